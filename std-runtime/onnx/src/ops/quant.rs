//! Quantization ops: QuantizeLinear / DequantizeLinear (per tensor or per axis) and
//! DynamicQuantizeLinear. Rounding is half to even and results saturate to the target integer
//! type, as ONNX specifies. (De)QuantizeLinear also take blocked scales (`block_size`) and the
//! low-bit output types (int4/uint4, int2/uint2, float8, float4 e2m1, held in their carrier dtype;
//! the float formats round as `Cast` does). The integer operators (QLinearConv, MatMulInteger,
//! ...) are in `qlinear.rs`.

use picograd_core::lowbit::LowBit;
use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::{dtype_of, lowbit_of};
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

/// A scale or zero point shaped to broadcast over `x`: per tensor, per `axis` (1-D, len > 1),
/// or, with a nonzero `block`, blocked along `axis` (same rank as `x`, each element covering
/// `block` consecutive positions of that axis).
fn along(p: &Tensor, x: &Tensor, axis: i64, block: i64) -> Result<Tensor> {
    if block != 0 {
        return blocked(p, x, axis, block);
    }
    if p.ndim() != 1 {
        return Ok(p.clone());
    }
    if p.numel() == 1 {
        // One element is per tensor, whatever the axis says.
        return p.try_reshape(&[]);
    }
    let a = super::dim_axis("QuantizeLinear", axis, x.ndim())?;
    let mut s = vec![1isize; x.ndim()];
    s[a] = -1;
    p.try_reshape(&s)
}

/// A blocked parameter repeated `block` times along `axis` and cut to `x`'s length there.
fn blocked(p: &Tensor, x: &Tensor, axis: i64, block: i64) -> Result<Tensor> {
    let a = super::dim_axis("QuantizeLinear", axis, x.ndim())?;
    let (ps, xs) = (p.shape(), x.shape());
    let b = usize::try_from(block).unwrap_or(0);
    let fits = ps.len() == xs.len()
        && b > 0
        && ps.iter().zip(&xs).enumerate().all(
            |(i, (&q, &d))| {
                if i == a {
                    q == d.div_ceil(b)
                } else {
                    q == d
                }
            },
        );
    if !fits {
        return Err(bad(
            "QuantizeLinear",
            format!(
                "blocked parameter of shape {ps:?} does not fit input {xs:?} with block_size \
                 {block} along axis {a}"
            ),
        ));
    }
    let mut with_block: Vec<usize> = ps.clone();
    with_block.insert(a + 1, b);
    let mut unsq: Vec<isize> = ps.iter().map(|&d| d as isize).collect();
    unsq.insert(a + 1, 1);
    let mut merged: Vec<isize> = ps.iter().map(|&d| d as isize).collect();
    merged[a] *= b as isize;
    let full = p
        .try_reshape(&unsq)?
        .try_expand(&with_block)?
        .try_reshape(&merged)?;
    let cut: Vec<(usize, usize)> = xs.iter().map(|&d| (0, d)).collect();
    full.try_shrink(&cut)
}

/// The output type of a quantization: a dtype, or a low-bit type held in its carrier.
#[derive(Clone, Copy)]
enum Target {
    Int(DType),
    Low(LowBit),
}

/// `saturate(round(x / scale) + zp)` as `out`: the cast itself saturates to `out`'s range
/// (float → int casts truncate and saturate, NaN → 0, on every device: DESIGN.md), and the
/// rounded value is an integer, so no clamp is composed before it.
fn quantize(x: &Tensor, scale: &Tensor, zp: Option<&Tensor>, out: DType) -> Result<Tensor> {
    let (lo, hi) = (out.min_value(), out.max_value());
    Ok(scaled(x, scale, zp, (lo, hi))?.cast(out))
}

/// Largest saturation bound for which [`math::round_for_saturation`] serves f32 (`2^21`,
/// `2^(p−2)` with p = 23; 8- and 16-bit outputs, zero point included).
const NARROW: f64 = (1 << 21) as f64;

