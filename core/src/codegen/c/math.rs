//! Freestanding math: C definitions of `pg_sqrtf`, `pg_fmodf`, `pg_exp2f`, `pg_log2f` and
//! `pg_sinf`, picograd's own code, so device builds need no libm.
//!
//! Invariant: the functions use only `+ - * /`, comparisons, integer operations and the
//! `pg_f32_bits`/`pg_bits_f32` helpers (which must be defined first); no libm, no errno, no
//! undefined behaviour for any input. Accuracy (measured in `core/tests/freestanding_math.rs`
//! against f64): `sqrtf` and `fmodf` are exact (correctly rounded / exact remainder); `exp2f`
//! and `log2f` are within a few ulp over the whole float range; `sinf` likewise for
//! |x| < 2^32 (reduction by π/2 in double with a three-part constant), and merely bounded and
//! deterministic beyond. Special values: exp2(+inf) = inf, exp2(-inf) = 0, log2(±0) = -inf,
//! log2(x < 0) = NaN, log2(+inf) = inf, sin(±inf) = NaN, sqrt(x < 0) = NaN; NaN stays NaN.

/// The definitions, in dependency order (`pg_sinf` calls `pg_fmodf`).
pub(crate) const FREESTANDING_F32: &str = r"/* picograd freestanding math: no libm */
static inline __attribute__((unused)) float pg_sqrtf(float x) {
  uint32_t u = pg_f32_bits(x), m;
  int32_t e, s;
  uint64_t op, res = 0u, one = (uint64_t)1u << 46;
  if (x != x || x == 0.0f) return x;
  if (u >> 31) return pg_bits_f32(0x7fc00000u);
  if (u >= 0x7f800000u) return x;
  e = (int32_t)(u >> 23);
  m = u & 0x007fffffu;
  if (e == 0) {
    e = 1;
    while (m < 0x00800000u) { m <<= 1; e -= 1; }
  } else {
    m |= 0x00800000u;
  }
  e -= 150; /* x = m * 2^e, m in [2^23, 2^24) */
  s = (e & 1) ? 23 : 24;
  op = (uint64_t)m << s; /* in [2^46, 2^48): its root has 24 bits */
  while (one != 0u) {
    if (op >= res + one) { op -= res + one; res = (res >> 1) + one; } else { res >>= 1; }
    one >>= 2;
  }
  if (op > res) res += 1u; /* round to nearest; a tie cannot happen */
  return pg_bits_f32((uint32_t)((e - s) / 2 + 149) * 0x00800000u + (uint32_t)res);
}

static inline __attribute__((unused)) float pg_fmodf(float a, float b) {
  uint32_t ua = pg_f32_bits(a), ub = pg_f32_bits(b), sign = ua & 0x80000000u, ma, mb;
  int32_t ea, eb;
  ua &= 0x7fffffffu;
  ub &= 0x7fffffffu;
  if (ub == 0u || ua >= 0x7f800000u || ub > 0x7f800000u) return pg_bits_f32(0x7fc00000u);
  if (ua < ub) return a;
  ea = (int32_t)(ua >> 23);
  eb = (int32_t)(ub >> 23);
  ma = ea ? (ua & 0x007fffffu) | 0x00800000u : ua;
  mb = eb ? (ub & 0x007fffffu) | 0x00800000u : ub;
  if (ea == 0) { ea = 1; while (ma < 0x00800000u) { ma <<= 1; ea -= 1; } }
  if (eb == 0) { eb = 1; while (mb < 0x00800000u) { mb <<= 1; eb -= 1; } }
  for (; ea > eb; ea--) {
    if (ma >= mb) ma -= mb;
    ma <<= 1;
  }
  if (ma >= mb) ma -= mb;
  if (ma == 0u) return pg_bits_f32(sign);
  while (ma < 0x00800000u) { ma <<= 1; ea -= 1; }
  if (ea >= 1) return pg_bits_f32(sign | ((uint32_t)ea << 23) | (ma & 0x007fffffu));
  return pg_bits_f32(sign | (ma >> (1 - ea)));
}

