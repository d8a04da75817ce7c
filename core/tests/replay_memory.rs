//! A replay runs intermediates whose lives do not overlap in one buffer (`jit/share.rs`): the
//! results stay bit-identical to running the function afresh, and close to a naive loop, over
//! replays with new inputs; inputs, outputs and values computed from weights alone keep their
//! own buffers. Counts shared slots, never time.

#[path = "common/close.rs"]
mod close;
use close::assert_close;
use picograd_core::jit::{Capture, SignatureCache};
use picograd_core::Tensor;

/// Widths of a five-layer perceptron: its four hidden values are live one layer each.
const WIDTHS: [usize; 6] = [6, 9, 8, 7, 5, 3];
const ROWS: usize = 3;

fn layer_weights() -> Vec<(Vec<f32>, Vec<f32>)> {
    WIDTHS
        .windows(2)
        .enumerate()
        .map(|(l, w)| {
            let m: Vec<f32> = (0..w[0] * w[1])
                .map(|i| ((i * 7 + l * 3) % 11) as f32 * 0.125 - 0.6)
                .collect();
            let b: Vec<f32> = (0..w[1]).map(|j| (j + l) as f32 * 0.0625 - 0.2).collect();
            (m, b)
        })
        .collect()
}

fn mlp(x: &Tensor, layers: &[(Tensor, Tensor)]) -> Tensor {
    let mut h = x.clone();
    for (m, b) in layers {
        h = h.matmul(m).try_add(b).unwrap().relu();
    }
    h
}

fn naive(x: &[f32], layers: &[(Vec<f32>, Vec<f32>)]) -> Vec<f32> {
    let mut h = x.to_vec();
    for (l, (m, b)) in layers.iter().enumerate() {
        let (k, n) = (WIDTHS[l], WIDTHS[l + 1]);
        h = (0..ROWS * n)
            .map(|o| {
                let (r, j) = (o / n, o % n);
                let s: f32 = (0..k).map(|i| h[r * k + i] * m[i * n + j]).sum();
                (s + b[j]).max(0.0)
            })
            .collect();
    }
    h
}

fn input(k: usize) -> Vec<f32> {
    (0..ROWS * WIDTHS[0])
        .map(|i| ((i * 5 + k * 3) % 13) as f32 * 0.25 - 1.5)
        .collect()
}

fn tensors(layers: &[(Vec<f32>, Vec<f32>)]) -> Vec<(Tensor, Tensor)> {
    layers
        .iter()
        .enumerate()
        .map(|(l, (m, b))| {
            (
                Tensor::from_slice(m, &[WIDTHS[l], WIDTHS[l + 1]]),
                Tensor::from_slice(b, &[WIDTHS[l + 1]]),
            )
        })
        .collect()
}

#[test]
fn hidden_values_share_buffers_and_replays_stay_exact() {
    let host = layer_weights();
    let layers = tensors(&host);
    let x0 = Tensor::from_slice(&input(0), &[ROWS, WIDTHS[0]]);
    let y0 = mlp(&x0, &layers);
    let (cap, _) = Capture::record(&[&x0], &[&y0]).unwrap();
    assert_eq!(cap.steps().len(), 5, "one kernel per layer");
    // Hidden widths 9, 8, 7, 5: the third joins the first's buffer, the fourth the second's.
    assert_eq!(cap.shared_slots(), 2);
    for k in 1..4 {
        let xs = input(k);
        let x = Tensor::from_slice(&xs, &[ROWS, WIDTHS[0]]);
        let got = cap.replay(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
        let fresh = mlp(&x, &layers).to_vec::<f32>().unwrap();
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&fresh), "replay {k} against a fresh run");
        assert_close(&got, &naive(&xs, &host), "replay against a naive loop");
    }
}

#[test]
fn values_from_weights_alone_keep_their_buffers() {
    let host = layer_weights();
    let mut doubled = host.clone();
    doubled[0].0.iter_mut().for_each(|v| *v *= 2.0);
    let layers = tensors(&host);
    // The first layer's weight doubled, from weights alone: once frozen, replays read the
    // value the recording left in its buffer, so no hidden value may have used that buffer.
    let f = |x: &Tensor| {
        let mut l = layers.clone();
        l[0].0 = l[0].0.try_add(&l[0].0).unwrap();
        mlp(x, &l)
    };
    let x0 = Tensor::from_slice(&input(0), &[ROWS, WIDTHS[0]]);
    let y0 = f(&x0);
    let (mut cap, _) = Capture::record(&[&x0], &[&y0]).unwrap();
    for k in 1..4 {
        if k == 2 {
            assert_eq!(cap.freeze_constants(), 1, "the doubling");
        }
        let xs = input(k);
        let x = Tensor::from_slice(&xs, &[ROWS, WIDTHS[0]]);
        let got = cap.replay(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
        assert_close(&got, &naive(&xs, &doubled), &format!("replay {k}"));
    }
    // And through the cache `onnx::Model::run` uses.
    let cache = SignatureCache::new();
    for k in 0..3 {
        let xs = input(k);
        let x = Tensor::from_slice(&xs, &[ROWS, WIDTHS[0]]);
        let y = cache.call(&[x], |ins| Ok(vec![f(&ins[0])])).unwrap();
        let got = y[0].to_vec::<f32>().unwrap();
        assert_close(&got, &naive(&xs, &doubled), &format!("call {k}"));
    }
}
