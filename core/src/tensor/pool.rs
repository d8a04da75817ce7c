//! Pooling: sliding windows built from movement ops only ([`Tensor::pool_windows`]: tile with
//! reshape + expand, then reshape/shrink the tiles into windows), and the pools built on them
//! (`avg_pool2d`, `max_pool2d` with indices, `max_unpool2d`). Every op works on the trailing
//! `kernel.len()` axes, so "2d" is only the default; the leading axes pass through the trailing-
//! axis movement ops of `tail.rs` unread, so a symbolic batch stays symbolic. Invariant:
//! nothing here reads values on the host; gradients flow through the primitives.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

/// Padding of the spatial axes, in the three forms the reference accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    /// The same amount on both sides of every spatial axis.
    All(usize),
    /// One amount per spatial axis (first axis first), on both sides.
    PerDim(Vec<usize>),
    /// Two amounts per spatial axis, last axis first, as torch's `F.pad`:
    /// `(left, right, top, bottom, ...)`.
    PerSide(Vec<usize>),
}

impl From<usize> for Padding {
    fn from(p: usize) -> Padding {
        Padding::All(p)
    }
}

impl Padding {
    /// `(before, after)` per spatial axis, first axis first, for `n` spatial axes.
    pub fn resolve(&self, op: &'static str, n: usize) -> Result<Vec<(usize, usize)>> {
        match self {
            Padding::All(p) => Ok(vec![(*p, *p); n]),
            Padding::PerDim(v) if v.len() == n => Ok(v.iter().map(|&p| (p, p)).collect()),
            Padding::PerSide(v) if v.len() == 2 * n => Ok((0..n)
                .map(|d| (v[2 * (n - 1 - d)], v[2 * (n - 1 - d) + 1]))
                .collect()),
            _ => Err(Error::shape(
                op,
                format!("padding {self:?} does not fit {n} spatial axes"),
            )),
        }
    }
}

/// Options of the pooling ops; `Default` is a 2×2 window with stride = kernel.
#[derive(Clone, Debug)]
pub struct PoolOpts {
    /// Window size per spatial axis.
    pub kernel: Vec<usize>,
    /// Step per axis (`None`: the kernel size); one entry applies to every axis.
    pub stride: Option<Vec<usize>>,
    /// Gap between window taps; one entry applies to every axis.
    pub dilation: Vec<usize>,
    /// Zero (avg) or lowest-value (max) padding.
    pub padding: Padding,
    /// Output sizes by ceiling division (windows may run into extra right padding).
    pub ceil_mode: bool,
    /// Average pooling: count padded cells in the divisor.
    pub count_include_pad: bool,
}

impl Default for PoolOpts {
    fn default() -> PoolOpts {
        PoolOpts::new(&[2, 2])
    }
}

impl PoolOpts {
    /// A window of `kernel`, stride = kernel, no padding.
    pub fn new(kernel: &[usize]) -> PoolOpts {
        PoolOpts {
            kernel: kernel.to_vec(),
            stride: None,
            dilation: vec![1],
            padding: Padding::All(0),
            ceil_mode: false,
            count_include_pad: true,
        }
    }
    /// Sets the stride.
    pub fn stride(mut self, s: &[usize]) -> PoolOpts {
        self.stride = Some(s.to_vec());
        self
    }
    /// Sets the dilation.
    pub fn dilation(mut self, d: &[usize]) -> PoolOpts {
        self.dilation = d.to_vec();
        self
    }
    /// Sets the padding.
    pub fn padding(mut self, p: impl Into<Padding>) -> PoolOpts {
        self.padding = p.into();
        self
    }
    /// Sets ceil mode.
    pub fn ceil_mode(mut self, on: bool) -> PoolOpts {
        self.ceil_mode = on;
        self
    }
    /// Sets whether padding counts in averages.
    pub fn count_include_pad(mut self, on: bool) -> PoolOpts {
        self.count_include_pad = on;
        self
    }
}

/// `v` with one entry per axis (a single entry is repeated).
/// Strides, dilations and kernel sizes must be at least 1; an output padding may be 0.
pub(crate) fn per_axis(op: &'static str, what: &str, v: &[usize], n: usize) -> Result<Vec<usize>> {
    if what != "output_padding" && v.contains(&0) {
        return Err(Error::shape(
            op,
            format!("{what} {v:?} has a 0 (each must be at least 1)"),
        ));
    }
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v.to_vec()),
        _ => Err(Error::shape(
            op,
            format!("{what} {v:?} does not fit {n} spatial axes"),
        )),
    }
}

