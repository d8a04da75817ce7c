//! Training with `nn`: one SGD (momentum, Nesterov, weight decay) and one Adam/AdamW step on a
//! fixed batch equal an independent f64 computation of the same step (forward, backward and
//! update written out by hand below); the same steps under the JIT agree; and a few epochs of
//! the digits MLP bring the loss well below its initial value.
// The f64 references index several arrays in step; index loops read clearest.
#![allow(clippy::needless_range_loop)]

#[path = "../examples/common/digits.rs"]
mod digits;

use picograd::jit::Jit;
use picograd::nn::losses::cross_entropy;
use picograd::nn::optim::AdamConfig;
use picograd::nn::{Adam, Linear, Module, Optimizer, SGD};
use picograd::{DType, Tensor};

/// A 2-layer MLP in f64: parameters as flat row-major vectors.
#[derive(Clone, Debug)]
struct RefMlp {
    /// w1 (h, i), b1 (h), w2 (o, h), b2 (o).
    p: [Vec<f64>; 4],
    dims: (usize, usize, usize),
}

impl RefMlp {
    /// Gradients of the mean cross entropy of the batch `x` (n, i) with labels `y`.
    fn grads(&self, x: &[f64], y: &[usize]) -> [Vec<f64>; 4] {
        let (ni, nh, no) = self.dims;
        let n = y.len();
        let [w1, b1, w2, b2] = &self.p;
        let mut g = [
            vec![0.0; nh * ni],
            vec![0.0; nh],
            vec![0.0; no * nh],
            vec![0.0; no],
        ];
        for r in 0..n {
            let xr = &x[r * ni..(r + 1) * ni];
            let h: Vec<f64> = (0..nh)
                .map(|j| b1[j] + (0..ni).map(|k| w1[j * ni + k] * xr[k]).sum::<f64>())
                .collect();
            let a: Vec<f64> = h.iter().map(|v| v.max(0.0)).collect();
            let z: Vec<f64> = (0..no)
                .map(|j| b2[j] + (0..nh).map(|k| w2[j * nh + k] * a[k]).sum::<f64>())
                .collect();
            let m = z.iter().cloned().fold(f64::MIN, f64::max);
            let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
            let dz: Vec<f64> = (0..no)
                .map(|j| ((z[j] - m).exp() / s - f64::from(u8::from(j == y[r]))) / n as f64)
                .collect();
            for j in 0..no {
                g[3][j] += dz[j];
                for k in 0..nh {
                    g[2][j * nh + k] += dz[j] * a[k];
                }
            }
            for k in 0..nh {
                let da: f64 = (0..no).map(|j| dz[j] * w2[j * nh + k]).sum();
                let dh = if h[k] > 0.0 { da } else { 0.0 };
                g[1][k] += dh;
                for c in 0..ni {
                    g[0][k * ni + c] += dh * xr[c];
                }
            }
        }
        g
    }
}

/// The picograd model and its f64 twin, with the same starting values.
fn models() -> (Linear, Linear, RefMlp) {
    let (l1, l2) = (Linear::new(4, 5, true, 11), Linear::new(5, 3, true, 12));
    let v = |t: &Option<Tensor>| t.as_ref().unwrap().to_f64_vec().unwrap();
    let p = [
        l1.weight.to_f64_vec().unwrap(),
        v(&l1.bias),
        l2.weight.to_f64_vec().unwrap(),
        v(&l2.bias),
    ];
    (l1, l2, RefMlp { p, dims: (4, 5, 3) })
}

fn batch() -> (Vec<f64>, Vec<usize>) {
    let x: Vec<f64> = (0..24).map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0).collect();
    (x, vec![0, 2, 1, 2, 0, 1])
}

fn inputs(x: &[f64], y: &[usize]) -> (Tensor, Tensor) {
    let xt = Tensor::from_f64s(x, &[y.len(), 4], DType::F32);
    let yt = Tensor::from_f64s(
        &y.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &[y.len()],
        DType::I32,
    );
    (xt, yt)
}

fn loss_of(l1: &Linear, l2: &Linear, x: &Tensor, y: &Tensor) -> Tensor {
    cross_entropy(&l2.forward(&l1.forward(x).relu()), y).unwrap()
}

