//! The long-reduction rule (README "Sizes, NaN and long-running processes"): a float sum longer
//! than `SPLIT_THRESHOLD` is summed in blocks of `C` (the smallest power of two ≥ √L), the
//! block sums in order, then the leftover elements. Checked here: the f32 sum of 16,781,312
//! ones is exact (a sequential accumulator gives 16,777,216); a sum of 24 million random values
//! is within 1e-6 of an f64 reference; the interpreter and the Clang device agree bit for bit
//! with a host model of the rule; short sums keep their single kernel.

use std::sync::Arc;

use picograd::device::Device;
use picograd::lazy::split_reduce::{block_len, SPLIT_THRESHOLD};
use picograd::ops::{AluOp, ReduceOp};
use picograd::schedule::schedule;
use picograd::Tensor;

fn devices() -> Vec<Arc<dyn Device>> {
    picograd::init();
    vec![
        picograd::context::interp(),
        picograd::runtime::clang().expect("no C compiler: the Clang device cannot run"),
    ]
}

/// Deterministic values in `[lo, lo + 1)` (an LCG; no dependency).
fn values(n: usize, seed: u64, lo: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            lo + (s >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// The rule on the host, in f32: block sums in order, then the leftover elements' sum.
fn rule_sum(xs: &[f32]) -> f32 {
    let len = xs.len() as u64;
    if len <= SPLIT_THRESHOLD {
        return xs.iter().fold(0.0f32, |a, &x| a + x);
    }
    let c = block_len(len) as usize;
    let q = xs.len() / c;
    let blocks: Vec<f32> = xs[..q * c].chunks(c).map(rule_sum).collect();
    let total = rule_sum(&blocks);
    if q * c < xs.len() {
        total + rule_sum(&xs[q * c..])
    } else {
        total
    }
}

/// The rule for `sum(x * w)`: the first level folds each product into its block's accumulator,
/// with one rounding (`fma`) on a device with fused multiply-add, else two.
fn rule_dot(xs: &[f32], ws: &[f32], fused: bool) -> f32 {
    let dot = |x: &[f32], w: &[f32]| {
        let pairs = x.iter().zip(w);
        if fused {
            pairs.fold(0.0f32, |a, (x, w)| x.mul_add(*w, a))
        } else {
            pairs.fold(0.0f32, |a, (x, w)| x * w + a)
        }
    };
    let c = block_len(xs.len() as u64) as usize;
    let q = xs.len() / c;
    let blocks: Vec<f32> = (0..q)
        .map(|b| dot(&xs[b * c..(b + 1) * c], &ws[b * c..(b + 1) * c]))
        .collect();
    rule_sum(&blocks) + dot(&xs[q * c..], &ws[q * c..])
}

fn kernels(t: &Tensor) -> usize {
    schedule(&[t.lazy()]).unwrap().len()
}

#[test]
fn the_block_length_is_the_power_of_two_at_or_above_the_square_root() {
    assert_eq!(block_len(65_537), 512);
    assert_eq!(block_len(1 << 20), 1 << 10);
    assert_eq!(block_len((1 << 20) + 1), 1 << 11);
    assert_eq!(block_len(16_781_312), 8192);
}

#[test]
fn sum_of_16781312_ones_is_exact_on_every_device() {
    let n = 16_781_312usize; // 2^24 + 4096: sequentially, f32 stops at 2^24
    for dev in devices() {
        // One stored element read through an expand: 4 bytes, not 64 MB.
        let one = Tensor::try_from_slice_on(&[1.0f32], &[1], &dev).unwrap();
        let ones = one.try_expand(&[n]).unwrap();
        let s = ones.try_sum(&[0], false).unwrap();
        assert_eq!(
            s.to_vec::<f32>().unwrap(),
            vec![n as f32],
            "on {}",
            dev.name()
        );
        // mean composes from the sum: exact too.
        let m = ones.try_mean(&[0], false).unwrap();
        assert_eq!(
            m.to_vec::<f32>().unwrap(),
            vec![1.0],
            "mean on {}",
            dev.name()
        );
    }
}

#[test]
fn sum_of_24_million_random_values_is_within_1e6_of_f64() {
    let n = 24_000_000usize;
    let xs = values(n, 7, 1.0);
    let exact: f64 = xs.iter().map(|&x| f64::from(x)).sum();
    // The test can fail: summed one by one in f32 the same values are far off.
    let sequential = xs.iter().fold(0.0f32, |a, &x| a + x);
    let seq_err = (f64::from(sequential) - exact).abs() / exact;
    assert!(seq_err > 1e-3, "sequential f32 error {seq_err}");
    let clang = &devices()[1];
    let x = Tensor::try_from_slice_on(&xs, &[n], clang).unwrap();
    let got = x.try_sum(&[0], false).unwrap().to_vec::<f32>().unwrap()[0];
    let err = (f64::from(got) - exact).abs() / exact;
    eprintln!("24M values: relative error {err:.2e} split, {seq_err:.2e} sequential");
    assert!(err < 1e-6, "sum {got} vs f64 {exact}: relative error {err}");
    assert_eq!(
        got.to_bits(),
        rule_sum(&xs).to_bits(),
        "the documented order"
    );
}

#[test]
fn split_sums_agree_bit_for_bit_on_interpreter_clang_and_the_rule() {
    // Rows of 100,003 (a leftover of 163 after 195 blocks of 512), a sum over two axes that are
    // not adjacent (4 x 131 x 257: length 134,668), and a matmul-shaped sum of products.
    let (rows, len) = (3usize, 100_003usize);
    let a = values(rows * len, 1, -0.5);
    let b = values(4 * 5 * 131 * 257, 2, -0.5);
    let w = values(len, 3, -0.5);
    let mut seen = Vec::new();
    for dev in devices() {
        let x = Tensor::try_from_slice_on(&a, &[rows, len], &dev).unwrap();
        let y = Tensor::try_from_slice_on(&b, &[4, 5, 131, 257], &dev).unwrap();
        let v = Tensor::try_from_slice_on(&w, &[1, len], &dev).unwrap();
        let row_sums = x.try_sum(&[1], false).unwrap();
        let cross = y.try_sum(&[0, 2, 3], false).unwrap();
        let dots = x
            .try_alu(AluOp::Mul, &[&v.try_expand(&[rows, len]).unwrap()])
            .unwrap()
            .try_reduce(ReduceOp::Sum, Some(&[1]), false)
            .unwrap();
        let bits = |t: &Tensor| -> Vec<u32> {
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|f| f.to_bits())
                .collect()
        };
        seen.push((bits(&row_sums), bits(&cross), dev.name().to_string()));
        // Each device folds products as it documents (`fused_mulacc`), in the same order.
        let want: Vec<u32> = (a.chunks(len))
            .map(|r| rule_dot(r, &w, dev.fused_mulacc()).to_bits())
            .collect();
        assert_eq!(bits(&dots), want, "sums of products on {}", dev.name());
    }
    // The rule on the host.
    let want_rows: Vec<u32> = a.chunks(len).map(|r| rule_sum(r).to_bits()).collect();
    let want_cross: Vec<u32> = (0..5)
        .map(|j| {
            let line: Vec<f32> = (0..4)
                .flat_map(|i| {
                    let start = (i * 5 + j) * 131 * 257;
                    b[start..start + 131 * 257].iter().copied()
                })
                .collect();
            rule_sum(&line).to_bits()
        })
        .collect();
    for (r, c, name) in &seen {
        assert_eq!(r, &want_rows, "row sums on {name}");
        assert_eq!(c, &want_cross, "sum over axes 0, 2, 3 on {name}");
    }
}

#[test]
fn only_long_float_sums_split() {
    picograd::init();
    let dev = picograd::context::interp();
    let at = SPLIT_THRESHOLD as usize;
    let f = |n: usize| Tensor::try_from_slice_on(&vec![1.0f32; n], &[n], &dev).unwrap();
    // At the threshold: one kernel, as before the rule.
    assert_eq!(kernels(&f(at).try_sum(&[0], false).unwrap()), 1);
    // Above it without a leftover (2^18 = 512 blocks of 512): blocks, then their sum.
    assert_eq!(kernels(&f(1 << 18).try_sum(&[0], false).unwrap()), 2);
    // With a leftover: its sum is one more kernel, added after the block sums' reduce.
    assert_eq!(kernels(&f(at + 1).try_sum(&[0], false).unwrap()), 3);
    // Max and integer sums are exact in any order: never split.
    assert_eq!(kernels(&f(at + 1).try_max(&[0], false).unwrap()), 1);
    let i = Tensor::try_from_slice_on(&vec![1i32; at + 1], &[at + 1], &dev).unwrap();
    assert_eq!(kernels(&i.try_sum(&[0], false).unwrap()), 1);
}
