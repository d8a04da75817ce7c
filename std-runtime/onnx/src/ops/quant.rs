//! Quantization ops: QuantizeLinear / DequantizeLinear (per tensor or per axis) and
//! DynamicQuantizeLinear. Rounding is half to even and results saturate to the target integer
//! type, as ONNX specifies. The integer operators (QLinearConv, MatMulInteger, ...) are in
//! `qlinear.rs`.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::dtype_of;
use super::{math, one, Handler};

/// The handler for `op` if it is a quantization op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "QuantizeLinear" => quantize_linear,
        "DequantizeLinear" => dequantize_linear,
        "DynamicQuantizeLinear" => dynamic_quantize,
        _ => return None,
    })
}

/// A scale or zero point shaped to broadcast along `axis` of `x` (per-axis when 1-D, len > 1).
fn along(p: &Tensor, x: &Tensor, axis: i64) -> Result<Tensor> {
    if p.ndim() != 1 || p.numel() == 1 && x.ndim() != 1 {
        return Ok(p.clone());
    }
    let a = super::dim_axis("QuantizeLinear", axis, x.ndim())?;
    let mut s = vec![1isize; x.ndim()];
    s[a] = -1;
    p.try_reshape(&s)
}

/// `saturate(round(x / scale) + zp)` as `out`.
fn quantize(x: &Tensor, scale: &Tensor, zp: Option<&Tensor>, out: DType) -> Result<Tensor> {
    let mut q = math::round(&x.float().try_div(scale.float())?)?;
    if let Some(z) = zp {
        q = q.try_add(z.cast(q.dtype()))?;
    }
    Ok(q.try_maximum(out.min_value())?
        .try_minimum(out.max_value())?
        .cast(out))
}

fn quantize_linear(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    if n.int("block_size", 0) != 0 {
        return Err(bad(
            "QuantizeLinear",
            "blocked quantization is not supported",
        ));
    }
    let axis = n.int("axis", 1);
    let scale = along(n.input(1)?, x, axis)?;
    let zp = n.opt(2).map(|z| along(z, x, axis)).transpose()?;
    let out = match (&zp, n.int("output_dtype", 0)) {
        (Some(z), _) => z.dtype(),
        (None, 0) => DType::U8,
        (None, c) => dtype_of(c as i32).ok_or_else(|| bad("QuantizeLinear", "output_dtype"))?,
    };
    if out.is_float() {
        return Err(bad("QuantizeLinear", "float8 targets are not supported"));
    }
    one(quantize(x, &scale, zp.as_ref(), out)?)
}

fn dequantize_linear(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    if n.int("block_size", 0) != 0 {
        return Err(bad(
            "DequantizeLinear",
            "blocked quantization is not supported",
        ));
    }
    let axis = n.int("axis", 1);
    let scale = along(n.input(1)?, x, axis)?;
    let f = scale.dtype();
    let mut v = x.cast(f);
    if let Some(z) = n.opt(2) {
        v = v.try_sub(along(z, x, axis)?.cast(f))?;
    }
    one(v.try_mul(&scale)?)
}

fn dynamic_quantize(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?.float();
    let flat = x.try_reshape(&[-1])?;
    let hi = flat.try_max(&[0], false)?.try_maximum(0.0)?;
    let lo = flat.try_min(&[0], false)?.try_minimum(0.0)?;
    let scale = hi.try_sub(&lo)?.try_div(255.0)?;
    let zp = math::round(&lo.neg().try_div(&scale)?)?
        .try_maximum(0.0)?
        .try_minimum(255.0)?
        .cast(DType::U8);
    let y = quantize(&x, &scale, Some(&zp), DType::U8)?;
    Ok(vec![y, scale, zp])
}
