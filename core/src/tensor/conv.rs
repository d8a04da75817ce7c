//! Convolutions as pooling: pad the input, take sliding windows ([`Tensor::try_pool_windows`]),
//! broadcast-multiply with the weight and sum over `(cin, taps)` — one reduce, so a conv with
//! bias and activation fuses into one kernel. Nothing here depends on the target: copying a
//! padded input into its own buffer or the weights into channel blocks is the scheduler's
//! choice (`schedule/layout.rs`). `conv_transpose2d` is a conv over a zero-stuffed
//! input with the weight's channels swapped and its taps flipped. Spatial rank is free
//! (`weight.ndim() - 2`); `conv1d` is the 1-D spelling.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::error::{Error, Result};

use super::pool::{per_axis, Padding};
use super::{must, Tensor};

/// Options of the convolutions; `Default` is groups 1, stride 1, dilation 1, no padding.
#[derive(Clone, Debug)]
pub struct ConvOpts {
    /// Channel groups (input and output channels split into this many independent convs).
    pub groups: usize,
    /// Step per spatial axis (one entry applies to every axis).
    pub stride: Vec<usize>,
    /// Gap between taps per spatial axis (one entry applies to every axis).
    pub dilation: Vec<usize>,
    /// Zero padding of the input (for `conv_transpose2d`: cropped from the output).
    pub padding: Padding,
    /// `conv_transpose2d` only: extra size added on the far side of the output.
    pub output_padding: Vec<usize>,
}

impl Default for ConvOpts {
    fn default() -> ConvOpts {
        ConvOpts {
            groups: 1,
            stride: vec![1],
            dilation: vec![1],
            padding: Padding::All(0),
            output_padding: vec![0],
        }
    }
}

impl ConvOpts {
    /// Sets the groups.
    pub fn groups(mut self, g: usize) -> ConvOpts {
        self.groups = g;
        self
    }
    /// Sets the stride.
    pub fn stride(mut self, s: &[usize]) -> ConvOpts {
        self.stride = s.to_vec();
        self
    }
    /// Sets the dilation.
    pub fn dilation(mut self, d: &[usize]) -> ConvOpts {
        self.dilation = d.to_vec();
        self
    }
    /// Sets the padding.
    pub fn padding(mut self, p: impl Into<Padding>) -> ConvOpts {
        self.padding = p.into();
        self
    }
    /// Sets the output padding (transposed convolution).
    pub fn output_padding(mut self, p: &[usize]) -> ConvOpts {
        self.output_padding = p.to_vec();
        self
    }
}

fn isz(v: &[usize]) -> Vec<isize> {
    v.iter().map(|&d| d as isize).collect()
}

/// Pads (positive) or crops (negative) the trailing `p.len()` axes; the leading axes (a
/// symbolic batch included) pass through untouched.
fn pad_or_crop(x: &Tensor, p: &[(i64, i64)]) -> Result<Tensor> {
    let pad: Vec<(usize, usize)> = p
        .iter()
        .map(|&(b, a)| (b.max(0) as usize, a.max(0) as usize))
        .collect();
    let x = x.try_pad_tail(&pad)?;
    let padded = x.lead_tail("conv", p.len())?.1;
    let mut keep = Vec::with_capacity(p.len());
    for (a, &(b, e)) in p.iter().enumerate() {
        let n = padded[a];
        let (lo, hi) = ((-b).max(0) as usize, (-e).max(0) as usize);
        if lo + hi > n {
            return Err(Error::shape(
                "conv",
                format!("cropping ({lo}, {hi}) leaves nothing of axis size {n}"),
            ));
        }
        keep.push((lo, n - hi));
    }
    x.try_shrink_tail(&keep)
}

/// Checks input/weight/bias shapes of a conv; returns `(cin, cout, spatial rank)`. The batch
/// (axis 0) is never read as a number, so it may stay symbolic.
fn check_conv(x: &Tensor, w: &Tensor, bias: Option<&Tensor>, g: usize) -> Result<[usize; 3]> {
    let (xs, ws) = (x.shape_quiet(), w.shape());
    let bad = |why: &str| {
        Error::shape(
            "conv2d",
            format!("input {xs:?}, weight {ws:?}, groups {g}: {why}"),
        )
    };
    if ws.len() < 3 || xs.len() != ws.len() {
        return Err(bad("input and weight need the same rank >= 3"));
    }
    if g == 0 || xs[1] != g * ws[1] || ws[0] % g != 0 {
        return Err(bad(
            "channels do not match (input C = groups·weight[1], weight[0] % groups = 0)",
        ));
    }
    if let Some(b) = bias {
        if b.shape() != [ws[0]] {
            return Err(bad(&format!("bias {:?} must be [{}]", b.shape(), ws[0])));
        }
    }
    // Channels and spatial axes are read as numbers below: they must be concrete.
    x.lead_tail("conv2d", xs.len() - 1)?;
    Ok([xs[1], ws[0], ws.len() - 2])
}