/// Resolved pooling geometry per spatial axis.
struct Geo {
    k: Vec<usize>,
    s: Vec<usize>,
    d: Vec<usize>,
    pads: Vec<(usize, usize)>,
}

fn geometry(op: &'static str, x: &Tensor, o: &PoolOpts) -> Result<Geo> {
    let n = o.kernel.len();
    if n == 0 || n > x.ndim() || o.kernel.contains(&0) {
        return Err(Error::shape(
            op,
            format!(
                "kernel {:?} does not fit input {:?}",
                o.kernel,
                x.shape_quiet()
            ),
        ));
    }
    let s = per_axis(op, "stride", o.stride.as_deref().unwrap_or(&o.kernel), n)?;
    let d = per_axis(op, "dilation", &o.dilation, n)?;
    if s.contains(&0) || d.contains(&0) {
        return Err(Error::shape(op, "stride and dilation must be positive"));
    }
    let pads = o.padding.resolve(op, n)?;
    Ok(Geo {
        k: o.kernel.clone(),
        s,
        d,
        pads,
    })
}

/// Extra right padding so that outputs are counted by ceiling division; windows never start in
/// the right padding.
fn ceil_pads(spatial: &[usize], g: &Geo) -> Vec<(usize, usize)> {
    (0..g.k.len())
        .map(|a| {
            let (i, (pb, pa)) = (spatial[a] as i64, g.pads[a]);
            let (pb, pa, s) = (pb as i64, pa as i64, g.s[a] as i64);
            let eff = (g.d[a] * (g.k[a] - 1) + 1) as i64;
            let span = i + pb + pa - eff;
            let o = (span + s - 1).div_euclid(s) + 1;
            let mut last = s * (o - 1);
            if last > pb + i - 1 {
                last -= s; // a window starting in the right padding is dropped
            }
            let after = (last + eff - i - pb).max(pa);
            (pb as usize, after.max(0) as usize)
        })
        .collect()
}

/// What max pooling computed: the maxima, the padded windows, the geometry and the pads used.
struct MaxParts {
    maxima: Tensor,
    windows: Tensor,
    geo: Geo,
    pads: Vec<(usize, usize)>,
}

/// Pads the trailing `pads.len()` axes with zeros (leading axes, symbolic or not, untouched).
fn pad_spatial(x: &Tensor, pads: &[(usize, usize)]) -> Result<Tensor> {
    x.try_pad_tail(pads)
}

