//! The reverse pass and the gradient API: `requires_grad`, `backward`, `gradient`, `grad`,
//! `detach`.
//!
//! Invariants: the pass visits every tensor between the root and the leaves that needs a
//! gradient, in reverse topological order, so each tensor's gradient is complete (all its
//! consumers have contributed) before it flows further; gradients of leaves accumulate into their
//! `.grad` across `backward` calls until cleared.

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use hashbrown::{HashMap, HashSet};

use super::{Ctx, Tensor};
use crate::error::{Error, Result};
use crate::lazy::LazyBuffer;
use crate::ops::{AluOp, Scalar};

fn key(t: &Tensor) -> usize {
    alloc::sync::Arc::as_ptr(&t.0) as usize
}

impl Tensor {
    /// Does this tensor need a gradient?
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }

    /// Marks this tensor as needing a gradient (a parameter); returns it for chaining.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).requires_grad_(true);
    /// let y = x.mul(&x).sum_all();
    /// y.backward().unwrap();
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    /// ```
    pub fn requires_grad_(self, on: bool) -> Tensor {
        self.0.requires_grad.store(on, Ordering::Relaxed);
        self
    }

    /// The accumulated gradient, after `backward`.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().clone()
    }

    /// Replaces the accumulated gradient (`None` clears it, as optimizers' `zero_grad` does).
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.0.grad.lock() = g;
    }

    /// The same value without gradient history.
    pub fn detach(&self) -> Tensor {
        Tensor::from_lazy(self.lazy())
    }

    pub(crate) fn ctx(&self) -> Option<Ctx> {
        self.0.ctx.lock().clone()
    }

    /// Tensors from `self` back to the leaves that need gradients, consumers before producers.
    fn reverse_topo(&self) -> Vec<Tensor> {
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = alloc::vec![(self.clone(), false)];
        while let Some((t, done)) = stack.pop() {
            if done {
                order.push(t);
                continue;
            }
            if !seen.insert(key(&t)) {
                continue;
            }
            stack.push((t.clone(), true));
            if let Some(ctx) = t.ctx() {
                stack.extend(
                    ctx.parents
                        .iter()
                        .filter(|p| p.requires_grad())
                        .map(|p| (p.clone(), false)),
                );
            }
        }
        order.reverse();
        order
    }

    /// Gradients of `self` with respect to every tensor it depends on that needs one.
    fn grads(&self) -> Result<(Vec<Tensor>, HashMap<usize, LazyBuffer>)> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "backward",
                alloc::format!("needs a one-element tensor, shape is {:?}", self.shape()),
            ));
        }
        if !self.requires_grad() {
            return Err(Error::Unsupported(
                "backward of a tensor that does not require a gradient".into(),
            ));
        }
        let order = self.reverse_topo();
        let mut grads: HashMap<usize, LazyBuffer> = HashMap::new();
        let seed = self.lazy();
        grads.insert(
            key(self),
            LazyBuffer::constant(seed.device(), Scalar::one(seed.dtype()), seed.shape()),
        );
        for t in &order {
            let (Some(ctx), Some(g)) = (t.ctx(), grads.get(&key(t)).cloned()) else {
                continue;
            };
            for (p, pg) in ctx.parents.iter().zip(ctx.func.backward(&g)?) {
                let Some(pg) = pg else { continue };
                if !p.requires_grad() {
                    continue;
                }
                let acc = match grads.remove(&key(p)) {
                    Some(prev) => prev.alu(AluOp::Add, &[&pg])?,
                    None => pg,
                };
                grads.insert(key(p), acc);
            }
        }
        Ok((order, grads))
    }

    /// Computes the gradient of this one-element tensor with respect to every leaf that needs
    /// one, adding it to the leaf's `.grad`. The graph's history is released afterwards.
    pub fn backward(&self) -> Result<()> {
        let (order, grads) = self.grads()?;
        for t in &order {
            let is_leaf = t.ctx().is_none();
            if is_leaf {
                if let Some(g) = grads.get(&key(t)) {
                    let total = match t.grad() {
                        Some(prev) => prev.lazy().alu(AluOp::Add, &[g])?,
                        None => g.clone(),
                    };
                    t.set_grad(Some(Tensor::from_lazy(total)));
                }
            }
        }
        for t in &order {
            *t.0.ctx.lock() = None;
        }
        Ok(())
    }

    /// The gradients of this one-element tensor with respect to `targets` (zeros where it does
    /// not depend on one), leaving `.grad` and the graph untouched.
    pub fn gradient(&self, targets: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (_, grads) = self.grads()?;
        Ok(targets
            .iter()
            .map(|t| match grads.get(&key(t)) {
                Some(g) => Tensor::from_lazy(g.clone()),
                None => t.zeros_like(),
            })
            .collect())
    }

    /// The same tensor, with its gradient materialized into its own buffer in the backward pass
    /// (a kernel boundary there, as tinygrad's `contiguous_backward`).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).requires_grad_(true);
    /// let g = x.contiguous_backward().mul(3.0).sum_all().gradient(&[&x]).unwrap();
    /// assert_eq!(g[0].to_vec::<f32>().unwrap(), vec![3.0, 3.0]);
    /// ```
    pub fn contiguous_backward(&self) -> Tensor {
        Tensor::derive(
            crate::autograd::FnKind::ContiguousBackward,
            &[self],
            self.lazy(),
        )
    }

    /// A materialized copy (a kernel boundary); gradients pass straight through.
    pub fn contiguous(&self) -> Tensor {
        Tensor::derive(
            crate::autograd::FnKind::Contiguous,
            &[self],
            self.lazy().contiguous(),
        )
    }
}
