//! The device benchmark (not a test): the models of the export issue — sine MLP, digits MLP,
//! digits CNN, MLPerf Tiny's keyword-spotting DS-CNN — exported to C and run under QEMU on each
//! device target. For each it prints flash (model code + weights), RAM (arena + stack
//! high-water mark) and instructions per inference (deterministic: QEMU `-icount`), beside the
//! peers' Cortex-M4 figures from the issue and this machine's previous run (kept in
//! `target/device-bench.txt`), so a codegen change can be judged on device cost.
//!
//! Weights are seeded random values: instruction counts do not depend on them.
//! Run: `./scripts/device-bench.sh` (or `cargo run --release --example device_bench`).

use std::collections::BTreeMap;
use std::path::Path;

use picograd::codegen::opt::OptConfig;
use picograd::export::{export, ExportNames, ExportOptions};
use picograd::jit::Capture;
use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};
use picograd::tensor::{ConvOpts, Padding, PoolOpts};
use picograd::Tensor;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// A benchmark model: input shape, forward pass, and the peers' Cortex-M4 figures
/// (onnx2c, tinygrad export) as (instructions, RAM, flash) and picograd's goals.
struct Model {
    name: &'static str,
    input: Vec<usize>,
    forward: Box<dyn Fn(&Tensor) -> Tensor>,
    peers: &'static str,
}

fn w(shape: &[usize], seed: u64, scale: f64) -> Tensor {
    let t = Tensor::randn(shape, seed).mul(scale);
    t.realize().expect("weights");
    t
}

fn sine_mlp() -> Model {
    let (w1, b1, w2, b2, w3) = (
        w(&[1, 16], 1, 1.0),
        w(&[16], 2, 0.1),
        w(&[16, 16], 3, 0.3),
        w(&[16], 4, 0.1),
        w(&[16, 1], 5, 0.3),
    );
    Model {
        name: "sine MLP 1-16-16-1",
        input: vec![1, 1],
        forward: Box::new(move |x| x.matmul(&w1).add(&b1).relu().matmul(&w2).add(&b2).relu().matmul(&w3)),
        peers: "onnx2c 1,937 instr / 152 B RAM / 1,536 B flash; tinygrad 888 / 128 / 2,217; goal <= 620 instr",
    }
}

fn digits_mlp() -> Model {
    let (w1, b1, w2, b2) = (
        w(&[64, 128], 6, 0.1),
        w(&[128], 7, 0.1),
        w(&[128, 10], 8, 0.1),
        w(&[10], 9, 0.1),
    );
    Model {
        name: "digits MLP 64-128-10",
        input: vec![1, 64],
        forward: Box::new(move |x| x.matmul(&w1).add(&b1).relu().matmul(&w2).add(&b2)),
        peers: "onnx2c 49,519 / 1,044 / 38,624; tinygrad 44,550 / 560 / 38,801; goal <= 31,000 instr, arena <= 512 B",
    }
}

fn digits_cnn() -> Model {
    let (c1, cb1, c2, cb2) = (
        w(&[8, 1, 3, 3], 10, 0.3),
        w(&[8], 11, 0.1),
        w(&[16, 8, 3, 3], 12, 0.1),
        w(&[16], 13, 0.1),
    );
    let (fc, fb) = (w(&[64, 10], 14, 0.1), w(&[10], 15, 0.1));
    Model {
        name: "digits CNN",
        input: vec![1, 1, 8, 8],
        forward: Box::new(move |x| {
            let pad = ConvOpts::default().padding(1);
            let pool = PoolOpts::new(&[2, 2]);
            let x = x.conv2d(&c1, Some(&cb1), &pad).relu().max_pool2d(&pool);
            let x = x.conv2d(&c2, Some(&cb2), &pad).relu().max_pool2d(&pool);
            x.flatten(1, -1).matmul(&fc).add(&fb)
        }),
        peers: "onnx2c 414,602 / 4,176 / 8,576; tinygrad 52,190 / 3,988 / 9,609; goal <= 36,000 instr, arena <= 2,560 B",
    }
}

fn ds_cnn() -> Model {
    // MLPerf Tiny KWS DS-CNN: conv 10x4 stride 2 -> 64, 4 x [depthwise 3x3, pointwise 1x1], BN
    // folded into the weights, ReLU, average pool, linear 64 -> 12, softmax.
    let conv = (w(&[64, 1, 10, 4], 16, 0.1), w(&[64], 17, 0.1));
    let blocks: Vec<_> = (0..4)
        .map(|i| {
            (
                w(&[64, 1, 3, 3], 20 + i, 0.3),
                w(&[64], 30 + i, 0.1),
                w(&[64, 64, 1, 1], 40 + i, 0.1),
                w(&[64], 50 + i, 0.1),
            )
        })
        .collect();
    let (fc, fb) = (w(&[64, 12], 60, 0.1), w(&[12], 61, 0.1));
    Model {
        name: "KWS DS-CNN",
        input: vec![1, 1, 49, 10],
        forward: Box::new(move |x| {
            let first = ConvOpts::default().stride(&[2, 2]).padding(Padding::PerSide(vec![1, 2, 4, 5]));
            let mut x = x.conv2d(&conv.0, Some(&conv.1), &first).relu();
            for (dw, db, pw, pb) in &blocks {
                let depthwise = ConvOpts::default().padding(1).groups(64);
                x = x.conv2d(dw, Some(db), &depthwise).relu();
                x = x.conv2d(pw, Some(pb), &ConvOpts::default()).relu();
            }
            x.mean(&[2, 3], false).matmul(&fc).add(&fb).softmax(-1)
        }),
        peers: "onnx2c 24,988,790 / 64,104 / 92,712; tinygrad 6,799,634 / 96,540 / 98,209; goal <= 4,760,000 instr, arena <= 64,000 B, flash <= 97,000 B",
    }
}

