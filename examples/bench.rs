//! picograd's benchmark: matmul, conv, an elementwise chain, MLP inference and training, and
//! cold start — each timed here (best of several runs) and, when `.venv/bin/python` has them,
//! against numpy/OpenBLAS, onnxruntime and tinygrad running the same work in a Python child
//! process (`scripts/bench_peers.py`, which prints JSON). Prints one table with the ratios
//! against the goals.
//!
//! Run: `scripts/bench.sh` (sets up the peers), or `cargo run --release --example bench`.
//! The 1-thread matmul, the 1-thread elementwise chain and the cold start run in child
//! processes of this example (`PICOGRAD_THREADS=1`; a fresh kernel cache). With `PICOGRAD_SEARCH=1` every row but the cold
//! start runs searched kernels: a kernel's first (untimed warm-up) run searches, or reuses a
//! choice cached by an earlier run; the cold start never searches.

#[path = "common/digits.rs"]
#[allow(dead_code)]
mod digits;

use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

use picograd::jit::Jit;
use picograd::nn::losses::cross_entropy;
use picograd::nn::optim::AdamConfig;
use picograd::nn::{Adam, Linear, Module, Optimizer};
use picograd::{ConvOpts, Padding, Result, Tensor};

type Peers = HashMap<String, f64>;

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // The cold child times its own setup too (`picograd::init`), as the peer's time includes
    // `import tinygrad`.
    if std::env::args().nth(1).as_deref() == Some("--cold") {
        return child_cold();
    }
    picograd::init();
    match std::env::args().nth(1).as_deref() {
        Some("--matmul") => return child_matmul(),
        Some("--elementwise") => return child_elementwise(),
        _ => {}
    }
    let threads = picograd::runtime::tuning::thread_count();
    eprintln!("picograd bench: {threads} threads; timing (best of several runs)...");
    let peers = run_peers(threads);
    let cold_peer = run_python(&["1", "cold"]);
    let mut rows = vec![
        matmul_row(1, child_time("--matmul")?, &run_python(&["1"])),
        matmul_row(threads, best(3, matmul_once)?, &peers),
        big_matmul_row(threads, &peers)?,
        conv_row(threads, &peers)?,
    ];
    rows.extend(elementwise_rows(&peers)?);
    rows.extend(mlp_rows(&peers)?);
    rows.push(train_row(&peers)?);
    rows.push(cold_row(child_time("--cold")?, &cold_peer));
    print_table(&rows);
    Ok(())
}

// ---- timing helpers ----

/// The best time in seconds of `n` runs (after one warm-up).
fn best(n: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut t = f64::MAX;
    for _ in 0..n {
        let s = Instant::now();
        f()?;
        t = t.min(s.elapsed().as_secs_f64());
    }
    Ok(t)
}

/// Runs this example again with `arg`; it prints its time in seconds on the last line.
fn child_time(arg: &str) -> std::result::Result<f64, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe()?;
    // An empty cache of our own for a cold start (a fresh private folder), removed on return.
    let cold = picograd::runtime::private_fs::private_temp_dir("picograd-cold-")?;
    let mut cmd = Command::new(exe);
    cmd.arg(arg);
    if arg == "--matmul" || arg == "--elementwise" {
        cmd.env("PICOGRAD_THREADS", "1");
    } else {
        cmd.env("PICOGRAD_CACHE", cold.path().join("cache"));
        // Cold start measures compiling, not searching (an empty cache would search everything).
        cmd.env_remove("PICOGRAD_SEARCH");
    }
    let out = cmd.output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("").trim().to_string();
    last.parse()
        .map_err(|_| format!("child {arg} printed {text:?}").into())
}

/// Runs the Python peers with `args`; an empty map when Python or the packages are missing.
fn run_python(args: &[&str]) -> Peers {
    let py = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench_peers.py");
    let Ok(out) = Command::new(py).arg(script).args(args).output() else {
        eprintln!("  (no .venv/bin/python: peers skipped; run scripts/bench.sh)");
        return Peers::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    parse_flat_json(text.lines().last().unwrap_or(""))
}

fn run_peers(threads: usize) -> Peers {
    run_python(&[&threads.to_string()])
}

/// The numeric fields of a flat JSON object (the peers print nothing nested).
fn parse_flat_json(s: &str) -> Peers {
    let body = s.trim().trim_start_matches('{').trim_end_matches('}');
    body.split(", \"")
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            let v: f64 = v.trim().parse().ok()?;
            Some((k.trim().trim_matches('"').to_string(), v))
        })
        .collect()
}

