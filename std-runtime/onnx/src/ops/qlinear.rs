//! Quantized operators (QOperator format) on picograd's integer kernels: QLinearConv,
//! QLinearMatMul, ConvInteger, MatMulInteger, and the `com.microsoft` QLinearAdd, QLinearMul,
//! QGemm, QLinearAveragePool and QLinearGlobalAveragePool. The QDQ rewrite (`qdq.rs`) lowers
//! DequantizeLinear → op → QuantizeLinear groups to these same handlers.
//!
//! Invariant: no value is ever dequantized to float. 8-bit operands minus their zero points
//! are i16 (a conv's scalar input zero point is folded into its bias instead, its padding
//! read as that zero point: `zero_point_in_bias`), products widen to i32 (`MulWide`), sums
//! accumulate in i32, and the result is
//! requantized with the fixed-point form of the f32 scale ratio computed as onnxruntime does
//! (`x_scale * w_scale / y_scale` in f32), rounded as its `rint(float(acc) * scale)` rounds
//! (`Requant`: the f32 product's rounding emulated in integers, then half to even), then the
//! output zero point is added and the value clamped to the output type's range.

use picograd_core::tensor::quantized::{requant_params, Ties};
use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::{to_f64s, to_i64s};
use super::{one, Handler};

/// The handler for default-domain `op` if it is an integer operator.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "MatMulInteger" => matmul_integer,
        "ConvInteger" => conv_integer,
        "QLinearConv" => qlinear_conv,
        "QLinearMatMul" => qlinear_matmul,
        _ => return None,
    })
}

/// The handler for `com.microsoft` op `op` if picograd supports it.
pub fn lookup_ms(op: &str) -> Option<Handler> {
    Some(match op {
        "QLinearAdd" => |n| qlinear_binary(n, false),
        "QLinearMul" => |n| qlinear_binary(n, true),
        "QGemm" => qgemm,
        "QLinearAveragePool" => qlinear_avg_pool,
        "QLinearGlobalAveragePool" => qlinear_global_avg_pool,
        _ => return None,
    })
}

/// An 8-bit operand of `op`'s input `i`.
fn q8<'a>(n: &'a Node, i: usize) -> Result<&'a Tensor> {
    let t = n.input(i)?;
    match t.dtype() {
        DType::I8 | DType::U8 => Ok(t),
        d => Err(bad(
            n.op(),
            format!(
                "input {i} {:?} is {d}; only int8/uint8 are supported",
                t.shape()
            ),
        )),
    }
}

/// `x − zp` as i16 (exact for 8-bit values); `zp` is a scalar, or 1-D along `axis` of `x`.
/// With no zero point or an all-zero one (symmetric weights), `x` itself: an int8 weight stays
/// int8 (in flash, once exported), and the widening multiply takes it as it is.
fn centered(x: &Tensor, zp: Option<&Tensor>, axis: usize) -> Result<Tensor> {
    let Some(z) = zp else { return Ok(x.clone()) };
    if to_i64s(z)?.iter().all(|&v| v == 0) {
        return Ok(x.clone());
    }
    x.cast(DType::I16)
        .try_sub(along(z, x.ndim(), axis)?.cast(DType::I16))
}

/// A per-axis parameter (1-D, more than one value) shaped to broadcast along `axis` of a
/// rank-`rank` tensor; scalars and one-element tensors as they are.
fn along(p: &Tensor, rank: usize, axis: usize) -> Result<Tensor> {
    if p.numel() <= 1 {
        return p.try_reshape(&[]);
    }
    let mut s = vec![1isize; rank];
    s[axis] = -1;
    p.try_reshape(&s)
}

/// A (small, constant) scale tensor's values as f32.
fn scales(t: &Tensor) -> Result<Vec<f32>> {
    Ok(to_f64s(&t.float())?.into_iter().map(|v| v as f32).collect())
}

