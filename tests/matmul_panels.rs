//! Cache-blocked matmul (`core/src/tensor/matmul.rs`, `panel_matmul`): a large 2-D product is
//! computed through contiguous panels of `b`, and must give bit for bit what the plain
//! broadcast-multiply-and-sum gives (the same sum over `k` in the same order), agree with an
//! f64 dot product, and differentiate like the plain form.

use picograd::schedule::schedule;
use picograd::Tensor;

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0) * 0.73)
        .collect()
}

/// The plain composition `matmul` uses below the panel threshold.
fn plain(a: &Tensor, b: &Tensor) -> Tensor {
    let (n, k) = (a.shape()[0] as isize, a.shape()[1] as isize);
    let m = b.shape()[1] as isize;
    let a3 = a.reshape(&[n, 1, k]);
    let b3 = b.transpose(0, 1).reshape(&[1, m, k]);
    a3.mul(&b3).sum(&[-1], false)
}

/// (n, k, m): odd row counts and prime reduce lengths, all with `b` of at least 1 Mi elements
/// and `m` a multiple of the panel width.
const SHAPES: [(usize, usize, usize); 4] = [
    (64, 4099, 1024),
    (97, 2048, 2048),
    (130, 1031, 4096),
    (333, 1500, 1024),
];

#[test]
fn panel_matmul_is_the_plain_sum_bit_for_bit() {
    picograd::init();
    for (n, k, m) in SHAPES {
        let (ad, bd) = (data(n * k, 1), data(k * m, 2));
        let a = Tensor::from_slice(&ad, &[n, k]);
        let b = Tensor::from_slice(&bd, &[k, m]);
        let c = a.matmul(&b);
        let kernels = schedule(&[c.lazy().contiguous()]).unwrap().len();
        assert!(
            kernels >= 3,
            "{n}x{k}x{m}: panels not used ({kernels} kernels)"
        );
        let got = c.to_vec::<f32>().unwrap();
        let want = plain(&a, &b).to_vec::<f32>().unwrap();
        assert_eq!(got.len(), n * m);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{n}x{k}x{m} [{i}]: {g} vs {w}");
        }
        // An independent check on a spread of entries: the f64 dot product.
        for idx in (0..n * m).step_by(977) {
            let (i, j) = (idx / m, idx % m);
            let dot: f64 = (0..k)
                .map(|r| f64::from(ad[i * k + r]) * f64::from(bd[r * m + j]))
                .sum();
            let tol = 1e-5 * (k as f64);
            assert!(
                (f64::from(got[idx]) - dot).abs() <= tol,
                "{n}x{k}x{m} [{i}, {j}]: {} vs f64 {dot}",
                got[idx]
            );
        }
    }
}

#[test]
fn panel_matmul_differentiates_like_the_plain_form() {
    picograd::init();
    let (n, k, m) = (64, 2048, 2048);
    let grads = |panels: bool| {
        let a = Tensor::from_slice(&data(n * k, 3), &[n, k]).requires_grad_(true);
        let b = Tensor::from_slice(&data(k * m, 4), &[k, m]).requires_grad_(true);
        let c = if panels { a.matmul(&b) } else { plain(&a, &b) };
        c.mul(&c).sum_all().backward().unwrap();
        let g = |t: &Tensor| t.grad().unwrap().to_vec::<f32>().unwrap();
        (g(&a), g(&b))
    };
    let (pa, pb) = grads(true);
    let (qa, qb) = grads(false);
    for (name, p, q) in [("a", &pa, &qa), ("b", &pb, &qb)] {
        for (i, (x, y)) in p.iter().zip(q.iter()).enumerate() {
            let tol = 1e-4 * (1.0 + y.abs());
            assert!((x - y).abs() <= tol, "grad {name} [{i}]: {x} vs {y}");
        }
    }
}
