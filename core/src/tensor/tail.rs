//! Movement ops on the trailing axes that carry the leading axes through exactly as they are:
//! how pooling and convolution build their windows over `[batch.., channels, spatial..]` without
//! reading the batch. The trailing axes the op changes must be concrete; a leading axis may be
//! symbolic (a bound batch `Variable`) and stays symbolic, so the windows of a symbolic batch are
//! the same graph at every batch value (one kernel, one capture).
//!
//! Invariant: on a tensor whose leading axes are all constants each op here is the concrete
//! primitive (`try_pad`, `try_shrink`, `try_reshape`, `try_broadcast_to`) with the same
//! arguments, so fixed-shape graphs are unchanged; with a symbolic leading axis it is the
//! symbolic primitive (`try_pad_sym`, ...) with that axis passed as its own expression. No
//! leading size is read as a number (`Node::resolved`), so nothing specializes a capture.

use alloc::format;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::shape::Sint;
use crate::symbolic::Node;

use super::Tensor;

impl Tensor {
    /// The leading axes as they are and the trailing `n` axes as sizes; a symbolic trailing
    /// axis is an error naming it (only leading axes may be symbolic here).
    pub(crate) fn lead_tail(&self, op: &'static str, n: usize) -> Result<(Vec<Sint>, Vec<usize>)> {
        let mut lead = self.sym_shape();
        if n > lead.len() {
            return Err(Error::shape(
                op,
                format!("{n} trailing axes of shape {:?}", self.shape_quiet()),
            ));
        }
        let tail = lead.split_off(lead.len() - n);
        let sizes = tail
            .iter()
            .enumerate()
            .map(|(a, d)| match d.as_const() {
                Some(c) => Ok(c.max(0) as usize),
                None => Err(Error::shape(
                    op,
                    format!(
                        "axis {} of shape {:?} is symbolic ({d}); only the leading (batch) \
                         axes may be symbolic here",
                        lead.len() + a,
                        self.shape_quiet()
                    ),
                )),
            })
            .collect::<Result<Vec<usize>>>()?;
        Ok((lead, sizes))
    }

    /// The leading axes as constants, when none is symbolic.
    fn const_lead(lead: &[Sint]) -> Option<Vec<usize>> {
        lead.iter()
            .map(|d| d.as_const().map(|c| c.max(0) as usize))
            .collect()
    }

    /// Keeps the first `keep` axes and reshapes the rest to `tail`.
    pub(crate) fn try_reshape_tail(&self, keep: usize, tail: &[usize]) -> Result<Tensor> {
        let lead = self
            .lead_tail("reshape", self.ndim().saturating_sub(keep))?
            .0;
        match Tensor::const_lead(&lead) {
            Some(c) => {
                let shape: Vec<isize> = c.iter().chain(tail).map(|&d| d as isize).collect();
                self.try_reshape(&shape)
            }
            None => {
                let mut shape = lead;
                shape.extend(tail.iter().map(|&d| Node::cst(d as i64)));
                self.try_reshape_sym(&shape)
            }
        }
    }

    /// Pads the trailing `pads.len()` axes with `(before, after)` zeros.
    pub(crate) fn try_pad_tail(&self, pads: &[(usize, usize)]) -> Result<Tensor> {
        let lead = self.lead_tail("pad", pads.len())?.0;
        match Tensor::const_lead(&lead) {
            Some(c) => {
                let mut arg: Vec<(usize, usize)> = c.iter().map(|_| (0, 0)).collect();
                arg.extend_from_slice(pads);
                self.try_pad(&arg)
            }
            None => {
                let mut arg: Vec<(Sint, Sint)> =
                    lead.iter().map(|_| (Node::cst(0), Node::cst(0))).collect();
                arg.extend(pads.iter().map(|&(b, e)| cst_pair(b, e)));
                self.try_pad_sym(&arg)
            }
        }
    }

    /// Keeps `[begin, end)` of each of the trailing `keep.len()` axes.
    pub(crate) fn try_shrink_tail(&self, keep: &[(usize, usize)]) -> Result<Tensor> {
        let lead = self.lead_tail("shrink", keep.len())?.0;
        match Tensor::const_lead(&lead) {
            Some(c) => {
                let mut arg: Vec<(usize, usize)> = c.iter().map(|&d| (0, d)).collect();
                arg.extend_from_slice(keep);
                self.try_shrink(&arg)
            }
            None => {
                let mut arg: Vec<(Sint, Sint)> =
                    lead.iter().map(|d| (Node::cst(0), d.clone())).collect();
                arg.extend(keep.iter().map(|&(b, e)| cst_pair(b, e)));
                self.try_shrink_sym(&arg)
            }
        }
    }

    /// Broadcasts the trailing `tail.len()` axes to `tail` (size-1 axes stretch).
    pub(crate) fn try_expand_tail(&self, tail: &[usize]) -> Result<Tensor> {
        let lead = self.lead_tail("expand", tail.len())?.0;
        match Tensor::const_lead(&lead) {
            Some(c) => {
                let shape: Vec<usize> = c.iter().chain(tail).copied().collect();
                self.try_expand(&shape)
            }
            None => {
                let mut shape = lead;
                shape.extend(tail.iter().map(|&d| Node::cst(d as i64)));
                self.try_broadcast_to_sym(&shape)
            }
        }
    }
}

fn cst_pair(b: usize, e: usize) -> (Sint, Sint) {
    (Node::cst(b as i64), Node::cst(e as i64))
}
