//! Sampling category indices from weights: `multinomial`, with replacement (inverse CDF:
//! count how many cumulative weights lie at or below a uniform draw) or without (Efraimidis–
//! Spirakis: the `k` largest of `log(u)/w`). Seeded like the random creation functions.

use alloc::format;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

impl Tensor {
    /// Draws `num_samples` category indices (i32) per row of non-negative weights (`[n]` or
    /// `[rows, n]`; the result is `[num_samples]` or `[rows, num_samples]`). Without
    /// `replacement` a category is drawn at most once per row. Deterministic for `seed`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let w = Tensor::from_slice(&[0.0f32, 1.0, 0.0, 1.0], &[4]);
    /// let s = w.multinomial(8, true, 3).to_vec::<i32>().unwrap();
    /// assert!(s.iter().all(|&i| i == 1 || i == 3));
    /// ```
    pub fn try_multinomial(
        &self,
        num_samples: usize,
        replacement: bool,
        seed: u64,
    ) -> Result<Tensor> {
        let shape = self.shape();
        let ok = (1..=2).contains(&shape.len())
            && num_samples > 0
            && (replacement || num_samples <= shape[shape.len() - 1]);
        if !ok {
            return Err(Error::shape(
                "multinomial",
                format!("cannot draw {num_samples} samples (replacement: {replacement}) from weights {shape:?}; weights must be 1-D or 2-D"),
            ));
        }
        let w = if shape.len() == 1 {
            self.try_unsqueeze(0)?
        } else {
            self.clone()
        };
        let picks = if replacement {
            with_replacement(&w.detach().float(), num_samples, seed)?
        } else {
            without_replacement(&w.detach().float(), num_samples, seed)?
        };
        let picks = picks.cast(DType::I32);
        if shape.len() == 1 {
            picks.try_squeeze(Some(0))
        } else {
            Ok(picks)
        }
    }
    /// [`Tensor::try_multinomial`], panicking on bad shapes or counts.
    #[track_caller]
    pub fn multinomial(&self, num_samples: usize, replacement: bool, seed: u64) -> Tensor {
        must(self.try_multinomial(num_samples, replacement, seed))
    }
}

/// `[rows, k]` draws: the number of normalized cumulative weights `<=` a uniform draw.
fn with_replacement(w: &Tensor, k: usize, seed: u64) -> Result<Tensor> {
    let (rows, n) = (w.shape()[0], w.shape()[1]);
    let cw = w.try_cumsum(1)?;
    let cdf = cw.try_div(cw.try_shrink(&[(0, rows), (n - 1, n)])?)?;
    let u = Tensor::rand(&[rows, k, 1], seed).cast(cdf.dtype());
    let below = u.try_ge(cdf.try_unsqueeze(1)?)?;
    below.try_sum(&[2], false)
}

/// `[rows, k]` draws without repeats: the top `k` keys `log2(u)/w` (zero weights never win).
fn without_replacement(w: &Tensor, k: usize, seed: u64) -> Result<Tensor> {
    let u = Tensor::rand(&w.shape(), seed).cast(w.dtype());
    let keys = u.log2().try_div(w)?;
    Ok(keys.try_topk(k, 1, true)?.1)
}
