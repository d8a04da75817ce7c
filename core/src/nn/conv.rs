//! Convolution layers ([`Conv1d`], [`Conv2d`], [`ConvTranspose2d`]) and a 2x2 max pool, on a
//! composed convolution: im2col (pad, then one strided slice per kernel tap, stacked), then a
//! grouped matmul with the weight. Everything is made of movement ops and a reduce, so the
//! gradient comes from autograd.
//!
//! Padding is `[left, right, top, bottom]` (tinygrad's order: last axis first). Shapes follow
//! PyTorch: input `(N, C, H, W)`, weight `(C_out, C_in/groups, KH, KW)`; a transposed conv's
//! weight is `(C_in, C_out/groups, KH, KW)`.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{kaiming_uniform, param, Module};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Output length of one spatial axis, or an error when the kernel does not fit.
fn out_len(padded: usize, k: usize, stride: usize, dil: usize) -> Result<usize> {
    let span = dil * (k - 1) + 1;
    if stride == 0 || dil == 0 || k == 0 || padded < span {
        return Err(Error::shape(
            "conv2d",
            format!("kernel {k} (dilation {dil}, stride {stride}) does not fit length {padded}"),
        ));
    }
    Ok((padded - span) / stride + 1)
}

/// `(N, C, KH*KW, OH, OW)`: every kernel tap's strided window of the padded input.
fn im2col(
    xp: &Tensor,
    k: (usize, usize),
    stride: (usize, usize),
    dil: (usize, usize),
    out: (usize, usize),
) -> Result<Tensor> {
    let mut taps = Vec::with_capacity(k.0 * k.1);
    for ky in 0..k.0 {
        for kx in 0..k.1 {
            let (y0, x0) = ((ky * dil.0) as i64, (kx * dil.1) as i64);
            let y1 = y0 + ((out.0 - 1) * stride.0) as i64 + 1;
            let x1 = x0 + ((out.1 - 1) * stride.1) as i64 + 1;
            let full = (0, i64::MAX, 1);
            let sl = [
                full,
                full,
                (y0, y1, stride.0 as i64),
                (x0, x1, stride.1 as i64),
            ];
            taps.push(xp.try_slice(&sl)?);
        }
    }
    let refs: Vec<&Tensor> = taps.iter().collect();
    Tensor::try_stack(&refs, 2)
}

/// Checks ranks and channel counts of a conv's input and weight.
fn check_conv(x: &[usize], w: &[usize], groups: usize) -> Result<()> {
    let ok =
        x.len() == 4 && w.len() == 4 && groups > 0 && w[0] % groups == 0 && x[1] == w[1] * groups;
    if !ok {
        return Err(Error::shape(
            "conv2d",
            format!("input {x:?} and weight {w:?} do not fit (groups {groups})"),
        ));
    }
    Ok(())
}

/// A 2-D convolution of `x` `(N, C_in, H, W)` with `w` `(C_out, C_in/groups, KH, KW)`, composed
/// as im2col + matmul. `padding` is `[left, right, top, bottom]`.
pub fn conv2d_composed(
    x: &Tensor,
    w: &Tensor,
    bias: Option<&Tensor>,
    groups: usize,
    stride: (usize, usize),
    dilation: (usize, usize),
    padding: [usize; 4],
) -> Result<Tensor> {
    let (xs, ws) = (x.shape(), w.shape());
    check_conv(&xs, &ws, groups)?;
    let [l, r, t, b] = padding;
    let xp = x.try_pad(&[(0, 0), (0, 0), (t, b), (l, r)])?;
    let oh = out_len(xs[2] + t + b, ws[2], stride.0, dilation.0)?;
    let ow = out_len(xs[3] + l + r, ws[3], stride.1, dilation.1)?;
    let cols = im2col(&xp, (ws[2], ws[3]), stride, dilation, (oh, ow))?;
    // (N, C, K, OH, OW) -> (N, G, C/G * K, OH * OW); weight -> (G, C_out/G, C/G * K).
    let (n, g) = (xs[0] as isize, groups as isize);
    let ck = (ws[1] * ws[2] * ws[3]) as isize;
    let cols = cols.try_reshape(&[n, g, ck, (oh * ow) as isize])?;
    let wm = w.try_reshape(&[1, g, ws[0] as isize / g, ck])?;
    let y = wm.try_matmul(&cols)?;
    let y = y.try_reshape(&[n, ws[0] as isize, oh as isize, ow as isize])?;
    match bias {
        Some(bv) => y.try_add(bv.try_reshape(&[1, -1, 1, 1])?),
        None => Ok(y),
    }
}

