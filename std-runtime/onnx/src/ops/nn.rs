//! Neural-network ops: Gemm, MatMul, Conv, ConvTranspose, the pools (Max, Average, Lp and their
//! Global forms) and the normalizations (Batch, Instance, Layer, Group, RMS, Lp, MVN, LRN).
//! Convolutions, Max/Average pooling, BatchNormalization and LayerNormalization are the shared
//! Tensor ops (any spatial rank) once the ONNX attributes (`auto_pad`, `pads`, `output_shape`,
//! ...) are resolved to explicit geometry here; LpPool reduces the shared sliding windows. All
//! stay lazy and exportable.

use picograd_core::{ConvOpts, Padding, PoolOpts, Result, Tensor};

use super::super::node::{bad, Node};
use super::shape::{isz, pad_full};
use super::{norm_axis, one, Handler};

/// The handler for `op` if it is a neural-network op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "MatMul" => |n| one(n.input(0)?.try_matmul(n.input(1)?)?),
        "Gemm" => gemm,
        "Conv" => conv,
        "ConvTranspose" => conv_transpose,
        "CausalConvWithState" => causal_conv,
        "MaxPool" => |n| pool(n, Pool::Max),
        "MaxUnpool" => max_unpool,
        "Col2Im" => col2im,
        "AveragePool" => |n| pool(n, Pool::Avg),
        "LpPool" => |n| pool(n, Pool::Lp(n.int("p", 2) as f64)),
        "GlobalAveragePool" => |n| global(n, Pool::Avg),
        "GlobalMaxPool" => |n| global(n, Pool::Max),
        "GlobalLpPool" => |n| global(n, Pool::Lp(n.int("p", 2) as f64)),
        "BatchNormalization" => batch_norm,
        "InstanceNormalization" => instance_norm,
        "LayerNormalization" => layer_norm,
        "GroupNormalization" => group_norm,
        "RMSNormalization" => rms_norm,
        "LpNormalization" => lp_norm,
        "MeanVarianceNormalization" => mvn,
        "LRN" => lrn,
        _ => return None,
    })
}

fn gemm(n: &Node) -> Result<Vec<Tensor>> {
    let t = |x: &Tensor, on: bool| {
        if on {
            x.try_transpose(0, 1)
        } else {
            Ok(x.clone())
        }
    };
    let a = t(n.input(0)?, n.int("transA", 0) != 0)?;
    let b = t(n.input(1)?, n.int("transB", 0) != 0)?;
    let mut y = a.try_matmul(&b)?;
    let alpha = n.float("alpha", 1.0) as f64;
    if alpha != 1.0 {
        y = y.try_mul(alpha)?;
    }
    if let Some(c) = n.opt(2) {
        y = y.try_add(c.try_mul(n.float("beta", 1.0) as f64)?)?;
    }
    one(y)
}

/// Window geometry for one spatial op.
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    /// `(before, after)` padding per spatial axis.
    pads: Vec<(i64, i64)>,
}

fn list(n: &Node, name: &str, k: usize, default: i64) -> Result<Vec<usize>> {
    let v = n.ints(name).unwrap_or_else(|| vec![default; k]);
    if v.len() != k || v.iter().any(|&x| !(1..=1 << 20).contains(&x)) {
        return Err(bad(n.op(), format!("{name} {v:?} for {k} spatial axes")));
    }
    Ok(v.iter().map(|&x| x as usize).collect())
}

