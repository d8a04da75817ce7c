//! A plain training loop with a progress hook: [`fit`] runs a step function over the batches of
//! a [`Dataset`] for some epochs and tells a callback after every step ([`Progress`]: epoch,
//! batch, loss), so a caller can draw a bar, log, or stop caring — no framework, no traits.
//!
//! Invariant: the hook is told once per step, in order, after the step's loss is known; an
//! error from a step ends the loop and is returned.

use alloc::vec::Vec;

use super::data::{Dataset, Last, Order};
use crate::error::Result;
use crate::tensor::Tensor;

/// Where a training loop is, told to the hook after each step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// The epoch, from 0.
    pub epoch: usize,
    /// Epochs in all.
    pub epochs: usize,
    /// The batch within the epoch, from 0.
    pub batch: usize,
    /// Batches per epoch.
    pub batches: usize,
    /// This step's loss.
    pub loss: f32,
    /// The mean loss of the epoch so far.
    pub mean_loss: f32,
}

/// The hook [`fit`] calls after each step.
pub type ProgressHook<'a> = &'a mut dyn FnMut(&Progress);

/// How [`fit`] cuts the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitOptions {
    /// Rows per batch.
    pub batch_size: usize,
    /// Passes over the data.
    pub epochs: usize,
    /// In order, or shuffled: epoch `e` uses seed `seed + e`.
    pub order: Order,
    /// Whether a last partial batch is kept.
    pub last: Last,
}

/// Runs `step` on every batch of `data` (one tensor per data set tensor) for the epochs of
/// `opts`; `step` does the forward pass, backward pass and update and returns the loss (a
/// one-element tensor). Calls `progress` after each step; returns each epoch's mean loss.
pub fn fit(
    data: &Dataset,
    opts: &FitOptions,
    mut step: impl FnMut(&[Tensor]) -> Result<Tensor>,
    progress: ProgressHook<'_>,
) -> Result<Vec<f32>> {
    let batches = data.batch_count(opts.batch_size, opts.last);
    let mut means = Vec::with_capacity(opts.epochs);
    for epoch in 0..opts.epochs {
        let order = match opts.order {
            Order::InOrder => Order::InOrder,
            Order::Shuffled { seed } => Order::Shuffled {
                seed: seed.wrapping_add(epoch as u64),
            },
        };
        let mut total = 0.0f32;
        for (batch, b) in data.batches(opts.batch_size, order, opts.last).enumerate() {
            let loss = step(&b?)?.item::<f32>()?;
            total += loss;
            progress(&Progress {
                epoch,
                epochs: opts.epochs,
                batch,
                batches,
                loss,
                mean_loss: total / (batch + 1) as f32,
            });
        }
        means.push(total / batches.max(1) as f32);
    }
    Ok(means)
}
