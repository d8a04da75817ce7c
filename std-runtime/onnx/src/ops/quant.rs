//! Quantization ops: QuantizeLinear / DequantizeLinear (per tensor or per axis),
//! DynamicQuantizeLinear, MatMulInteger and QLinearMatMul. Rounding is half to even and results
//! saturate to the target integer type, as ONNX specifies.

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
        "MatMulInteger" => matmul_integer,
        "ConvInteger" => conv_integer,
        "QLinearConv" => qlinear_conv,
        "QLinearMatMul" => qlinear_matmul,
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

fn centered(x: &Tensor, zp: Option<&Tensor>, d: DType) -> Result<Tensor> {
    let v = x.cast(d);
    match zp {
        Some(z) => {
            let z = if z.ndim() == 1 && z.numel() > 1 && x.ndim() >= 2 {
                z.try_reshape(&[-1, 1])?
            } else {
                z.clone()
            };
            v.try_sub(z.cast(d))
        }
        None => Ok(v),
    }
}

/// The weight minus its zero point (one per output channel when 1-D), as i32.
fn centered_weight(w: &Tensor, zp: Option<&Tensor>) -> Result<Tensor> {
    let v = w.cast(DType::I32);
    let Some(z) = zp else { return Ok(v) };
    let z = z.cast(DType::I32);
    if z.ndim() == 1 && z.numel() > 1 && w.ndim() > 0 {
        let mut s = vec![1isize; w.ndim()];
        s[0] = -1;
        return v.try_sub(z.try_reshape(&s)?);
    }
    v.try_sub(&z)
}

fn conv_integer(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let xc = match n.opt(2) {
        Some(z) => x.cast(DType::I32).try_sub(z.cast(DType::I32))?,
        None => x.cast(DType::I32),
    };
    let w = centered_weight(n.input(1)?, n.opt(3))?;
    let opts = super::nn::conv_opts(n, x, n.input(1)?)?;
    one(xc.try_conv2d(&w, None, &opts)?)
}

/// `quantize((x − xz) ⊛ (w − wz) (+ bias) · xs·ws, ys, yz)`.
fn qlinear_conv(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let xc = x.cast(DType::I32).try_sub(n.input(2)?.cast(DType::I32))?;
    let w = centered_weight(n.input(3)?, n.opt(5))?;
    let opts = super::nn::conv_opts(n, x, n.input(3)?)?;
    let mut acc = xc.try_conv2d(&w, None, &opts)?;
    if let Some(b) = n.opt(8) {
        let mut s = vec![1isize; acc.ndim()];
        s[1] = -1;
        acc = acc.try_add(b.cast(DType::I32).try_reshape(&s)?)?;
    }
    let ws = n.input(4)?.float();
    let ws = if ws.numel() > 1 {
        let mut s = vec![1isize; acc.ndim()];
        s[1] = -1;
        ws.try_reshape(&s)?
    } else {
        ws
    };
    let real = acc.float().try_mul(n.input(1)?.float())?.try_mul(&ws)?;
    let zp = n.input(7)?;
    one(quantize(&real, n.input(6)?, Some(zp), zp.dtype())?)
}

fn matmul_integer(n: &Node) -> Result<Vec<Tensor>> {
    let a = centered(n.input(0)?, n.opt(2), DType::I32)?;
    let b_zp = n.opt(3).map(|z| z.cast(DType::I32));
    let b = match b_zp {
        Some(z) => n.input(1)?.cast(DType::I32).try_sub(&z)?,
        None => n.input(1)?.cast(DType::I32),
    };
    one(a.try_matmul(&b)?)
}

fn qlinear_matmul(n: &Node) -> Result<Vec<Tensor>> {
    let deq = |i: usize| -> Result<Tensor> {
        let v = n
            .input(i)?
            .cast(DType::F32)
            .try_sub(n.input(i + 2)?.cast(DType::F32))?;
        v.try_mul(n.input(i + 1)?.cast(DType::F32))
    };
    let y = deq(0)?.try_matmul(&deq(3)?)?;
    let zp = n.input(7)?;
    one(quantize(&y, n.input(6)?, Some(zp), zp.dtype())?)
}
