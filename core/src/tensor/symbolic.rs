//! Tensors with symbolic dimensions: shapes holding a [`Variable`](crate::symbolic::Variable)
//! bound to a value (`Variable::bind`). The graph keeps the variable; the scheduler unbinds it,
//! so one compiled kernel serves every value in the variable's bounds, and realize passes the
//! value to the kernel.
//!
//! Invariant: a symbolic tensor's buffer is allocated for the variables' largest values and
//! holds its elements row-major for the bound values from index 0; [`Tensor::shape`] reports
//! the bound values. The ops written over symbolic shapes here (and elementwise ops, reductions,
//! matmul, squeeze/unsqueeze, flatten, a `-1` reshape that divides exactly, and conv/pooling
//! over a symbolic batch through `tail.rs`) keep dimensions symbolic; an op that computes a shape from
//! [`Tensor::shape`] sees the bound values, so it stays correct but is specialized to them (its
//! kernels compile per value) or refuses the reshape.

use alloc::vec::Vec;

use super::{size, Tensor};
use crate::autograd::FnKind;
use crate::device::{Buffer, Device};
use crate::error::{Error, Result};
use crate::lazy::LazyBuffer;
use crate::shape::{prod, Sint};
use crate::symbolic::Node;
use alloc::sync::Arc;

use super::element::Element;

fn resolved(shape: &[Sint]) -> Vec<usize> {
    shape.iter().map(|d| d.resolved().max(0) as usize).collect()
}

fn max_dims(shape: &[Sint]) -> Vec<usize> {
    shape.iter().map(|d| d.vmax().max(0) as usize).collect()
}

impl Tensor {
    /// The shape with symbolic dimensions as they are (bound variables, constants).
    pub fn sym_shape(&self) -> Vec<Sint> {
        self.lazy().shape().to_vec()
    }

    /// Is any dimension symbolic?
    pub fn is_symbolic(&self) -> bool {
        self.lazy().shape().iter().any(|d| !d.is_const())
    }

    /// A tensor holding `data` with a shape that may hold bound variables
    /// ([`Variable::bind`](crate::symbolic::Variable::bind)), on the default device. `data`
    /// fills the shape at the bound values; the buffer is sized for the largest values, so
    /// every kernel reading it is the same for any value in range.
    ///
    /// ```
    /// use picograd_core::{symbolic::{Node, Variable}, Tensor};
    /// let n = Variable::new("n", 1, 8).unwrap().bind(2).unwrap();
    /// let x = Tensor::try_from_slice_sym(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[n, Node::cst(3)]).unwrap();
    /// assert_eq!(x.shape(), vec![2, 3]);
    /// assert_eq!(x.sum(&[0], false).to_vec::<f32>().unwrap(), vec![5.0, 7.0, 9.0]);
    /// ```
    pub fn try_from_slice_sym<T: Element>(data: &[T], shape: &[Sint]) -> Result<Tensor> {
        Tensor::try_from_slice_sym_on(data, shape, &crate::context::default_device())
    }

    /// [`Tensor::try_from_slice_sym`] on a given device.
    pub fn try_from_slice_sym_on<T: Element>(
        data: &[T],
        shape: &[Sint],
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        check_dims("from_slice_sym", shape)?;
        let max = size::checked_numel("from_slice_sym", &max_dims(shape), T::DTYPE)?;
        let n: usize = resolved(shape).iter().product();
        if n != data.len() {
            return Err(Error::shape(
                "from_slice_sym",
                alloc::format!(
                    "{} values do not fill shape {} ({n} elements)",
                    data.len(),
                    fmt_list(shape)
                ),
            ));
        }
        let mut bytes = Vec::with_capacity(n * T::DTYPE.itemsize());
        data.iter().for_each(|v| v.put(&mut bytes));
        let buf = Buffer::new(device.clone(), T::DTYPE, max)?;
        buf.copy_in(&bytes)?;
        Ok(Tensor::from_lazy(LazyBuffer::from_buffer(buf, shape)))
    }

    /// The same values with a shape that may hold bound variables whose bound values are
    /// `self`'s shape (an ONNX input whose `batch` axis becomes a variable): no copy when
    /// `self` is a realized contiguous buffer, else one realize. The buffer holds exactly the
    /// bound elements (kernels read a symbolic tensor only up to its bound values), so this
    /// view is an input to compute from, not a max-sized buffer to write into.
    pub fn try_bind_shape(&self, shape: &[Sint]) -> Result<Tensor> {
        check_dims("bind_shape", shape)?;
        if resolved(shape) != self.shape() {
            return Err(Error::shape(
                "bind_shape",
                alloc::format!(
                    "{} does not bind to the shape {:?}",
                    fmt_list(shape),
                    self.shape()
                ),
            ));
        }
        let node = self.lazy().contiguous();
        if node.realized().is_none() {
            crate::realize::realize(core::slice::from_ref(&node))?;
        }
        let buf = node
            .realized()
            .ok_or_else(|| Error::internal("bind_shape: not realized"))?;
        Ok(Tensor::from_lazy(LazyBuffer::from_shared_buffer(
            buf, shape,
        )))
    }

    /// Reshapes to a shape that may hold bound variables. The element counts must agree (at
    /// the bound values; symbolically where both shapes are symbolic).
    pub fn try_reshape_sym(&self, shape: &[Sint]) -> Result<Tensor> {
        check_dims("reshape", shape)?;
        let own = self.sym_shape();
        if own == shape {
            return Ok(self.clone());
        }
        let (a, b) = (prod(&own), prod(shape));
        // Both symbolic: equal expressions are equal at every value (no specialization);
        // otherwise the reshape holds only at the bound values, and reading them says so.
        let differ = match !a.is_const() && !b.is_const() {
            true => a.unbind() != b.unbind() || a.resolved_quiet() != b.resolved_quiet(),
            false => a.resolved() != b.resolved(),
        };
        if differ {
            return Err(Error::shape(
                "reshape",
                alloc::format!("cannot reshape {} to {}", fmt_list(&own), fmt_list(shape)),
            ));
        }
        let out = self.lazy().reshape(shape)?;
        Ok(Tensor::derive(FnKind::Reshape, &[self], out))
    }

