//! Convolution and pooling over a symbolic batch: a small CNN (conv + bias + relu, max pool,
//! overlapping avg pool with padding, padded max pool, flatten, `reshape(-1, K)`, matmul, a
//! global average pool and a strided transposed conv) on an input `[batch, 2, 7, 7]` whose
//! batch is a bound `Variable`. At every batch size in the bounds the outputs keep the batch
//! symbolic, nothing is compiled or lowered after the first size, the values equal the
//! fixed-shape model's bit for bit (and the first conv + relu + pool a naive loop's), the
//! interpreter's work scales with the batch, and a JIT replays one capture at every size. One
//! test function, so no other test in this binary moves the global counters while it measures.

use std::sync::Arc;

use picograd::device::Device;
use picograd::interp::executed_ops;
use picograd::jit::Jit;
use picograd::realize::counters;
use picograd::symbolic::{Node, Variable};
use picograd::{ConvOpts, PoolOpts, Tensor};

const C: usize = 2;
const S: usize = 7;

fn vals(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.37 + seed).sin() * 2.0).round() / 4.0)
        .collect()
}

struct Cnn {
    w: Tensor,
    b: Tensor,
    fc: Tensor,
    wt: Tensor,
}

impl Cnn {
    fn new(dev: &Arc<dyn Device>) -> Cnn {
        let t = |shape: &[usize], seed| {
            let n = shape.iter().product();
            Tensor::try_from_slice_on(&vals(n, seed), shape, dev).unwrap()
        };
        Cnn {
            w: t(&[4, C, 3, 3], 1.0),
            b: t(&[4], 2.0),
            fc: t(&[4 * 4 * 4, 3], 3.0),
            wt: t(&[4, 2, 2, 2], 4.0),
        }
    }

    /// `[relu(conv) pooled, logits, global average, transposed conv]`.
    fn forward(&self, x: &Tensor) -> Vec<Tensor> {
        let conv = ConvOpts::default().padding(1);
        let h = x.conv2d(&self.w, Some(&self.b), &conv).relu(); // [b, 4, 7, 7]
        let p = h.max_pool2d(&PoolOpts::new(&[2, 2])); // [b, 4, 3, 3]
        let avg = PoolOpts::new(&[3, 3])
            .stride(&[1, 1])
            .padding(1)
            .count_include_pad(false);
        let a = p.avg_pool2d(&avg); // [b, 4, 3, 3]
        let m = a.max_pool2d(&PoolOpts::new(&[2, 2]).stride(&[1, 1]).padding(1)); // [b, 4, 4, 4]
        let logits = m.flatten(1, -1).reshape(&[-1, 64]).matmul(&self.fc);
        let gap = m.mean(&[2, 3], false);
        let up = p.conv_transpose2d(&self.wt, None, &ConvOpts::default().stride(&[2]));
        vec![p, logits, gap, up]
    }
}

/// Conv (padding 1) + bias + relu + 2×2 max pool, as loops over `x` `[b, C, S, S]`.
fn naive_pooled(x: &[f32], w: &[f32], bias: &[f32], b: usize) -> Vec<f32> {
    let at = |n: usize, c: usize, i: isize, j: isize| -> f32 {
        let inside = (0..S as isize).contains(&i) && (0..S as isize).contains(&j);
        match inside {
            true => x[((n * C + c) * S + i as usize) * S + j as usize],
            false => 0.0,
        }
    };
    let mut out = Vec::new();
    for n in 0..b {
        for o in 0..4 {
            let conv = |i: usize, j: usize| -> f32 {
                let mut s = bias[o];
                for c in 0..C {
                    for (di, dj) in (0..3).flat_map(|a| (0..3).map(move |b| (a, b))) {
                        let v = at(n, c, (i + di) as isize - 1, (j + dj) as isize - 1);
                        s += v * w[((o * C + c) * 3 + di) * 3 + dj];
                    }
                }
                s.max(0.0)
            };
            for (pi, pj) in (0..3).flat_map(|a| (0..3).map(move |b| (a, b))) {
                let m = (0..4)
                    .map(|t| conv(2 * pi + t / 2, 2 * pj + t % 2))
                    .fold(f32::MIN, f32::max);
                out.push(m);
            }
        }
    }
    out
}

/// The input `[b, C, S, S]` holding `xs`, its batch axis `batch` bound to `b`, on `dev`.
fn batch_input(xs: &[f32], batch: &Variable, b: usize, dev: &Arc<dyn Device>) -> Tensor {
    let dims = [
        batch.bind(b as i64).unwrap(),
        Node::cst(C as i64),
        Node::cst(S as i64),
        Node::cst(S as i64),
    ];
    Tensor::try_from_slice_sym_on(xs, &dims, dev).unwrap()
}

