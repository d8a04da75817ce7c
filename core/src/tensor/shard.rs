//! Sharded tensors: one tensor split along an axis over several devices.
//!
//! A sharded tensor *is* its gathered value — the parts copied to the first device and
//! concatenated, lazily — plus the list of per-device parts. Elementwise ops and reductions run
//! per shard, each on its own device; a reduction over the sharded axis combines the partial
//! results on the first device. Every other op uses the gathered value, so results are always
//! right (and differentiable: parts come from the source by shrink and copy) and gather only
//! when needed.
//!
//! Invariant: parts are ordinary (unsharded) tensors whose concatenation along `axis` is the
//! tensor's value; a sharded result of a per-shard op has the same split and devices.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicBool;

use spin::Mutex;

use super::{must, Tensor, TensorNode};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::ops::{AluOp, ReduceOp};

/// The per-device parts of a sharded tensor.
pub(crate) struct Shards {
    parts: Vec<Tensor>,
    axis: usize,
}

impl Shards {
    fn sizes(&self) -> Vec<usize> {
        self.parts.iter().map(|p| p.shape()[self.axis]).collect()
    }

    fn devices(&self) -> Vec<Arc<dyn Device>> {
        self.parts.iter().map(Tensor::device).collect()
    }

    fn same_split(&self, o: &Shards) -> bool {
        self.axis == o.axis
            && self.sizes() == o.sizes()
            && self
                .devices()
                .iter()
                .zip(o.devices())
                .all(|(a, b)| Arc::ptr_eq(a, &b))
    }
}

impl Tensor {
    /// Splits the tensor along `axis` into one part per device (sizes as even as possible, the
    /// first parts one larger), copying each part to its device. Elementwise ops and reductions
    /// then run per shard; `to_vec`, `realize` and every other op see the whole tensor.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use picograd_core::{device::Device, Interp, Tensor};
    /// let devs: Vec<Arc<dyn Device>> = vec![Arc::new(Interp::new()), Arc::new(Interp::new())];
    /// let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).shard(&devs, 0);
    /// let y = x.mul(2.0); // runs as two kernels, one per device
    /// assert_eq!(y.shards().unwrap().len(), 2);
    /// assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0]);
    /// ```
    pub fn try_shard(&self, devices: &[Arc<dyn Device>], axis: isize) -> Result<Tensor> {
        let ax = self.resolve_axes("shard", &[axis])?[0];
        let n = self.shape()[ax];
        let k = devices.len();
        if k == 0 || n < k {
            return Err(Error::shape(
                "shard",
                alloc::format!(
                    "cannot split axis {ax} of shape {:?} over {k} devices",
                    self.shape()
                ),
            ));
        }
        let mut parts = Vec::with_capacity(k);
        let mut start = 0;
        for (i, dev) in devices.iter().enumerate() {
            let len = n / k + usize::from(i < n % k);
            let mut arg: Vec<(usize, usize)> = self.shape().iter().map(|&d| (0, d)).collect();
            arg[ax] = (start, start + len);
            parts.push(self.try_shrink(&arg)?.to_device(dev));
            start += len;
        }
        Tensor::from_parts(parts, ax)
    }

    /// [`Tensor::try_shard`], panicking on a bad axis or too few elements.
    #[track_caller]
    pub fn shard(&self, devices: &[Arc<dyn Device>], axis: isize) -> Tensor {
        must(self.try_shard(devices, axis))
    }

    /// The per-device parts, for a sharded tensor.
    pub fn shards(&self) -> Option<&[Tensor]> {
        self.0.shards.as_deref().map(|s| s.parts.as_slice())
    }

    /// The axis the tensor is split along, for a sharded tensor.
    pub fn shard_axis(&self) -> Option<usize> {
        self.0.shards.as_ref().map(|s| s.axis)
    }

    /// The sharded tensor made of `parts` (split along `axis`): its value is the parts gathered
    /// on the first part's device.
    fn from_parts(parts: Vec<Tensor>, axis: usize) -> Result<Tensor> {
        let home = parts[0].device();
        let gathered: Vec<Tensor> = parts.iter().map(|p| p.to_device(&home)).collect();
        let refs: Vec<&Tensor> = gathered.iter().collect();
        let g = Tensor::try_cat(&refs, axis as isize)?;
        let node = TensorNode {
            lazy: Mutex::new(g.lazy()),
            requires_grad: AtomicBool::new(g.requires_grad()),
            grad: Mutex::new(None),
            ctx: Mutex::new(g.ctx()),
            shards: Some(Arc::new(Shards { parts, axis })),
        };
        Ok(Tensor(Arc::new(node)))
    }

