//! Optimizers ([`SGD`], [`Adam`] / AdamW) and learning-rate schedules ([`StepLR`],
//! [`cosine_lr`]).
//!
//! An update is built from detached values and `grad()`s (leaves), so it records no gradient, and
//! written with `try_assign` into the parameters' own buffers. [`Optimizer::schedule_step`]
//! builds every update lazily and returns the tensors to realize (parameters and optimizer
//! state); [`Optimizer::step`] realizes them together in one schedule. Inside a `Jit` step
//! function return those tensors as outputs: the capture then replays the in-place updates. The
//! learning rate and Adam's bias-correction powers live in one-element buffers, so a schedule
//! that changes the rate takes effect in replays too.
//!
//! Ordering invariant: every parameter update depends on a small *barrier* value that reads every
//! gradient (and any tensor passed as `after`). The scheduler orders kernels by data dependence
//! only, so without it a kernel that reads a parameter's old value (a backward matmul) could run
//! after that parameter's in-place write.

use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// Something that updates parameters from their gradients.
pub trait Optimizer {
    /// Builds the in-place updates lazily (they run after every kernel that computes the
    /// gradients or `after`) and returns the tensors that must be realized to apply them.
    fn schedule_step(&mut self, after: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// The parameters being optimized.
    fn params(&self) -> &[Tensor];

    /// The learning rate now.
    fn lr(&self) -> f64;

    /// Sets the learning rate (written into its buffer, so captured steps see it).
    fn set_lr(&mut self, lr: f64) -> Result<()>;

    /// Applies one update: [`Optimizer::schedule_step`], realized in one schedule.
    fn step(&mut self) -> Result<()> {
        let outs = self.schedule_step(&[])?;
        let refs: Vec<&Tensor> = outs.iter().collect();
        Tensor::realize_all(&refs)
    }

    /// Clears every parameter's gradient.
    fn zero_grad(&self) {
        self.params().iter().for_each(|p| p.set_grad(None));
    }
}

/// A realized f32 buffer of `shape` filled with `v`, of its own (optimizer state).
fn state(shape: &[usize], v: f64) -> Result<Tensor> {
    super::own_buffer(&Tensor::full(shape, v, DType::F32))
}

/// One element of `t` as a `[1]` tensor (a cheap read that still orders after `t`'s kernel).
fn first(t: &Tensor) -> Result<Tensor> {
    t.detach().try_reshape(&[-1])?.try_shrink(&[(0, 1)])
}

/// A `[1]` bool that is computed from every gradient and every `after` tensor.
fn barrier(params: &[Tensor], after: &[&Tensor]) -> Result<Option<Tensor>> {
    let mut acc: Option<Tensor> = None;
    let grads = params.iter().filter_map(Tensor::grad);
    for t in grads.chain(after.iter().map(|t| (*t).clone())) {
        let f = first(&t)?.cast(DType::F32);
        acc = Some(match acc {
            None => f,
            Some(a) => a.try_add(f)?,
        });
    }
    acc.map(|a| a.try_eq(&a)).transpose()
}

/// `value`, made to depend on the barrier (the same value either way).
fn after_barrier(value: Tensor, bar: &Option<Tensor>) -> Result<Tensor> {
    match bar {
        Some(b) => b.try_where(&value, &value),
        None => Ok(value),
    }
}

/// Writes `lr` into the learning-rate buffer.
fn write_lr(buf: &Tensor, lr: f64) -> Result<()> {
    buf.try_assign(&buf.const_like(lr))?;
    buf.realize().map(|_| ())
}

/// Stochastic gradient descent with momentum, Nesterov momentum and L2 weight decay (PyTorch's
/// update: `g += wd·p; b = μ·b + g; g = nesterov ? g + μ·b : b; p -= lr·g`).
pub struct SGD {
    params: Vec<Tensor>,
    bufs: Vec<Tensor>,
    lr: f64,
    lr_t: Tensor,
    /// Momentum μ (0 for plain SGD).
    pub momentum: f64,
    /// Use Nesterov momentum.
    pub nesterov: bool,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
}

impl SGD {
    /// SGD over `params` with learning rate `lr`, `momentum`, `nesterov`, `weight_decay`.
    pub fn new(
        params: Vec<Tensor>,
        lr: f64,
        momentum: f64,
        nesterov: bool,
        weight_decay: f64,
    ) -> Result<SGD> {
        let bufs = if momentum != 0.0 {
            let b = params.iter().map(|p| state(&p.shape(), 0.0));
            b.collect::<Result<Vec<_>>>()?
        } else {
            Vec::new()
        };
        Ok(SGD {
            params,
            bufs,
            lr,
            lr_t: state(&[1], lr)?,
            momentum,
            nesterov,
            weight_decay,
        })
    }

