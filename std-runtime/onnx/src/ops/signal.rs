//! DFT as two lazy matmuls: the signal axis moved last, its real and imaginary parts multiplied
//! by cosine and sine matrices built on the host (`[input length, output length]`). Forward,
//! inverse (scaled by 1/L), one-sided forward (the first L/2 + 1 bins) and one-sided inverse
//! (a real output from a Hermitian half spectrum, as numpy's `irfft`). STFT frames the signal
//! with strided slices, applies the window and the same transform; MelWeightMatrix is built on
//! the host.

use std::f64::consts::PI;

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::{norm_axis, Handler};

/// The handler for `op` if it is a signal op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "DFT" => dft,
        "STFT" => stft,
        "MelWeightMatrix" => mel_weight_matrix,
        _ => return None,
    })
}

/// Most entries of a transform's (or a mel filter bank's) matrix: a 4096-point DFT.
const MAX_MATRIX: usize = 1 << 24;

/// Which transform, and its sizes: `inputs` samples read, `outputs` produced, length `len`.
struct Plan {
    inverse: bool,
    onesided: bool,
    inputs: usize,
    outputs: usize,
    len: usize,
}

impl Plan {
    /// `(cos, sin)` matrices `[inputs, outputs]` of this transform, signs and scale folded in.
    fn matrices(&self) -> (Vec<f64>, Vec<f64>) {
        let l = self.len as f64;
        let (mut c, mut s) = (Vec::new(), Vec::new());
        for i in 0..self.inputs {
            for o in 0..self.outputs {
                let theta = 2.0 * PI * ((i * o) % self.len.max(1)) as f64 / l;
                let w = self.weight(i);
                c.push(w * theta.cos());
                s.push(w * theta.sin());
            }
        }
        (c, s)
    }

    /// The transform of `re + i·im` (signal axis last) as (real, imaginary) parts.
    fn apply(&self, re: &Tensor, im: Option<&Tensor>, dtype: DType) -> Result<(Tensor, Tensor)> {
        if self
            .inputs
            .checked_mul(self.outputs)
            .is_none_or(|e| e > MAX_MATRIX)
        {
            return Err(bad(
                "DFT",
                format!(
                    "a {}-point transform needs a {}×{} matrix (at most {MAX_MATRIX} entries)",
                    self.len, self.inputs, self.outputs
                ),
            ));
        }
        let (c, s) = self.matrices();
        let shape = [self.inputs, self.outputs];
        let c = Tensor::try_from_f64s(&c, &shape, dtype)?;
        let s = Tensor::try_from_f64s(&s, &shape, dtype)?;
        // Forward: (a + ib)(cos − i sin); inverse: (a + ib)(cos + i sin).
        let sign = if self.inverse { 1.0 } else { -1.0 };
        let mut out_re = re.try_matmul(&c)?;
        let mut out_im = re.try_matmul(&s)?.try_mul(sign)?;
        if let Some(im) = im {
            out_re = out_re.try_sub(im.try_matmul(&s)?.try_mul(sign)?)?;
            out_im = out_im.try_add(im.try_matmul(&c)?)?;
        }
        Ok((out_re, out_im))
    }

    /// The scale of input bin `i`: 1 forward, 1/L inverse, doubled for the mirrored bins of a
    /// one-sided inverse.
    fn weight(&self, i: usize) -> f64 {
        if !self.inverse {
            return 1.0;
        }
        let l = self.len as f64;
        let mirrored = self.onesided && i > 0 && 2 * i < self.len;
        if mirrored {
            2.0 / l
        } else {
            1.0 / l
        }
    }
}

/// The real and imaginary parts (`[.., N]`, signal axis last) of a `[.., 1|2]` input.
fn parts(x: &Tensor, axis: usize) -> Result<(Tensor, Option<Tensor>)> {
    let s = x.shape();
    let r = s.len();
    let comp = |k: usize| -> Result<Tensor> {
        let mut keep: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
        keep[r - 1] = (k, k + 1);
        let t = x.try_shrink(&keep)?.try_squeeze(Some(-1))?;
        let n = r - 1;
        let mut perm: Vec<usize> = (0..n).filter(|&i| i != axis).collect();
        perm.push(axis);
        t.try_permute(&perm)
    };
    let imag = if s[r - 1] == 2 { Some(comp(1)?) } else { None };
    Ok((comp(0)?, imag))
}

