//! Monotone epilogues out of a max reduce (`core/src/lazy/max_hoist.rs`): a max pooling over
//! `relu(x + b)` (b per channel) is built as `relu(maxpool(x) + b)`, and gives the bits of the
//! unhoisted graph — the same pooling over the values of `relu(x + b)` computed first and read
//! back as a buffer, which the rule cannot see through — on inputs with ±0, negative values and ties, for disjoint and
//! overlapping windows. NaN and the documented zero-sign exception are checked as the module
//! says; an operand that varies along the pooled axes is not hoisted.

use picograd_core::lazy::LazyOp;
use picograd_core::ops::ReduceOp;
use picograd_core::{PoolOpts, Tensor};

/// Seeded values with many exact ties, zeros of both signs and negatives.
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            match s % 8 {
                0 => 0.0,
                1 => -0.0,
                2 => -1.5,
                _ => ((s >> 8) % 64) as f32 * 0.25 - 8.0,
            }
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `t`'s values as a fresh buffer: a max over it has no elementwise op to hoist.
fn computed(t: &Tensor) -> Tensor {
    Tensor::from_slice(&t.to_vec::<f32>().unwrap(), &t.shape())
}

/// `op(t)` hoisted and over `t`'s computed values, as bits, and whether the first hoisted.
fn both(t: &Tensor, op: impl Fn(&Tensor) -> Tensor) -> (bool, Vec<u32>, Vec<u32>) {
    let hoisted = op(t);
    // Before realizing: a realized tensor holds a plain buffer node.
    let was = is_hoisted(&hoisted);
    let h = bits(&hoisted.to_vec::<f32>().unwrap());
    let p = bits(&op(&computed(t)).to_vec::<f32>().unwrap());
    (was, h, p)
}

/// `maxpool(relu(x + b))` hoisted and unhoisted, as bits.
fn pooled(x: &Tensor, b: &Tensor, opts: &PoolOpts) -> (bool, Vec<u32>, Vec<u32>) {
    both(&x.add(b).relu(), |t| t.max_pool2d(opts))
}

/// Is `t` an elementwise op applied after a max reduce (the hoisted form)?
fn is_hoisted(t: &Tensor) -> bool {
    let lazy = t.lazy();
    let mut node = lazy.base().clone();
    loop {
        match node.op() {
            Some((LazyOp::Alu(_), srcs)) => {
                let next = srcs.iter().find(|s| {
                    matches!(
                        s.base().op(),
                        Some((LazyOp::Alu(_) | LazyOp::Reduce(ReduceOp::Max, _), _))
                    )
                });
                match next {
                    Some(n) => node = n.base().clone(),
                    None => return false,
                }
            }
            Some((LazyOp::Reduce(ReduceOp::Max, _), _)) => return !node.ptr_eq(lazy.base()),
            _ => return false,
        }
    }
}

#[test]
fn pooled_relu_of_bias_is_bit_identical_to_the_unhoisted_graph() {
    let mut zeros = 0;
    // Disjoint 2×2 windows and overlapping 3×3 stride-1 windows (an expanding view).
    for (seed, opts) in [
        (1, PoolOpts::new(&[2, 2])),
        (2, PoolOpts::new(&[3, 3]).stride(&[1, 1])),
        (3, PoolOpts::new(&[2, 2]).stride(&[1, 1])),
    ] {
        let x = Tensor::from_slice(&data(2 * 3 * 6 * 6, seed), &[2, 3, 6, 6]);
        // Biases other than -0 (the documented exception): negative, +0, positive.
        let b = Tensor::from_slice(&[-0.75f32, 0.0, 2.5], &[1, 3, 1, 1]);
        let (hoisted, h, p) = pooled(&x, &b, &opts);
        assert!(hoisted, "seed {seed}: the epilogue was not hoisted");
        assert_eq!(h, p, "seed {seed}");
        zeros += h.iter().filter(|&&v| v == 0).count();
        assert!(h.iter().any(|&v| v != 0), "seed {seed}");
    }
    assert!(zeros > 0, "no window collapsed to the ReLU's zero");
}

