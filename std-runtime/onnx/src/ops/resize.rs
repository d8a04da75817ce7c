//! Resize (and the older Upsample), kept lazy: every resized axis is one matrix product with an
//! `[out, in]` interpolation matrix built on the host from the coordinate transform and the mode
//! (nearest with its rounding rule, linear, cubic with `cubic_coeff_a`/`exclude_outside`).
//! `tf_crop_and_resize` fills positions outside the input with `extrapolation_value`.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::checked_numel;
use super::{norm_axis, one};

/// How output coordinates map back to input coordinates on one axis.
struct Axis {
    len_in: usize,
    len_out: usize,
    scale: f64,
    roi: (f64, f64),
}

/// The settings shared by every axis.
struct Setup {
    mode: String,
    transform: String,
    nearest: String,
    cubic_a: f64,
    exclude_outside: bool,
}

/// The Resize/Upsample handler.
pub fn resize(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let shape = x.shape();
    let r = shape.len();
    if n.int("antialias", 0) != 0 {
        return Err(bad("Resize", "antialias is not supported"));
    }
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&v| norm_axis("Resize", v, r))
            .collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    let plan = plan_axes(n, &shape, &axes)?;
    let setup = read_setup(n);
    let mut y = x.float();
    let mut outside: Option<Tensor> = None;
    for (a, ax) in plan {
        let (w, inside) = matrix(&ax, &setup);
        let wt = Tensor::try_from_f64s(&w, &[ax.len_out, ax.len_in], y.dtype())?;
        y = apply(&y, a, &wt)?;
        if setup.transform == "tf_crop_and_resize" {
            let mut s = vec![1isize; r];
            s[a] = ax.len_out as isize;
            let m = Tensor::try_from_f64s(&inside, &[ax.len_out], DType::Bool)?
                .try_reshape(&s)?
                .logical_not();
            outside = Some(match outside {
                None => m,
                Some(o) => o.try_alu(picograd_core::ops::AluOp::Or, &[&m])?,
            });
        }
    }
    if let Some(o) = outside {
        y = o.try_where(y.const_like(n.float("extrapolation_value", 0.0) as f64), &y)?;
    }
    if !x.dtype().is_float() {
        y = super::math::round(&y)?;
    }
    one(y.cast(x.dtype()))
}

fn read_setup(n: &Node) -> Setup {
    let default_tf = if n.op() == "Upsample" || n.opset < 11 {
        "asymmetric"
    } else {
        "half_pixel"
    };
    let mut mode = n.string("mode", "nearest");
    if mode == "bilinear" || mode == "trilinear" {
        mode = "linear".into();
    }
    let nearest_default = if n.op() == "Upsample" || n.opset < 11 {
        "floor"
    } else {
        "round_prefer_floor"
    };
    Setup {
        mode,
        transform: n.string("coordinate_transformation_mode", default_tf),
        nearest: n.string("nearest_mode", nearest_default),
        cubic_a: n.float("cubic_coeff_a", -0.75) as f64,
        exclude_outside: n.int("exclude_outside", 0) != 0,
    }
}

/// Output size, scale and roi of every resized axis.
fn plan_axes(n: &Node, shape: &[usize], axes: &[usize]) -> Result<Vec<(usize, Axis)>> {
    let (scales, sizes, roi) = if n.op() == "Upsample" {
        let s = match n.floats("scales") {
            Some(s) => Some(s.iter().map(|&v| v as f64).collect()),
            None => n.floats_input(1)?,
        };
        (s, None, None)
    } else if n.opset < 11 {
        (n.floats_input(1)?, None, None)
    } else {
        (
            n.floats_input(2)?.filter(|v| !v.is_empty()),
            n.ints_input(3)?.filter(|v| !v.is_empty()),
            n.floats_input(1)?.filter(|v| !v.is_empty()),
        )
    };
    let k = axes.len();
    let mut out: Vec<(usize, f64)> = Vec::with_capacity(k);
    if let Some(sz) = sizes {
        if sz.len() != k {
            return Err(bad("Resize", format!("{} sizes for {k} axes", sz.len())));
        }
        let ratio: Vec<f64> = (0..k)
            .map(|i| sz[i] as f64 / shape[axes[i]] as f64)
            .collect();
        let policy = n.string("keep_aspect_ratio_policy", "stretch");
        let common = match policy.as_str() {
            "not_larger" => Some(ratio.iter().cloned().fold(f64::INFINITY, f64::min)),
            "not_smaller" => Some(ratio.iter().cloned().fold(0.0, f64::max)),
            _ => None,
        };
        for i in 0..k {
            match common {
                Some(c) => out.push(((c * shape[axes[i]] as f64 + 0.5).floor() as usize, c)),
                None => out.push((sz[i].max(0) as usize, ratio[i])),
            }
        }
    } else {
        let sc = scales.ok_or_else(|| bad("Resize", "neither scales nor sizes given"))?;
        if sc.len() != k {
            return Err(bad("Resize", format!("{} scales for {k} axes", sc.len())));
        }
        for i in 0..k {
            if !(sc[i] > 0.0 && sc[i].is_finite()) {
                return Err(bad("Resize", format!("scale {}", sc[i])));
            }
            out.push(((shape[axes[i]] as f64 * sc[i]).floor() as usize, sc[i]));
        }
    }
    let dims: Vec<i64> = out.iter().map(|o| o.0 as i64).collect();
    checked_numel("Resize", &dims)?;
    Ok((0..k)
        .map(|i| {
            let roi = match &roi {
                Some(rv) if rv.len() == 2 * k => (rv[i], rv[i + k]),
                Some(rv) if rv.len() == 2 * shape.len() => (rv[axes[i]], rv[axes[i] + shape.len()]),
                _ => (0.0, 1.0),
            };
            (
                axes[i],
                Axis {
                    len_in: shape[axes[i]],
                    len_out: out[i].0,
                    scale: out[i].1,
                    roi,
                },
            )
        })
        .collect())
}

