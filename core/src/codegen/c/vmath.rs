//! Vectorizable math: C definitions of `pg_vexp2f`, `pg_vlog2f` and `pg_vsinf`, branch-free f32
//! code that clang's loop and SLP vectorizers turn into AVX-512/AVX2/NEON code inside kernels
//! (libm's scalar `exp2f` calls never vectorize).
//!
//! Invariant: straight-line code only — range reduction, a polynomial, integer bit tricks
//! through the `pg_f32_bits`/`pg_bits_f32`/`pg_f64_bits` unions, and special cases as selects
//! (`?:` on values, no early returns, loops, tables or calls) — with no undefined or
//! implementation-defined behaviour for any input (integer work is unsigned and wraps).
//! Polynomials step with `pg_vmaddf`, fused where the CPU has hardware FMA. Accuracy against
//! f64, measured over every f32 input with clang `-O2 -march=native` (AVX-512, FMA): `exp2`
//! ≤ 0.96 ulp (≤ 1.23 unfused), `log2` ≤ 2.85 ulp, `sin` ≤ 1.50 ulp (1.493 fused; unfused
//! 1.500 for |x| < 1e30 and 1.503 above; |x| ≥ 2^32 is reduced exactly with 96 bits of 2/π,
//! Payne–Hanek style). `core/tests/vector_math.rs` pins ≤ 1.25 / 3 / 2 ulp on a dense sample.
//! Special values follow libm's classes: exp2(+inf) = inf, exp2(-inf) = +0, exp2(x ≥ 128) =
//! inf, exp2(x ≤ -150) = +0; log2(±0) = -inf, log2(x < 0) = NaN, log2(+inf) = inf; sin(±0) =
//! ±0, sin(±inf) = NaN; NaN stays NaN.

/// The definitions, in dependency order (the functions call `pg_vmaddf`, `pg_vsinf` also
/// `pg_vmadd` and `pg_vredf`).
pub(crate) const VECTOR_F32: &str = r#"/* picograd vectorizable math: branch-free, no libm */
/* a * b + c with one rounding where the CPU fuses it in hardware (x86 FMA3, AArch64, or
   whatever defines __FP_FAST_FMAF), else with two: the code below is accurate either way, and
   a software fmaf would be slow. pg_vmadd is the same in double. */
