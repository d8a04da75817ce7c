//! The soak loops `examples/soak.rs` runs at full size and `tests/soak_*.rs` at CI size: eager
//! (non-JIT) Adam training of the digits MLP, sampling resident memory, and a stream of distinct
//! kernels compiled in batches on the default device, sampling mapped kernel libraries, live
//! libraries, resident memory and the disk cache. Each returns its samples; the `check_*`
//! functions hold the bounds, so the script and the tests fail on the same rule.

use picograd::nn::losses::cross_entropy;
use picograd::nn::optim::AdamConfig;
use picograd::nn::{Adam, Module, Optimizer};
use picograd::runtime::Compiler;
use picograd::{Result, Tensor};

use super::{digits, procstat, train};

/// Turns a sampling failure (no `/proc`) into picograd's error type.
fn sampled<T>(r: std::result::Result<T, String>) -> Result<T> {
    r.map_err(|e| picograd::Error::Io {
        path: "/proc/self".into(),
        detail: e,
    })
}

/// One eager-training sample: after `step` steps, resident bytes and the step's loss.
#[derive(Clone, Copy, Debug)]
pub struct EagerSample {
    pub step: usize,
    pub rss: u64,
    pub loss: f32,
}

/// Trains the digits MLP eagerly (forward, backward and `Adam::step` realized every step, no
/// JIT) for `steps` batches of [`train::BATCH`] images, cycling through a shuffled `data`, and
/// samples resident memory every `every` steps (and after the last).
pub fn eager_training(
    data: &digits::Digits,
    steps: usize,
    every: usize,
) -> Result<Vec<EagerSample>> {
    let model = train::Mlp::new(data, 1)?;
    let params = model.parameters().into_iter().map(|(_, t)| t).collect();
    let mut opt = Adam::new(params, AdamConfig::adam(0.01))?;
    let order = train::shuffled(data.len(), 7);
    let per_epoch = data.len() / train::BATCH;
    let mut samples = Vec::new();
    for step in 0..steps {
        let at = (step % per_epoch) * train::BATCH;
        let (x, y) = train::batch(data, &order[at..at + train::BATCH])?;
        opt.zero_grad();
        let loss = cross_entropy(&model.try_forward(&x)?, &y)?;
        loss.backward()?;
        opt.step()?;
        let loss = loss.item::<f32>()?;
        if step % every == 0 || step + 1 == steps {
            let rss = sampled(procstat::rss_bytes())?;
            samples.push(EagerSample {
                step: step + 1,
                rss,
                loss,
            });
        }
    }
    Ok(samples)
}

/// The least-squares slope of resident bytes per step over `samples`.
pub fn rss_slope(samples: &[EagerSample]) -> f64 {
    let n = samples.len() as f64;
    if samples.len() < 2 {
        return 0.0;
    }
    let mx = samples.iter().map(|s| s.step as f64).sum::<f64>() / n;
    let my = samples.iter().map(|s| s.rss as f64).sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for s in samples {
        sxy += (s.step as f64 - mx) * (s.rss as f64 - my);
        sxx += (s.step as f64 - mx).powi(2);
    }
    sxy / sxx
}

/// The eager bound: after the first `warmup` steps, resident memory never rises more than
/// `bound` bytes above its value at the end of warm-up, and the loss fell (so the steps
/// trained). Returns the growth seen.
pub fn check_eager(
    samples: &[EagerSample],
    warmup: usize,
    bound: u64,
) -> std::result::Result<u64, String> {
    let base = samples
        .iter()
        .rfind(|s| s.step <= warmup)
        .ok_or_else(|| format!("no sample within the {warmup} warm-up steps"))?;
    let after: Vec<&EagerSample> = samples.iter().filter(|s| s.step > warmup).collect();
    let peak = after
        .iter()
        .map(|s| s.rss)
        .max()
        .ok_or("no sample after warm-up")?;
    let growth = peak.saturating_sub(base.rss);
    if growth > bound {
        return Err(format!(
            "resident memory grew {} KiB after warm-up (step {}: {} KiB, peak {} KiB), above the {} KiB bound",
            growth / 1024,
            base.step,
            base.rss / 1024,
            peak / 1024,
            bound / 1024
        ));
    }
    let (first, last) = (samples[0].loss, samples[samples.len() - 1].loss);
    if last.is_nan() || last >= first {
        return Err(format!(
            "the loss did not fall: {first} at the start, {last} at the end"
        ));
    }
    Ok(growth)
}