impl Window {
    /// Reads kernel, strides, dilations and pads (explicit or `auto_pad`) for `spatial` dims.
    fn read(n: &Node, kernel: Vec<usize>, spatial: &[usize]) -> Result<Window> {
        let k = kernel.len();
        if spatial.len() != k || kernel.contains(&0) {
            return Err(bad(
                n.op(),
                format!("kernel {kernel:?} for spatial dims {spatial:?}"),
            ));
        }
        let strides = list(n, "strides", k, 1)?;
        let dilations = list(n, "dilations", k, 1)?;
        let pads = match n.string("auto_pad", "NOTSET").as_str() {
            "SAME_UPPER" | "SAME_LOWER" => {
                let lower = n.string("auto_pad", "") == "SAME_LOWER";
                (0..k)
                    .map(|i| {
                        // i128: kernel extents and strides of any existing shape cannot overflow.
                        let out = spatial[i].div_ceil(strides[i]) as i128;
                        let need = (out - 1).max(0) * strides[i] as i128
                            + (kernel[i] as i128 - 1) * dilations[i] as i128
                            + 1;
                        let total = i64::try_from((need - spatial[i] as i128).max(0))
                            .map_err(|_| bad(n.op(), format!("kernel {kernel:?} is too large")))?;
                        let small = total / 2;
                        Ok(if lower {
                            (total - small, small)
                        } else {
                            (small, total - small)
                        })
                    })
                    .collect::<Result<_>>()?
            }
            _ => {
                let p = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
                if p.len() != 2 * k {
                    return Err(bad(n.op(), format!("pads {p:?} for {k} spatial axes")));
                }
                (0..k).map(|i| (p[i], p[i + k])).collect()
            }
        };
        Ok(Window {
            kernel,
            strides,
            dilations,
            pads,
        })
    }

    /// Output size of each axis of a padded input of `spatial` dims (`ceil` rounds up).
    fn out_dims(&self, spatial: &[usize], ceil: bool) -> Result<Vec<usize>> {
        (0..self.kernel.len())
            .map(|i| {
                let padded = spatial[i] as i128 + self.pads[i].0 as i128 + self.pads[i].1 as i128;
                let span = (self.kernel[i] as i128 - 1) * self.dilations[i] as i128 + 1;
                let s = self.strides[i] as i128;
                let room = padded - span;
                if room < 0 {
                    return Err(bad(
                        "window",
                        format!("kernel {:?} larger than input {spatial:?}", self.kernel),
                    ));
                }
                let mut o = room / s + 1;
                if ceil && room % s != 0 {
                    o += 1;
                    // The last window must start inside the input or its left padding.
                    if (o - 1) * s >= spatial[i] as i128 + self.pads[i].0 as i128 {
                        o -= 1;
                    }
                }
                usize::try_from(o).map_err(|_| bad("window", format!("output size {o} overflows")))
            })
            .collect()
    }
}

/// Pads the spatial axes of `[N, C, ...]` by `pads` plus `extra` at the end, with `value`.
fn pad_spatial(x: &Tensor, pads: &[(i64, i64)], extra: &[i64], value: f64) -> Result<Tensor> {
    let mut full = vec![(0, 0); 2];
    full.extend(pads.iter().zip(extra).map(|(&(b, e), &x)| (b, e + x)));
    pad_full(x, &full, "constant", value)
}

fn conv(n: &Node) -> Result<Vec<Tensor>> {
    let (x, w) = (n.input(0)?, n.input(1)?);
    one(x.try_conv2d(w, n.opt(2), &conv_opts(n, x, w)?)?)
}

/// The shared conv's options for a Conv-like node with input `x` and weight `w`.
pub(super) fn conv_opts(n: &Node, x: &Tensor, w: &Tensor) -> Result<ConvOpts> {
    let ws = w.shape();
    if x.ndim() < 3 || ws.len() != x.ndim() {
        let xs = x.sym_shape();
        return Err(bad(n.op(), format!("input {xs:?} and weight {ws:?}")));
    }
    let win = Window::read(n, ws[2..].to_vec(), &spatial(x))?;
    Ok(ConvOpts::default()
        .groups(n.int("group", 1).max(1) as usize)
        .stride(&win.strides)
        .dilation(&win.dilations)
        .padding(per_side(n.op(), &win.pads)?))
}

