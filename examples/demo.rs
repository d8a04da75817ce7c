//! picograd's main job, end to end:
//!
//! 1. the compiler at work: symbolic index algebra and a ShapeTracker;
//! 2. train a digits classifier (MLP 64-128-10, Adam, JIT-captured steps) on the desktop;
//! 3. export it to standalone C (static memory plan, weights in flash, no malloc, no libm);
//! 4. build it for a Cortex-M4, run it under QEMU on all 360 test images, and check that the
//!    device agrees with the desktop — with the device's flash, RAM and instruction figures.
//!
//! Run: `./scripts/demo.sh` (or `cargo run --release --example demo` when the toolchains are
//! installed). `PICOGRAD_DEBUG=4` shows every kernel's C as it is compiled.

#[path = "common/digits.rs"]
mod digits;
// The demo uses the MLP half of the shared training module.
#[allow(dead_code)]
#[path = "common/train.rs"]
mod train;

use std::path::Path;

use picograd::export::{export, ExportNames};
use picograd::jit::Capture;
use picograd::nn::optim::AdamConfig;
use picograd::nn::Module;
use picograd::runtime::target::{build_and_run, BuildOptions, RunReport, Target, Values};
use picograd::shape::{sints, ShapeTracker};
use picograd::symbolic::Node;
use picograd::Tensor;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    picograd::init();
    compiler_at_work()?;
    let data = digits::load()?;
    let (train_set, test_set) = digits::split(&data);

    println!(
        "\n== 2. Train a digits classifier on the desktop ({})",
        picograd::context::default_device().name()
    );
    let mlp = train::Mlp::new(&train_set, 1)?;
    let plan = train::Plan {
        epochs: 15,
        adam: AdamConfig::adam(0.01),
    };
    let speed = train::train(&mlp, &train_set, &plan)?;
    let host_logits = forward(&mlp, &test_set)?;
    let host_acc = accuracy(&host_logits, &test_set.labels);
    println!(
        "   desktop: {:.2}% of the 360 test images right ({speed:.0} training steps/s)",
        host_acc * 100.0
    );

    println!("\n== 3. Export to C and run on an emulated Cortex-M4 (QEMU mps2-an386)");
    let target = Target::by_name("cortex-m4")?;
    let all = export_and_run(
        &mlp,
        &test_set.images,
        test_set.len(),
        "out/digits_mlp_360",
        &target,
    )?;
    let dev_logits = all
        .output("logits")
        .and_then(Values::to_f32)
        .ok_or("no logits from the device")?;
    let dev_acc = accuracy(&dev_logits, &test_set.labels);
    let agree = argmaxes(&dev_logits)
        .iter()
        .zip(argmaxes(&host_logits))
        .filter(|(a, b)| **a == *b)
        .count();
    let max_diff = dev_logits
        .iter()
        .zip(&host_logits)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "   device:  {:.2}% right; predictions agree with the desktop on {agree}/360 images",
        dev_acc * 100.0
    );
    println!("            largest logit difference device vs desktop: {max_diff:.2e}");

    let one = export_and_run(&mlp, &test_set.images[..64], 1, "out/digits_mlp", &target)?;
    println!("   one inference on the Cortex-M4 (bundle in out/digits_mlp/):");
    println!(
        "     instructions  {}",
        one.instructions.map_or("-".into(), |n| n.to_string())
    );
    println!(
        "     flash         {} bytes of model code and weights",
        one.model_text + one.model_data
    );
    println!(
        "     RAM           {} bytes of arena + static, {} bytes of stack",
        one.model_data + one.model_bss,
        one.stack_bytes.unwrap_or(0)
    );
    if agree != test_set.len() {
        return Err(format!(
            "the device disagrees with the desktop on {} images",
            test_set.len() - agree
        )
        .into());
    }
    Ok(())
}

fn compiler_at_work() -> Res<()> {
    println!("== 1. The compiler at work");
    let (a, b) = (Node::var("a", 0, 10), Node::var("b", 0, 19));
    let e = (&a * 40 + &b).floordiv(20);
    println!(
        "   symbolic: (a*40+b)//20 with a in [0,10], b in [0,19]  ->  {e}, bounds [{}, {}]",
        e.vmin(),
        e.vmax()
    );
    let st = ShapeTracker::from_shape(&sints(&[3, 4]))
        .permute(&[1, 0])?
        .reshape(&sints(&[12]))?;
    let (idx, _) = st.expr_idxs(&[Node::var("i", 0, 11)]);
    println!("   ShapeTracker: a 3x4 transposed then flattened reads buffer index {idx} ({} views, no copy)", st.views().len());
    Ok(())
}

/// The model's logits for every image of `d`, on the desktop.
fn forward(model: &dyn Module, d: &digits::Digits) -> Res<Vec<f32>> {
    let x = Tensor::try_from_slice(&d.images, &[d.len(), 64])?;
    Ok(picograd::no_grad(|| model.try_forward(&x))?.to_vec::<f32>()?)
}

/// Captures the model on `n` images, exports it to `dir`, and runs it on the target.
fn export_and_run(
    model: &dyn Module,
    images: &[f32],
    n: usize,
    dir: &str,
    target: &Target,
) -> Res<RunReport> {
    let x = Tensor::try_from_slice(images, &[n, 64])?;
    x.realize()?;
    let logits = picograd::no_grad(|| model.try_forward(&x))?;
    let (capture, _) = Capture::record(&[&x], &[&logits])?;
    let bundle = export(
        &capture,
        &ExportNames::new(&["image"], &["logits"]),
        &target.export_options(),
    )?;
    picograd::runtime::export::write_bundle(&bundle, Path::new(dir))?;
    // Cross-building and the QEMU run show as stages (a spinner on a terminal; plain lines
    // with PICOGRAD_DEBUG=1).
    let progress = picograd_cli::progress::BuildProgress::default();
    let opts = BuildOptions {
        on_stage: Some(progress.hook()),
        ..BuildOptions::default()
    };
    let report = build_and_run(
        target,
        Path::new(dir),
        &[("image", Values::f32(images))],
        &opts,
    );
    progress.finish(report.is_ok());
    Ok(report?)
}

fn argmaxes(logits: &[f32]) -> Vec<usize> {
    logits
        .chunks(10)
        .map(|r| (0..10).fold(0, |b, i| if r[i] > r[b] { i } else { b }))
        .collect()
}

fn accuracy(logits: &[f32], labels: &[u8]) -> f64 {
    let hits = argmaxes(logits)
        .iter()
        .zip(labels)
        .filter(|(p, &y)| **p == usize::from(y))
        .count();
    hits as f64 / labels.len() as f64
}
