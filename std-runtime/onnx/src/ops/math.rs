//! Elementwise math the Tensor API does not have yet, composed from the functions it has:
//! floor/ceil/round, erf (Abramowitz–Stegun 7.1.26, |error| < 1.5e-7), atan and the other
//! inverse and hyperbolic trig functions, isnan/isinf.

use std::f64::consts::FRAC_PI_2;

use picograd_core::{DType, Result, Tensor};

/// Largest integer ≤ x.
pub fn floor(x: &Tensor) -> Result<Tensor> {
    if !x.dtype().is_float() {
        return Ok(x.clone());
    }
    let t = x.trunc();
    t.try_sub(x.try_lt(&t)?.cast(x.dtype()))
}

/// Smallest integer ≥ x.
pub fn ceil(x: &Tensor) -> Result<Tensor> {
    if !x.dtype().is_float() {
        return Ok(x.clone());
    }
    let t = x.trunc();
    t.try_add(x.try_gt(&t)?.cast(x.dtype()))
}

/// Rounds half to even, as ONNX `Round` does.
pub fn round(x: &Tensor) -> Result<Tensor> {
    if !x.dtype().is_float() {
        return Ok(x.clone());
    }
    if let Some(bits) = significand_bits(x.dtype()) {
        return round_magic(x, bits);
    }
    let f = floor(x)?;
    let d = x.try_sub(&f)?;
    let up = f.try_add(1.0)?;
    let odd = f.try_rem(2.0)?.abs().try_eq(1.0)?;
    let tie = odd.try_where(&up, &f)?;
    let near = d.try_lt(0.5)?.try_where(&f, &up)?;
    d.try_eq(0.5)?.try_where(&tie, &near)
}

/// The explicit significand bits of `dtype` when its arithmetic runs in that dtype itself on
/// every device (f32, f64), so that `round_magic`'s two additions round exactly once each;
/// f16/bf16 compute in f32 and round on store, so they keep the composed rounding.
fn significand_bits(dtype: DType) -> Option<i32> {
    match dtype {
        DType::F32 => Some(23),
        DType::F64 => Some(52),
        DType::F16
        | DType::BF16
        | DType::Bool
        | DType::I8
        | DType::U8
        | DType::I16
        | DType::U16
        | DType::I32
        | DType::U32
        | DType::I64
        | DType::U64 => None,
    }
}

/// Round half to even by the magic-number identity: for `0 ≤ a < 2^p` (p the significand
/// bits), `a + 2^p` lies in `[2^p, 2^(p+1))` where the spacing is exactly 1, so IEEE
/// round-to-nearest-even rounds it to the nearest integer, ties to even (`2^p` is even, so the
/// parity is `a`'s own), and subtracting `2^p` back is exact. `|x| ≥ 2^p` is already an integer
/// (and NaN/±inf fail the compare), so those pass through; the sign is put back by a select so
/// that `-0.3` rounds to `-0.0` as numpy does (and a zero keeps its own sign). A few cheap float ops per element instead of two
/// `fmod`s (a loop each in freestanding C): no fast-math is ever on, so `(a + c) - c` is never
/// folded, and the linearizer folds float arithmetic only on constants.
fn round_magic(x: &Tensor, bits: i32) -> Result<Tensor> {
    let c = 2f64.powi(bits);
    let a = x.abs();
    let r = a.try_add(c)?.try_sub(c)?;
    let signed = x.try_lt(0.0)?.try_where(r.neg(), &r)?;
    let small = a.try_lt(c)?.try_where(&signed, x)?;
    // -0.0 is not below zero, so the select above gives it +0.0: zeros pass through as they are.
    a.try_eq(0.0)?.try_where(x, &small)
}

/// Round half to even for a caller that saturates the result to a range within
/// `±2^(p−2)` right after (p the significand bits; QuantizeLinear onto 8- and 16-bit
/// integers): `(x + 1.5·2^p) − 1.5·2^p` rounds every `|x| < 2^(p−1)` to its nearest integer,
/// ties to even (the sum lies in `(2^p, 2^(p+1))`, where the spacing is 1, and `1.5·2^p` is
/// even), and leaves every larger `x` beyond `±(2^(p−1) − 2)` on its own side, ±inf and NaN as
/// they are — all the saturation needs, in two additions and no selects (a zero may come out
/// `+0.0`, which no integer result can tell). `None` where [`round`] composes its rounding
/// (f16, bf16: their arithmetic rounds on store).
pub fn round_for_saturation(x: &Tensor) -> Option<Result<Tensor>> {
    let bits = significand_bits(x.dtype())?;
    let c = 1.5 * 2f64.powi(bits);
    Some(x.try_add(c).and_then(|t| t.try_sub(c)))
}