/// A depthwise causal 1-D conv: the carried state (or zeros) goes before the input, the
/// shared conv runs unpadded with one group per channel, and the last `k − 1` steps of the
/// padded input are the next state. `activation` `silu`/`swish` applies x·σ(x).
fn causal_conv(n: &Node) -> Result<Vec<Tensor>> {
    let (x, w) = (n.input(0)?, n.input(1)?);
    let (xs, ws) = (x.shape(), w.shape());
    if xs.len() != 3 || ws.len() != 3 || ws[0] != xs[1] || ws[2] == 0 {
        return Err(bad(n.op(), format!("input {xs:?} and weight {ws:?}")));
    }
    let (c, k) = (xs[1], ws[2]);
    let state = match n.opt(3) {
        Some(s) => s.clone(),
        None => x.try_pad(&[(0, 0), (0, 0), (k - 1, 0)])?.try_shrink(&[
            (0, xs[0]),
            (0, c),
            (0, k - 1),
        ])?,
    };
    let padded = Tensor::try_cat(&[&state, x], 2)?;
    let y = padded.try_conv2d(w, n.opt(2), &ConvOpts::default().groups(c))?;
    let y = match n.string("activation", "none").as_str() {
        "none" => y,
        "silu" | "swish" => y.float().silu().cast(x.dtype()),
        a => return Err(bad(n.op(), format!("activation '{a}'"))),
    };
    let len = padded.shape()[2];
    if padded.ndim() != 3 || len < k - 1 {
        return Err(bad(
            n.op(),
            format!(
                "state and input {:?} hold fewer than {} steps",
                padded.shape(),
                k - 1
            ),
        ));
    }
    let present = padded.try_shrink(&[(0, xs[0]), (0, c), (len - (k - 1), len)])?;
    Ok(vec![y, present])
}

/// `(before, after)` pads per axis (first axis first) as the shared ops' [`Padding::PerSide`].
fn per_side(op: &str, pads: &[(i64, i64)]) -> Result<Padding> {
    if pads.iter().any(|&(b, e)| b < 0 || e < 0) {
        return Err(bad(op, format!("negative pads {pads:?}")));
    }
    let v = pads
        .iter()
        .rev()
        .flat_map(|&(b, e)| [b as usize, e as usize])
        .collect();
    Ok(Padding::PerSide(v))
}

/// `[C]` reshaped to `[1, C, 1, ...]` for a rank-`r` tensor.
fn per_channel(t: &Tensor, r: usize) -> Result<Tensor> {
    let mut s = vec![1isize; r.max(2)];
    s[1] = -1;
    t.try_reshape(&s)
}

fn conv_transpose(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let w = n.input(1)?;
    let (xs, ws) = (x.shape(), w.shape());
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(bad(
            "ConvTranspose",
            format!("input {xs:?} and weight {ws:?}"),
        ));
    }
    let k = xs.len() - 2;
    let g = n.int("group", 1).max(1) as usize;
    let kernel = ws[2..].to_vec();
    if kernel.contains(&0) || xs[2..].contains(&0) {
        return Err(bad(
            "ConvTranspose",
            format!("input {xs:?} and weight {ws:?} have an empty spatial axis"),
        ));
    }
    let strides = list(n, "strides", k, 1)?;
    let dil = list(n, "dilations", k, 1)?;
    let opad = n.ints("output_padding").unwrap_or_else(|| vec![0; k]);
    let pads = transpose_pads(n, &xs[2..], &kernel, &strides, &dil, &opad)?;
    // A negative end pad grows the output: the shared op spells that as output padding.
    let mut out_pad = Vec::with_capacity(k);
    let mut crop = Vec::with_capacity(k);
    for (i, &(b, e)) in pads.iter().enumerate() {
        let grow = opad.get(i).copied().unwrap_or(0) as i128 - e.min(0) as i128;
        out_pad.push(usize::try_from(grow).map_err(|_| {
            bad(
                "ConvTranspose",
                format!("output padding {grow} on spatial axis {i}"),
            )
        })?);
        crop.push((b, e.max(0)));
    }
    let opts = ConvOpts::default()
        .groups(g)
        .stride(&strides)
        .dilation(&dil)
        .padding(per_side("ConvTranspose", &crop)?)
        .output_padding(&out_pad);
    one(x.try_conv_transpose2d(w, n.opt(2), &opts)?)
}

