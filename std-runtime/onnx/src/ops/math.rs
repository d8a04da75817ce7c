//! Elementwise math the Tensor API does not have yet, composed from the functions it has:
//! floor/ceil/round, erf (Abramowitz–Stegun 7.1.26, |error| < 1.5e-7), atan and the other
//! inverse and hyperbolic trig functions, isnan/isinf.

use std::f64::consts::FRAC_PI_2;

use picograd_core::{Result, Tensor};

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
    let f = floor(x)?;
    let d = x.try_sub(&f)?;
    let up = f.try_add(1.0)?;
    let odd = f.try_rem(2.0)?.abs().try_eq(1.0)?;
    let tie = odd.try_where(&up, &f)?;
    let near = d.try_lt(0.5)?.try_where(&f, &up)?;
    d.try_eq(0.5)?.try_where(&tie, &near)
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