/// Requantizes i32 `acc` by per-tensor or per-channel (along `axis`) f32 `ratios` to the dtype
/// of zero point `yz`, ties broken `ties`.
fn requantize(
    op: &'static str,
    acc: &Tensor,
    ratios: &[f32],
    axis: usize,
    yz: &Tensor,
    ties: Ties,
) -> Result<Tensor> {
    let (m, s) = requant_params(op, ratios)?;
    let dev = acc.device();
    let m = along(
        &Tensor::try_from_slice_on(&m, &[m.len()], &dev)?,
        acc.ndim(),
        axis,
    )?;
    let s = along(
        &Tensor::try_from_slice_on(&s, &[s.len()], &dev)?,
        acc.ndim(),
        axis,
    )?;
    let out = yz.dtype();
    if !matches!(out, DType::I8 | DType::U8) {
        return Err(bad(
            op,
            format!("output zero point is {out}, not int8/uint8"),
        ));
    }
    acc.try_requantize(&m, &s, &yz.try_reshape(&[])?, None, out, ties)
}

/// `a·b/c` per channel in f32, as onnxruntime computes its requantize scales.
fn ratio(op: &'static str, a: &[f32], b: &[f32], c: &[f32]) -> Result<Vec<f32>> {
    let (&a0, &c0) = (
        a.first().ok_or_else(|| bad(op, "empty scale"))?,
        c.first().ok_or_else(|| bad(op, "empty scale"))?,
    );
    if a.len() != 1 || c.len() != 1 {
        return Err(bad(op, "input and output scales must be scalars"));
    }
    Ok(b.iter().map(|&w| a0 * w / c0).collect())
}

fn conv_integer(n: &Node) -> Result<Vec<Tensor>> {
    let (x, w) = (q8(n, 0)?, q8(n, 1)?);
    let opts = super::nn::conv_opts(n, x, w)?;
    let xc = centered(x, n.opt(2), 1)?;
    let wc = centered(w, n.opt(3), 0)?;
    one(xc.try_conv2d_int(&wc, None, &opts)?)
}

/// `quantize((x − xz) ⊛ (w − wz) + bias, xs·ws/ys) + yz`, all in integers.
fn qlinear_conv(n: &Node) -> Result<Vec<Tensor>> {
    let (x, w) = (q8(n, 0)?, q8(n, 3)?);
    let opts = super::nn::conv_opts(n, x, w)?;
    let wc = centered(w, n.opt(5), 0)?;
    let acc = match zero_point_in_bias(x, n.input(2)?, &wc, n.opt(8), &opts)? {
        Some((xp, bias, o)) => xp.try_conv2d_int(&wc, Some(&bias), &o)?,
        None => centered(x, Some(n.input(2)?), 1)?.try_conv2d_int(&wc, n.opt(8), &opts)?,
    };
    let r = ratio(
        "QLinearConv",
        &scales(n.input(1)?)?,
        &scales(n.input(4)?)?,
        &scales(n.input(6)?)?,
    )?;
    one(requantize(
        "QLinearConv",
        &acc,
        &r,
        1,
        n.input(7)?,
        Ties::BeforeZeroPoint,
    )?)
}

