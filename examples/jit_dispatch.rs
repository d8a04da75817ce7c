//! JIT dispatch overhead: a function of many tiny kernels (each a few floats), captured once and
//! replayed; prints the replay time per kernel, which is almost all dispatch (finding buffer
//! pointers, calling the entry) since the kernels themselves do next to nothing.
//!
//! Run: `cargo run --release --example jit_dispatch [kernels]` (default 200).

use std::time::Instant;

use picograd::jit::Jit;
use picograd::Tensor;

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    picograd::init();
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    // Each step reads a sum through an expand, which ends a kernel: about two kernels a step.
    let f = Jit::new(move |x: &[Tensor]| {
        let mut h = x[0].clone();
        for _ in 0..n / 2 {
            h = h.mul(0.5).add(h.sum(&[0], true).mul(0.1));
        }
        Ok(vec![h])
    });
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]);
    f.call(std::slice::from_ref(&x))?;
    let kernels = f.capture().map_or(0, |c| c.steps().len());
    for _ in 0..20 {
        f.call(std::slice::from_ref(&x))?;
    }
    let reps = 200;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            f.call(std::slice::from_ref(&x))?;
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    let y = f.call(&[x])?[0].to_vec::<f32>()?;
    println!(
        "JIT replay of {kernels} tiny kernels: {:.1} us per call, {:.2} us per kernel (y[0] = {})",
        best * 1e6,
        best * 1e6 / kernels.max(1) as f64,
        y[0]
    );
    Ok(())
}
