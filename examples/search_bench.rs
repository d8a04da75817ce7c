//! What the measured search (`PICOGRAD_SEARCH`) buys: the bench's matmul, conv, elementwise and
//! MLP workloads run on two Clang devices in one process — one with hand-coded kernels, one
//! with searched kernels — timed alternately (best of several runs each), so load on the machine
//! hits both alike. Prints a table of both figures and their ratio, and what the search cost.
//!
//! Run: `cargo run --release --example search_bench` (the bound per kernel is
//! `PICOGRAD_SEARCH`'s, else the default; choices are cached in `$PICOGRAD_CACHE/search`, so a
//! second run reuses them without searching).

use std::sync::Arc;
use std::time::Instant;

use picograd::device::Device;
use picograd::jit::Jit;
use picograd::runtime::search::Search;
use picograd::runtime::tuning::{search_budget, thread_count, DEFAULT_SEARCH_BUDGET};
use picograd::runtime::Clang;
use picograd::{ConvOpts, Padding, Result, Tensor};

type Work = Box<dyn Fn() -> Result<()>>;

/// One workload: its name, how to turn a time into its figure, and how to build it on a device.
struct Case {
    name: &'static str,
    unit: &'static str,
    /// Figure from seconds per run (larger is better unless `lower_is_better`).
    figure: fn(f64) -> f64,
    lower_is_better: bool,
    runs: usize,
    build: fn(&Arc<dyn Device>) -> Result<Work>,
}

fn on(d: &Arc<dyn Device>, shape: &[usize], seed: u64) -> Result<Tensor> {
    let t = Tensor::rand(shape, seed).to_device(d);
    t.realize()?;
    Ok(t)
}

fn matmul(d: &Arc<dyn Device>) -> Result<Work> {
    let (a, b) = (on(d, &[1024, 1024], 1)?, on(d, &[1024, 1024], 2)?);
    Ok(Box::new(move || a.matmul(&b).realize().map(|_| ())))
}

fn conv(d: &Arc<dyn Device>) -> Result<Work> {
    let (x, w) = (on(d, &[16, 64, 56, 56], 4)?, on(d, &[64, 64, 3, 3], 5)?);
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    Ok(Box::new(move || {
        x.conv2d(&w, None, &opts).realize().map(|_| ())
    }))
}

fn elementwise(d: &Arc<dyn Device>) -> Result<Work> {
    let x = on(d, &[1 << 24], 6)?;
    Ok(Box::new(move || {
        x.mul(2.0)
            .add(1.0)
            .relu()
            .mul(x.sigmoid())
            .realize()
            .map(|_| ())
    }))
}

/// 784-512-512-10 with ReLUs on a batch of `n`, replayed by the JIT as the bench does (so the
/// figure is the kernels', not scheduling's).
fn mlp(d: &Arc<dyn Device>, n: usize) -> Result<Work> {
    let x = on(d, &[n, 784], 7)?;
    let mut layers = Vec::new();
    for (i, (fi, fo)) in [(784, 512), (512, 512), (512, 10)].into_iter().enumerate() {
        let w = on(d, &[fi, fo], 10 + i as u64)?.sub(0.5).mul(0.1);
        let b = on(d, &[fo], 20 + i as u64)?;
        w.realize()?;
        layers.push((w, b));
    }
    let f = Jit::new(move |io: &[Tensor]| {
        let mut h = io[0].clone();
        for (i, (w, b)) in layers.iter().enumerate() {
            h = h.matmul(w).add(b);
            if i + 1 < layers.len() {
                h = h.relu();
            }
        }
        Ok(vec![h])
    });
    Ok(Box::new(move || {
        let y = f.call(std::slice::from_ref(&x))?;
        y[0].to_vec::<f32>().map(|_| ())
    }))
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "matmul 1024²",
            unit: "GFLOP/s",
            figure: |s| 2.0 * 1024f64.powi(3) / 1e9 / s,
            lower_is_better: false,
            runs: 8,
            build: matmul,
        },
        Case {
            name: "conv 3×3 64→64 56² b16",
            unit: "GFLOP/s",
            figure: |s| 2.0 * 16.0 * 64.0 * 56.0 * 56.0 * 64.0 * 9.0 / 1e9 / s,
            lower_is_better: false,
            runs: 3,
            build: conv,
        },
        Case {
            name: "relu(2x+1)·sigmoid(x), 16M f32",
            unit: "GB/s",
            figure: |s| 2.0 * (4 << 24) as f64 / 1e9 / s,
            lower_is_better: false,
            runs: 5,
            build: elementwise,
        },
        Case {
            name: "MLP 784-512-512-10, batch 1 (JIT)",
            unit: "µs",
            figure: |s| s * 1e6,
            lower_is_better: true,
            runs: 200,
            build: |d| mlp(d, 1),
        },
        Case {
            name: "MLP 784-512-512-10, batch 128 (JIT)",
            unit: "samples/s",
            figure: |s| 128.0 / s,
            lower_is_better: false,
            runs: 20,
            build: |d| mlp(d, 128),
        },
    ]
}

fn secs(f: &Work) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64())
}

/// (hand-coded seconds, searched seconds, seconds the searched warm-up took): best of
/// `runs` alternating runs each.
fn compare(
    c: &Case,
    hand: &Arc<dyn Device>,
    searched: &Arc<dyn Device>,
) -> Result<(f64, f64, f64)> {
    let (h, s) = ((c.build)(hand)?, (c.build)(searched)?);
    h()?;
    let warm = secs(&s)?;
    let (mut bh, mut bs) = (f64::MAX, f64::MAX);
    for _ in 0..c.runs {
        bh = bh.min(secs(&h)?);
        bs = bs.min(secs(&s)?);
    }
    Ok((bh, bs, warm))
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    picograd::init();
    let budget = search_budget().unwrap_or(DEFAULT_SEARCH_BUDGET);
    let hand: Arc<dyn Device> = Arc::new(Clang::new()?.with_search(None));
    let search = Arc::new(Clang::new()?.with_search(Some(Search::new(budget))));
    let searched: Arc<dyn Device> = search.clone();
    eprintln!(
        "search bench: {} threads, search bound {} ms per kernel",
        thread_count(),
        budget.as_millis()
    );
    println!("\n| workload | hand-coded | searched | searched / hand-coded (higher is better) | first searched run |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for c in cases() {
        let (h, s, warm) = compare(&c, &hand, &searched)?;
        let (fh, fs) = ((c.figure)(h), (c.figure)(s));
        let ratio = if c.lower_is_better { fh / fs } else { fs / fh };
        println!(
            "| {} | {fh:.3} {u} | {fs:.3} {u} | {ratio:.2}× | {warm:.2} s |",
            c.name,
            u = c.unit
        );
    }
    if let Some(s) = search.search() {
        eprintln!("search stats: {:?}", s.stats());
    }
    Ok(())
}