#[test]
fn plain_relu_and_clamp_hoist_and_keep_values() {
    let x = Tensor::from_slice(&data(4 * 8 * 8, 7), &[1, 4, 8, 8]);
    let opts = PoolOpts::new(&[2, 2]);
    // max(c, v) keeps c's bits wherever it collapses, so this form is exact with any zeros.
    let lower = Tensor::from_slice(&[0.0f32], &[1]).maximum(&x);
    let (hoisted, h, p) = both(&lower, |t| t.max_pool2d(&opts));
    assert!(hoisted);
    assert_eq!(h, p);
    // x - 1 then relu: bits too (no -0 can enter the ReLU: -0 - 1 = -1).
    let (hoisted, h, p) = both(&x.sub(1.0).relu(), |t| t.max_pool2d(&opts));
    assert!(hoisted);
    assert_eq!(h, p);
}

#[test]
fn the_zero_sign_exception_is_the_documented_one() {
    // relu of [-1, -0] is [+0, -0]: the first maximum is +0; relu(max) = relu(-0) = -0.
    let x = Tensor::from_slice(&[-1.0f32, -0.0], &[1, 1, 1, 2]);
    let opts = PoolOpts::new(&[1, 2]);
    let (hoisted, h, p) = both(&x.relu(), |t| t.max_pool2d(&opts));
    assert!(hoisted);
    assert_eq!(h[0], (-0.0f32).to_bits());
    assert_eq!(p[0], 0.0f32.to_bits());
}

#[test]
fn nan_elements_are_skipped_and_an_all_nan_window_gives_the_op_of_minus_infinity() {
    let nan = f32::NAN;
    // Windows: [nan, 1, -3, 2], [nan, nan, nan, nan], [-5, nan, -6, -7], [nan, 0.5, nan, nan].
    let v = [
        nan, 1.0, nan, nan, -3.0, 2.0, nan, nan, -5.0, nan, nan, 0.5, -6.0, -7.0, nan, nan,
    ];
    let x = Tensor::from_slice(&v, &[1, 1, 4, 4]);
    let b = Tensor::from_slice(&[0.25f32], &[1, 1, 1, 1]);
    let opts = PoolOpts::new(&[2, 2]);
    let (_, h, p) = pooled(&x, &b, &opts);
    // Windows holding a number: both forms skip the NaNs (relu(2.25), relu(-4.75), relu(0.75)).
    let expect = |v: f32| v.to_bits();
    assert_eq!(
        [h[0], h[2], h[3]],
        [expect(2.25), expect(0.0), expect(0.75)]
    );
    assert_eq!([p[0], p[2], p[3]], [h[0], h[2], h[3]]);
    // A window of only NaN: the unhoisted max gives -inf, the hoisted one relu(-inf + b) = 0.
    assert_eq!(p[1], f32::NEG_INFINITY.to_bits());
    assert_eq!(h[1], 0.0f32.to_bits());
}

#[test]
fn an_operand_varying_along_the_window_is_not_hoisted() {
    let x = Tensor::from_slice(&data(64, 3), &[1, 1, 8, 8]);
    let y = Tensor::from_slice(&data(64, 4), &[1, 1, 8, 8]);
    let opts = PoolOpts::new(&[2, 2]);
    let h = x.add(&y).max_pool2d(&opts);
    assert!(!is_hoisted(&h));
    let reference: Vec<f32> = {
        let (a, c) = (data(64, 3), data(64, 4));
        let r: Vec<f32> = (0..64).map(|i| a[i] + c[i]).collect();
        (0..16)
            .map(|o| {
                let (oy, ox) = (o / 4, o % 4);
                let mut acc = f32::NEG_INFINITY;
                for (dy, dx) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    let v = r[(2 * oy + dy) * 8 + 2 * ox + dx];
                    acc = if acc < v { v } else { acc };
                }
                acc
            })
            .collect()
    };
    assert_eq!(bits(&h.to_vec::<f32>().unwrap()), bits(&reference));
    // Only max reduces hoist: a sum keeps its elementwise input.
    assert!(matches!(
        x.add(1.0).sum(&[-1], false).lazy().base().op(),
        Some((LazyOp::Reduce(ReduceOp::Sum, _), _))
    ));
}
