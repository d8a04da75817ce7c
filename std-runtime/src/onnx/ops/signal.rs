//! DFT as two lazy matmuls: the signal axis moved last, its real and imaginary parts multiplied
//! by cosine and sine matrices built on the host (`[input length, output length]`). Forward,
//! inverse (scaled by 1/L), one-sided forward (the first L/2 + 1 bins) and one-sided inverse
//! (a real output from a Hermitian half spectrum, as numpy's `irfft`).

use std::f64::consts::PI;

use picograd_core::{Result, Tensor};

use super::super::node::{bad, Node};
use super::{norm_axis, Handler};

/// The handler for `op` if it is a signal op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "DFT" => dft,
        _ => return None,
    })
}

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

fn dft(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
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
    let (inverse, onesided) = (n.int("inverse", 0) != 0, n.int("onesided", 0) != 0);
    let have = x.shape()[axis];
    let len = match n.ints_input(1)?.and_then(|v| v.first().copied()) {
        Some(l) if l > 0 => l as usize,
        Some(l) => return Err(bad("DFT", format!("dft_length {l}"))),
        None if inverse && onesided => 2 * have.saturating_sub(1),
        None => have,
    };
    let plan = Plan {
        inverse,
        onesided,
        inputs: if inverse && onesided {
            len / 2 + 1
        } else {
            len
        },
        outputs: if onesided && !inverse {
            len / 2 + 1
        } else {
            len
        },
        len,
    };
    let (re, im) = parts(x, axis)?;
    let (re, im) = (
        fit(&re, plan.inputs)?,
        im.map(|t| fit(&t, plan.inputs)).transpose()?,
    );
    let (c, s) = plan.matrices();
    let shape = [plan.inputs, plan.outputs];
    let c = Tensor::try_from_f64s(&c, &shape, x.dtype())?;
    let s = Tensor::try_from_f64s(&s, &shape, x.dtype())?;
    // Forward: (a + ib)(cos − i sin); inverse: (a + ib)(cos + i sin).
    let sign = if inverse { 1.0 } else { -1.0 };
    let mut out_re = re.try_matmul(&c)?;
    let mut out_im = re.try_matmul(&s)?.try_mul(sign)?;
    if let Some(im) = &im {
        out_re = out_re.try_sub(im.try_matmul(&s)?.try_mul(sign)?)?;
        out_im = out_im.try_add(im.try_matmul(&c)?)?;
    }
    let back = |t: Tensor| -> Result<Tensor> {
        let k = r - 1;
        let mut order = vec![0; k];
        let perm: Vec<usize> = (0..k).filter(|&i| i != axis).chain([axis]).collect();
        for (p, &q) in perm.iter().enumerate() {
            order[q] = p;
        }
        t.try_permute(&order)?.try_unsqueeze(-1)
    };
    if inverse && onesided {
        return Ok(vec![back(out_re)?]);
    }
    Ok(vec![Tensor::try_cat(
        &[&back(out_re)?, &back(out_im)?],
        -1,
    )?])
}
