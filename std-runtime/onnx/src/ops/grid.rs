//! Grid ops: AffineGrid (lazy: a normalized coordinate grid times the affine matrices) and
//! GridSample (computed on the host from realized values, any spatial rank: nearest, linear or
//! cubic taps, `zeros`/`border`/`reflection` padding, `align_corners`). GridSample is data-
//! dependent gathering, so, like Resize, it runs eagerly and does not export.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::to_f64s;
use super::shape::isz;
use super::{one, Handler};

/// The handler for `op` if it is a grid op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "GridSample" => grid_sample,
        "AffineGrid" => affine_grid,
        _ => return None,
    })
}

/// Normalized positions along an axis of `len` cells: `[-1, 1]` at the corner cells' centres
/// (`align`) or at the outer edges.
fn axis_positions(len: usize, align: bool) -> Result<Tensor> {
    let v: Vec<f32> = (0..len)
        .map(|i| {
            let i = i as f64;
            let l = len as f64;
            let p = if align {
                if len > 1 {
                    -1.0 + 2.0 * i / (l - 1.0)
                } else {
                    0.0
                }
            } else {
                (2.0 * i + 1.0) / l - 1.0
            };
            p as f32
        })
        .collect();
    Tensor::try_from_slice(&v, &[len])
}

/// `grid[n, d.., h.., w.., :] = θ[n] · (x, y[, z], 1)`.
fn affine_grid(n: &Node) -> Result<Vec<Tensor>> {
    let theta = n.input_rank(0, 3)?;
    let size = n.ints_input(1)?.unwrap_or_default();
    let k = size.len().saturating_sub(2);
    if !(2..=3).contains(&k) || size.iter().any(|&s| s <= 0) {
        return Err(bad(n.op(), format!("size {size:?}")));
    }
    super::super::values::checked_numel(n.op(), &size)?;
    let align = n.int("align_corners", 0) != 0;
    let spatial: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
    // Homogeneous coordinates (x first = last axis) over the whole grid: [points, k + 1].
    let mut coords = Vec::new();
    for a in (0..k).rev() {
        let mut shape = vec![1isize; k];
        shape[a] = spatial[a] as isize;
        let p = axis_positions(spatial[a], align)?
            .try_reshape(&shape)?
            .try_expand(&spatial)?;
        coords.push(p.try_reshape(&[-1, 1])?);
    }
    let points: usize = spatial.iter().product();
    coords.push(Tensor::try_ones(&[points, 1], DType::F32)?);
    let refs: Vec<&Tensor> = coords.iter().collect();
    let base = Tensor::try_cat(&refs, 1)?.cast(theta.dtype());
    let g = base.try_matmul(&theta.try_transpose(1, 2)?)?;
    let mut out = vec![theta.shape()[0]];
    out.extend(&spatial);
    out.push(k);
    one(g.try_reshape(&isz(&out))?)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq)]
enum Pad {
    Zeros,
    Border,
    Reflection,
}

/// What one sampling call needs about the input.
struct Sampler<'a> {
    data: &'a [f64],
    dims: &'a [usize],
    mode: Mode,
    pad: Pad,
    align: bool,
}

fn grid_sample(n: &Node) -> Result<Vec<Tensor>> {
    let (x, grid) = (n.input(0)?, n.input(1)?);
    let (xs, gs) = (x.shape(), grid.shape());
    let k = xs.len().saturating_sub(2);
    if k == 0 || gs.len() != k + 2 || gs[k + 1] != k || gs[0] != xs[0] {
        return Err(bad(n.op(), format!("input {xs:?} and grid {gs:?}")));
    }
    let mode = match n.string("mode", "linear").as_str() {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        m => return Err(bad(n.op(), format!("mode '{m}'"))),
    };
    let pad = match n.string("padding_mode", "zeros").as_str() {
        "zeros" => Pad::Zeros,
        "border" => Pad::Border,
        "reflection" => Pad::Reflection,
        m => return Err(bad(n.op(), format!("padding_mode '{m}'"))),
    };
    let (data, g) = (to_f64s(x)?, to_f64s(grid)?);
    let plane: usize = xs[2..].iter().product();
    let points: usize = gs[1..=k].iter().product();
    let mut out = Vec::with_capacity(xs[0] * xs[1] * points);
    for b in 0..xs[0] {
        for c in 0..xs[1] {
            let at = (b * xs[1] + c) * plane;
            let s = Sampler {
                data: &data[at..at + plane],
                dims: &xs[2..],
                mode,
                pad,
                align: n.int("align_corners", 0) != 0,
            };
            for p in 0..points {
                let g0 = (b * points + p) * k;
                let norm: Vec<f64> = g[g0..g0 + k].iter().rev().copied().collect();
                out.push(s.sample(&norm) as f32);
            }
        }
    }
    let mut shape = xs[..2].to_vec();
    shape.extend(&gs[1..=k]);
    one(Tensor::try_from_slice(&out, &shape)?.cast(x.dtype()))
}

