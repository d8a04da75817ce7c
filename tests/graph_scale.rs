//! Graph size on the Clang device: a 24-deep `abs` chain (each `abs` is `max(x, -x)`, reading
//! its input twice; 22 of them used to take 30 s and 4.4 GB) is one small kernel with the right
//! values, and a 100,000-node add chain builds, compiles, runs and drops on a 256 KiB stack.
//! The work bounds themselves are counted in `core/tests/graph_scale.rs` on the interpreter.

use std::sync::Arc;

use picograd::device::Device;
use picograd::realize::count_work;
use picograd::schedule::{schedule, MAX_FUSED_DEPTH};
use picograd::Tensor;

fn clang() -> Arc<dyn Device> {
    picograd::init();
    Arc::new(picograd::runtime::Clang::new().expect("no C compiler: the Clang tests cannot run"))
}

#[test]
fn abs_chain_24_is_one_small_kernel_on_clang() {
    let dev = clang();
    let xs = [-1.5f32, 2.0, -3.25, 0.5, 7.0, -0.125, 0.75, -9.0];
    let x = Tensor::try_from_slice_on(&xs, &[8], &dev).unwrap();
    let y = (0..24).fold(x, |h, _| h.sub(0.75).abs());
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    assert_eq!(items.len(), 1);
    // 24 steps of SUB, NEG, MAX, each lowered once per element (the tree is 2^24 deep).
    assert_eq!(count_work(&items).unwrap().flops, 3 * 24 * 8);
    let want: Vec<f32> = xs
        .iter()
        .map(|&v| (0..24).fold(v, |h, _| (h - 0.75f32).abs()))
        .collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
}

#[test]
fn a_100k_add_chain_runs_on_clang_on_a_small_stack() {
    let dev = clang();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            const N: usize = 100_000;
            let x = Tensor::try_from_slice_on(&[1.0f32, -2.0, 0.5], &[3], &dev).unwrap();
            let y = (0..N).fold(x, |h, _| h.add(1.0));
            let items = schedule(&[y.lazy().contiguous()]).unwrap();
            assert_eq!(items.len(), N.div_ceil(MAX_FUSED_DEPTH));
            drop(items);
            let want = vec![1.0 + N as f32, -2.0 + N as f32, 0.5 + N as f32];
            assert_eq!(y.to_vec::<f32>().unwrap(), want);
            drop(y);
        })
        .unwrap()
        .join()
        .unwrap();
}