fn isz(v: &[usize]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

impl Tensor {
    /// Sliding windows over the trailing `k.len()` axes: `[.., i1, .., in]` becomes
    /// `[.., o1, .., on, k1, .., kn]` with `out[.., o, j] = x[.., o·s + j·d]`, all as views.
    pub fn try_pool_windows(&self, k: &[usize], s: &[usize], d: &[usize]) -> Result<Tensor> {
        let n = k.len();
        if n > self.ndim() {
            let shape = self.shape_quiet();
            return Err(Error::shape("pool", format!("kernel {k:?} for {shape:?}")));
        }
        // Only the windowed axes are read as numbers: a symbolic batch stays symbolic.
        let (pre, sp) = self.lead_tail("pool", n)?;
        let mut o = Vec::with_capacity(n);
        for a in 0..n {
            let eff = d[a] * (k[a] - 1) + 1;
            if eff > sp[a] || k[a] == 0 || s[a] == 0 {
                return Err(Error::shape(
                    "pool",
                    format!(
                        "window {k:?} (dilation {d:?}) does not fit input {:?}",
                        self.shape_quiet()
                    ),
                ));
            }
            o.push((sp[a] - eff) / s[a] + 1);
        }
        if (0..n).all(|a| k[a] <= s[a] && d[a] == 1) {
            return windows_disjoint(self, pre.len(), &sp, k, s, &o);
        }
        windows_tiled(self, pre.len(), &sp, k, s, d, &o)
    }
}

/// Windows that do not overlap: cut each axis into `o` rows of `s`, keep the first `k`. The
/// `pre` leading axes pass through untouched.
fn windows_disjoint(
    x: &Tensor,
    pre: usize,
    sp: &[usize],
    k: &[usize],
    s: &[usize],
    o: &[usize],
) -> Result<Tensor> {
    let (mut pads, mut cut, mut rows, mut keep) = (vec![], vec![], vec![], vec![]);
    for a in 0..k.len() {
        pads.push((0, (o[a] * s[a]).saturating_sub(sp[a])));
        cut.push((0, o[a] * s[a]));
        rows.extend([o[a], s[a]]);
        keep.extend([(0, o[a]), (0, k[a])]);
    }
    let x = x.try_pad_tail(&pads)?.try_shrink_tail(&cut)?;
    let x = x.try_reshape_tail(pre, &rows)?.try_shrink_tail(&keep)?;
    x.try_permute(&window_order(pre, k.len(), true))
}

/// The permutation that moves window axes last: pairs `(out, tap)` when `out_first`, else
/// `(tap, out)`.
fn window_order(pre: usize, n: usize, out_first: bool) -> Vec<usize> {
    let (o, t) = if out_first { (0, 1) } else { (1, 0) };
    let mut order: Vec<usize> = (0..pre).collect();
    order.extend((0..n).map(|a| pre + 2 * a + o));
    order.extend((0..n).map(|a| pre + 2 * a + t));
    order
}

/// Overlapping or dilated windows: tile each axis `f` times, lay the tiles out in rows of
/// `L = d + m·i` (so row `j` starts at input index `j·d`), and take every `s`-th column. The
/// `pre` leading axes pass through untouched.
fn windows_tiled(
    x: &Tensor,
    pre: usize,
    sp: &[usize],
    k: &[usize],
    s: &[usize],
    d: &[usize],
    o: &[usize],
) -> Result<Tensor> {
    let n = k.len();
    let row: Vec<usize> = (0..n)
        .map(|a| {
            let need = o[a] * s[a];
            let m = need.saturating_sub(d[a]).div_ceil(sp[a]).max(1);
            d[a] + m * sp[a]
        })
        .collect();
    let f: Vec<usize> = (0..n).map(|a| (k[a] * row[a]).div_ceil(sp[a])).collect();
    let (mut up, mut big, mut tiled) = (vec![], vec![], vec![]);
    for a in 0..n {
        up.extend([1, sp[a]]);
        big.extend([f[a], sp[a]]);
        tiled.push(f[a] * sp[a]);
    }
    let x = x.try_reshape_tail(pre, &up)?.try_expand_tail(&big)?;
    let x = x.try_reshape_tail(pre, &tiled)?;
    let per = |ext: &dyn Fn(usize) -> Vec<usize>| -> Vec<usize> { (0..n).flat_map(ext).collect() };
    let ranges = |ext: &dyn Fn(usize) -> Vec<(usize, usize)>| -> Vec<(usize, usize)> {
        (0..n).flat_map(ext).collect()
    };
    let x = x.try_shrink_tail(&ranges(&|a| vec![(0, k[a] * row[a])]))?;
    let x = x.try_reshape_tail(pre, &per(&|a| vec![k[a], row[a]]))?;
    let x = x.try_shrink_tail(&ranges(&|a| vec![(0, k[a]), (0, o[a] * s[a])]))?;
    let x = x.try_reshape_tail(pre, &per(&|a| vec![k[a], o[a], s[a]]))?;
    let x = x.try_shrink_tail(&ranges(&|a| vec![(0, k[a]), (0, o[a]), (0, 1)]))?;
    let x = x.try_reshape_tail(pre, &per(&|a| vec![k[a], o[a]]))?;
    x.try_permute(&window_order(pre, n, false))
}

impl Tensor {
    /// The trailing `n` axes as negative axis numbers.
    fn trailing_axes(n: usize) -> Vec<isize> {
        (1..=n as isize).rev().map(|a| -a).collect()
    }

    /// Windows of `x` padded with `value` by `pads`. A non-zero `value` is selected by a window
    /// of a padded constant mask, so everything stays a view of `x` and fuses into one kernel.
    fn padded_windows(x: &Tensor, g: &Geo, pads: &[(usize, usize)], value: f64) -> Result<Tensor> {
        let win = pad_spatial(x, pads)?.try_pool_windows(&g.k, &g.s, &g.d)?;
        if value == 0.0 || pads.iter().all(|&p| p == (0, 0)) {
            return Ok(win);
        }
        // The mask depends on the windowed axes only: built over them and broadcast, so it
        // never reads a (possibly symbolic) leading size.
        let (pre, sp) = x.lead_tail("pool", pads.len())?;
        let mut ones = vec![1; pre.len()];
        ones.extend(&sp);
        let inside = Tensor::try_full_on(&ones, 1.0, DType::Bool, &x.device())?;
        let mask = pad_spatial(&inside, pads)?.try_pool_windows(&g.k, &g.s, &g.d)?;
        mask.try_where(&win, value)
    }

    /// Average pooling over the trailing `opts.kernel.len()` axes (ints average as f32).
    ///
    /// ```
    /// use picograd_core::{DType, PoolOpts, Tensor};
    /// let t = Tensor::arange(0.0, 25.0, 1.0, DType::F32).reshape(&[1, 1, 5, 5]);
    /// let p = t.avg_pool2d(&PoolOpts::default());
    /// assert_eq!(p.to_vec::<f32>().unwrap(), vec![3.0, 5.0, 13.0, 15.0]);
    /// ```
    pub fn try_avg_pool2d(&self, opts: &PoolOpts) -> Result<Tensor> {
        let g = geometry("avg_pool2d", self, opts)?;
        let x = self.float();
        let axes = Tensor::trailing_axes(g.k.len());
        let sp = self.lead_tail("avg_pool2d", g.k.len())?.1;
        let cp = ceil_pads(&sp, &g);
        let pads = if opts.ceil_mode { &cp } else { &g.pads };
        let total = Tensor::padded_windows(&x, &g, pads, 0.0)?.try_sum(&axes, false)?;
        if !opts.count_include_pad {
            let ones = Tensor::padded_windows(&x.ones_like(), &g, pads, 0.0)?;
            return total.try_div(ones.try_sum(&axes, false)?);
        }
        if !opts.ceil_mode {
            let count: usize = g.k.iter().product();
            return total.try_div(count as f64);
        }
        // Regular padding counts; the extra ceil-mode padding does not.
        let base = pad_spatial(&x, &g.pads)?.ones_like();
        let extra: Vec<(usize, usize)> = (cp.iter().zip(&g.pads))
            .map(|(c, r)| (c.0 - r.0, c.1 - r.1))
            .collect();
        let ones = Tensor::padded_windows(&base, &g, &extra, 0.0)?;
        total.try_div(ones.try_sum(&axes, false)?)
    }
    /// [`Tensor::try_avg_pool2d`], panicking on a bad geometry.
    #[track_caller]
    pub fn avg_pool2d(&self, opts: &PoolOpts) -> Tensor {
        must(self.try_avg_pool2d(opts))
    }

    /// Max pooling over the trailing `opts.kernel.len()` axes (padding is the dtype's lowest
    /// value; `count_include_pad` is ignored).
    ///
    /// ```
    /// use picograd_core::{DType, PoolOpts, Tensor};
    /// let t = Tensor::arange(0.0, 25.0, 1.0, DType::I32).reshape(&[1, 1, 5, 5]);
    /// let p = t.max_pool2d(&PoolOpts::default().padding(1));
    /// assert_eq!(p.to_vec::<i32>().unwrap(), vec![0, 2, 4, 10, 12, 14, 20, 22, 24]);
    /// ```
    pub fn try_max_pool2d(&self, opts: &PoolOpts) -> Result<Tensor> {
        Ok(self.max_pool_parts(opts)?.maxima)
    }
    /// [`Tensor::try_max_pool2d`], panicking on a bad geometry.
    #[track_caller]
    pub fn max_pool2d(&self, opts: &PoolOpts) -> Tensor {
        must(self.try_max_pool2d(opts))
    }

    /// The pooled maxima and the windows they came from (with the geometry and pads used).
    fn max_pool_parts(&self, opts: &PoolOpts) -> Result<MaxParts> {
        let g = geometry("max_pool2d", self, opts)?;
        let sp = self.lead_tail("max_pool2d", g.k.len())?.1;
        let pads = if opts.ceil_mode {
            ceil_pads(&sp, &g)
        } else {
            g.pads.clone()
        };
        let low = self.dtype().min_value();
        let win = Tensor::padded_windows(self, &g, &pads, low)?;
        let m = win.try_max(&Tensor::trailing_axes(g.k.len()), false)?;
        Ok(MaxParts {
            maxima: m,
            windows: win,
            geo: g,
            pads,
        })
    }

    /// Max pooling that also returns, per output, the flat spatial index (i32, row-major over
    /// the pooled axes) of the first maximum in its window.
    pub fn try_max_pool2d_with_indices(&self, opts: &PoolOpts) -> Result<(Tensor, Tensor)> {
        let MaxParts {
            maxima: m,
            windows: win,
            geo: g,
            pads,
        } = self.max_pool_parts(opts)?;
        let n = g.k.len();
        let axes = Tensor::trailing_axes(n);
        let sp = self.lead_tail("max_pool2d", n)?.1;
        let size: usize = sp.iter().product();
        // Count down so the first maximum wins the max; size - that is its index.
        let idx = Tensor::arange(size as f64, 0.0, -1.0, DType::I32).try_reshape(&isz(&sp))?;
        let idx = Tensor::padded_windows(&idx, &g, &pads, DType::I32.min_value())?;
        let hit = win.try_eq(&win.try_max(&axes, true)?)?;
        let best = hit.cast(DType::I32).try_mul(&idx)?.try_max(&axes, false)?;
        Ok((m, best.const_like(size as f64).try_sub(&best)?))
    }
    /// [`Tensor::try_max_pool2d_with_indices`], panicking on a bad geometry.
    #[track_caller]
    pub fn max_pool2d_with_indices(&self, opts: &PoolOpts) -> (Tensor, Tensor) {
        must(self.try_max_pool2d_with_indices(opts))
    }

    /// Partial inverse of max pooling: `self` `[b, c, o..]` values go to the flat spatial
    /// `indices` in a zero tensor `[b, c, out..]`. `output_size` (trailing spatial sizes)
    /// defaults to the size the pooling geometry implies.
    pub fn try_max_unpool2d(
        &self,
        indices: &Tensor,
        opts: &PoolOpts,
        output_size: Option<&[usize]>,
    ) -> Result<Tensor> {
        let shape = self.shape();
        if shape.len() < 3 || indices.shape() != shape {
            return Err(Error::shape(
                "max_unpool2d",
                format!(
                    "values {shape:?} and indices {:?} must match, rank >= 3",
                    indices.shape()
                ),
            ));
        }
        let (b, c, sp) = (shape[0], shape[1], &shape[2..]);
        let g = geometry(
            "max_unpool2d",
            self,
            &PoolOpts {
                kernel: fit_kernel(&opts.kernel, sp.len()),
                ..opts.clone()
            },
        )?;
        let out: Vec<usize> = match output_size {
            Some(o) => o[o.len().saturating_sub(sp.len())..].to_vec(),
            None => (0..sp.len())
                .map(|a| {
                    let eff = g.d[a] * (g.k[a] - 1) + 1;
                    ((sp[a] - 1) * g.s[a] + eff).saturating_sub(g.pads[a].0 + g.pads[a].1)
                })
                .collect(),
        };
        let p: usize = out.iter().product();
        let (bi, ci) = (b as isize, c as isize);
        let positions = Tensor::arange(0.0, p as f64, 1.0, indices.dtype())
            .try_reshape(&[1, 1, p as isize, 1])?;
        let hot = indices.try_reshape(&[bi, ci, 1, -1])?.try_eq(&positions)?;
        let vals = hot.try_where(&self.try_reshape(&[bi, ci, 1, -1])?, 0.0)?;
        let mut dims = vec![bi, ci];
        dims.extend(isz(&out));
        vals.try_sum(&[3], false)?
            .cast(self.dtype())
            .try_reshape(&dims)
    }
    /// [`Tensor::try_max_unpool2d`], panicking on mismatched shapes.
    #[track_caller]
    pub fn max_unpool2d(
        &self,
        indices: &Tensor,
        opts: &PoolOpts,
        output_size: Option<&[usize]>,
    ) -> Tensor {
        must(self.try_max_unpool2d(indices, opts, output_size))
    }
}

/// A kernel for `n` axes: a one-entry kernel is repeated.
fn fit_kernel(k: &[usize], n: usize) -> Vec<usize> {
    if k.len() == 1 {
        vec![k[0]; n]
    } else {
        k.to_vec()
    }
}
