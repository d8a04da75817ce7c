//! Symbolic shapes end to end: a batch dimension that is a bound `Variable`. A model (matmul,
//! bias and relu, a second matmul, a row sum) run at every batch size in the variable's bounds
//! compiles each kernel once, gives the fixed-shape run's values at each size, and on the
//! interpreter does work proportional to the batch (no padding to the maximum); a JIT capture
//! over a sequence length replays at any length. One test function, so no other test in this
//! binary moves the global counters while it measures.

use std::sync::Arc;

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

#[test]
fn symbolic_batch_and_jit() {
    let all: Vec<usize> = (1..=16).collect();
    batches_on(picograd::context::interp(), &all, true);
    let clang =
        picograd::runtime::clang().expect("no C compiler: the Clang symbolic test cannot run");
    batches_on(clang, &[1, 6, 16], false);
}