static inline __attribute__((unused)) float pg_exp2f(float x) {
  int32_t k;
  float f, p;
  if (x != x) return x + x;
  if (x >= 128.0f) return pg_bits_f32(0x7f800000u);
  if (x <= -150.0f) return 0.0f;
  k = (int32_t)(x + (x < 0.0f ? -0.5f : 0.5f));
  f = x - (float)k; /* exact, |f| <= 0.5 */
  p = 0x1.ffcbfcp-17f;
  p = 0x1.430912p-13f + f * p;
  p = 0x1.5d87fep-10f + f * p;
  p = 0x1.3b2ab6p-7f + f * p;
  p = 0x1.c6b08ep-5f + f * p;
  p = 0x1.ebfbe0p-3f + f * p;
  p = 0x1.62e430p-1f + f * p;
  p = 1.0f + f * p;
  if (k > 127) return p * 2.0f * 0x1p127f;
  if (k < -126) return p * pg_bits_f32((uint32_t)(k + 191) << 23) * 0x1p-64f;
  return p * pg_bits_f32((uint32_t)(k + 127) << 23);
}

static inline __attribute__((unused)) float pg_log2f(float x) {
  uint32_t u = pg_f32_bits(x);
  int32_t e = 0;
  float f, s, z, r, hfsq, hi, lo;
  if (x != x) return x + x;
  if ((u & 0x7fffffffu) == 0u) return pg_bits_f32(0xff800000u);
  if (u >> 31) return pg_bits_f32(0x7fc00000u);
  if (u == 0x7f800000u) return x;
  if (u < 0x00800000u) { u = pg_f32_bits(x * 0x1p25f); e = -25; }
  e += (int32_t)(u >> 23) - 127;
  u = (u & 0x007fffffu) | 0x3f800000u;
  if (u > 0x3fb504f3u) { u -= 0x00800000u; e += 1; } /* mantissa in [sqrt(1/2), sqrt(2)) */
  f = pg_bits_f32(u) - 1.0f;
  s = f / (2.0f + f);
  z = s * s;
  r = z * (0x1.555556p-1f + z * (0x1.99999ap-2f + z * (0x1.24924ap-2f + z * 0x1.c71c72p-3f)));
  hfsq = 0.5f * f * f;
  hi = pg_bits_f32(pg_f32_bits(f - hfsq) & 0xfffff000u); /* 12 bits: hi * 0x1.714p+0f is exact */
  lo = (f - hi) - hfsq + s * (hfsq + r);
  return (lo + hi) * 0x1.47652cp-12f + lo * 0x1.714p+0f + ((float)e + hi * 0x1.714p+0f);
}

static inline __attribute__((unused)) float pg_sinf(float x) {
  uint32_t ax = pg_f32_bits(x) & 0x7fffffffu, q;
  double xd = x, kd, r;
  float rf, z, s;
  if (ax >= 0x7f800000u) return x - x;
  if (ax < 0x39800000u) return x; /* |x| < 2^-12: sin x rounds to x */
  if (ax >= 0x4f800000u) xd = pg_fmodf(x, 0x1.921fb6p+2f); /* |x| >= 2^32: bounded only */
  kd = xd * 0x1.45f306dc9c883p-1;
  kd = (kd + 0x1.8p52) - 0x1.8p52; /* nearest integer */
  r = ((xd - kd * 0x1.921fbp+0) - kd * 0x1.5110bp-22) - kd * 0x1.18469898cc517p-44;
  q = (uint32_t)(int64_t)kd & 3u;
  rf = (float)r;
  z = rf * rf;
  if (q & 1u) {
    s = 1.0f - z * (0.5f - z * (0x1.555556p-5f - z * (0x1.6c16c2p-10f - z * (0x1.a01a02p-16f
        - z * (0x1.27e4fcp-22f - z * 0x1.1eed8ep-29f)))));
  } else {
    s = rf - rf * z * (0x1.555556p-3f - z * (0x1.111112p-7f - z * (0x1.a01a02p-13f
        - z * (0x1.71de3ap-19f - z * 0x1.ae6456p-26f))));
  }
  return (q & 2u) ? -s : s;
}
";