/// For a conv with a scalar input zero point `xz`, the input, bias and options that let the
/// kernel multiply the stored 8-bit input as it is: `Σ (x − xz)·w + b = Σ x·w + (b − xz·Σw)`,
/// `Σw` per output channel over all taps of the (centered, constant) weights `wc`. A padded
/// conv reads its padding as `xz` instead (the input padded with the value `xz`, the conv
/// itself unpadded): there `x − xz` is the 0 the centered form pads with, so the identity
/// holds at every output, borders included. No i16 value is computed per input read, and
/// the products are 8-bit × 8-bit. `None` (keep the centered input) when `xz` is 0, per
/// channel, or the folded bias would leave i32.
fn zero_point_in_bias(
    x: &Tensor,
    xz: &Tensor,
    wc: &Tensor,
    bias: Option<&Tensor>,
    opts: &picograd_core::ConvOpts,
) -> Result<Option<(Tensor, Tensor, picograd_core::ConvOpts)>> {
    let dims = x.ndim().saturating_sub(2);
    let pads = opts.padding.resolve("QLinearConv", dims)?;
    let z = to_i64s(xz)?;
    if z.len() != 1 || z[0] == 0 {
        return Ok(None);
    }
    let cout = wc.shape()[0];
    let w = to_i64s(wc)?;
    let per = w.len() / cout.max(1);
    let b = match bias {
        Some(b) => to_i64s(b)?,
        None => vec![0; cout],
    };
    let folded: Option<Vec<i32>> = (0..cout)
        .map(|c| {
            let sum: i64 = w[c * per..(c + 1) * per].iter().sum();
            i32::try_from(b.get(c).copied().unwrap_or(0) - z[0] * sum).ok()
        })
        .collect();
    let (Some(v), true) = (folded, b.len() == cout) else {
        return Ok(None);
    };
    let bias = Tensor::try_from_slice_on(&v, &[cout], &x.device())?;
    if pads.iter().all(|&p| p == (0, 0)) {
        return Ok(Some((x.clone(), bias, opts.clone())));
    }
    let mut arg = vec![(0, 0); x.ndim() - dims];
    arg.extend(pads);
    let xp = x.try_pad_value(&arg, z[0] as f64)?;
    Ok(Some((xp, bias, opts.clone().padding(0))))
}

/// The integer product of centered `a` `[.., m, k]` (or `[k]`) and `b` `[.., k, n]`.
fn matmul_centered(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.ndim() == 1 {
        return a.try_unsqueeze(0)?.try_matmul_int(b)?.try_squeeze(Some(-2));
    }
    a.try_matmul_int(b)
}

fn matmul_integer(n: &Node) -> Result<Vec<Tensor>> {
    let (a, b) = (q8(n, 0)?, q8(n, 1)?);
    // a's zero point is per row (axis −2) when 1-D, b's per column (the last axis).
    let ac = centered(a, n.opt(2), a.ndim().saturating_sub(2))?;
    let bc = centered(b, n.opt(3), b.ndim().saturating_sub(1))?;
    one(matmul_centered(&ac, &bc)?)
}

fn qlinear_matmul(n: &Node) -> Result<Vec<Tensor>> {
    let (a, b) = (q8(n, 0)?, q8(n, 3)?);
    let ac = centered(a, Some(n.input(2)?), a.ndim().saturating_sub(2))?;
    let bc = centered(b, Some(n.input(5)?), b.ndim().saturating_sub(1))?;
    let acc = matmul_centered(&ac, &bc)?;
    let r = ratio(
        "QLinearMatMul",
        &scales(n.input(1)?)?,
        &scales(n.input(4)?)?,
        &scales(n.input(6)?)?,
    )?;
    let last = acc.ndim().saturating_sub(1);
    one(requantize(
        "QLinearMatMul",
        &acc,
        &r,
        last,
        n.input(7)?,
        Ties::BeforeZeroPoint,
    )?)
}

