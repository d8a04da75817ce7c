//! Symbolic shapes end to end: a batch dimension that is a bound `Variable`. A model (matmul,
//! bias and relu, a second matmul, a row sum) run at every batch size in the variable's bounds
//! compiles each kernel once, gives the fixed-shape run's values at each size, and on the
//! interpreter does work proportional to the batch (no padding to the maximum); a JIT capture
//! over a sequence length replays at any length (a function that reads the length as a number
//! captures again per length instead); mean/var/std over the symbolic axis compile once. One
//! test function, so no other test in this
//! binary moves the global counters while it measures.

use std::sync::Arc;

#[path = "../examples/common/tiny_gpt.rs"]
mod tiny_gpt;

use picograd::device::Device;
use picograd::interp::executed_ops;
use picograd::jit::Jit;
use picograd::realize::counters;
use picograd::symbolic::{Node, Variable};
use picograd::Tensor;

fn vals(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.37 + seed).sin() * 2.0).round() / 4.0)
        .collect()
}

struct Model {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Model {
    fn new(dev: &Arc<dyn Device>) -> Model {
        let t = |n, shape: &[usize], seed| Tensor::try_from_slice_on(&vals(n, seed), shape, dev);
        Model {
            w1: t(8 * 16, &[8, 16], 1.0).unwrap(),
            b1: t(16, &[16], 2.0).unwrap(),
            w2: t(16 * 4, &[16, 4], 3.0).unwrap(),
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let h = x.matmul(&self.w1).add(&self.b1).relu();
        h.matmul(&self.w2).mul(0.5).sum(&[-1], false)
    }
}

/// Runs the model at every batch size in 1..=16 through a bound variable; compares with the
/// fixed-shape model at each size in `check` (each fixed size compiles its own kernels, so the
/// Clang run checks a few to stay fast).
fn batches_on(dev: Arc<dyn Device>, check: &[usize], count_work: bool) {
    let m = Model::new(&dev);
    let batch = Variable::new("batch", 1, 16).unwrap();
    let mut work = Vec::new();
    let mut first = None;
    for b in 1..=16usize {
        let xs = vals(b * 8, b as f32);
        let dims = [batch.bind(b as i64).unwrap(), Node::cst(8)];
        let x = Tensor::try_from_slice_sym_on(&xs, &dims, &dev).unwrap();
        let (c0, w0) = (counters(), executed_ops());
        let y = m.forward(&x);
        y.realize().unwrap();
        let (c1, w1) = (counters(), executed_ops());
        work.push(w1 - w0);
        match first {
            None => first = Some(c1.compiled - c0.compiled),
            Some(_) => {
                assert_eq!(c1.compiled, c0.compiled, "batch {b}: compiled again");
                assert_eq!(c1.lowered, c0.lowered, "batch {b}: lowered again");
            }
        }
        assert_eq!(y.shape(), vec![b]);
        let got = y.to_vec::<f32>().unwrap();
        if !check.contains(&b) {
            continue;
        }
        let fixed = Tensor::try_from_slice_on(&xs, &[b, 8], &dev).unwrap();
        let want = m.forward(&fixed).to_vec::<f32>().unwrap();
        assert_eq!(got, want, "batch {b} on {}", dev.name());
    }
    let compiled = first.unwrap();
    assert!(compiled >= 2, "{} kernels compiled at batch 1", compiled);
    if count_work {
        eprintln!("interp work by batch: {work:?}");
        assert!(
            work[0] * 8 <= work[7],
            "batch 1 did {} instructions, batch 8 did {}",
            work[0],
            work[7]
        );
    }
    // Outside the bounds: an error at bind time, and a value never reaches a kernel.
    assert!(batch.bind(17).is_err());
    assert!(batch.bind(0).is_err());
}

/// Naive reference of the JIT'd function: `(relu(x @ w).sum(0), x * 2 + 1)` for `x` of
/// `len` rows of 4 and `w` of 4 x 3.
fn jit_reference(x: &[f32], w: &[f32], len: usize) -> (Vec<f32>, Vec<f32>) {
    let mut s = vec![0.0f32; 3];
    for r in 0..len {
        for (c, sc) in s.iter_mut().enumerate() {
            let dot: f32 = (0..4).map(|k| x[r * 4 + k] * w[k * 3 + c]).sum();
            *sc += dot.max(0.0);
        }
    }
    (s, x.iter().map(|v| v * 2.0 + 1.0).collect())
}

/// A JIT captured at one sequence length replays at any length in the variable's bounds with
/// no scheduling, lowering or compiling; a `SignatureCache` keys on the symbolic signature.
fn jit_on(dev: Arc<dyn Device>) {
    let seq = Variable::new("seq_len", 1, 128).unwrap();
    let ws = vals(12, 5.0);
    let w = Tensor::try_from_slice_on(&ws, &[4, 3], &dev).unwrap();
    let f = |x: &[Tensor]| -> picograd::Result<Vec<Tensor>> {
        let s = x[0].try_matmul(&w)?.relu().try_sum(&[0], false)?;
        Ok(vec![s, x[0].mul(2.0).add(1.0)])
    };
    let jit = Jit::new(f);
    let cache = picograd::jit::SignatureCache::new();
    let input = |len: usize| {
        let xs = vals(len * 4, len as f32 * 0.1);
        let dims = [seq.bind(len as i64).unwrap(), Node::cst(4)];
        (Tensor::try_from_slice_sym_on(&xs, &dims, &dev).unwrap(), xs)
    };
    let mut before = None;
    for (i, len) in [5usize, 1, 128, 37, 5, 64].into_iter().enumerate() {
        let (x, xs) = input(len);
        if i == 1 {
            before = Some(counters());
        }
        let (want_s, want_y) = jit_reference(&xs, &ws, len);
        let outs = jit.call(std::slice::from_ref(&x)).unwrap();
        assert_eq!(outs[1].shape(), vec![len, 4], "len {len}");
        assert_eq!(outs[0].to_vec::<f32>().unwrap(), want_s, "sum, len {len}");
        assert_eq!(outs[1].to_vec::<f32>().unwrap(), want_y, "x*2+1, len {len}");
        let cached = cache.call(std::slice::from_ref(&x), f).unwrap();
        assert_eq!(
            cached[0].to_vec::<f32>().unwrap(),
            want_s,
            "cache, len {len}"
        );
        assert_eq!(cached[1].shape(), vec![len, 4], "cache, len {len}");
    }
    let (b, a) = (before.unwrap(), counters());
    // A variable of other bounds, or a fixed length, is another signature: the JIT refuses it.
    let other = Variable::new("seq_len", 1, 64).unwrap();
    let dims = [other.bind(5).unwrap(), Node::cst(4)];
    let x = Tensor::try_from_slice_sym_on(&vals(20, 0.0), &dims, &dev).unwrap();
    let e = jit
        .call(std::slice::from_ref(&x))
        .expect_err("other bounds replayed");
    assert!(e.to_string().contains("captured as"), "{e}");
    let x = Tensor::try_from_slice_on(&vals(20, 0.0), &[5, 4], &dev).unwrap();
    assert!(
        jit.call(std::slice::from_ref(&x)).is_err(),
        "a fixed length replayed"
    );
    assert_eq!(jit.replays(), 7);
    assert_eq!(jit.captures(), 1, "a symbolic function was specialized");
    let st = cache.stats();
    assert_eq!((st.captures, st.replays, st.reruns), (1, 5, 0));
    assert_eq!(a.compiled, b.compiled, "replays compiled on {}", dev.name());
    assert_eq!(a.lowered, b.lowered, "replays lowered on {}", dev.name());
    assert_eq!(
        a.scheduled,
        b.scheduled,
        "replays scheduled on {}",
        dev.name()
    );
}

/// A function that reads a symbolic dimension's value as a number (`shape()`, here to divide
/// by the row count) is specialized to it: the JIT and the `SignatureCache` capture again at
/// each new value and replay only at a value they captured, so every result equals the eager
/// function's (a replay of the first capture would divide by a stale count).
fn jit_specialized_on(dev: Arc<dyn Device>) {
    let seq = Variable::new("rows", 1, 32).unwrap();
    let f = |x: &[Tensor]| -> picograd::Result<Vec<Tensor>> {
        let n = x[0].shape()[0] as f64;
        Ok(vec![x[0].try_sum(&[0], false)?.div(n).add(1.0)])
    };
    let jit = Jit::new(f);
    let cache = picograd::jit::SignatureCache::new();
    for len in [3usize, 3, 7, 3, 12, 7] {
        let xs = vals(len * 4, len as f32 * 0.3);
        let dims = [seq.bind(len as i64).unwrap(), Node::cst(4)];
        let x = Tensor::try_from_slice_sym_on(&xs, &dims, &dev).unwrap();
        let eager = f(std::slice::from_ref(&x)).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let got = jit.call(std::slice::from_ref(&x)).unwrap();
        assert_eq!(got[0].to_vec::<f32>().unwrap(), eager, "jit, len {len}");
        let got = cache.call(std::slice::from_ref(&x), f).unwrap();
        assert_eq!(got[0].to_vec::<f32>().unwrap(), eager, "cache, len {len}");
    }
    assert_eq!((jit.captures(), jit.replays()), (3, 3), "on {}", dev.name());
    let st = cache.stats();
    assert_eq!((st.captures, st.replays, st.reruns), (3, 3, 0));
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

/// `mean`, `var`, `std` and `mean_all` over a symbolic axis divide by the count at each bound
/// value: equal to the fixed-shape ops at every length, the kernels compiled and lowered once,
/// and a JIT'd normalization over the axis replays at every length from one capture.
fn stats_on(dev: Arc<dyn Device>, lens: &[usize]) {
    let n = Variable::new("rows", 1, 16).unwrap();
    let ops = |x: &Tensor| {
        vec![
            x.mean(&[0], false),
            x.var(&[0], true, 1.0),
            x.std(&[-2], false, 0.0),
            x.mean_all(),
        ]
    };
    let mut first = None;
    for &len in lens {
        let xs = vals(len * 5, len as f32 * 0.7);
        let dims = [n.bind(len as i64).unwrap(), Node::cst(5)];
        let x = Tensor::try_from_slice_sym_on(&xs, &dims, &dev).unwrap();
        let c0 = counters();
        let got: Vec<Vec<f32>> = ops(&x).iter().map(|t| t.to_vec::<f32>().unwrap()).collect();
        let c1 = counters();
        match first {
            None => first = Some(()),
            Some(()) => {
                assert_eq!(c1.compiled, c0.compiled, "len {len}: compiled again");
                assert_eq!(c1.lowered, c0.lowered, "len {len}: lowered again");
            }
        }
        let fixed = Tensor::try_from_slice_on(&xs, &[len, 5], &dev).unwrap();
        for (k, (g, w)) in got.iter().zip(ops(&fixed)).enumerate() {
            close(
                g,
                &w.to_vec::<f32>().unwrap(),
                &format!("op {k} at len {len}"),
            );
        }
    }
    let f = |x: &[Tensor]| -> picograd::Result<Vec<Tensor>> {
        let centered = x[0].try_sub(x[0].try_mean(&[0], true)?)?;
        Ok(vec![
            centered.try_div(x[0].try_std(&[0], true, 0.0)?.add(1.0))?
        ])
    };
    let jit = Jit::new(f);
    for len in [4usize, 9, 1, 16] {
        let xs = vals(len * 5, len as f32);
        let dims = [n.bind(len as i64).unwrap(), Node::cst(5)];
        let x = Tensor::try_from_slice_sym_on(&xs, &dims, &dev).unwrap();
        let want = f(std::slice::from_ref(&x)).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let got = jit.call(std::slice::from_ref(&x)).unwrap();
        close(
            &got[0].to_vec::<f32>().unwrap(),
            &want,
            &format!("jit at len {len}"),
        );
    }
    assert_eq!((jit.captures(), jit.replays()), (1, 3), "on {}", dev.name());
}

/// The KV-cache decoder of `examples/kv_decode.rs`: every position runs the kernels of the
/// first step (no compile after it), and each step's logits match the uncached model's.
fn kv_decode_on(dev: Arc<dyn Device>) {
    let m = tiny_gpt::TinyGpt::new(&dev).unwrap();
    let d = tiny_gpt::decode(&m, &dev, &[3, 1, 4], 5).unwrap();
    eprintln!(
        "kv decode on {}: tokens {:?}, max |cached - uncached| {:e}",
        dev.name(),
        d.tokens,
        d.max_diff
    );
    assert_eq!(d.tokens.len(), 8);
    assert_eq!(d.compiled_after_first, 0, "compiled after the first token");
    assert_eq!(d.lowered_after_first, 0, "lowered after the first token");
    assert_eq!(d.captures, 1, "the step was specialized to a position");
    assert!(d.max_diff <= 1e-5, "cached logits differ by {}", d.max_diff);
}

#[test]
fn symbolic_batch_and_jit() {
    let all: Vec<usize> = (1..=16).collect();
    batches_on(picograd::context::interp(), &all, true);
    let clang =
        picograd::runtime::clang().expect("no C compiler: the Clang symbolic test cannot run");
    batches_on(clang.clone(), &[1, 6, 16], false);
    jit_on(picograd::context::interp());
    jit_on(clang.clone());
    jit_specialized_on(picograd::context::interp());
    stats_on(picograd::context::interp(), &[3, 2, 16, 7]);
    // Each fixed length compiles its own kernels: a few on Clang.
    stats_on(clang.clone(), &[3, 16]);
    kv_decode_on(picograd::context::interp());
    kv_decode_on(clang);
}
