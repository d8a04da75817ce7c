//! What the digits examples share: the two models (an MLP and a small CNN), mini-batches, the
//! JIT-captured Adam training loop with a progress bar, and accuracy on a test set.

use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use picograd::jit::Jit;
use picograd::nn::losses::cross_entropy;
use picograd::nn::optim::AdamConfig;
use picograd::nn::{cosine_lr, prefixed, Adam, Conv2d, Linear, Module, Optimizer};
use picograd::tensor::PoolOpts;
use picograd::{Result, Tensor};

use super::digits;

pub const BATCH: usize = 32;

/// 64 → 128 → 10 with a ReLU, on pixels standardized with the training set's per-pixel mean
/// and spread (part of the model, so a device feeds it raw pixels).
pub struct Mlp {
    pub mean: Tensor,
    pub inv_std: Tensor,
    pub l1: Linear,
    pub l2: Linear,
}

impl Mlp {
    /// A fresh MLP whose input standardization comes from `train`.
    pub fn new(train: &digits::Digits, seed: u64) -> Result<Mlp> {
        let (mean, inv_std) = pixel_stats(train);
        Ok(Mlp {
            mean: Tensor::try_from_slice(&mean, &[64])?.try_own()?,
            inv_std: Tensor::try_from_slice(&inv_std, &[64])?.try_own()?,
            l1: Linear::new(64, 128, true, seed),
            l2: Linear::new(128, 10, true, seed + 1),
        })
    }
}

impl Module for Mlp {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x
            .try_reshape(&[-1, 64])?
            .try_sub(&self.mean)?
            .try_mul(&self.inv_std)?;
        self.l2.try_forward(&self.l1.try_forward(&x)?.relu())
    }
    fn parameters(&self) -> Vec<(String, Tensor)> {
        let mut p = prefixed("l1", self.l1.parameters());
        p.extend(prefixed("l2", self.l2.parameters()));
        p
    }
}

/// Per-pixel mean and 1 / (spread + 0.1) over a data set.
fn pixel_stats(d: &digits::Digits) -> (Vec<f32>, Vec<f32>) {
    let n = d.len() as f32;
    let mut mean = vec![0f32; 64];
    let mut var = vec![0f32; 64];
    d.images
        .chunks(64)
        .for_each(|im| (0..64).for_each(|p| mean[p] += im[p] / n));
    d.images
        .chunks(64)
        .for_each(|im| (0..64).for_each(|p| var[p] += (im[p] - mean[p]).powi(2) / n));
    (mean, var.iter().map(|v| 1.0 / (v.sqrt() + 0.1)).collect())
}

/// conv 1→8, relu, pool, conv 8→16, relu, pool, linear 64→10.
pub struct Cnn {
    pub c1: Conv2d,
    pub c2: Conv2d,
    pub fc: Linear,
}

impl Module for Cnn {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.try_reshape(&[-1, 1, 8, 8])?;
        let pool = PoolOpts::new(&[2, 2]);
        let x = self.c1.try_forward(&x)?.relu().try_max_pool2d(&pool)?;
        let x = self.c2.try_forward(&x)?.relu().try_max_pool2d(&pool)?;
        self.fc.try_forward(&x.try_flatten(1, -1)?)
    }
    fn parameters(&self) -> Vec<(String, Tensor)> {
        let mut p = prefixed("c1", self.c1.parameters());
        p.extend(prefixed("c2", self.c2.parameters()));
        p.extend(prefixed("fc", self.fc.parameters()));
        p
    }
}

/// A fixed-seed permutation of `0..n` (Fisher–Yates on an xorshift stream).
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut idx: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        idx.swap(i, (s % (i as u64 + 1)) as usize);
    }
    idx
}

/// The batch of images and labels at `rows`, as tensors.
pub fn batch(d: &digits::Digits, rows: &[usize]) -> Result<(Tensor, Tensor)> {
    let mut px: Vec<f32> = Vec::with_capacity(rows.len() * 64);
    rows.iter()
        .for_each(|&r| px.extend(&d.images[r * 64..(r + 1) * 64]));
    let ys: Vec<i32> = rows.iter().map(|&r| i32::from(d.labels[r])).collect();
    let x = Tensor::try_from_slice(&px, &[rows.len(), 64])?;
    Ok((x, Tensor::try_from_slice(&ys, &[rows.len()])?))
}

/// Fraction of `d` classified correctly (forward under `no_grad`, argmax on the host).
pub fn accuracy(model: &dyn Module, d: &digits::Digits) -> Result<f64> {
    let (x, _) = batch(d, &(0..d.len()).collect::<Vec<_>>())?;
    let logits = picograd::no_grad(|| model.try_forward(&x))?.to_vec::<f32>()?;
    let hits = logits
        .chunks(10)
        .zip(&d.labels)
        .filter(|(row, &y)| {
            let best = (0..10).max_by(|&a, &b| row[a].total_cmp(&row[b]));
            best == Some(usize::from(y))
        })
        .count();
    Ok(hits as f64 / d.len() as f64)
}

pub fn progress(steps: usize, epoch: usize, epochs: usize) -> ProgressBar {
    let pb = ProgressBar::new(steps as u64);
    let style = ProgressStyle::with_template("  {prefix} [{bar:30}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    pb.set_style(style);
    pb.set_prefix(format!("epoch {:>2}/{epochs}", epoch + 1));
    pb
}

/// How one model is trained.
pub struct Plan {
    pub epochs: usize,
    /// Adam (weight decay 0) or AdamW; the rate follows a cosine from `lr` to `lr/20`.
    pub adam: AdamConfig,
}

/// Trains `model` per `plan`; returns the steps/s of the replayed steps (the first step
/// captures and compiles).
pub fn train(model: &dyn Module, train: &digits::Digits, plan: &Plan) -> Result<f64> {
    let (epochs, lr) = (plan.epochs, plan.adam.lr);
    let params: Vec<Tensor> = model.parameters().into_iter().map(|(_, t)| t).collect();
    let opt = Mutex::new(Adam::new(params, plan.adam)?);
    let step = Jit::new(|io: &[Tensor]| {
        let mut opt = opt.lock().unwrap_or_else(|e| e.into_inner());
        opt.zero_grad();
        let loss = cross_entropy(&model.try_forward(&io[0])?, &io[1])?;
        loss.backward()?;
        let mut outs = vec![loss.clone()];
        outs.extend(opt.schedule_step(&[&loss])?);
        Ok(outs)
    });
    let per_epoch = train.len() / BATCH;
    let (mut steps, mut start) = (0usize, Instant::now());
    for epoch in 0..epochs {
        let rate = cosine_lr(lr, lr * 0.05, epoch, epochs);
        opt.lock().unwrap_or_else(|e| e.into_inner()).set_lr(rate)?;
        let order = shuffled(train.len(), epoch as u64 + 1);
        let pb = progress(per_epoch, epoch, epochs);
        let mut total = 0.0;
        for b in 0..per_epoch {
            let (x, y) = batch(train, &order[b * BATCH..(b + 1) * BATCH])?;
            total += step.call(&[x, y])?[0].item::<f32>()?;
            if step.replays() == 0 {
                start = Instant::now();
            } else {
                steps += 1;
            }
            pb.inc(1);
            pb.set_message(format!("loss {:.4}", total / (b + 1) as f32));
        }
        pb.finish_and_clear();
        let loss = total / per_epoch as f32;
        println!(
            "   epoch {:>2}/{epochs}  loss {loss:.4}  lr {rate:.5}",
            epoch + 1
        );
    }
    Ok(steps as f64 / start.elapsed().as_secs_f64())
}