    /// An elementwise op run per shard, when an operand is sharded and the others can follow its
    /// split (`None`: not sharded, or splits that disagree — the gathered values are used).
    pub(crate) fn sharded_alu(&self, op: AluOp, others: &[&Tensor]) -> Result<Option<Tensor>> {
        let all: Vec<&Tensor> = core::iter::once(self)
            .chain(others.iter().copied())
            .collect();
        let Some(lead) = all
            .iter()
            .find_map(|t| t.0.shards.clone().map(|s| (s, t.shape())))
        else {
            return Ok(None);
        };
        let (sh, shape) = lead;
        let mut full = self.shape();
        for o in others {
            full = Tensor::broadcast_shape(op.name(), &full, &o.shape())?;
        }
        let follows = |t: &Tensor| {
            t.0.shards
                .as_ref()
                .is_none_or(|s| s.same_split(&sh) && t.shape() == shape)
        };
        if full != shape || !all.iter().all(|t| follows(t)) {
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(sh.parts.len());
        let mut start = 0;
        for (i, own) in sh.parts.iter().enumerate() {
            let len = own.shape()[sh.axis];
            let operands = all
                .iter()
                .map(|t| match &t.0.shards {
                    Some(s) => Ok(s.parts[i].clone()),
                    None => piece(t, &full, sh.axis, (start, start + len), &own.device()),
                })
                .collect::<Result<Vec<_>>>()?;
            let rest: Vec<&Tensor> = operands[1..].iter().collect();
            parts.push(operands[0].try_alu(op, &rest)?);
            start += len;
        }
        Tensor::from_parts(parts, sh.axis).map(Some)
    }

    /// A reduction run per shard; over the sharded axis the partial results are combined on the
    /// first device (`None`: not sharded).
    pub(crate) fn sharded_reduce(
        &self,
        op: ReduceOp,
        axes: Option<&[isize]>,
        keepdim: bool,
    ) -> Result<Option<Tensor>> {
        let Some(sh) = self.0.shards.clone() else {
            return Ok(None);
        };
        let axes: Vec<usize> = match axes {
            None => (0..self.ndim()).collect(),
            Some(a) => self.resolve_axes(op.name(), a)?,
        };
        let signed: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        if !axes.contains(&sh.axis) {
            let parts = sh
                .parts
                .iter()
                .map(|p| p.try_reduce(op, Some(&signed), keepdim))
                .collect::<Result<Vec<_>>>()?;
            let axis = if keepdim {
                sh.axis
            } else {
                sh.axis - axes.iter().filter(|&&a| a < sh.axis).count()
            };
            return Tensor::from_parts(parts, axis).map(Some);
        }
        let home = sh.parts[0].device();
        let mut acc: Option<Tensor> = None;
        for p in &sh.parts {
            let partial = p.try_reduce(op, Some(&signed), true)?.to_device(&home);
            acc = Some(match acc {
                None => partial,
                Some(a) => a.try_alu(op.alu(), &[&partial])?,
            });
        }
        let total = acc.ok_or_else(|| Error::shape("shard", "no shards"))?;
        if keepdim {
            return Ok(Some(total));
        }
        let shape: Vec<isize> = self
            .shape()
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d as isize)
            .collect();
        total.try_reshape(&shape).map(Some)
    }
}

/// The part of unsharded `t` (broadcast to `full`) that lines up with one shard, on its device.
fn piece(
    t: &Tensor,
    full: &[usize],
    axis: usize,
    range: (usize, usize),
    dev: &Arc<dyn Device>,
) -> Result<Tensor> {
    let mut arg: Vec<(usize, usize)> = full.iter().map(|&d| (0, d)).collect();
    arg[axis] = range;
    // A constant (a scalar operand) is made on the shard's device rather than copied there.
    if let (Some(v), false) = (t.lazy().as_const(), t.requires_grad()) {
        let shape: Vec<crate::shape::Sint> = arg
            .iter()
            .map(|&(b, e)| crate::shape::Sint::cst((e - b) as i64))
            .collect();
        return Ok(Tensor::from_lazy(crate::lazy::LazyBuffer::constant(
            dev, v, &shape,
        )));
    }
    let b = t.try_broadcast_to(full)?;
    Ok(b.try_shrink(&arg)?.to_device(dev))
}