impl Sampler<'_> {
    /// The interpolation domain of axis `i`: `[0, d−1]` aligned, `[−½, d−½]` otherwise.
    fn bounds(&self, i: usize) -> (f64, f64) {
        let d = self.dims[i] as f64;
        if self.align {
            (0.0, d - 1.0)
        } else {
            (-0.5, d - 0.5)
        }
    }

    /// The value at normalized coordinates `norm` (first spatial axis first).
    fn sample(&self, norm: &[f64]) -> f64 {
        let mut pos: Vec<f64> = norm
            .iter()
            .zip(self.dims)
            .map(|(&v, &d)| {
                let d = d as f64;
                if self.align {
                    (v + 1.0) / 2.0 * (d - 1.0)
                } else {
                    ((v + 1.0) * d - 1.0) / 2.0
                }
            })
            .collect();
        if self.mode == Mode::Nearest {
            pos.iter_mut().for_each(|v| *v = round_half_even(*v));
        }
        for (i, v) in pos.iter_mut().enumerate() {
            let (lo, hi) = self.bounds(i);
            if *v < lo || *v > hi {
                match self.pad {
                    Pad::Border => *v = v.clamp(0.0, self.dims[i] as f64 - 1.0),
                    Pad::Reflection => *v = reflect(*v, lo, hi),
                    Pad::Zeros => {}
                }
            }
        }
        let taps: Vec<Vec<(i64, f64)>> = pos.iter().map(|&v| self.taps(v)).collect();
        self.combine(&taps, 0, 0, 1.0)
    }

    /// Integer positions and weights along one axis.
    fn taps(&self, v: f64) -> Vec<(i64, f64)> {
        match self.mode {
            Mode::Nearest => vec![(v as i64, 1.0)],
            Mode::Linear => {
                let f = v.floor();
                let t = v - f;
                vec![(f as i64, 1.0 - t), (f as i64 + 1, t)]
            }
            Mode::Cubic => {
                let f = v.floor();
                let w = cubic_weights(v - f);
                (0..4).map(|j| (f as i64 - 1 + j as i64, w[j])).collect()
            }
        }
    }

    /// Σ over the tap product of axes `axis..`, at flat offset `base`, scaled by `w`.
    fn combine(&self, taps: &[Vec<(i64, f64)>], axis: usize, base: usize, w: f64) -> f64 {
        if axis == taps.len() {
            return w * self.data[base];
        }
        let stride: usize = self.dims[axis + 1..].iter().product();
        let mut sum = 0.0;
        for &(i, tw) in &taps[axis] {
            let Some(i) = self.index(axis, i) else {
                continue;
            };
            sum += self.combine(taps, axis + 1, base + i * stride, w * tw);
        }
        sum
    }

    /// The cell read for integer position `i` of `axis` under the padding mode (`None`: zero).
    fn index(&self, axis: usize, i: i64) -> Option<usize> {
        let d = self.dims[axis] as i64;
        match self.pad {
            Pad::Zeros => (0..d).contains(&i).then_some(i as usize),
            Pad::Border => Some(i.clamp(0, d - 1) as usize),
            Pad::Reflection => {
                let (lo, hi) = self.bounds(axis);
                Some((reflect(i as f64, lo, hi) as i64).clamp(0, d - 1) as usize)
            }
        }
    }
}

/// Keys' cubic convolution weights (a = −0.75) for the 4 taps around fraction `t`.
fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.75;
    let far = |x: f64| ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    let near = |x: f64| ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// Reflects `x` back into `[lo, hi]` off the nearer border, repeatedly.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let (dx, from_low) = if x < lo {
        (lo - x, true)
    } else if x > hi {
        (x - hi, false)
    } else {
        return x;
    };
    let k = (dx / range).floor();
    let r = dx - k * range;
    let even = (k as i64) % 2 == 0;
    match (from_low, even) {
        (true, true) | (false, false) => lo + r,
        _ => hi - r,
    }
}

/// Rounds half to even (numpy's `rint`).
fn round_half_even(v: f64) -> f64 {
    let r = v.round();
    if (v - v.trunc()).abs() == 0.5 && r % 2.0 != 0.0 {
        r - v.signum()
    } else {
        r
    }
}
