//! Sharded tensors: per-shard execution on each device, results and gradients equal to the
//! unsharded computation, reductions over and across the sharded axis, and ops that gather.

use std::sync::Arc;

use picograd_core::device::Device;
use picograd_core::{Interp, Tensor};

/// The default device first (where sharded values gather), then fresh interpreters.
fn devices(n: usize) -> Vec<Arc<dyn Device>> {
    let mut d = vec![picograd_core::context::default_device()];
    d.extend((1..n).map(|_| Arc::new(Interp::new()) as Arc<dyn Device>));
    d
}

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.5).collect()
}

#[test]
fn elementwise_runs_per_shard_and_matches() {
    let devs = devices(3);
    let x = Tensor::from_slice(&data(20), &[5, 4]);
    let b = Tensor::from_slice(&data(4), &[4]);
    let s = x.shard(&devs, 0);
    let sizes: Vec<usize> = s.shards().unwrap().iter().map(|p| p.shape()[0]).collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    // A sharded operand, an unsharded broadcast operand and a scalar.
    let y = s.mul(&s).add(&b).mul(2.0).relu();
    let parts = y.shards().expect("elementwise results stay sharded");
    for (p, d) in parts.iter().zip(&devs) {
        assert!(
            Arc::ptr_eq(&p.device(), d),
            "each part computes on its own device"
        );
    }
    let want = x.mul(&x).add(&b).mul(2.0).relu().to_vec::<f32>().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
}

#[test]
fn reductions_along_and_across_the_sharded_axis() {
    let devs = devices(2);
    let x = Tensor::from_slice(&data(24), &[4, 6]);
    let s = x.shard(&devs, 1);
    let along = s.sum(&[0], false);
    assert_eq!(
        along.shard_axis(),
        Some(0),
        "reducing another axis keeps the split"
    );
    assert_eq!(
        along.to_vec::<f32>().unwrap(),
        x.sum(&[0], false).to_vec::<f32>().unwrap()
    );
    let across = s.max(&[1], true);
    assert!(
        across.shards().is_none(),
        "reducing the sharded axis combines on one device"
    );
    assert_eq!(
        across.to_vec::<f32>().unwrap(),
        x.max(&[1], true).to_vec::<f32>().unwrap()
    );
    assert_eq!(
        s.sum_all().item::<f32>().unwrap(),
        x.sum_all().item::<f32>().unwrap()
    );
}

#[test]
fn other_ops_see_the_gathered_tensor_and_gradients_flow() {
    let devs = devices(2);
    let xv = data(12);
    let x = Tensor::from_slice(&xv, &[4, 3]).requires_grad_(true);
    let w = Tensor::from_slice(&data(6), &[3, 2]);
    let s = x.shard(&devs, 0);
    // matmul is not shard-aware: it uses the gathered value.
    let loss = s.mul(&s).matmul(&w).sum_all();
    let want = x.mul(&x).matmul(&w).sum_all();
    assert!((loss.item::<f32>().unwrap() - want.item::<f32>().unwrap()).abs() < 1e-4);
    let g = loss.gradient(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
    let g_want = want.gradient(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
    for (a, b) in g.iter().zip(&g_want) {
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
    }
}

#[test]
fn bad_shards_are_errors() {
    let x = Tensor::from_slice(&data(3), &[3]);
    let e = x
        .try_shard(&devices(4), 0)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("shard") && e.contains("4 devices"), "{e}");
    assert!(x.try_shard(&devices(2), 1).is_err());
    // Two tensors split differently fall back to the gathered values, still right.
    let devs = devices(2);
    let a = Tensor::from_slice(&data(12), &[4, 3]);
    let b = a.shard(&devs, 0).add(a.shard(&devs, 1));
    assert!(b.shards().is_none());
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        a.mul(2.0).to_vec::<f32>().unwrap()
    );
}
