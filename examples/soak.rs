//! Soak run: (a) eager Adam training of the digits MLP for `--steps` steps (default 10,000),
//! resident memory sampled along the way; (b) `--kernels` distinct kernels (default 20,000) in
//! one process on the default device, compiled `--batch` at a time, with the kernel libraries
//! mapped, live libraries, resident memory and the disk cache sampled. Prints first, last and
//! peak of each and the time taken; exits 1 when eager memory grows more than `--rss-bound-mb`
//! after warm-up (the first tenth of the steps) or mapped libraries exceed the realizer's
//! program capacity (plus slack) or keep growing once it evicts. `scripts/soak.sh` runs it in
//! release mode with a fresh kernel cache; `tests/soak_*.rs` run the same loops at CI size.
//!
//! Run: `cargo run --release --example soak -- [--steps N] [--kernels N] [--batch N]
//! [--capacity N] [--rss-bound-mb N]` (0 skips a part).

#[path = "common/digits.rs"]
mod digits;
#[path = "common/procstat.rs"]
mod procstat;
#[path = "common/soak.rs"]
mod soak;
#[allow(dead_code)]
#[path = "common/train.rs"]
mod train;

use std::time::Instant;

/// The command line, each a count.
struct Args {
    steps: usize,
    kernels: usize,
    batch: usize,
    capacity: usize,
    rss_bound_mb: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        steps: 10_000,
        kernels: 20_000,
        batch: 200,
        capacity: picograd::realize::DEFAULT_CACHE_CAPACITY,
        rss_bound_mb: 8,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a number"))?;
        let n: usize = value
            .parse()
            .map_err(|_| format!("{flag} {value:?}: not a count"))?;
        match flag.as_str() {
            "--steps" => a.steps = n,
            "--kernels" => a.kernels = n,
            "--batch" => a.batch = n.max(1),
            "--capacity" => a.capacity = n.max(1),
            "--rss-bound-mb" => a.rss_bound_mb = n as u64,
            _ => {
                return Err(format!(
                    "unknown option {flag} (--steps --kernels --batch --capacity --rss-bound-mb)"
                ))
            }
        }
    }
    Ok(a)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Part (a); the error says which bound broke.
fn eager(a: &Args) -> Result<(), String> {
    let data = digits::load()?;
    let (train_set, _) = digits::split(&data);
    let every = (a.steps / 100).max(1);
    let t = Instant::now();
    let samples = soak::eager_training(&train_set, a.steps, every).map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    let warmup = (a.steps / 10).max(1);
    let after: Vec<soak::EagerSample> = samples
        .iter()
        .copied()
        .filter(|s| s.step > warmup)
        .collect();
    let (first, last) = (samples[0], samples[samples.len() - 1]);
    let peak = samples.iter().map(|s| s.rss).max().unwrap_or(0);
    println!(
        "eager: {} steps in {secs:.1} s ({:.0} steps/s); loss {:.4} -> {:.4}",
        a.steps,
        a.steps as f64 / secs,
        first.loss,
        last.loss
    );
    println!(
        "eager: RSS first {:.1} MiB, last {:.1} MiB, peak {:.1} MiB; slope after warm-up ({warmup} steps) {:.1} bytes/step",
        mib(first.rss),
        mib(last.rss),
        mib(peak),
        soak::rss_slope(&after)
    );
    let growth = soak::check_eager(&samples, warmup, a.rss_bound_mb << 20)?;
    println!(
        "eager: ok, grew {:.2} MiB after warm-up (bound {} MiB)",
        mib(growth),
        a.rss_bound_mb
    );
    Ok(())
}

/// Part (b); the error says which bound broke.
fn kernels(a: &Args) -> Result<(), String> {
    picograd::realize::set_cache_capacity(a.capacity);
    let batches = a.kernels.div_ceil(a.batch);
    let every = (batches / 50).max(1);
    let t = Instant::now();
    let samples = soak::distinct_kernels(a.kernels, a.batch, every).map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "kernels: {} distinct kernels in {secs:.1} s ({:.1} kernels/s, {} per realize)",
        a.kernels,
        a.kernels as f64 / secs,
        a.batch
    );
    println!("kernels:  after  mapped .so  live libs  RSS MiB  disk cache MiB");
    for s in &samples {
        println!(
            "kernels: {:>6}  {:>10}  {:>9}  {:>7.1}  {:>14.1}",
            s.kernels,
            s.mapped,
            s.live,
            mib(s.rss),
            mib(s.disk)
        );
    }
    let bound = a.capacity + 8;
    let peak = soak::check_mappings(&samples, a.capacity, bound)?;
    println!(
        "kernels: ok, at most {peak} kernel libraries mapped at once (bound {bound}: capacity {} + 8)",
        a.capacity
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    picograd::init();
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let mut failed = false;
    for (run, part, n) in [
        (eager as fn(&Args) -> Result<(), String>, "eager", a.steps),
        (kernels, "kernels", a.kernels),
    ] {
        if n == 0 {
            continue;
        }
        if let Err(e) = run(&a) {
            eprintln!("soak: {part}: FAILED: {e}");
            failed = true;
        }
    }
    if failed {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