    /// The direction for parameter `i` (momentum buffer updated in `out`).
    fn direction(&self, i: usize, g: &Tensor, out: &mut Vec<Tensor>) -> Result<Tensor> {
        let p = self.params[i].detach();
        let g = if self.weight_decay != 0.0 {
            g.try_add(p.try_mul(self.weight_decay)?)?
        } else {
            g.clone()
        };
        if self.momentum == 0.0 {
            return Ok(g);
        }
        let b = &self.bufs[i];
        b.try_assign(&b.detach().try_mul(self.momentum)?.try_add(&g)?)?;
        out.push(b.clone());
        let b = b.detach();
        if self.nesterov {
            g.try_add(b.try_mul(self.momentum)?)
        } else {
            Ok(b)
        }
    }
}

impl Optimizer for SGD {
    fn schedule_step(&mut self, after: &[&Tensor]) -> Result<Vec<Tensor>> {
        let bar = barrier(&self.params, after)?;
        let mut out = Vec::new();
        for i in 0..self.params.len() {
            let Some(g) = self.params[i].grad() else {
                continue;
            };
            let d = self.direction(i, &g, &mut out)?;
            let p = &self.params[i];
            let new = p.detach().try_sub(d.try_mul(self.lr_t.detach())?)?;
            p.try_assign(&after_barrier(new, &bar)?)?;
            out.push(p.clone());
        }
        Ok(out)
    }

    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.lr
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.lr = lr;
        write_lr(&self.lr_t, lr)
    }
}

/// Adam's hyperparameters.
#[derive(Clone, Copy, Debug)]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first and second moment estimates.
    pub betas: (f64, f64),
    /// Added to the denominator.
    pub eps: f64,
    /// Weight decay: an L2 term in the gradient (Adam) or decoupled (AdamW).
    pub weight_decay: f64,
    /// Decoupled weight decay (`p -= lr·wd·p`, AdamW) instead of L2.
    pub decoupled: bool,
}

impl AdamConfig {
    /// Adam with `lr`, betas (0.9, 0.999), eps 1e-8, no weight decay.
    pub fn adam(lr: f64) -> AdamConfig {
        AdamConfig {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
        }
    }

    /// AdamW: Adam with decoupled weight decay `wd`.
    pub fn adamw(lr: f64, wd: f64) -> AdamConfig {
        AdamConfig {
            weight_decay: wd,
            decoupled: true,
            ..AdamConfig::adam(lr)
        }
    }
}

/// Adam and AdamW (bias-corrected moment estimates; PyTorch's update).
pub struct Adam {
    params: Vec<Tensor>,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
    /// `β1^t` and `β2^t`, updated each step.
    pows: (Tensor, Tensor),
    lr_t: Tensor,
    /// The hyperparameters (changing `lr` here does not reach the buffer: use `set_lr`).
    pub cfg: AdamConfig,
}

impl Adam {
    /// Adam (or AdamW, per `cfg.decoupled`) over `params`.
    pub fn new(params: Vec<Tensor>, cfg: AdamConfig) -> Result<Adam> {
        let zeros = |ps: &[Tensor]| -> Result<Vec<Tensor>> {
            ps.iter().map(|p| state(&p.shape(), 0.0)).collect()
        };
        Ok(Adam {
            m: zeros(&params)?,
            v: zeros(&params)?,
            pows: (state(&[1], 1.0)?, state(&[1], 1.0)?),
            lr_t: state(&[1], cfg.lr)?,
            params,
            cfg,
        })
    }