/// One kernel-stream sample, after `kernels` distinct kernels.
#[derive(Clone, Copy, Debug)]
pub struct KernelSample {
    pub kernels: usize,
    pub mapped: usize,
    pub live: u64,
    pub rss: u64,
    pub disk: u64,
}

/// The constant of kernel `i`: distinct for every `i` below 2^23 (exact in f32).
fn constant(i: usize) -> f64 {
    0.5 + i as f64
}

/// Realizes `n` distinct kernels (`x * c_i + 1`, a different constant each) in batches of
/// `batch` outputs per `realize_all`, so the device compiles each batch together
/// (`compile_many`), checks every value against the same arithmetic on the host, and samples
/// after every `every` batches (and after the last).
pub fn distinct_kernels(n: usize, batch: usize, every: usize) -> Result<Vec<KernelSample>> {
    let x = [0.25f32, -1.0, 2.0, 7.5];
    let cache = picograd::runtime::cache::default_dir();
    let mut samples = Vec::new();
    let batches = n.div_ceil(batch);
    for b in 0..batches {
        let ids: Vec<usize> = (b * batch..n.min((b + 1) * batch)).collect();
        let t = Tensor::try_from_slice(&x, &[x.len()])?;
        let outs: Vec<Tensor> = ids.iter().map(|&i| t.mul(constant(i)).add(1.0)).collect();
        Tensor::realize_all(&outs.iter().collect::<Vec<_>>())?;
        for (&i, out) in ids.iter().zip(&outs) {
            let want: Vec<f32> = x.iter().map(|v| v * constant(i) as f32 + 1.0).collect();
            let got = out.to_vec::<f32>()?;
            if got != want {
                return Err(picograd::Error::Device(format!(
                    "kernel {i}: got {got:?}, want {want:?}"
                )));
            }
        }
        drop(outs);
        if b % every == 0 || b + 1 == batches {
            samples.push(KernelSample {
                kernels: ids.last().map_or(0, |i| i + 1),
                mapped: sampled(procstat::mapped_kernel_libraries())?,
                live: Compiler::live_libraries(),
                rss: sampled(procstat::rss_bytes())?,
                disk: match &cache {
                    Some(d) => sampled(procstat::folder_bytes(d))?,
                    None => 0,
                },
            });
        }
    }
    Ok(samples)
}

/// The mapping bound: kernel libraries mapped at once never exceed `bound`, and once the stream
/// has gone past the realizer's `capacity` programs (so evictions have begun) by the end of its
/// first half, the last sample maps no more than that half's peak: the count levels off
/// instead of growing with the kernels. Returns the peak.
pub fn check_mappings(
    samples: &[KernelSample],
    capacity: usize,
    bound: usize,
) -> std::result::Result<usize, String> {
    let peak = samples.iter().map(|s| s.mapped).max().ok_or("no samples")?;
    if peak > bound {
        return Err(format!(
            "{peak} kernel libraries were mapped at once, above the bound of {bound}"
        ));
    }
    let half = &samples[..samples.len().div_ceil(2)];
    let early = half.iter().map(|s| s.mapped).max().unwrap_or(0);
    let last = samples[samples.len() - 1];
    let evicting = half.last().is_some_and(|s| s.kernels > capacity);
    if evicting && last.mapped > early {
        return Err(format!(
            "mapped kernel libraries still growing: {} after {} kernels, at most {early} in the first half",
            last.mapped, last.kernels
        ));
    }
    Ok(peak)
}
