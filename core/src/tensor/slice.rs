//! Python-style slicing with steps: `slice(&[(start, stop, step)])`, bounds clamped like
//! Python's `slice.indices`, negative indices counting from the end, negative steps walking
//! backwards. Lowered to `shrink` then `stride`.

use alloc::format;
use alloc::vec::Vec;

use crate::error::{Error, Result};

use super::{must, Tensor};

/// One axis of a slice after normalization: the kept range and the step.
struct Span {
    lo: usize,
    hi: usize,
    step: i64,
}

/// Clamps one Python bound against length `n` for a step's direction.
fn clamp_bound(v: i64, n: i64, step: i64) -> i64 {
    let v = if v < 0 { v.saturating_add(n) } else { v };
    if step > 0 {
        v.clamp(0, n)
    } else {
        v.clamp(-1, n - 1)
    }
}

/// The contiguous range `[lo, hi)` holding the selected elements, and the step.
fn span(start: i64, stop: i64, step: i64, n: usize) -> Span {
    let n = n as i64;
    let (a, b) = (clamp_bound(start, n, step), clamp_bound(stop, n, step));
    // In i128: a step near i64::MIN or i64::MAX must not overflow the count.
    let (a, b, s) = (i128::from(a), i128::from(b), i128::from(step));
    let count = if s > 0 {
        (b - a + s - 1).max(0) / s
    } else {
        (a - b - s - 1).max(0) / -s
    };
    if count == 0 {
        return Span {
            lo: 0,
            hi: 0,
            step: step.signum(),
        };
    }
    // One element: any step selects it; ±1 keeps later stages clear of a step such as i64::MIN
    // (more than one element bounds |step| by the axis length).
    let step = if count == 1 { step.signum() } else { step };
    let last = a + (count - 1) * s;
    let (lo, hi) = if step > 0 {
        (a, last + 1)
    } else {
        (last, a + 1)
    };
    Span {
        lo: lo as usize,
        hi: hi as usize,
        step,
    }
}

impl Tensor {
    /// Slices each leading axis by `(start, stop, step)`, as Python's `t[start:stop:step]`;
    /// axes not listed are kept whole. Use `i64::MIN`/`i64::MAX` for open ends (`t[::-1]` is
    /// `(i64::MAX, i64::MIN, -1)`).
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::I32);
    /// let r = t.slice(&[(i64::MAX, i64::MIN, -2)]);
    /// assert_eq!(r.to_vec::<i32>().unwrap(), vec![5, 3, 1]);
    /// ```
    pub fn try_slice(&self, arg: &[(i64, i64, i64)]) -> Result<Tensor> {
        let shape = self.shape();
        if arg.len() > shape.len() || arg.iter().any(|a| a.2 == 0) {
            return Err(Error::shape(
                "slice",
                format!("bad slice {arg:?} for shape {shape:?} (one entry per axis, step != 0)"),
            ));
        }
        let spans: Vec<Span> = shape
            .iter()
            .enumerate()
            .map(|(i, &n)| match arg.get(i) {
                Some(&(a, b, s)) => span(a, b, s, n),
                None => span(0, n as i64, 1, n),
            })
            .collect();
        let ranges: Vec<(usize, usize)> = spans.iter().map(|s| (s.lo, s.hi)).collect();
        let steps: Vec<i64> = spans.iter().map(|s| s.step).collect();
        let shrunk = self.try_shrink(&ranges)?;
        if steps.iter().all(|&s| s == 1) {
            return Ok(shrunk);
        }
        shrunk.try_stride(&steps)
    }
    /// [`Tensor::try_slice`], panicking on a bad slice.
    #[track_caller]
    pub fn slice(&self, arg: &[(i64, i64, i64)]) -> Tensor {
        must(self.try_slice(arg))
    }
}