impl Tensor {
    /// Convolution of `self` `[b, cin, i..]` with `weight` `[cout, cin/groups, k..]`, plus an
    /// optional `bias` `[cout]`; any number of spatial axes. Gives `[b, cout, o..]`.
    ///
    /// ```
    /// use picograd_core::{ConvOpts, DType, Tensor};
    /// let t = Tensor::arange(0.0, 9.0, 1.0, DType::F32).reshape(&[1, 1, 3, 3]);
    /// let w = Tensor::ones(&[1, 1, 2, 2], DType::F32);
    /// let y = t.conv2d(&w, None, &ConvOpts::default());
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![8.0, 12.0, 20.0, 24.0]);
    /// ```
    pub fn try_conv2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvOpts,
    ) -> Result<Tensor> {
        let [_, _, n] = check_conv(self, weight, bias, opts.groups)?;
        let p: Vec<(i64, i64)> = (opts.padding.resolve("conv2d", n)?.iter())
            .map(|&(b, a)| (b as i64, a as i64))
            .collect();
        self.conv_padded(weight, bias, opts, &p, |a, b| a.try_mul(b))
    }
    /// [`Tensor::try_conv2d`], panicking on mismatched shapes.
    #[track_caller]
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOpts) -> Tensor {
        must(self.try_conv2d(weight, bias, opts))
    }

    /// 1-D convolution: `self` `[b, cin, l]`, `weight` `[cout, cin/groups, k]`.
    pub fn try_conv1d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvOpts,
    ) -> Result<Tensor> {
        if self.ndim() != 3 || weight.ndim() != 3 {
            return Err(Error::shape(
                "conv1d",
                format!(
                    "input {:?} and weight {:?} must be 3-D",
                    self.shape(),
                    weight.shape()
                ),
            ));
        }
        self.try_conv2d(weight, bias, opts)
    }
    /// [`Tensor::try_conv1d`], panicking on mismatched shapes.
    #[track_caller]
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, opts: &ConvOpts) -> Tensor {
        must(self.try_conv1d(weight, bias, opts))
    }

    /// The conv with explicit per-axis `(before, after)` padding (negative crops); `prod`
    /// multiplies input windows by weights (`try_mul`, or the widening integer multiply).
    pub(crate) fn conv_padded(
        &self,
        w: &Tensor,
        bias: Option<&Tensor>,
        o: &ConvOpts,
        p: &[(i64, i64)],
        prod: fn(&Tensor, &Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let [cin, cout, n] = check_conv(self, w, bias, o.groups)?;
        let ws = w.shape();
        let k = &ws[2..];
        let s = per_axis("conv2d", "stride", &o.stride, n)?;
        let d = per_axis("conv2d", "dilation", &o.dilation, n)?;
        let win = pad_or_crop(self, p)?.try_pool_windows(k, &s, &d)?; // [b, cin, o.., k..]
        let out: Vec<usize> = win.lead_tail("conv2d", 2 * n)?.1[..n].to_vec();
        let (g, rc, ci) = (o.groups, cout / o.groups, cin / o.groups);
        // [b, g, 1, o.., ci, k..] against weight [1, g, rc, 1.., ci, k..]
        let mut xs = vec![g, ci, 1];
        xs.extend(&out);
        xs.extend(k);
        let mut order = vec![0, 1, 3];
        order.extend(4..4 + n);
        order.push(2);
        order.extend(4 + n..4 + 2 * n);
        let x = win.try_reshape_tail(1, &xs)?.try_permute(&order)?;
        let mut wsh = vec![1, g as isize, rc as isize];
        wsh.extend(core::iter::repeat_n(1, n));
        wsh.push(ci as isize);
        wsh.extend(isz(k));
        let red: Vec<isize> = (1..=(n + 1) as isize).map(|a| -a).collect();
        let y = prod(&x, &w.try_reshape(&wsh)?)?.try_sum(&red, false)?;
        let mut ysh = vec![cout];
        ysh.extend(&out);
        let y = y.try_reshape_tail(1, &ysh)?;
        match bias {
            None => Ok(y),
            Some(bb) => {
                let mut bsh = vec![1, cout as isize];
                bsh.extend(core::iter::repeat_n(1, n));
                y.try_add(&bb.try_reshape(&bsh)?)
            }
        }
    }

    /// Transposed convolution of `self` `[b, cin, i..]` with `weight` `[cin, cout/groups, k..]`
    /// (torch's layout); `padding` crops the output, `output_padding` extends its far side.
    ///
    /// ```
    /// use picograd_core::{ConvOpts, DType, Tensor};
    /// let t = Tensor::arange(0.0, 4.0, 1.0, DType::F32).reshape(&[1, 1, 2, 2]);
    /// let w = Tensor::ones(&[1, 1, 2, 2], DType::F32);
    /// let y = t.conv_transpose2d(&w, None, &ConvOpts::default());
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 1.0, 1.0, 2.0, 6.0, 4.0, 2.0, 5.0, 3.0]);
    /// ```
    pub fn try_conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvOpts,
    ) -> Result<Tensor> {
        let (xs, ws) = (self.shape_quiet(), weight.shape());
        let g = opts.groups;
        if ws.len() < 3 || xs.len() != ws.len() || g == 0 || ws[0] % g != 0 || xs[1] != ws[0] {
            return Err(Error::shape(
                "conv_transpose2d",
                format!("input {xs:?}, weight {ws:?}, groups {g}: weight must be [cin, cout/groups, k..]"),
            ));
        }
        let n = ws.len() - 2;
        let k = &ws[2..];
        let s = per_axis("conv_transpose2d", "stride", &opts.stride, n)?;
        let d = per_axis("conv_transpose2d", "dilation", &opts.dilation, n)?;
        let op = per_axis(
            "conv_transpose2d",
            "output_padding",
            &opts.output_padding,
            n,
        )?;
        let pads = opts.padding.resolve("conv_transpose2d", n)?;
        let w = flip_transpose_weight(weight, g)?;
        let x = stuff_zeros(self, &s)?;
        let p: Vec<(i64, i64)> = (0..n)
            .map(|a| {
                let full = ((k[a] - 1) * d[a]) as i64;
                (
                    full - pads[a].0 as i64,
                    full - pads[a].1 as i64 + op[a] as i64,
                )
            })
            .collect();
        let inner = ConvOpts {
            groups: g,
            stride: vec![1],
            dilation: d,
            padding: Padding::All(0),
            output_padding: vec![0],
        };
        x.conv_padded(&w, bias, &inner, &p, |a, b| a.try_mul(b))
    }
    /// [`Tensor::try_conv_transpose2d`], panicking on mismatched shapes.
    #[track_caller]
    pub fn conv_transpose2d(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvOpts,
    ) -> Tensor {
        must(self.try_conv_transpose2d(weight, bias, opts))
    }
}