/// The error function.
pub fn erf(x: &Tensor) -> Result<Tensor> {
    let x = x.float();
    let a = x.abs();
    let t = a.try_mul(0.3275911)?.try_add(1.0)?.reciprocal();
    let coef = [
        1.061405429,
        -1.453152027,
        1.421413741,
        -0.284496736,
        0.254829592,
    ];
    let mut p = t.const_like(0.0);
    for c in coef {
        p = p.try_add(c)?.try_mul(&t)?;
    }
    let e = a.try_mul(&a)?.neg().exp();
    let y = p.try_mul(&e)?.neg().try_add(1.0)?;
    y.try_mul(x.sign())
}

/// Arc tangent: reduce |x| > 1 through `π/2 − atan(1/x)`, halve the angle once, then the series.
pub fn atan(x: &Tensor) -> Result<Tensor> {
    let x = x.float();
    let big = x.abs().try_gt(1.0)?;
    let r = big.try_where(x.reciprocal(), &x)?;
    let half = r.try_div(r.try_mul(&r)?.try_add(1.0)?.sqrt().try_add(1.0)?)?;
    let h2 = half.try_mul(&half)?;
    let mut s = half.const_like(0.0);
    for k in (0..10).rev() {
        let c = if k % 2 == 0 { 1.0 } else { -1.0 } / (2 * k + 1) as f64;
        s = s.try_mul(&h2)?.try_add(c)?;
    }
    let small = s.try_mul(&half)?.try_mul(2.0)?;
    let far = x.sign().try_mul(FRAC_PI_2)?.try_sub(&small)?;
    big.try_where(&far, &small)
}

/// Arc sine, as `atan(x/√(1−x²))`.
pub fn asin(x: &Tensor) -> Result<Tensor> {
    let x = x.float();
    let c = x.try_mul(&x)?.neg().try_add(1.0)?.sqrt();
    atan(&x.try_div(&c)?)
}

/// Arc cosine, as `π/2 − asin(x)`.
pub fn acos(x: &Tensor) -> Result<Tensor> {
    asin(x)?.neg().try_add(FRAC_PI_2)
}

/// Hyperbolic sine.
pub fn sinh(x: &Tensor) -> Result<Tensor> {
    x.exp().try_sub(x.neg().exp())?.try_mul(0.5)
}

/// Hyperbolic cosine.
pub fn cosh(x: &Tensor) -> Result<Tensor> {
    x.exp().try_add(x.neg().exp())?.try_mul(0.5)
}

/// Inverse hyperbolic sine, `sign(x)·ln(|x| + √(x²+1))`.
pub fn asinh(x: &Tensor) -> Result<Tensor> {
    let a = x.abs();
    let r = a.try_add(a.try_mul(&a)?.try_add(1.0)?.sqrt())?.log();
    r.try_mul(x.sign())
}

/// Inverse hyperbolic cosine, `ln(x + √(x²−1))`.
pub fn acosh(x: &Tensor) -> Result<Tensor> {
    x.try_add(x.try_mul(x)?.try_sub(1.0)?.sqrt())
        .map(|t| t.log())
}

/// Inverse hyperbolic tangent, `½·ln((1+x)/(1−x))`.
pub fn atanh(x: &Tensor) -> Result<Tensor> {
    let q = x.try_add(1.0)?.try_div(x.neg().try_add(1.0)?)?;
    q.log().try_mul(0.5)
}

/// `x != x`.
pub fn isnan(x: &Tensor) -> Result<Tensor> {
    x.try_ne(x)
}

/// `|x| == ∞`, optionally only one sign.
pub fn isinf(x: &Tensor, pos: bool, neg: bool) -> Result<Tensor> {
    let p = x.try_eq(f64::INFINITY)?;
    let n = x.try_eq(f64::NEG_INFINITY)?;
    match (pos, neg) {
        (true, true) => p.try_alu(picograd_core::ops::AluOp::Or, &[&n]),
        (true, false) => Ok(p),
        (false, true) => Ok(n),
        (false, false) => Ok(p.const_like(0.0)),
    }
}
