//! Rounding a tensor onto a storage-only low-bit type ([`LowBit`]) as ONNX `Cast` does, composed
//! from elementwise ops so it is part of the lazy graph (every device, JIT replays, export).
//!
//! Invariant: every step is exact in the working float type — scaling by powers of two, `trunc`
//! (`x - fmod(x, 1)`), compares and selects — so the one rounding is the round-half-to-even of
//! the scaled value, and the result is bit-identical on every device (fused multiply-adds
//! cannot change an exact product).

use crate::dtype::DType;
use crate::error::Result;
use crate::lowbit::{pow2, E8M0Round, FloatFormat, LowBit, Overflow};

use super::Tensor;

impl Tensor {
    /// The values of `self` rounded onto `kind`, in `kind`'s carrier dtype (f32, i8 or u8).
    ///
    /// Float formats: round half to even; beyond the largest finite value, `saturate` (ONNX
    /// `Cast`'s attribute) clamps to ±max, otherwise e5m2 gives ±∞ and the formats without
    /// infinities NaN; float4 e2m1 always clamps and maps NaN to -0; the fnuz formats have no
    /// negative zero. Integer types: truncate toward zero and wrap modulo 2^bits (NaN and ±∞
    /// give 0), as the ONNX reference's cast does. Inputs of any dtype; f64 is rounded in f64.
    ///
    /// ```
    /// use picograd_core::{lowbit::LowBit, Tensor};
    /// let x = Tensor::from_slice(&[0.3f32, 500.0, -17.0], &[3]);
    /// let y = x.try_to_lowbit(LowBit::F8E4M3FN, true).unwrap();
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.3125, 448.0, -16.0]);
    /// let y = x.try_to_lowbit(LowBit::I4, true).unwrap();
    /// assert_eq!(y.to_vec::<i8>().unwrap(), vec![0, 4, -1]);
    /// ```
    pub fn try_to_lowbit(&self, kind: LowBit, saturate: bool) -> Result<Tensor> {
        match (kind.float_format(), kind.int_range()) {
            (Some(f), _) => round_float(self, kind, f, saturate),
            (None, Some((lo, hi))) => wrap_int(self, kind, lo, hi),
            (None, None) => self.try_to_e8m0(saturate, E8M0Round::Up),
        }
    }

    /// The values of `self` rounded onto float8 e8m0 (a power of two 2^-127..=2^127, f32
    /// carrier) as ONNX's reference does: from the f32 value (f64 inputs are first rounded to
    /// f32), sign ignored, 0 giving 2^-127, NaN and ±∞ giving NaN; `mode` rounds between
    /// powers of two; past 2^127 `saturate` keeps 2^127, otherwise NaN.
    pub fn try_to_e8m0(&self, saturate: bool, mode: E8M0Round) -> Result<Tensor> {
        let a = self.cast(DType::F32).abs();
        // Binary search for the f32 exponent field e (0 for subnormals and zero), with
        // p = 2^(e - 127) beside it: every product is an exact power of two, and a step past
        // e = 254 gives p = ∞, which no finite value reaches.
        let mut p = a.const_like(pow2(-127));
        for step in [128, 64, 32, 16, 8, 4, 2, 1] {
            // 2^128 is past f32's range: that step multiplies by 2^64 twice.
            let mut cand = p.try_mul(pow2(step.min(64)))?;
            if step == 128 {
                cand = cand.try_mul(pow2(64))?;
            }
            p = a.try_ge(&cand)?.try_where(&cand, &p)?;
        }
        let normal = a.try_ge(pow2(-126))?;
        let up = match mode {
            E8M0Round::Up => normal.try_where(&a.try_ne(&p)?, &a.try_gt(0.0)?)?,
            // Guard bit set: mantissa ≥ 0.5 (normal), or above 2^-127 (subnormal).
            E8M0Round::Nearest => {
                normal.try_where(&a.try_ge(&p.try_mul(1.5)?)?, &a.try_gt(pow2(-127))?)?
            }
            E8M0Round::Down => a.try_ne(&a)?,
        };
        let top = p.try_eq(pow2(127))?;
        let past = if saturate {
            p.clone()
        } else {
            p.const_like(f64::NAN)
        };
        let bumped = top.try_where(&past, &p.try_mul(2.0)?)?;
        let y = up.try_where(&bumped, &p)?;
        // NaN and ±∞ (a - a is NaN exactly for them) give NaN.
        a.try_sub(&a)?.try_eq(0.0)?.try_where(&y, f64::NAN)
    }
}