/// 2x2 max pooling with stride 2 over the last two axes of `(N, C, H, W)` (odd edges dropped,
/// as PyTorch's floor mode does): a reshape to `(N, C, H/2, 2, W/2, 2)` and a max.
pub fn max_pool2x2(x: &Tensor) -> Result<Tensor> {
    let s = x.shape();
    if s.len() != 4 || s[2] < 2 || s[3] < 2 {
        return Err(Error::shape(
            "max_pool2x2",
            format!("needs (N, C, H>=2, W>=2), got {s:?}"),
        ));
    }
    let (h, w) = (s[2] / 2, s[3] / 2);
    let x = x.try_shrink(&[(0, s[0]), (0, s[1]), (0, 2 * h), (0, 2 * w)])?;
    let six = [s[0], s[1], h, 2, w, 2].map(|d| d as isize);
    x.try_reshape(&six)?.try_max(&[3, 5], false)
}

/// Weight and bias for a conv: kaiming-uniform over `fan_in`, bias `U(±1/√fan_in)`.
fn conv_params(shape: &[usize], fan_in: usize, bias: usize, seed: u64) -> (Tensor, Tensor) {
    let w = param(kaiming_uniform(shape, fan_in, seed));
    let b = param(kaiming_uniform(&[bias], fan_in, seed.wrapping_add(1)));
    (w, b)
}

fn named(w: &Tensor, b: &Option<Tensor>) -> Vec<(String, Tensor)> {
    let mut p = alloc::vec![(String::from("weight"), w.clone())];
    if let Some(b) = b {
        p.push((String::from("bias"), b.clone()));
    }
    p
}

/// A 2-D convolution layer.
pub struct Conv2d {
    /// `(C_out, C_in/groups, KH, KW)`.
    pub weight: Tensor,
    /// `(C_out)`, if present.
    pub bias: Option<Tensor>,
    /// Stride `(y, x)`.
    pub stride: (usize, usize),
    /// Dilation `(y, x)`.
    pub dilation: (usize, usize),
    /// `[left, right, top, bottom]`.
    pub padding: [usize; 4],
    /// Channel groups.
    pub groups: usize,
}

impl Conv2d {
    /// A square-kernel conv with symmetric `padding`, stride `stride`, no dilation, one group.
    pub fn new(
        c_in: usize,
        c_out: usize,
        k: usize,
        stride: usize,
        padding: usize,
        seed: u64,
    ) -> Conv2d {
        let (w, b) = conv_params(&[c_out, c_in, k, k], c_in * k * k, c_out, seed);
        Conv2d {
            weight: w,
            bias: Some(b),
            stride: (stride, stride),
            dilation: (1, 1),
            padding: [padding; 4],
            groups: 1,
        }
    }
}