// ---- workloads ----

fn rand(shape: &[usize], seed: u64) -> Result<Tensor> {
    let t = Tensor::rand(shape, seed);
    t.realize()?;
    Ok(t)
}

fn matmul_once() -> Result<()> {
    thread_local! {
        static AB: (Tensor, Tensor) = (rand(&[1024, 1024], 1).unwrap(), rand(&[1024, 1024], 2).unwrap());
    }
    AB.with(|(a, b)| a.matmul(b).realize().map(|_| ()))
}

fn child_matmul() -> std::result::Result<(), Box<dyn std::error::Error>> {
    println!("{}", best(3, matmul_once)?);
    Ok(())
}

/// The elementwise chain relu(2x+1)·sigmoid(x) on 16M f32.
fn chain(x: &Tensor) -> Tensor {
    x.mul(2.0).add(1.0).relu().mul(x.sigmoid())
}

fn child_elementwise() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let x = rand(&[1 << 24], 6)?;
    println!("{}", best(3, || chain(&x).realize().map(|_| ()))?);
    Ok(())
}

/// 784-512-512-10 with ReLUs; weights `[in, out]`.
struct Mlp {
    layers: Vec<(Tensor, Tensor)>,
}

impl Mlp {
    fn new() -> Result<Mlp> {
        let mut layers = Vec::new();
        for (i, (fi, fo)) in [(784, 512), (512, 512), (512, 10)].into_iter().enumerate() {
            let w = Tensor::rand(&[fi, fo], 10 + i as u64).sub(0.5).mul(0.1);
            let b = Tensor::zeros(&[fo], picograd::DType::F32);
            w.realize()?;
            b.realize()?;
            layers.push((w, b));
        }
        Ok(Mlp { layers })
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = x.clone();
        for (i, (w, b)) in self.layers.iter().enumerate() {
            h = h.matmul(w).add(b);
            if i + 1 < self.layers.len() {
                h = h.relu();
            }
        }
        h
    }
}

fn child_cold() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // The same program as the tinygrad peer's `tiny_mlp_cold` (scripts/bench_peers.py): random
    // input and weights, three matmuls with ReLU between, one read of the result — timed from
    // before the library is set up.
    let t = Instant::now();
    picograd::init();
    let mut h = Tensor::rand(&[1, 784], 1);
    for (i, (fi, fo)) in [(784, 512), (512, 512), (512, 10)].into_iter().enumerate() {
        h = h.matmul(&Tensor::rand(&[fi, fo], 2 + i as u64));
        if i < 2 {
            h = h.relu();
        }
    }
    let y = h.to_vec::<f32>()?;
    assert_eq!(y.len(), 10);
    println!("{}", t.elapsed().as_secs_f64());
    Ok(())
}

// ---- rows ----

