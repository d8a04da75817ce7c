//! Cache-blocked matmul, chosen by the scheduler (`core/src/schedule/layout.rs`): on the host
//! (Clang, its own vector width and cache sizes) a product whose `b` overflows L2 reads `b`
//! through a copy in contiguous panels — for any column count (a zero-padded last panel) and
//! batched products too. It must give bit for bit what the untransformed schedule gives (the
//! same sum over `k` in the same order), agree with an f64 dot product, and differentiate like
//! the untransformed schedule.

use picograd::realize::run_schedule;
use picograd::schedule::schedule_for;
use picograd::Tensor;

#[path = "common/seeded.rs"]
mod seeded;

fn data(n: usize, seed: usize) -> Vec<f32> {
    seeded::data_scaled(n, seed, 0.73)
}

/// Runs `t` scheduled with the host's layout transforms (`laid`) or none: values and how many
/// layout copies ran.
fn run(t: &Tensor, laid: bool) -> (Vec<f32>, usize) {
    let cfg = picograd::runtime::tuning::host_opt_config();
    let node = t.lazy().contiguous();
    let cfg = if laid { cfg.as_ref() } else { None };
    let items = schedule_for(std::slice::from_ref(&node), cfg).unwrap();
    run_schedule(&items).unwrap();
    let copies = items.iter().filter(|i| i.layout_copy).count();
    (Tensor::from_lazy(node).to_vec::<f32>().unwrap(), copies)
}

/// (batch, n, k, m): odd row counts, prime reduce lengths, column counts with and without a
/// remainder panel; every `b` overflows a 2 MiB L2, and every row count reaches the copy rule's
/// reuse on any host (`MIN_REUSE_VECTORS` × the vector width: 64 rows with AVX-512's 16 lanes —
/// 40 rows got no panels there).
const SHAPES: [(usize, usize, usize, usize); 4] = [
    (1, 64, 4099, 1024),
    (1, 97, 2048, 1000),
    (1, 333, 1500, 1024),
    (2, 65, 301, 1000),
];

#[test]
fn panelled_matmul_is_the_plain_sum_bit_for_bit() {
    picograd::init();
    if picograd::runtime::tuning::host_opt_config().is_none() {
        return; // PICOGRAD_NOOPT: no optimizer config, so no layout to test.
    }
    for (bt, n, k, m) in SHAPES {
        let (ad, bd) = (data(bt * n * k, 1), data(bt * k * m, 2));
        let mm = || {
            let a = Tensor::from_slice(&ad, &[bt, n, k]);
            let b = Tensor::from_slice(&bd, &[bt, k, m]);
            a.matmul(&b)
        };
        let (got, copies) = run(&mm(), true);
        let (want, none) = run(&mm(), false);
        assert_eq!((copies, none), (1, 0), "{bt}x{n}x{k}x{m}: panels not used");
        assert_eq!(got.len(), bt * n * m);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{bt}x{n}x{k}x{m} [{i}]: {g} vs {w}"
            );
        }
        // An independent check on a spread of entries: the f64 dot product.
        for idx in (0..bt * n * m).step_by(977) {
            let (t, i, j) = (idx / (n * m), idx / m % n, idx % m);
            let dot: f64 = (0..k)
                .map(|r| f64::from(ad[(t * n + i) * k + r]) * f64::from(bd[(t * k + r) * m + j]))
                .sum();
            let tol = 1e-5 * (k as f64);
            assert!(
                (f64::from(got[idx]) - dot).abs() <= tol,
                "{bt}x{n}x{k}x{m} [{t}, {i}, {j}]: {} vs f64 {dot}",
                got[idx]
            );
        }
    }
}

#[test]
fn panelled_matmul_differentiates_like_the_plain_schedule() {
    picograd::init();
    let (n, k, m) = (64, 1024, 1000);
    let grads = |laid: bool| {
        let a = Tensor::from_slice(&data(n * k, 3), &[n, k]).requires_grad_(true);
        let b = Tensor::from_slice(&data(k * m, 4), &[k, m]).requires_grad_(true);
        let c = a.matmul(&b);
        c.mul(&c).sum_all().backward().unwrap();
        let (ga, _) = run(&a.grad().unwrap(), laid);
        let (gb, _) = run(&b.grad().unwrap(), laid);
        (ga, gb)
    };
    let (pa, pb) = grads(true);
    let (qa, qb) = grads(false);
    for (name, p, q) in [("a", &pa, &qa), ("b", &pb, &qb)] {
        for (i, (x, y)) in p.iter().zip(q.iter()).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "grad {name} [{i}]: {x} vs {y}");
        }
    }
}