/// `[cin, cout/g, k..]` → `[cout, cin/g, k..]` with the taps reversed.
fn flip_transpose_weight(w: &Tensor, g: usize) -> Result<Tensor> {
    let ws = w.shape();
    let n = ws.len() - 2;
    let mut split = vec![g as isize, (ws[0] / g) as isize, ws[1] as isize];
    split.extend(isz(&ws[2..]));
    let flip: Vec<isize> = (3..3 + n as isize).collect();
    let w = w
        .try_reshape(&split)?
        .try_transpose(1, 2)?
        .try_flip(&flip)?;
    let mut merged = vec![(g * ws[1]) as isize, (ws[0] / g) as isize];
    merged.extend(isz(&ws[2..]));
    w.try_reshape(&merged)
}

/// Inserts `s - 1` zeros between neighbours along each trailing axis (`i` → `(i-1)·s + 1`).
fn stuff_zeros(x: &Tensor, s: &[usize]) -> Result<Tensor> {
    if s.iter().all(|&v| v == 1) {
        return Ok(x.clone());
    }
    let n = s.len();
    let (lead, sp) = x.lead_tail("conv_transpose2d", n)?;
    let pre = lead.len();
    let (mut up, mut pad, mut flat, mut keep) = (vec![], vec![], vec![], vec![]);
    for a in 0..n {
        up.extend([sp[a], 1]);
        pad.extend([(0, 0), (0, s[a] - 1)]);
        flat.push(sp[a] * s[a]);
        keep.push((0, (sp[a] - 1) * s[a] + 1));
    }
    x.try_reshape_tail(pre, &up)?
        .try_pad_tail(&pad)?
        .try_reshape_tail(pre, &flat)?
        .try_shrink_tail(&keep)
}