/// The working float type: f64 stays f64, everything else is rounded from f32 (exact for every
/// input dtype below 32 bits).
fn working(x: &Tensor) -> Tensor {
    match x.dtype() {
        DType::F64 => x.clone(),
        _ => x.cast(DType::F32),
    }
}

fn round_float(x: &Tensor, kind: LowBit, f: FloatFormat, saturate: bool) -> Result<Tensor> {
    let x = working(x);
    let max = f.max_value();
    // Past 2·max everything overflows alike; clamping there keeps ±∞ out of the rounding.
    let a = x.abs();
    let a = a.try_gt(2.0 * max)?.try_where(2.0 * max, &a)?;
    let r = round_magnitude(&a, f)?;
    let over = r.try_gt(max)?;
    let r = match (saturate, f.overflow) {
        (true, _) | (false, Overflow::Clamp) => over.try_where(max, &r)?,
        (false, Overflow::Infinity) => over.try_where(f64::INFINITY, &r)?,
        (false, Overflow::NaN) => over.try_where(f64::NAN, &r)?,
    };
    // The sign of x, -0 included (1/-0 = -∞), NaN taking r's.
    let sign = x.reciprocal().try_lt(0.0)?.try_where(-1.0, 1.0)?;
    let sign = x.try_lt(0.0)?.try_where(-1.0, &sign)?;
    let mut y = r.try_mul(&sign)?;
    if f.fnuz {
        y = y.try_eq(0.0)?.try_where(0.0, &y)?;
    }
    if kind == LowBit::F4E2M1 {
        y = x.try_ne(&x)?.try_where(-0.0, &y)?;
    }
    Ok(y.cast(kind.carrier()))
}

/// `a ≥ 0` (or NaN) rounded half to even onto the format's grid, which may exceed its max.
fn round_magnitude(a: &Tensor, f: FloatFormat) -> Result<Tensor> {
    let m = f.mant_bits as i32;
    let emin = f.min_exp();
    let emax = libm::floor(libm::log2(f.max_value())) as i32;
    // The grid step's inverse: 2^(m - e) in binade [2^e, 2^(e+1)), fixed below 2^emin.
    let mut inv = a.const_like(pow2(m - emin));
    for e in emin + 1..=emax {
        inv = a.try_ge(pow2(e))?.try_where(pow2(m - e), &inv)?;
    }
    let v = a.try_mul(&inv)?;
    let t = v.trunc();
    let d = v.try_sub(&t)?;
    let up = t.try_add(1.0)?;
    let odd = t.try_rem(2.0)?.try_eq(1.0)?;
    let tie = odd.try_where(&up, &t)?;
    let near = d.try_gt(0.5)?.try_where(&up, &t)?;
    let q = d.try_eq(0.5)?.try_where(&tie, &near)?;
    q.try_div(&inv)
}

fn wrap_int(x: &Tensor, kind: LowBit, lo: i32, hi: i32) -> Result<Tensor> {
    let n = f64::from(hi - lo + 1);
    let w = if x.dtype().is_float() {
        let x = working(x);
        // NaN and ±∞ give 0; x - x is 0 exactly for finite x.
        let v = x.try_sub(&x)?.try_eq(0.0)?.try_where(x.trunc(), 0.0)?;
        let k = v.try_div(n)?;
        let kt = k.trunc();
        let floor = kt.try_sub(k.try_lt(&kt)?.cast(kt.dtype()))?;
        v.try_sub(floor.try_mul(n)?)?
    } else {
        let v = x.cast(DType::I64);
        v.try_rem(n)?.try_add(n)?.try_rem(n)?
    };
    let w = if lo < 0 {
        w.try_gt(f64::from(hi))?.try_where(&w.try_sub(n)?, &w)?
    } else {
        w
    };
    Ok(w.cast(kind.carrier()))
}
