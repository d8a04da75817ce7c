//! Trains two digits classifiers on the real data set (UCI handwritten digits, fixed split: the
//! first 1,437 images train, the last 360 test): an MLP (64-128-10) with Adam and a small CNN with
//! AdamW. Every step is a JIT replay with in-place parameter updates. Prints the loss per epoch,
//! test accuracy and steps/s, and saves the weights (safetensors) to `out/`.
//!
//! Run: `cargo run --release --example train_digits`

#[path = "common/digits.rs"]
mod digits;
#[path = "common/train.rs"]
mod train;

use picograd::nn::optim::AdamConfig;
use picograd::nn::{Conv2d, Linear, Module};
use picograd::Result;
use train::{accuracy, Cnn, Mlp, Plan};

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
    let speed = train::train(model, data.0, &plan)?;
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

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    picograd::init();
    let data = digits::load()?;
    let (train_set, test_set) = digits::split(&data);
    std::fs::create_dir_all("out")?;
    // The MLP standardizes pixels itself; the CNN keeps [0, 1] (its zero padding means "blank").
    let mlp = Mlp::new(&train_set, 1)?;
    let plan = Plan {
        epochs: 15,
        adam: AdamConfig::adam(0.01),
    };
    let mlp_acc = run("mlp", &mlp, (&train_set, &test_set), plan)?;
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
