//! Composing ShapeTrackers and the view facts the scheduler asks about.
//!
//! Invariant: `a.concat(b)` requires `b` to read positions of `a`'s shape (its first view's
//! buffer is `a`'s row-major layout); the result maps `b`'s positions straight to `a`'s buffer.

use alloc::vec::Vec;

use super::ShapeTracker;
use crate::error::{Error, Result};

impl ShapeTracker {
    /// The tracker that reads through `top` and then through `self`: positions of `top`'s shape
    /// mapped to `self`'s buffer. Identity-like `top`s return `self` unchanged.
    pub fn concat(&self, top: &ShapeTracker) -> Result<ShapeTracker> {
        let first = &top.views()[0];
        if top.views().len() == 1 && first.contiguous() && first.shape() == self.shape() {
            return Ok(self.clone());
        }
        let mut views: Vec<super::View> = self.views().to_vec();
        views.extend(top.views().iter().cloned());
        let st = ShapeTracker::from_views(views).ok_or_else(|| {
            Error::shape("concat", alloc::format!("cannot stack {top} on {self}"))
        })?;
        Ok(st.simplify())
    }

    /// Does some view read one element more than once (a stride-0 axis longer than 1)?
    pub fn has_expand(&self) -> bool {
        self.views().iter().any(|v| {
            v.shape()
                .iter()
                .zip(v.strides())
                .any(|(d, s)| s.as_const() == Some(0) && d.as_const() != Some(1))
        })
    }

    /// Does some view pad (carry a mask)?
    pub fn has_mask(&self) -> bool {
        self.views().iter().any(|v| v.mask().is_some())
    }
}