/// The input coordinate of output index `o`.
fn source(o: usize, ax: &Axis, transform: &str) -> f64 {
    let (o, s, li, lo) = (o as f64, ax.scale, ax.len_in as f64, ax.len_out as f64);
    match transform {
        "align_corners" if lo > 1.0 => o * (li - 1.0) / (s * li - 1.0),
        "align_corners" => 0.0,
        "asymmetric" => o / s,
        "pytorch_half_pixel" if lo > 1.0 => (o + 0.5) / s - 0.5,
        "pytorch_half_pixel" => 0.0,
        "tf_half_pixel_for_nn" => (o + 0.5) / s,
        "half_pixel_symmetric" => {
            let adj = lo / (s * li);
            li / 2.0 * (1.0 - adj) + (o + 0.5) / s - 0.5
        }
        "tf_crop_and_resize" if lo > 1.0 => {
            ax.roi.0 * (li - 1.0) + o * (ax.roi.1 - ax.roi.0) * (li - 1.0) / (lo - 1.0)
        }
        "tf_crop_and_resize" => 0.5 * (ax.roi.0 + ax.roi.1) * (li - 1.0),
        _ => (o + 0.5) / s - 0.5,
    }
}

/// The `[out, in]` interpolation matrix (row-major) and, per output, whether it is inside.
fn matrix(ax: &Axis, s: &Setup) -> (Vec<f64>, Vec<f64>) {
    let (li, lo) = (ax.len_in, ax.len_out);
    let mut w = vec![0.0; lo * li];
    let mut inside = vec![1.0; lo];
    for o in 0..lo {
        let x = source(o, ax, &s.transform);
        if s.transform == "tf_crop_and_resize" && (x < 0.0 || x > (li as f64 - 1.0)) {
            inside[o] = 0.0;
            continue;
        }
        for (i, c) in taps(x, li, s) {
            w[o * li + i] += c;
        }
    }
    (w, inside)
}

/// `(input index, weight)` pairs for coordinate `x` on an axis of `li`.
fn taps(x: f64, li: usize, s: &Setup) -> Vec<(usize, f64)> {
    let clamp = |i: i64| i.clamp(0, li as i64 - 1) as usize;
    match s.mode.as_str() {
        "linear" => {
            let f = x.floor();
            let r = x - f;
            vec![(clamp(f as i64), 1.0 - r), (clamp(f as i64 + 1), r)]
        }
        "cubic" => {
            let f = x.floor();
            let r = x - f;
            let a = s.cubic_a;
            let cw = |d: f64| {
                let d = d.abs();
                if d <= 1.0 {
                    ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
                } else if d < 2.0 {
                    ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
                } else {
                    0.0
                }
            };
            let mut t: Vec<(i64, f64)> =
                (-1..=2).map(|k| (f as i64 + k, cw(r - k as f64))).collect();
            if s.exclude_outside {
                t.retain(|&(i, _)| i >= 0 && i < li as i64);
                let sum: f64 = t.iter().map(|p| p.1).sum();
                t.iter_mut().for_each(|p| p.1 /= sum);
            }
            t.into_iter().map(|(i, c)| (clamp(i), c)).collect()
        }
        _ => {
            let i = match s.nearest.as_str() {
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                "round_prefer_ceil" => (x + 0.5).floor(),
                _ => {
                    if x - x.floor() == 0.5 {
                        x.floor()
                    } else {
                        x.round()
                    }
                }
            };
            vec![(clamp(i as i64), 1.0)]
        }
    }
}

/// `y` with axis `a` mapped through the `[out, in]` matrix `w`.
fn apply(y: &Tensor, a: usize, w: &Tensor) -> Result<Tensor> {
    let r = y.ndim();
    let mut perm: Vec<usize> = (0..r).filter(|&i| i != a).collect();
    perm.push(a);
    let mut inv = vec![0; r];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    let t = y.try_permute(&perm)?.try_matmul(&w.try_transpose(0, 1)?)?;
    t.try_permute(&inv)
}
