//! Kernel counts for common expressions (fusion must not silently regress), no recomputation of
//! reductions, and the values those fused kernels compute, checked against plain loops.

use picograd_core::lazy::{LazyBuffer, LazyOp};
use picograd_core::ops::{AluOp, ReduceOp};
use picograd_core::realize::count_work;
use picograd_core::schedule::schedule;
use picograd_core::Tensor;

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape)
}

fn seq(n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * scale)
        .collect()
}

fn alu(a: &Tensor, op: AluOp, b: &[&Tensor]) -> Tensor {
    a.try_alu(op, b).unwrap()
}

fn relu(x: &Tensor) -> Tensor {
    alu(x, AluOp::Max, &[&x.const_like(0.0)])
}

fn sum(x: &Tensor, axes: Option<&[isize]>, keepdim: bool) -> Tensor {
    x.try_reduce(ReduceOp::Sum, axes, keepdim).unwrap()
}

/// matmul composed as tinygrad does: broadcast multiply, then sum over the shared axis.
fn matmul(a: &Tensor, b: &Tensor) -> Tensor {
    let (n, k) = (a.shape()[0], a.shape()[1]);
    let m = b.shape()[1];
    let a3 = a.try_reshape(&[n as isize, 1, k as isize]).unwrap();
    let b3 = b
        .try_permute(&[1, 0])
        .unwrap()
        .try_reshape(&[1, m as isize, k as isize])
        .unwrap();
    sum(&alu(&a3, AluOp::Mul, &[&b3]), Some(&[2]), false)
}

/// Number of kernels and reduce accumulations the schedule of `x` runs.
fn work(x: &Tensor) -> (u64, u64) {
    let items = schedule(&[x.lazy().contiguous()]).unwrap();
    let c = count_work(&items).unwrap();
    (c.kernels, c.reduce_ops)
}

