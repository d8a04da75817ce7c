//! Freezing a capture's constant steps (`Capture::freeze_constants`, what `SignatureCache` and so
//! `onnx::Model::run` do): steps over weights alone run at the recording only, replays skip
//! them, and the results stay those of running the function afresh. Counts steps, never time.

#[path = "common/close.rs"]
mod close;
use close::assert_close;
use picograd_core::jit::{Capture, SignatureCache};
use picograd_core::Tensor;

fn weights() -> Tensor {
    Tensor::from_slice(&[0.5f32, -1.25, 2.0, 3.5, -0.75, 1.0], &[2, 3])
}

/// `x @ w + sum(w²)`: the sum reads the weight alone, the matmul reads the input.
fn f(x: &Tensor, w: &Tensor) -> Tensor {
    let s = w.try_mul(w).unwrap().sum_all();
    x.matmul(w).try_add(&s).unwrap()
}

fn reference(x: &[f32], w: &[f32]) -> Vec<f32> {
    let s: f32 = w.iter().map(|v| v * v).sum();
    (0..2)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .map(|(i, j)| x[i * 2] * w[j] + x[i * 2 + 1] * w[3 + j] + s)
        .collect()
}

#[test]
fn steps_over_weights_alone_are_frozen_and_replays_stay_exact() {
    let w = weights();
    let x0 = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    let y0 = f(&x0, &w);
    let (mut cap, _) = Capture::record(&[&x0], &[&y0]).unwrap();
    let all = cap.steps().len();
    assert_eq!(cap.replayed_steps(), all, "nothing is frozen unless asked");
    let frozen = cap.freeze_constants();
    assert_eq!(frozen, 1, "the sum over the weight alone, and nothing else");
    assert_eq!(cap.replayed_steps(), all - 1);
    let wv = w.to_vec::<f32>().unwrap();
    for k in 0..3 {
        let xs: Vec<f32> = (0..4).map(|i| (i * 3 + k) as f32 * 0.25 - 1.0).collect();
        let x = Tensor::from_slice(&xs, &[2, 2]);
        let y = cap.replay(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
        assert_close(&y, &reference(&xs, &wv), "replay");
    }
}

#[test]
fn input_work_and_outputs_are_never_frozen() {
    let w = weights();
    let x0 = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    // Everything reads the input, and the weights-only value is itself an output.
    let y = x0.sum_all().try_mul(&x0).unwrap();
    let s = w.try_mul(&w).unwrap().sum_all();
    let (mut cap, _) = Capture::record(&[&x0], &[&y, &s]).unwrap();
    assert_eq!(cap.freeze_constants(), 0);
    assert_eq!(cap.replayed_steps(), cap.steps().len());
}

#[test]
fn a_signature_cache_replay_matches_a_fresh_run() {
    let w = weights();
    let wv = w.to_vec::<f32>().unwrap();
    let cache = SignatureCache::new();
    for k in 0..4 {
        let xs: Vec<f32> = (0..4).map(|i| (i + k) as f32 * 0.5 - 1.5).collect();
        let x = Tensor::from_slice(&xs, &[2, 2]);
        let y = cache.call(&[x], |ins| Ok(vec![f(&ins[0], &w)])).unwrap();
        let got = y[0].to_vec::<f32>().unwrap();
        assert_close(&got, &reference(&xs, &wv), &format!("call {k}"));
    }
    assert_eq!(cache.stats().replays, 3);
}

#[test]
fn a_jit_runs_frozen_steps_again_after_a_weight_is_written() {
    // `x @ w + sum(w²)` under a `Jit`: the sum over the weight alone is frozen, and runs again
    // only on the replay after `w` is assigned a new value (an optimizer's update), whose
    // result then uses the new `w` in both terms.
    let w = weights().try_own().unwrap();
    let jit = picograd_core::jit::Jit::new(|ins: &[Tensor]| Ok(vec![f(&ins[0], &w)]));
    let mut wv = w.to_vec::<f32>().unwrap();
    for k in 0..6 {
        if k == 3 {
            let new: Vec<f32> = wv.iter().map(|v| v * 0.5 + 0.25).collect();
            w.try_assign(&Tensor::from_slice(&new, &[2, 3])).unwrap();
            w.realize().unwrap();
            wv = new;
        }
        let xs: Vec<f32> = (0..4).map(|i| (i * 2 + k) as f32 * 0.5 - 1.0).collect();
        let y = jit.call(&[Tensor::from_slice(&xs, &[2, 2])]).unwrap();
        let got = y[0].to_vec::<f32>().unwrap();
        assert_close(&got, &reference(&xs, &wv), &format!("call {k}"));
        let cap = jit.capture().unwrap();
        assert_eq!(
            cap.replayed_steps(),
            cap.steps().len() - 1,
            "the sum is frozen"
        );
        assert_eq!(cap.refreshes(), usize::from(k >= 3), "call {k}");
    }
}