    /// Keeps `[start, end)` of each axis, where the bounds may be bound variables: a buffer
    /// of the largest size read up to a bound length (the ends must lie inside the axis for
    /// every value of their variables).
    pub fn try_shrink_sym(&self, arg: &[(Sint, Sint)]) -> Result<Tensor> {
        let own = self.sym_shape();
        let bad = arg.len() != own.len()
            || arg
                .iter()
                .zip(&own)
                .any(|((b, e), d)| b.vmin() < 0 || (e - b).vmin() < 0 || (d - e).vmin() < 0);
        if bad {
            let fmt: Vec<alloc::string::String> = arg
                .iter()
                .map(|(b, e)| alloc::format!("{b}..{e}"))
                .collect();
            return Err(Error::shape(
                "shrink",
                alloc::format!("cannot shrink {} to [{}]", fmt_list(&own), fmt.join(", ")),
            ));
        }
        let out = self.lazy().shrink_nodes(arg)?;
        Ok(Tensor::derive(
            FnKind::ShrinkSym(arg.to_vec()),
            &[self],
            out,
        ))
    }

    /// Pads each axis with `(before, after)` zeros, where the amounts may be bound variables
    /// (never negative for any value in their bounds): how a row lands at a position that is a
    /// variable, e.g. a KV cache write.
    pub fn try_pad_sym(&self, arg: &[(Sint, Sint)]) -> Result<Tensor> {
        let own = self.sym_shape();
        if arg.len() != own.len() || arg.iter().any(|(b, e)| b.vmin() < 0 || e.vmin() < 0) {
            let fmt: Vec<alloc::string::String> = arg
                .iter()
                .map(|(b, e)| alloc::format!("({b}, {e})"))
                .collect();
            return Err(Error::shape(
                "pad",
                alloc::format!("cannot pad {} by [{}]", fmt_list(&own), fmt.join(", ")),
            ));
        }
        let padded: Vec<Sint> = own
            .iter()
            .zip(arg)
            .map(|(d, (b, e))| &(d + b) + e)
            .collect();
        size::checked_numel("pad", &max_dims(&padded), self.dtype())?;
        let out = self.lazy().pad_nodes(arg)?;
        Ok(Tensor::derive(FnKind::PadSym(arg.to_vec()), &[self], out))
    }

    /// The shape symbolic shapes broadcast to, numpy style: equal dimensions stay, a 1
    /// stretches to the other side.
    pub fn broadcast_shape_sym(op: &'static str, a: &[Sint], b: &[Sint]) -> Result<Vec<Sint>> {
        let n = a.len().max(b.len());
        let pad = |s: &[Sint]| {
            core::iter::repeat_n(Node::cst(1), n - s.len())
                .chain(s.iter().cloned())
                .collect::<Vec<_>>()
        };
        let one = Node::cst(1);
        pad(a)
            .into_iter()
            .zip(pad(b))
            .map(|(x, y)| match (x == y, x == one, y == one) {
                (true, _, _) | (false, false, true) => Ok(x),
                (false, true, _) => Ok(y),
                (false, false, false) => Err(Error::shape(
                    op,
                    alloc::format!(
                        "shapes {} and {} do not broadcast",
                        fmt_list(a),
                        fmt_list(b)
                    ),
                )),
            })
            .collect()
    }

    /// `self` broadcast to a shape that may hold bound variables.
    pub fn try_broadcast_to_sym(&self, shape: &[Sint]) -> Result<Tensor> {
        let own = self.sym_shape();
        if own == shape {
            return Ok(self.clone());
        }
        if !own.iter().chain(shape).any(|d| !d.is_const()) {
            return self.try_broadcast_to(&resolved(shape));
        }
        let fits =
            Tensor::broadcast_shape_sym("broadcast_to", &own, shape).is_ok_and(|s| s == shape);
        if !fits {
            return Err(Error::shape(
                "broadcast_to",
                alloc::format!("cannot broadcast {} to {}", fmt_list(&own), fmt_list(shape)),
            ));
        }
        let mut padded = alloc::vec![Node::cst(1); shape.len() - own.len()];
        padded.extend(own);
        let r = self.try_reshape_sym(&padded)?;
        let e = r.lazy().expand(shape)?;
        Ok(Tensor::derive(FnKind::Expand, &[&r], e))
    }
}

/// `[2, 3]`-style text of a shape, the way [`Tensor::shape`]'s errors print (a symbolic
/// dimension by its expression).
fn fmt_list(shape: &[Sint]) -> alloc::string::String {
    let parts: Vec<alloc::string::String> = shape.iter().map(|d| alloc::format!("{d}")).collect();
    alloc::format!("[{}]", parts.join(", "))
}

/// Every dimension must be a constant or a lone variable bound to a value (an unbound one has
/// no value for realize to pass).
fn check_dims(op: &'static str, shape: &[Sint]) -> Result<()> {
    for d in shape {
        for v in d.vars() {
            if v.bound_value().is_none() {
                return Err(Error::shape(
                    op,
                    alloc::format!(
                        "dimension {d} of {} uses variable {v} without a value: bind it \
                         (Variable::bind)",
                        fmt_list(shape)
                    ),
                ));
            }
        }
    }
    Ok(())
}