/// QGemm: `quantize(alpha·(A′ − az)(B′ − bz) + C, as·bs/ys) + yz` with `A′`, `B′` the
/// optionally transposed operands and `C` an i32 bias. Without `y_scale` the output would be
/// float, which this integer path does not produce.
fn qgemm(n: &Node) -> Result<Vec<Tensor>> {
    let t = |x: &Tensor, on: bool| {
        if on {
            x.try_transpose(0, 1)
        } else {
            Ok(x.clone())
        }
    };
    let a = t(
        &centered(q8(n, 0)?, Some(n.input(2)?), 0)?,
        n.int("transA", 0) != 0,
    )?;
    // b's zero point is per output column: axis 1 of B′, axis 0 of B when transposed.
    let tb = n.int("transB", 0) != 0;
    let b = t(
        &centered(q8(n, 3)?, Some(n.input(5)?), usize::from(!tb))?,
        tb,
    )?;
    if n.float("alpha", 1.0) != 1.0 {
        return Err(bad("QGemm", "alpha != 1 is not supported"));
    }
    let mut acc = a.try_matmul_int(&b)?;
    if let Some(c) = n.opt(6) {
        acc = acc.try_add(c.cast(DType::I32))?;
    }
    let (Some(ys), Some(yz)) = (n.opt(7), n.opt(8)) else {
        return Err(bad(
            "QGemm",
            "a float output (no y_scale/y_zero_point) is not supported",
        ));
    };
    let r = ratio(
        "QGemm",
        &scales(n.input(1)?)?,
        &scales(n.input(4)?)?,
        &scales(ys)?,
    )?;
    one(requantize("QGemm", &acc, &r, 1, yz, Ties::BeforeZeroPoint)?)
}

/// QLinearAdd / QLinearMul. Mul: `(a − az)(b − bz)` widened exactly, rescaled by `as·bs/cs`
/// once. Add: each centered operand rescaled by its ratio `s/cs` to a fixed point with
/// `frac` fraction bits (exact up to 2^-frac of an output step), summed, then rounded once to
/// the output step: two roundings, the first far finer than the output.
fn qlinear_binary(n: &Node, mul: bool) -> Result<Vec<Tensor>> {
    let op = if mul { "QLinearMul" } else { "QLinearAdd" };
    let (a, b) = (q8(n, 0)?, q8(n, 3)?);
    let (sa, sb, sc) = (
        scalar(op, n.input(1)?)?,
        scalar(op, n.input(4)?)?,
        scalar(op, n.opt(6).ok_or_else(|| bad(op, "C_scale missing"))?)?,
    );
    let ac = centered(a, n.opt(2), 0)?;
    let bc = centered(b, n.opt(5), 0)?;
    let yz = n
        .opt(7)
        .cloned()
        .unwrap_or(Tensor::try_from_slice_on(&[0u8], &[], &a.device())?);
    if mul {
        return one(requantize(
            op,
            &ac.try_mul_wide(&bc)?,
            &[sa * sb / sc],
            0,
            &yz,
            Ties::BeforeZeroPoint,
        )?);
    }
    let (ra, rb) = (sa / sc, sb / sc);
    // |x − z| ≤ 255: keep the rescaled terms below 2^29 each, so their sum fits in i32.
    let big = ra.max(rb) * 256.0;
    let frac = (29 - (big.log2().ceil() as i32)).clamp(0, 24);
    let pow = (1u32 << frac) as f32;
    let ta = requantize_i32(op, &ac.cast(DType::I32), ra * pow)?;
    let tb = requantize_i32(op, &bc.cast(DType::I32), rb * pow)?;
    let sum = ta.try_add(&tb)?;
    one(requantize(
        op,
        &sum,
        &[1.0 / pow],
        0,
        &yz,
        Ties::BeforeZeroPoint,
    )?)
}

/// `round(acc · ratio)` in i32 (one rounding, no zero point, no clamp).
fn requantize_i32(op: &'static str, acc: &Tensor, ratio: f32) -> Result<Tensor> {
    let (m, s) = requant_params(op, &[ratio])?;
    let dev = acc.device();
    let m = Tensor::try_from_slice_on(&m, &[], &dev)?;
    let s = Tensor::try_from_slice_on(&s, &[], &dev)?;
    acc.try_alu(picograd_core::ops::AluOp::Requant, &[&m, &s])
}

fn scalar(op: &'static str, t: &Tensor) -> Result<f32> {
    match scales(t)?.as_slice() {
        [v] => Ok(*v),
        v => Err(bad(
            op,
            format!("scale must be a scalar, got {} values", v.len()),
        )),
    }
}