/// Pads with zeros or truncates the last axis to `n`.
fn fit(t: &Tensor, n: usize) -> Result<Tensor> {
    let s = t.shape();
    let have = s[s.len() - 1];
    if have >= n {
        let mut keep: Vec<(usize, usize)> = s.iter().map(|&d| (0, d)).collect();
        keep[s.len() - 1] = (0, n);
        return t.try_shrink(&keep);
    }
    let mut pads = vec![(0, 0); s.len()];
    pads[s.len() - 1] = (0, n - have);
    t.try_pad(&pads)
}

/// The DFT's signal axis (an input from opset 20, an attribute before), checked.
fn dft_axis(n: &Node, x: &Tensor) -> Result<usize> {
    let r = x.ndim();
    if r < 2 || !matches!(x.shape()[r - 1], 1 | 2) {
        return Err(bad(
            "DFT",
            format!("input {:?} needs a last axis of 1 or 2", x.shape()),
        ));
    }
    let axis = if n.opset >= 20 {
        n.ints_input(2)?
            .and_then(|v| v.first().copied())
            .unwrap_or(-2)
    } else {
        n.int("axis", 1)
    };
    let axis = norm_axis("DFT", axis, r)?;
    if axis == r - 1 {
        return Err(bad("DFT", "the axis cannot be the real/imaginary axis"));
    }
    Ok(axis)
}

/// The DFT's transform for a signal of `have` samples.
fn dft_plan(n: &Node, have: usize) -> Result<Plan> {
    let (inverse, onesided) = (n.int("inverse", 0) != 0, n.int("onesided", 0) != 0);
    let len = match n.ints_input(1)?.and_then(|v| v.first().copied()) {
        Some(l) if l > 0 => l as usize,
        Some(l) => return Err(bad("DFT", format!("dft_length {l}"))),
        None if inverse && onesided => 2 * have.saturating_sub(1),
        None => have,
    };
    let half = len / 2 + 1;
    Ok(Plan {
        inverse,
        onesided,
        inputs: if inverse && onesided { half } else { len },
        outputs: if onesided && !inverse { half } else { len },
        len,
    })
}

/// Moves the last axis of `t` (rank `k`) back to `axis` and appends a unit axis.
fn restore(t: &Tensor, axis: usize) -> Result<Tensor> {
    let k = t.ndim();
    let perm: Vec<usize> = (0..k).filter(|&i| i != axis).chain([axis]).collect();
    let mut order = vec![0; k];
    for (p, &q) in perm.iter().enumerate() {
        order[q] = p;
    }
    t.try_permute(&order)?.try_unsqueeze(-1)
}

fn dft(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let axis = dft_axis(n, x)?;
    let plan = dft_plan(n, x.shape()[axis])?;
    let (re, im) = parts(x, axis)?;
    let re = fit(&re, plan.inputs)?;
    let im = im.map(|t| fit(&t, plan.inputs)).transpose()?;
    let (out_re, out_im) = plan.apply(&re, im.as_ref(), x.dtype())?;
    if plan.inverse && plan.onesided {
        return Ok(vec![restore(&out_re, axis)?]);
    }
    let both = [&restore(&out_re, axis)?, &restore(&out_im, axis)?];
    Ok(vec![Tensor::try_cat(&both, -1)?])
}

/// The frames `[B, F, L]` of a `[B, N]` signal part, `step` apart.
fn frames(t: &Tensor, step: usize, len: usize, count: usize) -> Result<Tensor> {
    let b = t.shape()[0];
    let parts: Vec<Tensor> = (0..count)
        .map(|f| t.try_shrink(&[(0, b), (f * step, f * step + len)]))
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::try_stack(&refs, 1)
}

