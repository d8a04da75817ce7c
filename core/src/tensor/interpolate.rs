//! Resizing (`interpolate`): each resized axis is a contraction with an `[out, in]` weight
//! matrix built from tensor ops on `arange`s — one-hot rows for nearest modes, two-tap
//! `(1-f, f)` rows for linear — so the result (and its gradient) stays in the graph.
//! Coordinates follow the reference: `align_corners` maps corners to corners, otherwise pixel
//! centres `(o + 0.5)·scale - 0.5`; results are cast back to the input dtype (ints truncate).

use alloc::format;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

/// How `interpolate` picks source values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterpolateMode {
    /// The source at `floor(o·scale)`.
    Nearest,
    /// The source at `floor((o + 0.5)·scale)`.
    NearestExact,
    /// Linear between the two neighbours (bilinear/trilinear over several axes).
    Linear,
}

/// The source coordinate of each of `out` outputs on an axis of `inp` inputs, as f32.
fn coords(inp: usize, out: usize, mode: InterpolateMode, align: bool) -> Tensor {
    let a = usize::from(align);
    let scale = if out > a {
        (inp - a) as f64 / (out - a) as f64
    } else {
        0.0
    };
    let o = Tensor::arange(0.0, out as f64, 1.0, DType::F32);
    match mode {
        InterpolateMode::Linear if align => o.mul(scale),
        InterpolateMode::Linear => o.add(0.5).mul(scale).sub(0.5),
        InterpolateMode::Nearest => o.mul(scale),
        InterpolateMode::NearestExact => o.add(0.5).mul(scale),
    }
}

/// The `[out, in]` weights of one axis.
fn axis_weights(inp: usize, out: usize, mode: InterpolateMode, align: bool) -> Result<Tensor> {
    let last = (inp - 1) as f64;
    let idx = coords(inp, out, mode, align).clamp(Some(0.0), Some(last));
    let src = Tensor::arange(0.0, inp as f64, 1.0, DType::F32).try_reshape(&[1, inp as isize])?;
    let col = |t: &Tensor| t.try_reshape(&[out as isize, 1]);
    let low = idx.trunc(); // idx >= 0, so this is floor
    if mode != InterpolateMode::Linear {
        return Ok(src.try_eq(col(&low)?)?.cast(DType::F32));
    }
    let frac = idx.try_sub(&low)?;
    let high = low.try_add(frac.gt(0.0).cast(DType::F32))?;
    let w_low = src
        .try_eq(col(&low)?)?
        .try_where(col(&frac.const_like(1.0).sub(&frac))?, 0.0)?;
    let w_high = src.try_eq(col(&high)?)?.try_where(col(&frac)?, 0.0)?;
    w_low.try_add(w_high)
}

impl Tensor {
    /// Resizes the trailing `size.len()` axes to `size` (leading axes are batch axes).
    ///
    /// ```
    /// use picograd_core::{InterpolateMode, Tensor};
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4, 21, 22, 23, 24, 41, 42, 43, 44], &[3, 4]);
    /// let y = t.interpolate(&[2, 3], InterpolateMode::Linear, false);
    /// assert_eq!(y.to_vec::<i32>().unwrap(), vec![6, 7, 8, 36, 37, 38]);
    /// ```
    pub fn try_interpolate(
        &self,
        size: &[usize],
        mode: InterpolateMode,
        align_corners: bool,
    ) -> Result<Tensor> {
        let shape = self.shape();
        let bad = size.is_empty() || size.len() > shape.len() || size.contains(&0);
        if bad || shape[shape.len() - size.len()..].contains(&0) {
            return Err(Error::shape(
                "interpolate",
                format!("cannot resize {shape:?} to {size:?}"),
            ));
        }
        if align_corners && mode != InterpolateMode::Linear {
            return Err(Error::shape(
                "interpolate",
                "align_corners needs the linear mode",
            ));
        }
        let mut x = self.float();
        for (j, &out) in size.iter().enumerate().rev() {
            let axis = (shape.len() - size.len() + j) as isize;
            let w = axis_weights(shape[axis as usize], out, mode, align_corners)?.cast(x.dtype());
            x = x
                .try_transpose(axis, -1)?
                .try_matmul(&w.try_transpose(0, 1)?)?;
            x = x.try_transpose(axis, -1)?;
        }
        Ok(x.cast(self.dtype()))
    }
    /// [`Tensor::try_interpolate`], panicking on a bad size.
    #[track_caller]
    pub fn interpolate(
        &self,
        size: &[usize],
        mode: InterpolateMode,
        align_corners: bool,
    ) -> Tensor {
        must(self.try_interpolate(size, mode, align_corners))
    }
}