fn all_params(l1: &Linear, l2: &Linear) -> Vec<Tensor> {
    let mut p: Vec<Tensor> = l1.parameters().into_iter().map(|(_, t)| t).collect();
    p.extend(l2.parameters().into_iter().map(|(_, t)| t));
    p
}

fn assert_close(params: &[Tensor], want: &[Vec<f64>; 4], what: &str) {
    for (i, (t, w)) in params.iter().zip(want).enumerate() {
        let got = t.to_f64_vec().unwrap();
        for (k, (a, b)) in got.iter().zip(w).enumerate() {
            assert!((a - b).abs() < 1e-5, "{what}: param {i}[{k}]: {a} vs {b}");
        }
    }
}

/// SGD reference: PyTorch's update, `steps` times on the same batch.
fn ref_sgd(
    mut m: RefMlp,
    steps: usize,
    (lr, mu, nesterov, wd): (f64, f64, bool, f64),
) -> [Vec<f64>; 4] {
    let (x, y) = batch();
    let mut bufs: Vec<Vec<f64>> = m.p.iter().map(|p| vec![0.0; p.len()]).collect();
    for _ in 0..steps {
        let g = m.grads(&x, &y);
        for i in 0..4 {
            for k in 0..m.p[i].len() {
                let gk = g[i][k] + wd * m.p[i][k];
                bufs[i][k] = mu * bufs[i][k] + gk;
                let d = if nesterov {
                    gk + mu * bufs[i][k]
                } else {
                    bufs[i][k]
                };
                m.p[i][k] -= lr * d;
            }
        }
    }
    m.p
}

/// Adam reference (AdamW when `decoupled`), `steps` times on the same batch.
fn ref_adam(mut m: RefMlp, steps: usize, cfg: AdamConfig) -> [Vec<f64>; 4] {
    let (x, y) = batch();
    let (b1, b2) = cfg.betas;
    let mut mv: Vec<(Vec<f64>, Vec<f64>)> =
        m.p.iter()
            .map(|p| (vec![0.0; p.len()], vec![0.0; p.len()]))
            .collect();
    for t in 1..=steps {
        let g = m.grads(&x, &y);
        for i in 0..4 {
            for k in 0..m.p[i].len() {
                let p = m.p[i][k];
                let gk = if cfg.decoupled {
                    g[i][k]
                } else {
                    g[i][k] + cfg.weight_decay * p
                };
                mv[i].0[k] = b1 * mv[i].0[k] + (1.0 - b1) * gk;
                mv[i].1[k] = b2 * mv[i].1[k] + (1.0 - b2) * gk * gk;
                let mh = mv[i].0[k] / (1.0 - b1.powi(t as i32));
                let vh = mv[i].1[k] / (1.0 - b2.powi(t as i32));
                let p = if cfg.decoupled {
                    p - cfg.lr * cfg.weight_decay * p
                } else {
                    p
                };
                m.p[i][k] = p - cfg.lr * mh / (vh.sqrt() + cfg.eps);
            }
        }
    }
    m.p
}

/// Runs `steps` eager steps of `opt` on the fixed batch.
fn eager_steps(l1: &Linear, l2: &Linear, opt: &mut dyn Optimizer, steps: usize) {
    let (x, y) = batch();
    let (xt, yt) = inputs(&x, &y);
    for _ in 0..steps {
        opt.zero_grad();
        loss_of(l1, l2, &xt, &yt).backward().unwrap();
        opt.step().unwrap();
    }
}

const SGD_CASES: [(f64, f64, bool, f64); 3] = [
    (0.1, 0.0, false, 0.0),
    (0.1, 0.9, false, 0.01),
    (0.05, 0.9, true, 0.02),
];

#[test]
fn one_sgd_step_matches_f64_reference() {
    picograd::init();
    for case in SGD_CASES {
        let (l1, l2, r) = models();
        let (lr, mu, nesterov, wd) = case;
        let mut opt = SGD::new(all_params(&l1, &l2), lr, mu, nesterov, wd).unwrap();
        eager_steps(&l1, &l2, &mut opt, 1);
        assert_close(
            &all_params(&l1, &l2),
            &ref_sgd(r.clone(), 1, case),
            "sgd step 1",
        );
        eager_steps(&l1, &l2, &mut opt, 1);
        assert_close(&all_params(&l1, &l2), &ref_sgd(r, 2, case), "sgd step 2");
    }
}