/// `round(x / scale) + zp` in float, rounding half to even, for a result saturated to
/// `[lo, hi]` right after: onto a narrow range (8 and 16 bits) the rounding needs no
/// selects (`math::round_for_saturation`: a Cortex-M4 quantizing a float input spent 44
/// instructions per value on the general rounding's four selects).
fn scaled(x: &Tensor, scale: &Tensor, zp: Option<&Tensor>, (lo, hi): (f64, f64)) -> Result<Tensor> {
    let v = x.float().try_div(scale.float())?;
    // The zero point's type bounds how far the sum moves.
    let zp_bound = zp.map_or(0.0, |z| {
        let t = z.dtype();
        t.min_value().abs().max(t.max_value().abs())
    });
    let narrow = lo.abs().max(hi.abs()) + zp_bound < NARROW;
    let mut q = match narrow.then(|| math::round_for_saturation(&v)).flatten() {
        Some(r) => r?,
        None => math::round(&v)?,
    };
    if let Some(z) = zp {
        q = q.try_add(z.cast(q.dtype()))?;
    }
    Ok(q)
}

/// Quantization onto a low-bit type: integers round and saturate to their range; the float
/// formats take `x / scale + zp` rounded as `Cast` rounds, under `saturate`.
fn quantize_low(
    x: &Tensor,
    scale: &Tensor,
    zp: Option<&Tensor>,
    kind: LowBit,
    saturate: bool,
) -> Result<Tensor> {
    if kind == LowBit::F8E8M0 {
        return Err(bad(
            "QuantizeLinear",
            "float8 e8m0 is not a quantized output type",
        ));
    }
    if kind.float_format().is_some() {
        let mut v = x.float().try_div(scale.float())?;
        if let Some(z) = zp {
            v = v.try_add(z.cast(v.dtype()))?;
        }
        return v.try_to_lowbit(kind, saturate);
    }
    let (lo, hi) = kind.range();
    Ok(scaled(x, scale, zp, (lo, hi))?
        .try_maximum(lo)?
        .try_minimum(hi)?
        .cast(kind.carrier()))
}

fn quantize_linear(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let (axis, block) = (n.int("axis", 1), n.int("block_size", 0));
    let scale = along(n.input(1)?, x, axis, block)?;
    let zp = n.opt(2).map(|z| along(z, x, axis, block)).transpose()?;
    let target = match (n.lowbit(2), &zp, n.int("output_dtype", 0)) {
        (Some(k), _, _) => Target::Low(k),
        (None, Some(z), _) => Target::Int(z.dtype()),
        (None, None, 0) => Target::Int(DType::U8),
        (None, None, c) => match (dtype_of(c as i32), lowbit_of(c as i32)) {
            (_, Some(k)) => Target::Low(k),
            (Some(d), None) => Target::Int(d),
            (None, None) => return Err(bad("QuantizeLinear", format!("output_dtype {c}"))),
        },
    };
    match target {
        Target::Low(k) => {
            let sat = n.int("saturate", 1) != 0;
            one(quantize_low(x, &scale, zp.as_ref(), k, sat)?)
        }
        Target::Int(d) if d.is_float() => Err(bad(
            "QuantizeLinear",
            format!("a {d} output is not a quantized type"),
        )),
        Target::Int(d) => one(quantize(x, &scale, zp.as_ref(), d)?),
    }
}

fn dequantize_linear(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let (axis, block) = (n.int("axis", 1), n.int("block_size", 0));
    let scale = along(n.input(1)?, x, axis, block)?;
    let f = scale.dtype();
    let mut v = x.cast(f);
    if let Some(z) = n.opt(2) {
        v = v.try_sub(along(z, x, axis, block)?.cast(f))?;
    }
    let y = v.try_mul(&scale)?;
    // Opset 23's `output_dtype` (0: the scale's type).
    match n.int("output_dtype", 0) {
        0 => one(y),
        c => match dtype_of(c as i32) {
            Some(d) if d.is_float() => one(y.cast(d)),
            _ => Err(bad("DequantizeLinear", format!("output_dtype {c}"))),
        },
    }
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
