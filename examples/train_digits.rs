//! Trains two digits classifiers on the real data set (first 1,437 images train, last 360 test):
//! an MLP (64-128-10) and a small CNN (conv3x3 1→8, pool, conv3x3 8→16, pool, linear 64→10),
//! with Adam (MLP, standardized pixels) and AdamW (CNN) under a cosine learning-rate schedule. Each training step — forward, backward
//! and the in-place parameter update — runs under the JIT: captured on the first batch, replayed
//! afterwards. Prints the loss per epoch, test accuracy and steps/s, and saves the weights to
//! `out/*.safetensors`.
//!
//! Run: `cargo run --release --example train_digits`

#[path = "common/digits.rs"]
mod digits;

use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use picograd::jit::Jit;
use picograd::nn::losses::cross_entropy;
use picograd::nn::optim::AdamConfig;
use picograd::nn::{cosine_lr, max_pool2x2, prefixed, Adam, Conv2d, Linear, Module, Optimizer};
use picograd::{Result, Tensor};

const BATCH: usize = 32;

/// 64 → 128 → 10 with a ReLU.
struct Mlp {
    l1: Linear,
    l2: Linear,
}

impl Module for Mlp {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.try_reshape(&[-1, 64])?;
        self.l2.try_forward(&self.l1.try_forward(&x)?.relu())
    }
    fn parameters(&self) -> Vec<(String, Tensor)> {
        let mut p = prefixed("l1", self.l1.parameters());
        p.extend(prefixed("l2", self.l2.parameters()));
        p
    }
}

/// conv 1→8, relu, pool, conv 8→16, relu, pool, linear 64→10.
struct Cnn {
    c1: Conv2d,
    c2: Conv2d,
    fc: Linear,
}

impl Module for Cnn {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = x.try_reshape(&[-1, 1, 8, 8])?;
        let x = max_pool2x2(&self.c1.try_forward(&x)?.relu())?;
        let x = max_pool2x2(&self.c2.try_forward(&x)?.relu())?;
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
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
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
fn batch(d: &digits::Digits, rows: &[usize]) -> Result<(Tensor, Tensor)> {
    let mut px: Vec<f32> = Vec::with_capacity(rows.len() * 64);
    rows.iter()
        .for_each(|&r| px.extend(&d.images[r * 64..(r + 1) * 64]));
    let ys: Vec<i32> = rows.iter().map(|&r| i32::from(d.labels[r])).collect();
    let x = Tensor::try_from_slice(&px, &[rows.len(), 64])?;
    Ok((x, Tensor::try_from_slice(&ys, &[rows.len()])?))
}

/// Fraction of `d` classified correctly (forward under `no_grad`, argmax on the host).
fn accuracy(model: &dyn Module, d: &digits::Digits) -> Result<f64> {
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

fn progress(steps: usize, epoch: usize, epochs: usize) -> ProgressBar {
    let pb = ProgressBar::new(steps as u64);
    let style = ProgressStyle::with_template("  {prefix} [{bar:30}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    pb.set_style(style);
    pb.set_prefix(format!("epoch {:>2}/{epochs}", epoch + 1));
    pb
}

/// How one model is trained.
struct Plan {
    epochs: usize,
    /// Adam (weight decay 0) or AdamW; the rate follows a cosine from `lr` to `lr/20`.
    adam: AdamConfig,
}

/// Trains `model` per `plan`; returns the steps/s of the replayed steps (the first step
/// captures and compiles).
fn train(model: &dyn Module, train: &digits::Digits, plan: &Plan) -> Result<f64> {
    let (epochs, lr) = (plan.epochs, plan.adam.lr);
    let params: Vec<Tensor> = model.parameters().into_iter().map(|(_, t)| t).collect();
    let opt = Mutex::new(Adam::new(params, plan.adam)?);
    let step = Jit::new(|io: &[Tensor]| {
        let mut opt = opt.lock().unwrap_or_else(|e| e.into_inner());
        opt.zero_grad();
        let loss = cross_entropy(&model.forward(&io[0]), &io[1]).expect("batch shapes");
        loss.backward().expect("backward");
        let mut outs = vec![loss.clone()];
        outs.extend(opt.schedule_step(&[&loss]).expect("optimizer step"));
        outs
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

/// Trains, evaluates and saves one model.
fn run(
    name: &str,
    model: &dyn Module,
    data: (&digits::Digits, &digits::Digits),
    plan: Plan,
) -> Result<f64> {
    println!(
        "== {name}: {} parameters",
        model
            .parameters()
            .iter()
            .map(|(_, t)| t.numel())
            .sum::<usize>()
    );
    let speed = train(model, data.0, &plan)?;
    let acc = accuracy(model, data.1)?;
    let path = format!("out/digits_{name}.safetensors");
    picograd::runtime::safetensors::save(&path, &model.parameters())?;
    println!(
        "   test accuracy {:.2}% ({} images), {speed:.0} steps/s, weights saved to {path}",
        acc * 100.0,
        data.1.len()
    );
    Ok(acc)
}

/// Standardizes every pixel with the training set's per-pixel mean and spread.
fn standardize(train: &mut digits::Digits, test: &mut digits::Digits) {
    let n = train.len() as f32;
    let mut mean = [0f32; 64];
    let mut var = [0f32; 64];
    train
        .images
        .chunks(64)
        .for_each(|im| (0..64).for_each(|p| mean[p] += im[p] / n));
    train
        .images
        .chunks(64)
        .for_each(|im| (0..64).for_each(|p| var[p] += (im[p] - mean[p]).powi(2) / n));
    for d in [train, test] {
        for (i, v) in d.images.iter_mut().enumerate() {
            *v = (*v - mean[i % 64]) / (var[i % 64].sqrt() + 0.1);
        }
    }
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    picograd::init();
    let data = digits::load()?;
    let (train_set, test_set) = digits::split(&data);
    std::fs::create_dir_all("out")?;
    let mlp = Mlp {
        l1: Linear::new(64, 128, true, 1),
        l2: Linear::new(128, 10, true, 2),
    };
    // The MLP sees standardized pixels; the CNN keeps [0, 1] (its zero padding means "blank").
    let (mut mlp_train, mut mlp_test) = (
        train_set.slice(0, train_set.len()),
        test_set.slice(0, test_set.len()),
    );
    standardize(&mut mlp_train, &mut mlp_test);
    let plan = Plan {
        epochs: 15,
        adam: AdamConfig::adam(0.01),
    };
    let mlp_acc = run("mlp", &mlp, (&mlp_train, &mlp_test), plan)?;
    let cnn = Cnn {
        c1: Conv2d::new(1, 8, 3, 1, 1, 3),
        c2: Conv2d::new(8, 16, 3, 1, 1, 4),
        fc: Linear::new(64, 10, true, 5),
    };
    let plan = Plan {
        epochs: 30,
        adam: AdamConfig::adamw(0.01, 0.1),
    };
    let cnn_acc = run("cnn", &cnn, (&train_set, &test_set), plan)?;
    println!(
        "\nMLP {:.2}% (target >= 91%), CNN {:.2}% (target >= 94%)",
        mlp_acc * 100.0,
        cnn_acc * 100.0
    );
    Ok(())
}