/// Explicit pads of a transposed convolution (from `pads`, `output_shape` or `auto_pad`).
fn transpose_pads(
    n: &Node,
    spatial: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dil: &[usize],
    opad: &[i64],
) -> Result<Vec<(i64, i64)>> {
    let k = spatial.len();
    let auto = n.string("auto_pad", "NOTSET");
    if let Some(p) = n
        .ints("pads")
        .filter(|_| auto == "NOTSET" || auto.is_empty())
    {
        if p.len() != 2 * k {
            return Err(bad("ConvTranspose", format!("pads {p:?}")));
        }
        return Ok((0..k).map(|i| (p[i], p[i + k])).collect());
    }
    let target: Option<Vec<i64>> = n
        .ints("output_shape")
        .map(|s| s[s.len().saturating_sub(k)..].to_vec());
    if target.as_ref().is_some_and(|t| t.len() != k) {
        return Err(bad(
            "ConvTranspose",
            format!("output_shape {target:?} for {k} spatial axes"),
        ));
    }
    (0..k)
        .map(|i| {
            // i128: no product of dims, strides and dilations that exist can overflow it.
            let full = strides[i] as i128 * (spatial[i] as i128 - 1)
                + opad.get(i).copied().unwrap_or(0) as i128
                + (kernel[i] as i128 - 1) * dil[i] as i128
                + 1;
            let want = match &target {
                Some(t) => t[i] as i128,
                None if auto.starts_with("SAME") => spatial[i] as i128 * strides[i] as i128,
                None => full,
            };
            let total = i64::try_from(full - want).map_err(|_| {
                bad(
                    "ConvTranspose",
                    format!("output size {want} on spatial axis {i}"),
                )
            })?;
            let half = total.div_euclid(2);
            Ok(if auto == "SAME_UPPER" {
                (half, total - half)
            } else {
                (total - half, half)
            })
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Pool {
    Max,
    Avg,
    Lp(f64),
}

/// The sizes of the spatial axes (after batch and channels), read without the batch: a
/// symbolic batch stays symbolic through the geometry computed from them.
fn spatial(x: &Tensor) -> Vec<usize> {
    let s = x.sym_shape();
    s.get(2..)
        .unwrap_or_default()
        .iter()
        .map(|d| d.resolved().max(0) as usize)
        .collect()
}

fn pool(n: &Node, kind: Pool) -> Result<Vec<Tensor>> {
    let x = n.input_min_rank(0, 3)?;
    let sp = spatial(x);
    let k = sp.len();
    let kernel = list(n, "kernel_shape", k, 0)?;
    let win = Window::read(n, kernel, &sp)?;
    let ceil = n.int("ceil_mode", 0) != 0;
    let out = win.out_dims(&sp, ceil)?;
    let opts = PoolOpts::new(&win.kernel)
        .stride(&win.strides)
        .dilation(&win.dilations)
        .padding(per_side(n.op(), &win.pads)?)
        .ceil_mode(ceil)
        .count_include_pad(n.int("count_include_pad", 0) != 0);
    let wants_indices = n.proto.output.get(1).is_some_and(|o| !o.is_empty());
    if wants_indices && matches!(kind, Pool::Max) {
        // Whole-tensor indices count planes over the batch: this output reads its size.
        let (y, idx) = x.try_max_pool2d_with_indices(&opts)?;
        return Ok(vec![y, onnx_indices(n, &idx, &x.shape())?]);
    }
    let y = match kind {
        Pool::Max => x.try_max_pool2d(&opts)?,
        Pool::Avg => x.try_avg_pool2d(&opts)?.cast(x.dtype()),
        Pool::Lp(e) => lp_pool(x, &win, &out, e)?,
    };
    one(y)
}

/// Per-plane flat indices (row-major) as ONNX's: i64 over the whole input tensor, and
/// column-major within the plane for `storage_order` 1 (2-D).
fn onnx_indices(n: &Node, idx: &Tensor, xs: &[usize]) -> Result<Tensor> {
    let mut idx = idx.cast(picograd_core::DType::I64);
    if n.int("storage_order", 0) != 0 && xs.len() == 4 {
        let (h, w) = (xs[2] as i64, xs[3] as i64);
        let (row, col) = (idx.try_div(w)?, idx.try_rem(w)?);
        idx = col.try_mul(h)?.try_add(&row)?;
    }
    let plane: usize = xs[2..].iter().product();
    let planes = xs[0] * xs[1];
    let mut shape = vec![xs[0] as isize, xs[1] as isize];
    shape.extend(vec![1isize; xs.len() - 2]);
    let base = Tensor::try_arange(0.0, planes as f64, 1.0, picograd_core::DType::I64)?
        .try_mul(plane as i64)?
        .try_reshape(&shape)?;
    idx.try_add(&base)
}

/// MaxUnpool with the shared op: ONNX's whole-tensor indices made per-plane, the values placed
/// in the size the pooling implies, then zero-padded at the end up to `output_shape`.
fn max_unpool(n: &Node) -> Result<Vec<Tensor>> {
    let (x, idx) = (n.input_min_rank(0, 3)?, n.input(1)?);
    let xs = x.shape();
    let k = xs.len().saturating_sub(2);
    let kernel = list(n, "kernel_shape", k, 0)?;
    let win = Window::read(n, kernel, &xs[2..])?;
    let opts = PoolOpts::new(&win.kernel)
        .stride(&win.strides)
        .padding(per_side(n.op(), &win.pads)?);
    let sizes: Vec<usize> = (0..k)
        .map(|i| {
            let full = xs[2 + i].saturating_sub(1) as i128 * win.strides[i] as i128
                + win.kernel[i] as i128
                - win.pads[i].0 as i128
                - win.pads[i].1 as i128;
            usize::try_from(full.max(0))
                .map_err(|_| bad(n.op(), format!("output size {full} on spatial axis {i}")))
        })
        .collect::<Result<_>>()?;
    let plane = sizes
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .and_then(|p| i64::try_from(p).ok())
        .filter(|&p| p > 0)
        .ok_or_else(|| {
            bad(
                n.op(),
                format!("output plane {sizes:?} is empty or too large"),
            )
        })?;
    let local = idx.try_rem(plane)?;
    let y = x.try_max_unpool2d(&local, &opts, Some(&sizes))?;
    let Some(out) = n.ints_input(2)? else {
        return one(y);
    };
    let mut pads = vec![(0usize, 0usize); 2];
    for (i, &have) in sizes.iter().enumerate() {
        let want = out.get(2 + i).copied().unwrap_or(have as i64).max(0) as usize;
        pads.push((0, want.saturating_sub(have)));
    }
    one(y.try_pad(&pads)?)
}

/// `(Σ |x|^p)^(1/p)` over each window of the zero-padded input (shared sliding windows).
fn lp_pool(x: &Tensor, win: &Window, out: &[usize], p: f64) -> Result<Tensor> {
    let sp = spatial(x);
    let k = win.kernel.len();
    let extra: Vec<i64> = (0..k)
        .map(|i| {
            let need = (out[i] - 1) * win.strides[i] + (win.kernel[i] - 1) * win.dilations[i] + 1;
            (need as i64 - (sp[i] as i64 + win.pads[i].0 + win.pads[i].1)).max(0)
        })
        .collect();
    let padded = pad_spatial(x, &win.pads, &extra, 0.0)?;
    let w = padded.try_pool_windows(&win.kernel, &win.strides, &win.dilations)?;
    let axes: Vec<isize> = (0..k as isize).map(|i| -1 - i).collect();
    w.abs().try_pow(p)?.try_sum(&axes, false)?.try_pow(1.0 / p)
}

fn global(n: &Node, kind: Pool) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let axes: Vec<isize> = (2..x.ndim() as isize).collect();
    one(match kind {
        Pool::Max => x.try_max(&axes, true)?,
        Pool::Avg => x.try_mean(&axes, true)?,
        Pool::Lp(e) => x.abs().try_pow(e)?.try_sum(&axes, true)?.try_pow(1.0 / e)?,
    })
}

/// `(x − mean) / √(var + eps)` over `axes` (biased variance).
fn normalize(x: &Tensor, axes: &[isize], eps: f64) -> Result<Tensor> {
    let mean = x.try_mean(axes, true)?;
    let d = x.try_sub(&mean)?;
    let var = d.try_mul(&d)?.try_mean(axes, true)?;
    d.try_div(var.try_add(eps)?.sqrt())
}

fn batch_norm(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let [scale, b, mean, var] = [1, 2, 3, 4].map(|i| n.input(i));
    let eps = n.float("epsilon", 1e-5) as f64;
    if n.int("training_mode", 0) != 0 {
        return batch_norm_training(n, x, scale?, b?, (mean?, var?), eps);
    }
    let invstd = var?.try_add(eps)?.rsqrt();
    one(x.try_batchnorm(Some(scale?), Some(b?), mean?, &invstd, &[1])?)
}

/// Training mode: normalizes with the batch's own statistics (biased variance) and returns the
/// running statistics blended with them by `momentum`.
fn batch_norm_training(
    n: &Node,
    x: &Tensor,
    scale: &Tensor,
    b: &Tensor,
    (mean, var): (&Tensor, &Tensor),
    eps: f64,
) -> Result<Vec<Tensor>> {
    let axes: Vec<isize> = (0..x.ndim() as isize).filter(|&a| a != 1).collect();
    let m = x.try_mean(&axes, false)?;
    let d = x.try_sub(&per_channel(&m, x.ndim())?)?;
    let v = d.try_mul(&d)?.try_mean(&axes, false)?;
    let y = x.try_batchnorm(Some(scale), Some(b), &m, &v.try_add(eps)?.rsqrt(), &[1])?;
    let mom = f64::from(n.float("momentum", 0.9));
    let blend = |run: &Tensor, now: &Tensor| -> Result<Tensor> {
        run.try_mul(mom)?.try_add(now.try_mul(1.0 - mom)?)
    };
    Ok(vec![y, blend(mean, &m)?, blend(var, &v)?])
}

fn instance_norm(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let r = x.ndim();
    let axes: Vec<isize> = (2..r as isize).collect();
    let y = normalize(x, &axes, n.float("epsilon", 1e-5) as f64)?;
    let y = y.try_mul(&per_channel(n.input(1)?, r)?)?;
    one(y.try_add(&per_channel(n.input(2)?, r)?)?)
}

/// The shared `layernorm` for Y; the optional Mean and InvStdDev outputs are built beside it
/// (lazy, so they cost nothing when unused).
fn layer_norm(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let r = x.ndim();
    let a = norm_axis("LayerNormalization", n.int("axis", -1), r)?;
    let axes: Vec<isize> = (a as isize..r as isize).collect();
    let eps = n.float("epsilon", 1e-5) as f64;
    let xf = x.float();
    let mut y = xf.try_layernorm(&axes, eps)?.try_mul(n.input(1)?)?;
    if let Some(b) = n.opt(2) {
        y = y.try_add(b)?;
    }
    let mean = xf.try_mean(&axes, true)?;
    let d = xf.try_sub(&mean)?;
    let inv = d.try_mul(&d)?.try_mean(&axes, true)?.try_add(eps)?.rsqrt();
    Ok(vec![y.cast(x.dtype()), mean, inv])
}

fn group_norm(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input_min_rank(0, 2)?;
    let xs = x.shape();
    let g = n.int("num_groups", 1).max(1) as usize;
    let (nb, c) = (xs[0], xs[1]);
    if c % g != 0 {
        return Err(bad(
            "GroupNormalization",
            format!("{g} groups for {c} channels"),
        ));
    }
    let grouped = x.try_reshape(&[nb as isize, g as isize, -1])?;
    let y = normalize(&grouped, &[2], n.float("epsilon", 1e-5) as f64)?;
    let y = y.try_reshape(&isz(&xs))?;
    let per = |t: &Tensor| -> Result<Tensor> {
        let t = if t.numel() == g && g != c {
            t.try_reshape(&[g as isize, 1])?
                .try_expand(&[g, c / g])?
                .try_reshape(&[c as isize])?
        } else {
            t.clone()
        };
        per_channel(&t, xs.len())
    };
    one(y.try_mul(&per(n.input(1)?)?)?.try_add(&per(n.input(2)?)?)?)
}

fn rms_norm(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let r = x.ndim();
    let a = norm_axis("RMSNormalization", n.int("axis", -1), r)?;
    let axes: Vec<isize> = (a as isize..r as isize).collect();
    let xf = x.float();
    let ms = xf.try_mul(&xf)?.try_mean(&axes, true)?;
    let y = xf.try_mul(ms.try_add(n.float("epsilon", 1e-5) as f64)?.rsqrt())?;
    one(y.try_mul(n.input(1)?)?.cast(x.dtype()))
}

fn lp_norm(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let a = norm_axis("LpNormalization", n.int("axis", -1), x.ndim())? as isize;
    let norm = if n.int("p", 2) == 1 {
        x.abs().try_sum(&[a], true)?
    } else {
        x.try_mul(x)?.try_sum(&[a], true)?.sqrt()
    };
    let zero = norm.try_eq(0.0)?;
    one(zero.try_where(x.const_like(0.0), x.try_div(&norm)?)?)
}

fn mvn(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let axes: Vec<isize> = n
        .ints("axes")
        .unwrap_or_else(|| vec![0, 2, 3])
        .iter()
        .map(|&a| norm_axis("MeanVarianceNormalization", a, x.ndim()).map(|v| v as isize))
        .collect::<Result<_>>()?;
    one(normalize(x, &axes, 1e-9)?)
}

fn lrn(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input_min_rank(0, 2)?;
    let size = n.int("size", 1).max(1) as usize;
    let (alpha, beta, bias) = (
        n.float("alpha", 1e-4) as f64,
        n.float("beta", 0.75) as f64,
        n.float("bias", 1.0) as f64,
    );
    let c = x.shape()[1];
    let sq = x.try_mul(x)?;
    // The window reaches `lo` channels down and `hi` up; reaches past the channels add only
    // zeros, so a window wider than the channels is cut to them (same sums, bounded work).
    let lo = ((size - 1) / 2).min(c);
    let hi = (size - 1 - (size - 1) / 2).min(c);
    let mut pads = vec![(0i64, 0i64); x.ndim()];
    pads[1] = (lo as i64, hi as i64);
    let padded = pad_full(&sq, &pads, "constant", 0.0)?;
    let mut sum = sq.const_like(0.0);
    for k in 0..=lo + hi {
        let mut arg: Vec<(usize, usize)> = padded.shape().iter().map(|&d| (0, d)).collect();
        arg[1] = (k, k + c);
        sum = sum.try_add(padded.try_shrink(&arg)?)?;
    }
    let den = sum
        .try_mul(alpha / size as f64)?
        .try_add(bias)?
        .try_pow(beta)?;
    one(x.try_div(&den)?)
}

/// Places `t`'s spatial axes (from axis 2) at `offset + o·stride` inside zeros of `size`.
fn scatter_strided(
    t: &Tensor,
    offset: &[usize],
    stride: &[usize],
    size: &[usize],
) -> Result<Tensor> {
    let mut y = t.clone();
    for (i, &s) in stride.iter().enumerate() {
        let a = 2 + i;
        let sh = y.shape();
        let o = sh[a];
        let mut split = sh.clone();
        split.insert(a + 1, 1);
        let mut pads = vec![(0usize, 0usize); split.len()];
        pads[a + 1] = (0, s - 1);
        let mut flat = sh.clone();
        flat[a] = o * s;
        let z = y
            .try_reshape(&isz(&split))?
            .try_pad(&pads)?
            .try_reshape(&isz(&flat))?;
        let used = (o - 1) * s + 1;
        let mut keep: Vec<(usize, usize)> = flat.iter().map(|&d| (0, d)).collect();
        keep[a] = (0, used);
        let mut place = vec![(0usize, 0usize); flat.len()];
        place[a] = (offset[i], size[i] - offset[i] - used);
        y = z.try_shrink(&keep)?.try_pad(&place)?;
    }
    Ok(y)
}

/// Col2Im geometry: image and block sizes, strides, dilations, pads (`[begin.., end..]`).
struct Fold {
    image: Vec<usize>,
    block: Vec<usize>,
    strides: Vec<usize>,
    dil: Vec<usize>,
    pads: Vec<i64>,
}

impl Fold {
    fn read(n: &Node) -> Result<Fold> {
        let sizes = |i: usize, min: i64| -> Result<Vec<usize>> {
            let v = n.ints_input(i)?.unwrap_or_default();
            Ok(v.iter().map(|&d| d.max(min) as usize).collect())
        };
        let (image, block) = (sizes(1, 0)?, sizes(2, 1)?);
        let k = image.len();
        if block.len() != k || k == 0 {
            return Err(bad(n.op(), format!("image {image:?} and block {block:?}")));
        }
        let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * k]);
        if pads.len() != 2 * k || pads.iter().any(|&p| !(0..=1 << 40).contains(&p)) {
            return Err(bad(n.op(), format!("pads {pads:?} for {k} spatial axes")));
        }
        let fold = Fold {
            strides: list(n, "strides", k, 1)?,
            dil: list(n, "dilations", k, 1)?,
            pads,
            image,
            block,
        };
        if fold.image.iter().any(|&d| d > 1 << 40) {
            return Err(bad(n.op(), format!("image {:?}", fold.image)));
        }
        // Every block must fit in the padded image (so block counts and offsets exist).
        let padded = fold.padded();
        for (i, &room) in padded.iter().enumerate() {
            let span = (fold.dil[i] as u128) * (fold.block[i] as u128 - 1) + 1;
            if span > room as u128 {
                return Err(bad(
                    n.op(),
                    format!(
                        "block {:?} (dilations {:?}) does not fit image {:?} padded by {:?}",
                        fold.block, fold.dil, fold.image, fold.pads
                    ),
                ));
            }
        }
        Ok(fold)
    }

    /// The padded image size per axis.
    fn padded(&self) -> Vec<usize> {
        let k = self.image.len();
        (0..k)
            .map(|i| (self.image[i] as i64 + self.pads[i] + self.pads[i + k]) as usize)
            .collect()
    }

    /// Sliding blocks per axis.
    fn blocks(&self) -> Vec<usize> {
        let span = |i: usize| self.dil[i] * (self.block[i] - 1) + 1;
        let p = self.padded();
        (0..p.len())
            .map(|i| (p[i] - span(i)) / self.strides[i] + 1)
            .collect()
    }

    /// Where kernel tap `j` (row-major over the block) starts, per axis.
    fn tap_offset(&self, j: usize) -> Vec<usize> {
        let mut rest = j;
        let mut offset = vec![0; self.block.len()];
        for i in (0..self.block.len()).rev() {
            offset[i] = (rest % self.block[i]) * self.dil[i];
            rest /= self.block[i];
        }
        offset
    }
}