static inline __attribute__((unused)) float pg_vmaddf(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(__FP_FAST_FMAF)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

static inline __attribute__((unused)) double pg_vmadd(double a, double b, double c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(__FP_FAST_FMA)
  return __builtin_fma(a, b, c);
#else
  return a * b + c;
#endif
}

static inline __attribute__((unused)) float pg_vexp2f(float x) {
  float c, t, f, p;
  uint32_t u, s1;
  c = x < -151.0f ? -151.0f : x; /* 2^-151 rounds to 0; NaN passes both clamps */
  c = c > 128.0f ? 128.0f : c;   /* 2^128 overflows to inf */
  /* t = 1.5 * 2^23 + 254 + k with k = c rounded to an integer: t's low 9 bits hold u = k + 254
     in [103, 382], both exponent biases of the two factors below */
  t = c + 0x1.8001fcp23f;
  f = c - (t - 0x1.8001fcp23f); /* exact, |f| <= 0.5 */
  p = 0x1.41fbbcp-13f;          /* 2^f on [-1/2, 1/2]: minimax, relative error < 2^-28 */
  p = pg_vmaddf(f, p, 0x1.5f3e54p-10f);
  p = pg_vmaddf(f, p, 0x1.3b2d4cp-7f);
  p = pg_vmaddf(f, p, 0x1.c6aee8p-5f);
  p = pg_vmaddf(f, p, 0x1.ebfbdcp-3f);
  p = pg_vmaddf(f, p, 0x1.62e430p-1f);
  p = pg_vmaddf(f, p, 1.0f);
  /* 2^k as two normal factors 2^(u/2 - 127) and 2^(u - u/2 - 127) (u/2 rounded down), so a
     subnormal result rounds once. Shifting t's bits left moves u into the exponent field and
     drops the rest: (bits << 22) & exponent mask is (u/2) << 23, and (bits << 23) is u << 23
     (u < 2^9, so it fits). */
  u = pg_f32_bits(t);
  s1 = (u << 22) & 0xff800000u;
  return p * pg_bits_f32(s1) * pg_bits_f32((u << 23) - s1);
}

static inline __attribute__((unused)) float pg_vlog2f(float x) {
  uint32_t u = pg_f32_bits(x), sub = u < 0x00800000u, t;
  float m, f, s, z, p, e, r;
  u = sub ? pg_f32_bits(x * 0x1p23f) : u; /* subnormals: scale into the normal range */
  t = u - 0x3f3504f3u; /* x's exponent relative to sqrt(1/2), as a 9-bit two's complement */
  e = (float)((int32_t)((t >> 23) ^ 256u) - 256) - (sub ? 23.0f : 0.0f);
  m = pg_bits_f32((t & 0x007fffffu) + 0x3f3504f3u); /* in [sqrt(1/2), sqrt(2)) */
  f = m - 1.0f;
  s = f / (2.0f + f); /* log2(1 + f) = 2/ln2 * atanh(s) */
  z = s * s;
  p = 0x1.484b14p-2f; /* (2/ln2)/(2j+1): the atanh series; dropped terms < 2^-28 (z < 0.03) */
  p = pg_vmaddf(z, p, 0x1.a61762p-2f);
  p = pg_vmaddf(z, p, 0x1.2776c6p-1f);
  p = pg_vmaddf(z, p, 0x1.ec709ep-1f);
  r = e + pg_vmaddf(s, z * p, s * 0x1.715476p+1f);
  /* Special cases as selects of literal constants: a constant built through the bit helpers
     here stops clang's SLP vectorizer. One test catches both x < 0 and NaN. */
  r = x == 0.0f ? -__builtin_inff() : r;
  r = x == __builtin_inff() ? x : r;
  return x >= 0.0f ? r : __builtin_nanf("");
}

/* |x| * 2/pi mod 4 for |x| >= 2^32, in units of 2^-62: x = m * 2^(e-150), and only the 96
   bits of 2/pi from bit e-151 on (1-based) matter mod 4 (earlier ones give multiples of 4).
   The window is cut from 2/pi's first 192 bits with two-way selects and shifts, not a table,
   so the code stays free of branches and gathers. */
static inline __attribute__((unused)) uint64_t pg_vredf(uint32_t ax) {
  uint32_t e = ax >> 23, o, s, second;
  uint64_t m = (ax & 0x007fffffu) | 0x00800000u, a, b, c, hi, lo;
  e = e < 159u ? 159u : e > 254u ? 254u : e;
  o = e - 152u; /* the window's first bit, 0-based: 7..102 */
  second = o >= 64u;
  s = o & 63u;
  a = second ? UINT64_C(0xfc2757d1f534ddc0) : UINT64_C(0xa2f9836e4e441529);
  b = second ? UINT64_C(0xdb6295993c439041) : UINT64_C(0xfc2757d1f534ddc0);
  c = second ? UINT64_C(0xfe5163abdebbc561) : UINT64_C(0xdb6295993c439041);
  hi = (a << s) | (b >> 1 >> (63u - s));
  lo = ((b << s) | (c >> 1 >> (63u - s))) >> 32;
  return m * hi + ((m * lo) >> 32);
}

static inline __attribute__((unused)) float pg_vsinf(float x) {
  uint32_t ax = pg_f32_bits(x) & 0x7fffffffu, big = ax >= 0x4f800000u, q;
  double xd = big ? 0.0 : (double)x, t, kd, r, rb;
  uint64_t y = pg_vredf(ax) + (UINT64_C(1) << 61), qb = y >> 62;
  float rf, z, s, c, v;
  /* |x| < 2^32: Cody-Waite in double with pi/2 in three parts (the products with k are exact) */
  t = xd * 0x1.45f306dc9c883p-1 + 0x1.8p52; /* rounds x * 2/pi to k, held in t's low bits */
  kd = t - 0x1.8p52;
  r = pg_vmadd(-kd, 0x1.18469898cc517p-44, (xd - kd * 0x1.921fbp+0) - kd * 0x1.5110bp-22);
  /* |x| >= 2^32: the fraction of the nearest quadrant, from pg_vredf */
  rb = (double)((int64_t)(y & ((UINT64_C(1) << 62) - 1u)) - ((int64_t)1 << 61));
  rb = rb * (0x1.921fb54442d18p+0 * 0x1p-62);
  rb = x < 0.0f ? -rb : rb;
  q = big ? (uint32_t)(x < 0.0f ? 0u - qb : qb) : (uint32_t)pg_f64_bits(t);
  rf = (float)(big ? rb : r); /* |rf| <= pi/4 */
  z = rf * rf;
  s = 0x1.71de3ap-19f; /* Taylor series; the dropped terms stay below 2^-28 */
  s = pg_vmaddf(z, s, -0x1.a01a02p-13f);
  s = pg_vmaddf(z, s, 0x1.111112p-7f);
  s = pg_vmaddf(z, s, -0x1.555556p-3f);
  s = pg_vmaddf(rf, z * s, rf);
  c = -0x1.27e4fcp-22f;
  c = pg_vmaddf(z, c, 0x1.a01a02p-16f);
  c = pg_vmaddf(z, c, -0x1.6c16c2p-10f);
  c = pg_vmaddf(z, c, 0x1.555556p-5f);
  c = pg_vmaddf(z, c, -0.5f);
  c = pg_vmaddf(z, c, 1.0f);
  v = (q & 1u) ? c : s;
  v = (q & 2u) ? -v : v;
  v = ax < 0x39800000u ? x : v; /* |x| < 2^-12 (and +-0): sin x rounds to x */
  return ax >= 0x7f800000u ? x - x : v;
}
"#;
