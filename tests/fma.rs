//! Fused multiply-add: on a device that declares hardware FMA, a matmul's multiply-accumulate
//! rounds once per step. Checked against independent Rust references: each output must be
//! exactly the sequential `f32::mul_add` fold (the kernel's summation order), on the
//! interpreter and in compiled C, while the unfused device gives exactly the `a * b + acc` fold;
//! both stay within the rounding-error bound of an f64 reference.

use std::sync::Arc;

use picograd::device::Device;
use picograd::interp::Interp;
use picograd::Tensor;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::data;

fn clang(fused: bool) -> Arc<dyn Device> {
    picograd::init();
    let c = picograd::runtime::Clang::new().expect("no C compiler: the FMA tests cannot run");
    Arc::new(c.with_fused_mulacc(fused))
}

fn matmul_on(
    dev: &Arc<dyn Device>,
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
) -> Vec<f32> {
    let ta = Tensor::try_from_slice_on(a, &[m, k], dev).unwrap();
    let tb = Tensor::try_from_slice_on(b, &[k, n], dev).unwrap();
    ta.matmul(&tb).to_vec::<f32>().unwrap()
}

/// Output (i, j) folded over the reduce axis in order with `step(acc, a, b)`.
fn fold(
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
    step: fn(f32, f32, f32) -> f32,
) -> Vec<f32> {
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            out.push((0..k).fold(0.0f32, |acc, r| step(acc, a[i * k + r], b[r * n + j])));
        }
    }
    out
}

const SHAPES: [(usize, usize, usize); 4] = [(13, 257, 19), (1, 784, 33), (7, 1, 5), (16, 100, 48)];

#[test]
fn fused_matmul_is_the_sequential_fma_fold_on_interp_and_clang() {
    let devs = [
        Arc::new(Interp::new().with_fused_mulacc(true)) as _,
        clang(true),
    ];
    matmuls_are_the_fold(&devs, 1, |acc, x, y| x.mul_add(y, acc));
}

#[test]
fn unfused_matmul_is_the_two_rounding_fold() {
    let devs = [Arc::new(Interp::new()) as _, clang(false)];
    matmuls_are_the_fold(&devs, 3, |acc, x, y| x * y + acc);
}

/// Every device computes exactly `fold(step)` on every shape (data seeded from `seed`).
fn matmuls_are_the_fold(devs: &[Arc<dyn Device>], seed: usize, step: fn(f32, f32, f32) -> f32) {
    for shape in SHAPES {
        let (m, k, n) = shape;
        let (a, b) = (data(m * k, seed), data(k * n, seed + 1));
        let want = fold(&a, &b, shape, step);
        for dev in devs {
            assert_eq!(
                matmul_on(dev, &a, &b, shape),
                want,
                "{shape:?} on {}",
                dev.name()
            );
        }
    }
}

/// Fused and unfused results differ only by rounding: each is within `k` units of f32 rounding
/// of the f64 sum (scaled by the sum of |a·b|), and they do differ somewhere.
#[test]
fn fused_and_unfused_differ_only_by_rounding() {
    let shape = (9, 1000, 11);
    let (m, k, n) = shape;
    let (a, b) = (data(m * k, 5), data(k * n, 6));
    let fused = matmul_on(&clang(true), &a, &b, shape);
    let unfused = matmul_on(&clang(false), &a, &b, shape);
    let u = f64::from(f32::EPSILON) / 2.0;
    for i in 0..m {
        for j in 0..n {
            let terms = (0..k).map(|r| f64::from(a[i * k + r]) * f64::from(b[r * n + j]));
            let exact: f64 = terms.clone().sum();
            let bound = k as f64 * u * terms.map(f64::abs).sum::<f64>();
            for (what, got) in [("fused", fused[i * n + j]), ("unfused", unfused[i * n + j])] {
                let err = (f64::from(got) - exact).abs();
                assert!(
                    err <= bound,
                    "{what} ({i}, {j}): {got} vs {exact}, bound {bound}"
                );
            }
        }
    }
    assert_ne!(fused, unfused, "the fused device really fuses");
}