/// Col2Im: sums each kernel tap's column block back into the (padded) image, then crops.
fn col2im(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let f = Fold::read(n)?;
    let xs = x.shape();
    let taps = f
        .block
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .filter(|&t| t <= xs.get(1).copied().unwrap_or(0).max(1))
        .ok_or_else(|| {
            bad(
                n.op(),
                format!(
                    "blocks {:?} have more taps than input {xs:?} has columns",
                    f.block
                ),
            )
        })?;
    if xs.len() != 3 || xs[1] % taps != 0 {
        return Err(bad(
            n.op(),
            format!("input {xs:?} for blocks {:?}", f.block),
        ));
    }
    let c = xs[1] / taps;
    let mut cols = vec![xs[0], c, taps];
    cols.extend(f.blocks());
    let x = x.try_reshape(&isz(&cols))?;
    let padded = f.padded();
    let mut sum: Option<Tensor> = None;
    for j in 0..taps {
        let mut keep: Vec<(usize, usize)> = cols.iter().map(|&d| (0, d)).collect();
        keep[2] = (j, j + 1);
        let part = x.try_shrink(&keep)?.try_squeeze(Some(2))?;
        let placed = scatter_strided(&part, &f.tap_offset(j), &f.strides, &padded)?;
        sum = Some(match sum {
            Some(s) => s.try_add(&placed)?,
            None => placed,
        });
    }
    let sum = sum.ok_or_else(|| bad(n.op(), "an empty block"))?;
    let mut crop = vec![(0, xs[0]), (0, c)];
    let k = f.image.len();
    crop.extend((0..k).map(|i| (f.pads[i] as usize, f.pads[i] as usize + f.image[i])));
    one(sum.try_shrink(&crop)?)
}