/// Export settings compared for each model.
fn configs() -> Vec<(&'static str, Option<OptConfig>)> {
    vec![
        ("plain", None),
        (
            "tile4",
            Some(OptConfig {
                vec_width: 1,
                max_accs: 4,
                max_unrolled: 16,
                l1_bytes: 0,
                l2_bytes: 0,
                float_registers: 0,
                int_registers: 0,
                dual_mac: false,
                vector_lanes: false,
                vec_registers: 0,
                stack_scratch: 0,
            }),
        ),
        ("tile8", Some(OptConfig::small_device())),
    ]
}

/// One measurement: instructions, flash, arena, stack.
type Figures = (u64, u64, u64, u64);

fn measure(m: &Model, target: &Target, opt: Option<OptConfig>, dir: &Path) -> Res<Figures> {
    let n: usize = m.input.iter().product();
    let xs: Vec<f32> = (0..n).map(|i| ((i * 37 % 19) as f32 - 9.0) / 9.0).collect();
    let x = Tensor::try_from_slice(&xs, &m.input)?;
    x.realize()?;
    let y = (m.forward)(&x);
    let (cap, _) = Capture::record(&[&x], &[&y])?;
    // Fused multiply-adds where the target's FPU has them (`fma = yes`).
    let opts = ExportOptions {
        opt,
        ..target.export_options()
    };
    let bundle = export(&cap, &ExportNames::new(&["x"], &["y"]), &opts)?;
    picograd::runtime::export::write_bundle(&bundle, dir)?;
    let r = build_and_run(
        target,
        dir,
        &[("x", Values::f32(&xs))],
        &BuildOptions::default(),
    )?;
    Ok((
        r.instructions.unwrap_or(0),
        r.model_text + r.model_data,
        bundle.arena_bytes as u64,
        r.stack_bytes.unwrap_or(0),
    ))
}

fn previous() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string("target/device-bench.txt").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            l.rsplit_once('\t')
                .and_then(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        })
        .collect()
}

fn delta(prev: &BTreeMap<String, u64>, key: &str, now: u64) -> String {
    match prev.get(key) {
        Some(&p) if p != now => format!(" (was {p})"),
        _ => String::new(),
    }
}

fn main() -> Res<()> {
    picograd::init();
    let prev = previous();
    let mut now = Vec::new();
    // Bundles go into a fresh private folder (random name), removed when `tmp` drops.
    let tmp = picograd::runtime::private_fs::private_temp_dir("picograd-device-bench-")?;
    let dir = tmp.path().join("bundle");
    for m in [sine_mlp(), digits_mlp(), digits_cnn(), ds_cnn()] {
        println!("\n== {}   (Cortex-M4 peers: {})", m.name, m.peers);
        println!(
            "   {:<14} {:<6} {:>12} {:>9} {:>9} {:>7}",
            "target", "opts", "instructions", "flash B", "arena B", "stack B"
        );
        for target in ["cortex-m4", "cortex-m3", "riscv32imafc", "riscv32imac"] {
            let t = Target::by_name(target)?;
            for (cname, cfg) in configs() {
                let (ins, flash, arena, stack) = match measure(&m, &t, cfg, &dir) {
                    Ok(f) => f,
                    // A model too big for a small part (the Cortex-M3 board has 64 KiB of RAM)
                    // is a finding, not a failure of the benchmark.
                    Err(e) if e.to_string().contains("overflowed") => {
                        println!("   {target:<14} {cname:<6} does not fit in the target's memory");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let key = format!("{}|{target}|{cname}", m.name);
                println!(
                    "   {target:<14} {cname:<6} {ins:>12}{} {flash:>9}{} {arena:>9} {stack:>7}",
                    delta(&prev, &format!("{key}|instructions"), ins),
                    delta(&prev, &format!("{key}|flash"), flash)
                );
                now.push(format!("{key}|instructions\t{ins}"));
                now.push(format!("{key}|flash\t{flash}"));
            }
        }
    }
    std::fs::create_dir_all("target")?;
    std::fs::write("target/device-bench.txt", now.join("\n") + "\n")?;
    println!("\n(gcc -O2 -ffp-contract=off, fused multiply-add on cortex-m4/riscv32imafc, freestanding math, weights const in flash, I/O in caller memory;");
    println!(" Cortex-M instruction counts are SysTick-derived, in steps of 40; RISC-V counts are exact.)");
    Ok(())
}