fn stft(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let xs = x.shape();
    if xs.len() != 3 || !matches!(xs[2], 1 | 2) {
        return Err(bad("STFT", format!("signal {xs:?}")));
    }
    let first =
        |i: usize| -> Result<Option<i64>> { Ok(n.ints_input(i)?.and_then(|v| v.first().copied())) };
    let step = first(1)?
        .filter(|&s| s > 0)
        .ok_or_else(|| bad("STFT", "frame_step"))? as usize;
    let window = n.opt(2);
    let len = match (first(3)?, window) {
        (Some(l), _) if l > 0 => l as usize,
        (_, Some(w)) => w.numel(),
        _ => return Err(bad("STFT", "needs a frame_length or a window")),
    };
    if len == 0 || len > xs[1] {
        return Err(bad(
            "STFT",
            format!("frame length {len} for {} samples", xs[1]),
        ));
    }
    let count = (xs[1] - len) / step + 1;
    let onesided = n.int("onesided", 1) != 0;
    let plan = Plan {
        inverse: false,
        onesided,
        inputs: len,
        outputs: if onesided { len / 2 + 1 } else { len },
        len,
    };
    let part = |k: usize| -> Result<Tensor> {
        let p = x
            .try_shrink(&[(0, xs[0]), (0, xs[1]), (k, k + 1)])?
            .try_squeeze(Some(2))?;
        let f = frames(&p, step, len, count)?;
        match window {
            Some(w) => f.try_mul(&w.cast(x.dtype()).try_reshape(&[1, 1, len as isize])?),
            None => Ok(f),
        }
    };
    let im = if xs[2] == 2 { Some(part(1)?) } else { None };
    let (re, im) = plan.apply(&part(0)?, im.as_ref(), x.dtype())?;
    Ok(vec![Tensor::try_stack(&[&re, &im], -1)?])
}

/// Triangular mel filters `[dft_length/2 + 1, num_mel_bins]` (the reference's integer bin
/// edges, so the matrix is exact).
fn mel_weight_matrix(n: &Node) -> Result<Vec<Tensor>> {
    let num = |i: usize| -> Result<f64> {
        n.floats_input(i)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| bad("MelWeightMatrix", format!("input {i}")))
    };
    let (bins, dft_len, rate) = (num(0)?, num(1)?, num(2)?);
    let rows_f = (dft_len / 2.0).floor() + 1.0;
    if !(0.0..=MAX_MATRIX as f64).contains(&bins)
        || !(1.0..=MAX_MATRIX as f64).contains(&rows_f)
        || bins * rows_f > MAX_MATRIX as f64
    {
        return Err(bad(
            "MelWeightMatrix",
            format!(
                "{bins} mel bins of a {dft_len}-point DFT (at most {MAX_MATRIX} matrix entries)"
            ),
        ));
    }
    let (bins, dft_len) = (bins as usize, dft_len as i64);
    let (lo, hi) = (num(3)?, num(4)?);
    let mel = |hz: f64| 2595.0 * (hz / 700.0).ln_1p() / 10f64.ln();
    let step = (mel(hi) - mel(lo)) / (bins + 2) as f64;
    let edges: Vec<i64> = (0..bins + 2)
        .map(|i| {
            let hz = 700.0 * ((i as f64 * step + mel(lo)) / 2595.0 * 10f64.ln()).exp_m1();
            (((dft_len + 1) as f64 * hz) / rate).floor() as i64
        })
        .collect();
    let rows = (dft_len / 2 + 1) as usize;
    let mut out = vec![0.0f64; rows * bins];
    let mut set = |j: i64, i: usize, v: f64| {
        if (0..rows as i64).contains(&j) {
            out[j as usize * bins + i] = v;
        }
    };
    for i in 0..bins {
        let (l, c, h) = (edges[i], edges[i + 1], edges[i + 2]);
        // Only the rows that exist are visited (edges can lie far outside them).
        let inside = |from: i64, to: i64| from.max(0)..to.min(rows as i64);
        if c == l {
            set(c, i, 1.0);
        } else {
            inside(l, c.saturating_add(1))
                .for_each(|j| set(j, i, (j as f64 - l as f64) / (c as f64 - l as f64)));
        }
        if h > c {
            inside(c, h).for_each(|j| set(j, i, (h as f64 - j as f64) / (h as f64 - c as f64)));
        }
    }
    let d = super::super::values::dtype_of(n.int("output_datatype", 1) as i32)
        .ok_or_else(|| bad("MelWeightMatrix", "output_datatype"))?;
    Ok(vec![Tensor::try_from_f64s(&out, &[rows, bins], d)?])
}