/// One table row: what, picograd's figure, and each peer's figure with the goal.
struct Row {
    name: String,
    unit: &'static str,
    ours: f64,
    /// (peer, peer's figure, ratio ours/peer oriented so larger is better, goal for the ratio)
    peers: Vec<(&'static str, f64, f64, f64)>,
}

fn throughput_peer(
    p: &Peers,
    key: &str,
    work: f64,
    goal: f64,
    name: &'static str,
    ours: f64,
) -> Option<(&'static str, f64, f64, f64)> {
    p.get(key).map(|s| {
        let theirs = work / s;
        (name, theirs, ours / theirs, goal)
    })
}

fn matmul_row(threads: usize, secs: f64, peers: &Peers) -> Row {
    let gflop = 2.0 * 1024f64.powi(3) / 1e9;
    let ours = gflop / secs;
    let mut p: Vec<_> = [
        throughput_peer(peers, "numpy_matmul_s", gflop, 0.7, "numpy", ours),
        throughput_peer(peers, "tiny_matmul_s", gflop, 20.0, "tinygrad", ours),
    ]
    .into_iter()
    .flatten()
    .collect();
    p.sort_by(|a, b| a.0.cmp(b.0));
    Row {
        name: format!("matmul 1024², {threads} thread(s)"),
        unit: "GFLOP/s",
        ours,
        peers: p,
    }
}

/// A GFLOP/s row: `gflop` of work timed by `run` (best of 3), against one peer's time `key`.
fn gflops_row(
    name: String,
    gflop: f64,
    run: impl Fn() -> Result<()>,
    peer: (&Peers, &str, &'static str, f64),
) -> Result<Row> {
    let ours = gflop / best(3, run)?;
    let (peers, key, who, goal) = peer;
    Ok(Row {
        name,
        unit: "GFLOP/s",
        ours,
        peers: throughput_peer(peers, key, gflop, goal, who, ours)
            .into_iter()
            .collect(),
    })
}

/// Information row: a 2048² product, which goes through cache-blocked panels of `b`.
fn big_matmul_row(threads: usize, peers: &Peers) -> Result<Row> {
    let (a, b) = (rand(&[2048, 2048], 11)?, rand(&[2048, 2048], 12)?);
    gflops_row(
        format!("matmul 2048² (panels), {threads} thr"),
        2.0 * 2048f64.powi(3) / 1e9,
        || a.matmul(&b).realize().map(|_| ()),
        (peers, "numpy_matmul2048_s", "numpy", 0.0),
    )
}

fn conv_row(threads: usize, peers: &Peers) -> Result<Row> {
    let x = rand(&[16, 64, 56, 56], 4)?;
    let w = rand(&[64, 64, 3, 3], 5)?;
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    gflops_row(
        format!("conv 3×3 64→64 56² b16, {threads} thr"),
        2.0 * 16.0 * 64.0 * 56.0 * 56.0 * 64.0 * 9.0 / 1e9,
        || x.conv2d(&w, None, &opts).realize().map(|_| ()),
        (peers, "ort_conv_s", "onnxruntime", 0.7),
    )
}

/// Memory bandwidth as this process sees it: a 64 MB copy (read + write), best of 5.
fn copy_bandwidth() -> f64 {
    let src = vec![1.0f32; 1 << 24];
    let mut dst = vec![0.0f32; 1 << 24];
    let mut t = f64::MAX;
    for _ in 0..6 {
        let s = Instant::now();
        dst.copy_from_slice(&src);
        t = t.min(s.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    2.0 * (4 << 24) as f64 / t / 1e9
}

fn elementwise_rows(peers: &Peers) -> Result<Vec<Row>> {
    let x = rand(&[1 << 24], 6)?;
    let gb = 2.0 * (4 << 24) as f64 / 1e9;
    let time = |f: &dyn Fn() -> Tensor| best(3, || f().realize().map(|_| ()));
    // The goal row runs on one thread, like the peers and the copy it is compared with.
    let one = child_time("--elementwise").map_err(|e| picograd::Error::Device(e.to_string()))?;
    let ours = gb / one;
    let bw = copy_bandwidth().max(peers.get("numpy_copy_s").map_or(0.0, |s| gb / s));
    let mut p = vec![("copy bandwidth", bw, ours / bw, 0.5)];
    p.extend(throughput_peer(
        peers,
        "numpy_elementwise_s",
        gb,
        0.0,
        "numpy",
        ours,
    ));
    let all = gb / time(&|| chain(&x))?;
    let mut rows = vec![
        Row {
            name: "relu(2x+1)·sigmoid(x), 16M f32, 1 thr".into(),
            unit: "GB/s",
            ours,
            peers: p,
        },
        Row {
            name: "relu(2x+1)·sigmoid(x), 16M f32, all thr".into(),
            unit: "GB/s",
            ours: all,
            peers: vec![("copy bandwidth", bw, all / bw, 0.0)],
        },
    ];
    // The other transcendentals, for information: log2- and sin-based chains.
    let log_secs = time(&|| x.abs().add(1.0).log().mul(&x))?;
    let sin_secs = time(&|| x.sin().mul(&x))?;
    for (name, secs) in [("log(1+|x|)·x", log_secs), ("sin(x)·x", sin_secs)] {
        rows.push(Row {
            name: format!("{name}, 16M f32"),
            unit: "GB/s",
            ours: gb / secs,
            peers: vec![("copy bandwidth", bw, gb / secs / bw, 0.0)],
        });
    }
    Ok(rows)
}

fn mlp_rows(peers: &Peers) -> Result<Vec<Row>> {
    let mlp = Mlp::new()?;
    let mut rows = Vec::new();
    for batch in [1usize, 128] {
        let x = rand(&[batch, 784], 7)?;
        let f = Jit::new(|io: &[Tensor]| Ok(vec![mlp.forward(&io[0])]));
        let n = if batch == 1 { 200 } else { 20 };
        let secs = best(n, || {
            let y = f.call(std::slice::from_ref(&x))?;
            y[0].to_vec::<f32>().map(|_| ())
        })?;
        let key = format!("ort_mlp{batch}_s");
        let row = if batch == 1 {
            Row {
                name: "MLP 784-512-512-10, batch 1".into(),
                unit: "µs",
                ours: secs * 1e6,
                peers: peers
                    .get(&key)
                    .map(|s| ("onnxruntime", s * 1e6, s / secs, 1.0))
                    .into_iter()
                    .collect(),
            }
        } else {
            let ours = batch as f64 / secs;
            Row {
                name: "MLP 784-512-512-10, batch 128".into(),
                unit: "samples/s",
                ours,
                peers: throughput_peer(peers, &key, batch as f64, 0.8, "onnxruntime", ours)
                    .into_iter()
                    .collect(),
            }
        };
        rows.push(row);
    }
    Ok(rows)
}

/// 64 → 128 → 10 on the digits, Adam, batch 32: the train_digits example's MLP step.
struct DigitsMlp {
    l1: Linear,
    l2: Linear,
}

fn train_row(peers: &Peers) -> Result<Row> {
    let data = digits::load().map_err(picograd::Error::Device)?;
    let m = DigitsMlp {
        l1: Linear::new(64, 128, true, 1),
        l2: Linear::new(128, 10, true, 2),
    };
    let mut params: Vec<Tensor> = m.l1.parameters().into_iter().map(|(_, t)| t).collect();
    params.extend(m.l2.parameters().into_iter().map(|(_, t)| t));
    // The step owns the optimizer: a JIT function is `FnMut` and returns `Result`.
    let mut opt = Adam::new(params, AdamConfig::adam(1e-3))?;
    let step = Jit::new(move |io: &[Tensor]| {
        opt.zero_grad();
        let logits = m.l2.try_forward(&m.l1.try_forward(&io[0])?.relu())?;
        let loss = cross_entropy(&logits, &io[1])?;
        loss.backward()?;
        let mut outs = vec![loss.clone()];
        outs.extend(opt.schedule_step(&[&loss])?);
        Ok(outs)
    });
    let batches: Vec<(Tensor, Tensor)> = (0..4)
        .map(|b| {
            let d = data.slice(b * 32, (b + 1) * 32);
            let y: Vec<i32> = d.labels.iter().map(|&l| i32::from(l)).collect();
            (
                Tensor::from_slice(&d.images, &[32, 64]),
                Tensor::from_slice(&y, &[32]),
            )
        })
        .collect();
    let mut i = 0;
    let mut one = || -> Result<()> {
        let (x, y) = &batches[i % 4];
        i += 1;
        step.call(&[x.clone(), y.clone()])?[0]
            .item::<f32>()
            .map(|_| ())
    };
    for _ in 0..5 {
        one()?;
    }
    let n = 200;
    let t = Instant::now();
    for _ in 0..n {
        one()?;
    }
    let ours = n as f64 / t.elapsed().as_secs_f64();
    Ok(Row {
        name: "train digits MLP 64-128-10, b32".into(),
        unit: "steps/s",
        ours,
        peers: peers
            .get("tiny_train_steps_per_s")
            .map(|s| ("tinygrad", *s, ours / s, 10.0))
            .into_iter()
            .collect(),
    })
}

fn cold_row(secs: f64, peers: &Peers) -> Row {
    Row {
        name: "cold start: MLP b1 first result".into(),
        unit: "s",
        ours: secs,
        peers: peers
            .get("tiny_cold_s")
            .map(|s| ("tinygrad", *s, s / secs, 4.0))
            .into_iter()
            .collect(),
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "\n| workload | picograd | peer | peer figure | ratio (higher is better) | goal | met |"
    );
    println!("| --- | ---: | --- | ---: | ---: | ---: | --- |");
    for r in rows {
        let ours = format!("{:.3} {}", r.ours, r.unit);
        if r.peers.is_empty() {
            println!("| {} | {ours} | – | – | – | – | – |", r.name);
        }
        for (peer, fig, ratio, goal) in &r.peers {
            let met = if *goal == 0.0 {
                "(info)"
            } else if ratio >= goal {
                "yes"
            } else {
                "no"
            };
            let unit = if *peer == "copy bandwidth" {
                "GB/s"
            } else {
                r.unit
            };
            println!(
                "| {} | {ours} | {peer} | {fig:.3} {unit} | {ratio:.2}× | {} | {met} |",
                r.name,
                if *goal == 0.0 {
                    String::from("–")
                } else {
                    format!("≥ {goal}×")
                }
            );
        }
    }
}