fn batches_on(dev: Arc<dyn Device>, sizes: &[usize], check: &[usize], count_work: bool) {
    let m = Cnn::new(&dev);
    let batch = Variable::new("batch", 1, 8).unwrap();
    let (mut first, mut work) = (None, Vec::new());
    for &b in sizes {
        let xs = vals(b * C * S * S, b as f32);
        let x = batch_input(&xs, &batch, b, &dev);
        let (c0, w0) = (counters(), executed_ops());
        let ys = m.forward(&x);
        Tensor::realize_all(&ys.iter().collect::<Vec<_>>()).unwrap();
        let (c1, w1) = (counters(), executed_ops());
        work.push((b, w1 - w0));
        match first {
            None => first = Some(c1.compiled - c0.compiled),
            Some(_) => {
                assert_eq!(c1.compiled, c0.compiled, "batch {b}: compiled again");
                assert_eq!(c1.lowered, c0.lowered, "batch {b}: lowered again");
            }
        }
        for (k, y) in ys.iter().enumerate() {
            let lead = &y.sym_shape()[0];
            assert!(
                !lead.is_const(),
                "output {k} lost the symbolic batch: {lead}"
            );
            assert_eq!(y.shape()[0], b, "output {k}");
        }
        let got: Vec<Vec<f32>> = ys.iter().map(|y| y.to_vec::<f32>().unwrap()).collect();
        let want_pool = naive_pooled(&xs, &vals(4 * C * 9, 1.0), &vals(4, 2.0), b);
        assert_eq!(got[0], want_pool, "conv+relu+pool at batch {b}");
        if check.contains(&b) {
            let fixed = Tensor::try_from_slice_on(&xs, &[b, C, S, S], &dev).unwrap();
            for (k, (g, w)) in got.iter().zip(m.forward(&fixed)).enumerate() {
                assert_eq!(g, &w.to_vec::<f32>().unwrap(), "output {k} at batch {b}");
            }
        }
    }
    let compiled = first.unwrap();
    eprintln!(
        "{}: {compiled} kernels compiled at the first batch; work {work:?}",
        dev.name()
    );
    assert!(
        compiled >= 3,
        "{compiled} kernels compiled at the first batch"
    );
    if count_work {
        // No padding to the maximum: the work is `per_item × batch + fixed`, exactly linear,
        // with the fixed part (loop set-up outside the batch loops) under 0.1% of one item.
        let at = |b: usize| work.iter().find(|w| w.0 == b).unwrap().1 as i64;
        let per_item = at(2) - at(1);
        let fixed = at(1) - per_item;
        for &(b, w) in &work {
            assert_eq!(
                w as i64,
                per_item * b as i64 + fixed,
                "work at batch {b}: {work:?}"
            );
        }
        assert!(
            (0..=per_item / 1000).contains(&fixed),
            "fixed work {fixed} against {per_item} per item"
        );
    }
}

/// A JIT of the CNN captured at one batch replays at the others from that one capture.
fn jit_on(dev: Arc<dyn Device>) {
    let m = Cnn::new(&dev);
    let batch = Variable::new("batch", 1, 8).unwrap();
    let f = |x: &[Tensor]| -> picograd::Result<Vec<Tensor>> { Ok(m.forward(&x[0])) };
    let jit = Jit::new(f);
    let mut before = None;
    for (i, b) in [3usize, 1, 8, 5].into_iter().enumerate() {
        let xs = vals(b * C * S * S, b as f32 * 0.5);
        let x = batch_input(&xs, &batch, b, &dev);
        if i == 1 {
            before = Some(counters());
        }
        let got = jit.call(std::slice::from_ref(&x)).unwrap();
        let want = f(std::slice::from_ref(&x)).unwrap();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.shape(), w.shape(), "jit output {k} at batch {b}");
            assert_eq!(
                g.to_vec::<f32>().unwrap(),
                w.to_vec::<f32>().unwrap(),
                "jit output {k} at batch {b}"
            );
        }
    }
    assert_eq!((jit.captures(), jit.replays()), (1, 3), "on {}", dev.name());
    let (b, a) = (before.unwrap(), counters());
    assert_eq!(a.compiled, b.compiled, "compiled after the first batch");
}

#[test]
fn conv_and_pool_over_a_symbolic_batch() {
    let all: Vec<usize> = (1..=8).collect();
    batches_on(picograd::context::interp(), &all, &[1, 4, 8], true);
    jit_on(picograd::context::interp());
    let clang =
        picograd::runtime::clang().expect("no C compiler: the Clang symbolic test cannot run");
    batches_on(clang.clone(), &[2, 8, 1], &[1, 8], false);
    jit_on(clang);
}
