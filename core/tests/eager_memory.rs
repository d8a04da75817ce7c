//! An eager training loop (no JIT) keeps a bounded graph: once a parameter's in-place update is
//! realized, the tensor holds a plain buffer node, not the graph that computed it, so step `n`
//! does not keep steps `0..n` alive. Counted in live hash-consed nodes (work, not time).
//!
//! Its own test binary: the count is process-wide.

use picograd_core::lazy::live_interned_nodes;
use picograd_core::nn::optim::{Adam, AdamConfig, Optimizer, SGD};
use picograd_core::nn::{Linear, Module};
use picograd_core::Tensor;

/// Runs `steps` eager steps of `opt` on a small regression and returns the live node count
/// after each, and the losses.
fn train(opt: &mut dyn Optimizer, layer: &Linear, steps: usize) -> (Vec<usize>, Vec<f32>) {
    let x = Tensor::randn(&[8, 6], 3);
    let target = Tensor::randn(&[8, 2], 4);
    let (mut live, mut losses) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        opt.zero_grad();
        let d = layer.forward(&x).sub(&target);
        let loss = d.mul(&d).mean(&[0, 1], false);
        loss.backward().unwrap();
        opt.step().unwrap();
        losses.push(loss.item::<f32>().unwrap());
        drop(loss);
        live.push(live_interned_nodes());
    }
    (live, losses)
}

#[test]
fn eager_optimizer_steps_keep_a_bounded_graph() {
    let layer = Linear::new(6, 2, true, 1);
    let params: Vec<Tensor> = layer.parameters().into_iter().map(|(_, t)| t).collect();
    let mut adam = Adam::new(params.clone(), AdamConfig::adam(0.05)).unwrap();
    let (live, losses) = train(&mut adam, &layer, 60);
    // The loop learns (so the steps really ran) ...
    assert!(losses[59] < losses[0] * 0.5, "{losses:?}");
    // ... and after the first few steps, every step leaves as many nodes alive as the last.
    assert_eq!(live[10], live[59], "live nodes grew: {live:?}");
    let mut sgd = SGD::new(params, 0.05, 0.9, false, 0.0).unwrap();
    let (live, _) = train(&mut sgd, &layer, 40);
    assert_eq!(live[10], live[39], "live nodes grew: {live:?}");
}