#[test]
fn one_adam_step_matches_f64_reference() {
    picograd::init();
    let cases = [
        AdamConfig::adam(0.01),
        AdamConfig {
            weight_decay: 0.1,
            ..AdamConfig::adam(0.02)
        },
        AdamConfig::adamw(0.02, 0.1),
    ];
    for cfg in cases {
        let (l1, l2, r) = models();
        let mut opt = Adam::new(all_params(&l1, &l2), cfg).unwrap();
        eager_steps(&l1, &l2, &mut opt, 1);
        assert_close(
            &all_params(&l1, &l2),
            &ref_adam(r.clone(), 1, cfg),
            "adam step 1",
        );
        eager_steps(&l1, &l2, &mut opt, 2);
        assert_close(&all_params(&l1, &l2), &ref_adam(r, 3, cfg), "adam step 3");
    }
}

/// Three steps under the JIT (one capture, two replays) equal three f64 steps.
fn jit_steps(mut opt: Box<dyn Optimizer + Send>, l1: &Linear, l2: &Linear) {
    // The step borrows the optimizer mutably (the function is `FnMut`) and uses `?`.
    let step = Jit::new(|io: &[Tensor]| {
        opt.zero_grad();
        let loss = loss_of(l1, l2, &io[0], &io[1]);
        loss.backward()?;
        let mut outs = vec![loss.clone()];
        outs.extend(opt.schedule_step(&[&loss])?);
        Ok(outs)
    });
    let (x, y) = batch();
    for _ in 0..3 {
        let (xt, yt) = inputs(&x, &y);
        step.call(&[xt, yt]).unwrap();
    }
    assert_eq!(step.replays(), 2);
}

#[test]
fn jit_steps_match_f64_reference() {
    picograd::init();
    let (l1, l2, r) = models();
    let case = SGD_CASES[2];
    let sgd = SGD::new(all_params(&l1, &l2), case.0, case.1, case.2, case.3).unwrap();
    jit_steps(Box::new(sgd), &l1, &l2);
    assert_close(&all_params(&l1, &l2), &ref_sgd(r, 3, case), "jit sgd");

    let (l1, l2, r) = models();
    let cfg = AdamConfig::adamw(0.02, 0.1);
    jit_steps(
        Box::new(Adam::new(all_params(&l1, &l2), cfg).unwrap()),
        &l1,
        &l2,
    );
    assert_close(&all_params(&l1, &l2), &ref_adam(r, 3, cfg), "jit adamw");
}

#[test]
fn digits_mlp_loss_drops_in_a_few_epochs() {
    picograd::init();
    let data = digits::load().unwrap();
    let (train, _) = digits::split(&data);
    let train = train.slice(0, 512);
    let (l1, l2) = (Linear::new(64, 128, true, 1), Linear::new(128, 10, true, 2));
    let mut opt = Adam::new(all_params(&l1, &l2), AdamConfig::adam(0.01)).unwrap();
    let bs = 64;
    let mut epoch_loss = Vec::new();
    for _ in 0..4 {
        let mut total = 0.0;
        for b in 0..train.len() / bs {
            let part = train.slice(b * bs, (b + 1) * bs);
            let x = Tensor::from_slice(&part.images, &[bs, 64]);
            let y = Tensor::from_slice(
                &part
                    .labels
                    .iter()
                    .map(|&l| i32::from(l))
                    .collect::<Vec<_>>(),
                &[bs],
            );
            opt.zero_grad();
            let loss = loss_of(&l1, &l2, &x, &y);
            loss.backward().unwrap();
            opt.step().unwrap();
            total += loss.item::<f32>().unwrap();
        }
        epoch_loss.push(total / (train.len() / bs) as f32);
    }
    let (first, last) = (epoch_loss[0], *epoch_loss.last().unwrap());
    assert!(first > 1.0, "initial loss {first}");
    assert!(last < 0.3 * first, "loss per epoch {epoch_loss:?}");
}