impl Module for Conv2d {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let b = self.bias.as_ref();
        conv2d_composed(
            x,
            &self.weight,
            b,
            self.groups,
            self.stride,
            self.dilation,
            self.padding,
        )
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

/// A 1-D convolution layer over `(N, C, L)`, run as a conv2d with height 1.
pub struct Conv1d {
    /// `(C_out, C_in/groups, K)`.
    pub weight: Tensor,
    /// `(C_out)`, if present.
    pub bias: Option<Tensor>,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Zeros added on each side.
    pub padding: usize,
    /// Channel groups.
    pub groups: usize,
}

impl Conv1d {
    /// A conv with kernel `k`, stride `stride`, symmetric `padding`, no dilation, one group.
    pub fn new(
        c_in: usize,
        c_out: usize,
        k: usize,
        stride: usize,
        padding: usize,
        seed: u64,
    ) -> Conv1d {
        let (w, b) = conv_params(&[c_out, c_in, k], c_in * k, c_out, seed);
        Conv1d {
            weight: w,
            bias: Some(b),
            stride,
            dilation: 1,
            padding,
            groups: 1,
        }
    }
}

impl Module for Conv1d {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let x4 = x.try_unsqueeze(2)?;
        let w4 = self.weight.try_unsqueeze(2)?;
        let p = self.padding;
        let (s, d) = ((1, self.stride), (1, self.dilation));
        let y = conv2d_composed(
            &x4,
            &w4,
            self.bias.as_ref(),
            self.groups,
            s,
            d,
            [p, p, 0, 0],
        )?;
        y.try_squeeze(Some(2))
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

/// A transposed 2-D convolution (the gradient of a conv with respect to its input).
pub struct ConvTranspose2d {
    /// `(C_in, C_out/groups, KH, KW)`.
    pub weight: Tensor,
    /// `(C_out)`, if present.
    pub bias: Option<Tensor>,
    /// Stride `(y, x)`.
    pub stride: (usize, usize),
    /// Dilation `(y, x)`.
    pub dilation: (usize, usize),
    /// Padding removed from each side: `(y, x)`.
    pub padding: (usize, usize),
    /// Extra rows/columns added at the bottom/right: `(y, x)`.
    pub output_padding: (usize, usize),
    /// Channel groups.
    pub groups: usize,
}

impl ConvTranspose2d {
    /// A square-kernel transposed conv, no dilation or output padding, one group.
    pub fn new(
        c_in: usize,
        c_out: usize,
        k: usize,
        stride: usize,
        padding: usize,
        seed: u64,
    ) -> Self {
        let (w, b) = conv_params(&[c_in, c_out, k, k], c_out * k * k, c_out, seed);
        ConvTranspose2d {
            weight: w,
            bias: Some(b),
            stride: (stride, stride),
            dilation: (1, 1),
            padding: (padding, padding),
            output_padding: (0, 0),
            groups: 1,
        }
    }
}

/// `x` `(N, C, H, W)` with `s-1` zeros inserted between neighbours along H and W.
fn zero_insert(x: &Tensor, s: (usize, usize)) -> Result<Tensor> {
    let d = x.shape();
    let six = [d[0], d[1], d[2], 1, d[3], 1].map(|v| v as isize);
    let pad = [(0, 0), (0, 0), (0, 0), (0, s.0 - 1), (0, 0), (0, s.1 - 1)];
    let wide = x.try_reshape(&six)?.try_pad(&pad)?;
    let four = [d[0], d[1], d[2] * s.0, d[3] * s.1].map(|v| v as isize);
    let (h, w) = ((d[2] - 1) * s.0 + 1, (d[3] - 1) * s.1 + 1);
    wide.try_reshape(&four)?
        .try_shrink(&[(0, d[0]), (0, d[1]), (0, h), (0, w)])
}

/// Pads (or crops, when negative) the last two axes by `(before, after)` per axis.
fn pad_or_crop(x: &Tensor, y: (i64, i64), xw: (i64, i64)) -> Result<Tensor> {
    let pos = |v: i64| v.max(0) as usize;
    let p = [(0, 0), (0, 0), (pos(y.0), pos(y.1)), (pos(xw.0), pos(xw.1))];
    let x = x.try_pad(&p)?;
    let s = x.shape();
    let cut = |v: i64| (-v).max(0) as usize;
    let arg = [
        (0, s[0]),
        (0, s[1]),
        (cut(y.0), s[2] - cut(y.1)),
        (cut(xw.0), s[3] - cut(xw.1)),
    ];
    x.try_shrink(&arg)
}

impl Module for ConvTranspose2d {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let ws = self.weight.shape();
        let xs = x.shape();
        if xs.len() != 4 || ws.len() != 4 || xs[1] != ws[0] || ws[0] % self.groups != 0 {
            return Err(Error::shape(
                "conv_transpose2d",
                format!(
                    "input {xs:?} and weight {ws:?} do not fit (groups {})",
                    self.groups
                ),
            ));
        }
        let g = self.groups as isize;
        // (C_in, C_out/G, KH, KW) -> (C_out, C_in/G, KH, KW), kernel flipped.
        let sh = [
            g,
            ws[0] as isize / g,
            ws[1] as isize,
            ws[2] as isize,
            ws[3] as isize,
        ];
        let w = self
            .weight
            .try_reshape(&sh)?
            .try_permute(&[0, 2, 1, 3, 4])?;
        let w = w.try_reshape(&[g * ws[1] as isize, ws[0] as isize / g, sh[3], sh[4]])?;
        let w = w.try_flip(&[2, 3])?;
        let xz = zero_insert(x, self.stride)?;
        let (d, p, op) = (self.dilation, self.padding, self.output_padding);
        let ey = (d.0 * (ws[2] - 1)) as i64 - p.0 as i64;
        let ex = (d.1 * (ws[3] - 1)) as i64 - p.1 as i64;
        let xz = pad_or_crop(&xz, (ey, ey + op.0 as i64), (ex, ex + op.1 as i64))?;
        let b = self.bias.as_ref();
        conv2d_composed(&xz, &w, b, self.groups, (1, 1), d, [0; 4])
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}
