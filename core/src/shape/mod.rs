//! Zero-copy movement ops: [`View`] (one strided, offset, masked window onto a buffer) and
//! [`ShapeTracker`] (a stack of views), with symbolic index expressions for codegen.
//!
//! Invariant: no movement op touches data; every op maps positions of the new shape to positions
//! of the old, and [`ShapeTracker::expr_idxs`] gives the buffer index and validity of any
//! position as symbolic [`Node`](crate::symbolic::Node)s.

mod compose;
mod reshape;
mod shapetracker;
mod view;

pub use shapetracker::ShapeTracker;
pub use view::{prod, sints, sints_usize, strides_for_shape, Sint, View};