    /// Advances `β^t` and returns the bias corrections `(1-β1^t, 1-β2^t)` as `[1]` tensors.
    fn corrections(&self, out: &mut Vec<Tensor>) -> Result<(Tensor, Tensor)> {
        let (p1, p2) = &self.pows;
        p1.try_assign(&p1.detach().try_mul(self.cfg.betas.0)?)?;
        p2.try_assign(&p2.detach().try_mul(self.cfg.betas.1)?)?;
        out.extend([p1.clone(), p2.clone()]);
        let one_minus = |p: &Tensor| p.detach().neg().try_add(1.0);
        Ok((one_minus(p1)?, one_minus(p2)?))
    }

    /// The new value of parameter `i` with gradient `g`; moments updated in `out`.
    fn update(
        &self,
        i: usize,
        g: &Tensor,
        c: &(Tensor, Tensor),
        out: &mut Vec<Tensor>,
    ) -> Result<Tensor> {
        let cfg = &self.cfg;
        let p = self.params[i].detach();
        let g = if cfg.weight_decay != 0.0 && !cfg.decoupled {
            g.try_add(p.try_mul(cfg.weight_decay)?)?
        } else {
            g.clone()
        };
        let (m, v) = (&self.m[i], &self.v[i]);
        let (b1, b2) = cfg.betas;
        m.try_assign(&m.detach().try_mul(b1)?.try_add(g.try_mul(1.0 - b1)?)?)?;
        v.try_assign(
            &v.detach()
                .try_mul(b2)?
                .try_add(g.try_mul(&g)?.try_mul(1.0 - b2)?)?,
        )?;
        out.extend([m.clone(), v.clone()]);
        let m_hat = m.detach().try_div(&c.0)?;
        let v_hat = v.detach().try_div(&c.1)?;
        let step = m_hat.try_div(v_hat.sqrt().try_add(cfg.eps)?)?;
        let lr = self.lr_t.detach();
        let p = if cfg.decoupled && cfg.weight_decay != 0.0 {
            p.try_sub(p.try_mul(&lr)?.try_mul(cfg.weight_decay)?)?
        } else {
            p
        };
        p.try_sub(step.try_mul(&lr)?)
    }
}

impl Optimizer for Adam {
    fn schedule_step(&mut self, after: &[&Tensor]) -> Result<Vec<Tensor>> {
        let bar = barrier(&self.params, after)?;
        let mut out = Vec::new();
        let c = self.corrections(&mut out)?;
        for i in 0..self.params.len() {
            let Some(g) = self.params[i].grad() else {
                continue;
            };
            let new = self.update(i, &g, &c, &mut out)?;
            self.params[i].try_assign(&after_barrier(new, &bar)?)?;
            out.push(self.params[i].clone());
        }
        Ok(out)
    }

    fn params(&self) -> &[Tensor] {
        &self.params
    }

    fn lr(&self) -> f64 {
        self.cfg.lr
    }

    fn set_lr(&mut self, lr: f64) -> Result<()> {
        self.cfg.lr = lr;
        write_lr(&self.lr_t, lr)
    }
}

/// Step decay: `base · gamma^(epoch / step_size)`.
#[derive(Clone, Copy, Debug)]
pub struct StepLR {
    /// The starting rate.
    pub base: f64,
    /// Epochs between decays.
    pub step_size: usize,
    /// Factor per decay.
    pub gamma: f64,
}

impl StepLR {
    /// The rate for `epoch` (0-based).
    pub fn lr_at(&self, epoch: usize) -> f64 {
        let k = epoch / self.step_size.max(1);
        self.base * libm::pow(self.gamma, k as f64)
    }
}

/// Cosine annealing from `base` (at `step` 0) to `min` (at `total`), clamped after `total`.
pub fn cosine_lr(base: f64, min: f64, step: usize, total: usize) -> f64 {
    let frac = (step.min(total) as f64) / (total.max(1) as f64);
    min + 0.5 * (base - min) * (1.0 + libm::cos(core::f64::consts::PI * frac))
}