/// The sum of `(x − xz)` over each window, as i32.
fn window_sums(n: &Node, x: &Tensor, kernel: &[usize], strides: &[usize]) -> Result<Tensor> {
    let d = vec![1; kernel.len()];
    let win = x.cast(DType::I32).try_pool_windows(kernel, strides, &d)?; // [b, c, o.., k..]
    let axes: Vec<isize> = (1..=kernel.len() as isize).map(|a| -a).collect();
    let sums = win.try_sum(&axes, false)?;
    // Σ(x − xz) = Σx − count · xz, exactly (at most 255 · count in magnitude): the zero
    // point costs one subtraction per output instead of one per input (the KWS model's
    // 24 × 5 pool: 7,680 per inference on Cortex-M4).
    let z = n.input(2)?;
    if to_i64s(z)?.iter().all(|&v| v == 0) {
        return Ok(sums);
    }
    let count: usize = kernel.iter().product();
    let count = i32::try_from(count).map_err(|_| bad(n.op(), "window too large"))?;
    let count = Tensor::try_from_slice_on(&[count], &[], &sums.device())?;
    sums.try_sub(&along(z, sums.ndim(), 1)?.cast(DType::I32).try_mul(&count)?)
}

fn pooled(n: &Node, sums: &Tensor, count: usize) -> Result<Vec<Tensor>> {
    let op = "QLinearAveragePool";
    let (xs, ys) = (scalar(op, n.input(1)?)?, scalar(op, n.input(3)?)?);
    let yz = n
        .opt(4)
        .cloned()
        .unwrap_or(Tensor::try_from_slice_on(&[0u8], &[], &sums.device())?);
    // onnxruntime rounds the pooled value with the zero point added (its ties differ from the
    // conv's when the zero point is odd).
    let r = [xs / ys / count as f32];
    one(requantize(op, sums, &r, 0, &yz, Ties::WithZeroPoint)?)
}

/// QLinearAveragePool without padding (any `pads` must be zero, `ceil_mode` 0): every window
/// holds `∏ kernel` values, so one requantize scale serves them all.
fn qlinear_avg_pool(n: &Node) -> Result<Vec<Tensor>> {
    let x = q8(n, 0)?;
    if x.ndim() < 3 || n.int("channels_last", 0) != 0 {
        return Err(bad(n.op(), "needs NCHW input of rank >= 3"));
    }
    let k = n
        .ints("kernel_shape")
        .ok_or_else(|| bad(n.op(), "kernel_shape missing"))?;
    let strides = n.ints("strides").unwrap_or(vec![1; k.len()]);
    let padded = n.ints("pads").is_some_and(|p| p.iter().any(|&v| v != 0));
    let auto = n.string("auto_pad", "NOTSET");
    if padded || n.int("ceil_mode", 0) != 0 || !matches!(auto.as_str(), "NOTSET" | "VALID") {
        return Err(bad(
            n.op(),
            "padding and ceil_mode are not supported on the integer path",
        ));
    }
    let to_u = |v: &[i64]| -> Result<Vec<usize>> {
        v.iter()
            .map(|&x| usize::try_from(x).map_err(|_| bad("QLinearAveragePool", format!("{v:?}"))))
            .collect()
    };
    let (k, s) = (to_u(&k)?, to_u(&strides)?);
    let sums = window_sums(n, x, &k, &s)?;
    pooled(n, &sums, k.iter().product())
}

fn qlinear_global_avg_pool(n: &Node) -> Result<Vec<Tensor>> {
    let x = q8(n, 0)?;
    if x.ndim() < 3 || n.int("channels_last", 0) != 0 {
        return Err(bad(n.op(), "needs NCHW input of rank >= 3"));
    }
    let sp = x.shape()[2..].to_vec();
    let sums = window_sums(n, x, &sp, &sp)?;
    pooled(n, &sums, sp.iter().product())
}