/// The reduce accumulations in the graph itself: each reduce node once, input size each.
fn graph_reduce_ops(x: &Tensor) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![x.lazy().base().clone()];
    let mut total = 0u64;
    while let Some(b) = stack.pop() {
        if !seen.insert(b.id()) {
            continue;
        }
        if let Some((op, srcs)) = b.op() {
            if let LazyOp::Reduce(..) = op {
                total += srcs[0]
                    .shape()
                    .iter()
                    .map(|d| d.vmax() as u64)
                    .product::<u64>();
            }
            stack.extend(srcs.iter().map(|s: &LazyBuffer| s.base().clone()));
        }
    }
    total
}

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn elementwise_chain_is_one_kernel() {
    let (a, b, c) = (seq(12, 1.0), seq(12, 0.5), seq(12, 0.25));
    let x = alu(
        &alu(&t(&a, &[3, 4]), AluOp::Add, &[&t(&b, &[3, 4])]),
        AluOp::Add,
        &[&t(&c, &[3, 4])],
    );
    assert_eq!(work(&x), (1, 0));
    let want: Vec<f32> = (0..12).map(|i| a[i] + b[i] + c[i]).collect();
    close(&x.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn reduce_then_elementwise_is_one_kernel() {
    let (a, b) = (seq(20, 1.0), seq(20, 0.5));
    let x = relu(&sum(
        &alu(&t(&a, &[4, 5]), AluOp::Mul, &[&t(&b, &[4, 5])]),
        None,
        false,
    ));
    assert_eq!(work(&x).0, 1);
    let want: f32 = a.iter().zip(&b).map(|(p, q)| p * q).sum::<f32>().max(0.0);
    close(&x.to_vec::<f32>().unwrap(), &[want]);
}

#[test]
fn sum_then_add_is_one_kernel() {
    let (a, b) = (seq(12, 1.0), seq(4, 0.5));
    let x = alu(
        &sum(&t(&a, &[3, 4]), Some(&[0]), false),
        AluOp::Add,
        &[&t(&b, &[4])],
    );
    assert_eq!(work(&x).0, 1);
    let want: Vec<f32> = (0..4)
        .map(|j| (0..3).map(|i| a[i * 4 + j]).sum::<f32>() + b[j])
        .collect();
    close(&x.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn two_reduces_are_two_kernels() {
    let a = seq(16, 1.0);
    let x = t(&a, &[4, 4]);
    let y = alu(
        &sum(&x, Some(&[0]), false),
        AluOp::Add,
        &[&sum(&x, Some(&[1]), false)],
    );
    assert_eq!(work(&y).0, 2);
    let want: Vec<f32> = (0..4)
        .map(|j| {
            (0..4).map(|i| a[i * 4 + j]).sum::<f32>() + (0..4).map(|k| a[j * 4 + k]).sum::<f32>()
        })
        .collect();
    close(&y.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn matmul_bias_relu_is_one_kernel() {
    let (a, w, bias) = (seq(6, 1.0), seq(12, 0.5), seq(4, 0.25));
    let y = relu(&alu(
        &matmul(&t(&a, &[2, 3]), &t(&w, &[3, 4])),
        AluOp::Add,
        &[&t(&bias, &[4])],
    ));
    let (kernels, reduce_ops) = work(&y);
    assert_eq!(kernels, 1);
    assert_eq!(reduce_ops, graph_reduce_ops(&y));
    let want: Vec<f32> = (0..8)
        .map(|o| {
            ((0..3)
                .map(|k| a[(o / 4) * 3 + k] * w[k * 4 + o % 4])
                .sum::<f32>()
                + bias[o % 4])
                .max(0.0)
        })
        .collect();
    close(&y.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn softmax_is_at_most_three_kernels_without_recomputing_reduces() {
    let a = seq(15, 0.3);
    let x = t(&a, &[3, 5]);
    let m = x.try_reduce(ReduceOp::Max, Some(&[1]), true).unwrap();
    let shifted = alu(&x, AluOp::Sub, &[&m]);
    let e = alu(
        &alu(
            &shifted,
            AluOp::Mul,
            &[&x.const_like(std::f64::consts::LOG2_E)],
        ),
        AluOp::Exp2,
        &[],
    );
    let s = sum(&e, Some(&[1]), true);
    let y = alu(&e, AluOp::Div, &[&s]);
    let (kernels, reduce_ops) = work(&y);
    assert!(kernels <= 3, "softmax took {kernels} kernels");
    assert_eq!(
        reduce_ops,
        graph_reduce_ops(&y),
        "a reduction ran more than once"
    );
    let mut want = Vec::new();
    for r in 0..3 {
        let row = &a[r * 5..r * 5 + 5];
        let mx = row.iter().cloned().fold(f32::MIN, f32::max);
        let ex: Vec<f32> = row.iter().map(|v| (v - mx).exp()).collect();
        let tot: f32 = ex.iter().sum();
        want.extend(ex.iter().map(|v| v / tot));
    }
    close(&y.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn reduce_shared_by_two_consumers_runs_once() {
    let a = seq(12, 1.0);
    let x = t(&a, &[3, 4]);
    let s = sum(&x, Some(&[1]), false);
    let y = alu(
        &alu(&s, AluOp::Mul, &[&s.const_like(2.0)]),
        AluOp::Add,
        &[&alu(&s, AluOp::Mul, &[&s])],
    );
    let (_, reduce_ops) = work(&y);
    assert_eq!(reduce_ops, graph_reduce_ops(&y));
    let want: Vec<f32> = (0..3)
        .map(|i| (0..4).map(|j| a[i * 4 + j]).sum::<f32>())
        .map(|v| v * 2.0 + v * v)
        .collect();
    close(&y.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn unrealized_intermediate_read_through_expand_is_realized() {
    let (a, b) = (seq(6, 1.0), seq(12, 0.5));
    let c = alu(
        &t(&a, &[2, 3]),
        AluOp::Add,
        &[&t(&a, &[2, 3]).const_like(1.0)],
    );
    let y = matmul(&c, &t(&b, &[3, 4]));
    assert_eq!(
        work(&y).0,
        2,
        "(a+1) must be computed once, not per output element"
    );
    let want: Vec<f32> = (0..8)
        .map(|o| {
            (0..3)
                .map(|k| (a[(o / 4) * 3 + k] + 1.0) * b[k * 4 + o % 4])
                .sum()
        })
        .collect();
    close(&y.to_vec::<f32>().unwrap(), &want);
}

#[test]
fn movement_ops_alone_make_no_kernel_beyond_the_copy() {
    let a = seq(12, 1.0);
    let x = t(&a, &[3, 4])
        .try_permute(&[1, 0])
        .unwrap()
        .try_flip(&[0])
        .unwrap();
    assert_eq!(work(&x).0, 1);
    let want: Vec<f32> = (0..12).map(|o| a[(o % 3) * 4 + (3 - o / 3)]).collect();
    close(&x.to_vec::<f32>().unwrap(), &want);
}

/// The schedule of an LSTM-like recurrence unrolled over `steps`: with `g = h[t-1]·W` (16 columns,
/// read in two halves as an LSTM reads its gates), `c[t] = c[t-1]·a + tanh(x[t] + g[:8] +
/// g[8:])`, `h[t] = relu(c[t])·0.5`; output the last `h`. The cell state is read by two ops
/// each step (`h[t]` and `c[t+1]`), as an LSTM's is. Returns (flops, values, a loop's values).
fn recurrence(steps: usize) -> (u64, Vec<f32>, Vec<f32>) {
    let (a, xs, w) = (seq(8, 0.1), seq(8 * steps, 0.3), seq(128, 0.05));
    let (at, xt, wt) = (t(&a, &[1, 8]), t(&xs, &[steps, 8]), t(&w, &[8, 16]));
    let mut c = Tensor::zeros(&[1, 8], picograd_core::DType::F32);
    let mut h = c.clone();
    for k in 0..steps {
        let x = xt.try_shrink(&[(k, k + 1), (0, 8)]).unwrap();
        let g = matmul(&h, &wt);
        let half = |k: usize| g.try_shrink(&[(0, 1), (8 * k, 8 * k + 8)]).unwrap();
        let pre = alu(&alu(&x, AluOp::Add, &[&half(0)]), AluOp::Add, &[&half(1)]).tanh();
        c = alu(&alu(&c, AluOp::Mul, &[&at]), AluOp::Add, &[&pre]);
        h = alu(&relu(&c), AluOp::Mul, &[&c.const_like(0.5)]);
    }
    let items = schedule(&[h.lazy().contiguous()]).unwrap();
    let flops = count_work(&items).unwrap().flops;
    // The same recurrence as a loop.
    let (mut lc, mut lh) = (vec![0f32; 8], vec![0f32; 8]);
    for k in 0..steps {
        let hw: Vec<f32> = (0..16)
            .map(|j| (0..8).map(|i| lh[i] * w[i * 16 + j]).sum())
            .collect();
        for j in 0..8 {
            lc[j] = lc[j] * a[j] + (xs[k * 8 + j] + hw[j] + hw[j + 8]).tanh();
            lh[j] = lc[j].max(0.0) * 0.5;
        }
    }
    (flops, h.to_vec::<f32>().unwrap(), lh)
}

/// An unrolled recurrence whose state two ops read each step does not recompute its history:
/// the work grows linearly with the steps (each step's kernels stay the same size), not
/// quadratically as it does when every step's kernel refolds the cell state from step 0.
#[test]
fn unrolled_recurrence_does_not_recompute_its_history() {
    let (f8, got8, want8) = recurrence(8);
    let (f32_, got32, want32) = recurrence(32);
    close(&got8, &want8);
    close(&got32, &want32);
    // Four times the steps: at most five times the work (quadratic would be sixteen).
    assert!(
        f32_ <= 5 * f8,
        "32 steps cost {f32_} flops, 8 steps {f8}: the recurrence is recomputed"
    );
}

/// `h ← relu(h·P + x[t])` over `steps` rows of a realized `x`, with `P` a cyclic shift (so the
/// products are exact and each step is one kernel: `h` is read through an expand); the distinct
/// kernels the schedule lowers, and the result with a plain loop's.
fn unrolled_steps(steps: usize) -> (usize, usize, Vec<f32>, Vec<f32>) {
    let xs = seq(steps * 6, 0.25);
    let x = t(&xs, &[steps, 6]);
    x.realize().unwrap();
    let mut shift = vec![0.0f32; 36];
    for k in 0..6 {
        shift[k * 6 + (k + 1) % 6] = 1.0;
    }
    let p = t(&shift, &[6, 6]);
    let mut h = t(&[0.5, -1.0, 2.0, 0.25, 3.0, -0.5], &[1, 6]);
    for s in 0..steps {
        let row = x.shrink(&[(s, s + 1), (0, 6)]);
        h = relu(&alu(&matmul(&h, &p), AluOp::Add, &[&row]));
    }
    let items = schedule(&[h.lazy()]).unwrap();
    let text = picograd_core::realize::describe(&items).unwrap();
    let distinct: std::collections::HashSet<&String> = text.iter().collect();
    // The same recurrence as a plain loop (a shift, adds and max: exact in f32).
    let mut want = vec![0.5f32, -1.0, 2.0, 0.25, 3.0, -0.5];
    for s in 0..steps {
        let prev = want.clone();
        for (j, w) in want.iter_mut().enumerate() {
            *w = (prev[(j + 5) % 6] + xs[s * 6 + j]).max(0.0);
        }
    }
    (
        items.len(),
        distinct.len(),
        h.to_vec::<f32>().unwrap(),
        want,
    )
}

#[test]
fn steps_reading_rows_of_one_buffer_share_a_kernel() {
    let (items12, distinct12, got12, want12) = unrolled_steps(12);
    let (items24, distinct24, got24, want24) = unrolled_steps(24);
    assert_eq!((items12, items24), (12, 24), "one kernel per step");
    // Every step reads the same shape at another row: one kernel, whatever the step count.
    assert_eq!(
        (distinct12, distinct24),
        (1, 1),
        "distinct kernels per schedule"
    );
    assert_eq!(got12, want12);
    assert_eq!(got24, want24);
}

/// An LSTM cell unrolled over `steps` with gates `g = h[t-1]·W` (4 slices of 8):
/// `c[t] = σ(g_f)·c[t-1] + σ(g_i)·tanh(g_c)`, `h[t] = σ(g_o)·tanh(c[t])`. Returns the kernels
/// scheduled, the last `h`, and a plain loop's.
fn lstm_cell_steps(steps: usize) -> (usize, Vec<f32>, Vec<f32>) {
    let w = seq(8 * 32, 0.05);
    let wt = t(&w, &[8, 32]);
    let mut c = t(&seq(8, 0.1), &[1, 8]);
    let mut h = t(&seq(8, 0.2), &[1, 8]);
    for _ in 0..steps {
        let g = matmul(&h, &wt);
        let gate = |k: usize| g.try_shrink(&[(0, 1), (8 * k, 8 * k + 8)]).unwrap();
        let (i, f, cc, o) = (
            gate(0).sigmoid(),
            gate(1).sigmoid(),
            gate(2).tanh(),
            gate(3).sigmoid(),
        );
        c = alu(
            &alu(&f, AluOp::Mul, &[&c]),
            AluOp::Add,
            &[&alu(&i, AluOp::Mul, &[&cc])],
        );
        h = alu(&o, AluOp::Mul, &[&c.tanh()]);
    }
    let items = schedule(&[h.lazy().contiguous()]).unwrap().len();
    let sig = |x: f32| 1.0 / (1.0 + (-x).exp());
    let (mut lc, mut lh) = (seq(8, 0.1), seq(8, 0.2));
    for _ in 0..steps {
        let g: Vec<f32> = (0..32)
            .map(|j| (0..8).map(|q| lh[q] * w[q * 32 + j]).sum())
            .collect();
        for j in 0..8 {
            lc[j] = sig(g[8 + j]) * lc[j] + sig(g[j]) * g[16 + j].tanh();
            lh[j] = sig(g[24 + j]) * lc[j].tanh();
        }
    }
    (items, h.to_vec::<f32>().unwrap(), lh)
}

/// The ops of one gate's sigmoid (negate, exp, add, reciprocal) are held by the same kernels:
/// they add no level of recomputation, so they fuse; only the fanned-out cell state is cut
/// (every few steps), giving at most 3 kernels per step (gates, and the cell's elementwise
/// part), not one per sigmoid op.
#[test]
fn lstm_gate_chains_fuse_into_few_kernels_per_step() {
    let (items, got, want) = lstm_cell_steps(12);
    close(&got, &want);
    assert!(items <= 3 * 12, "{items} kernels for 12 steps");
}
