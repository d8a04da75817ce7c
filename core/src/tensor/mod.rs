//! [`Tensor`]: the user-facing array type. A tensor is a handle on a lazy graph node; building
//! expressions records work, and `realize`/`to_vec`/`item` run it as fused kernels.
//!
//! Errors follow the crate's contract: building methods (`reshape`, `add`, ...) panic on misuse
//! with a message naming the op and the shapes, and each has a `try_` twin returning `Result`;
//! methods that compute (`realize`, `to_vec`, `item`) return `Result`.

mod activation;
mod argminmax;
mod compare;
mod conv;
mod count;
mod create;
mod cumulative;
mod element;
mod elementwise;
mod gather;
mod grad;
mod interpolate;
mod join;
mod linalg;
mod logic;
mod loss;
mod lowbit;
mod masked;
mod matmul;
mod movement;
mod multinomial;
mod nn_func;
mod ops_traits;
mod pool;
mod props;
pub mod quantized;
mod random;
mod reduce;
mod scatter;
mod shard;
mod size;
mod slice;
mod softmax;
mod sort;
mod stats;
mod symbolic;
mod tail;
mod triangle;
mod unary;

pub use conv::ConvOpts;
pub use elementwise::Operand;
pub use interpolate::InterpolateMode;
pub use linalg::SVD_SWEEPS;
pub(crate) use loss::check_label_range;
pub use loss::Reduction;
pub use pool::{Padding, PoolOpts};
pub use scatter::ScatterReduce;

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use spin::Mutex;

pub use element::{bytes_to_f64, Element};

use crate::autograd::{FnKind, Function};
use crate::device::{Buffer, Device};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lazy::{fmt_shape, LazyBuffer, LazyOp};
use crate::ops::{AluOp, ReduceOp, Scalar};
use crate::shape::Sint;

/// A lazily evaluated n-dimensional array. Clones share one tensor: its value (which `assign`
/// replaces), its gradient slot, and its `requires_grad` flag.
#[derive(Clone)]
pub struct Tensor(Arc<TensorNode>);

struct TensorNode {
    lazy: Mutex<LazyBuffer>,
    requires_grad: AtomicBool,
    grad: Mutex<Option<Tensor>>,
    /// How the tensor was made, kept only while it needs a gradient.
    ctx: Mutex<Option<Ctx>>,
    /// For a sharded tensor: its per-device parts (the value above is them gathered).
    shards: Option<Arc<shard::Shards>>,
}

impl Drop for TensorNode {
    /// Drops a long gradient history without recursing: the parents (and gradient) this tensor
    /// held the last reference to are taken apart here with an explicit stack.
    fn drop(&mut self) {
        let mut stack = take_links(self);
        while let Some(t) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(t.0) {
                stack.extend(take_links(&mut node));
            }
        }
    }
}

/// The tensors a node refers to: its history's parents and its gradient.
fn take_links(n: &mut TensorNode) -> Vec<Tensor> {
    let mut links = n
        .ctx
        .get_mut()
        .take()
        .map(|c| c.parents)
        .unwrap_or_default();
    links.extend(n.grad.get_mut().take());
    links
}

/// The primitive that made a tensor and the tensors it was made from.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) func: Function,
    pub(crate) parents: Vec<Tensor>,
}

/// Unwraps a building result, panicking with the error's message (which names op and shapes).
/// Every panicking twin goes through here and is `#[track_caller]`, as this is, so the panic
/// reports the line of the user's call, not this one.
#[track_caller]
pub(crate) fn must<T>(r: Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

fn dims(shape: &[usize]) -> Vec<Sint> {
    shape.iter().map(|&d| Sint::cst(d as i64)).collect()
}

impl Tensor {
    /// Wraps a lazy node as a new tensor (a leaf: no gradient history).
    pub fn from_lazy(lazy: LazyBuffer) -> Tensor {
        Tensor(Arc::new(TensorNode {
            lazy: Mutex::new(lazy),
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(None),
            ctx: Mutex::new(None),
            shards: None,
        }))
    }

    /// The lazy node behind the tensor.
    pub fn lazy(&self) -> LazyBuffer {
        self.0.lazy.lock().clone()
    }

    /// The result of primitive `kind` applied to `parents`, with value `out`; it records how it
    /// was made when some parent needs a gradient (and gradients are enabled).
    pub(crate) fn derive(kind: FnKind, parents: &[&Tensor], out: LazyBuffer) -> Tensor {
        let t = Tensor::from_lazy(out.clone());
        if crate::context::grad_enabled() && parents.iter().any(|p| p.requires_grad()) {
            t.0.requires_grad.store(true, Ordering::Relaxed);
            let func = Function {
                kind,
                inputs: parents.iter().map(|p| p.lazy()).collect(),
                out,
            };
            *t.0.ctx.lock() = Some(Ctx {
                func,
                parents: parents.iter().map(|p| (*p).clone()).collect(),
            });
        }
        t
    }

    /// A tensor holding `data` with `shape`, on the default device.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::try_from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    /// assert_eq!(t.shape(), vec![2, 2]);
    /// assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
    /// ```
    pub fn try_from_slice<T: Element>(data: &[T], shape: &[usize]) -> Result<Tensor> {
        Tensor::try_from_slice_on(data, shape, &crate::context::default_device())
    }

    /// [`Tensor::try_from_slice`] on a given device.
    pub fn try_from_slice_on<T: Element>(
        data: &[T],
        shape: &[usize],
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let n = size::checked_numel("from_slice", shape, T::DTYPE)?;
        if n != data.len() {
            return Err(Error::shape(
                "from_slice",
                alloc::format!(
                    "{} values do not fill shape {:?} ({n} elements)",
                    data.len(),
                    shape
                ),
            ));
        }
        let mut bytes = Vec::with_capacity(n * T::DTYPE.itemsize());
        data.iter().for_each(|v| v.put(&mut bytes));
        Tensor::from_raw_bytes(&bytes, shape, T::DTYPE, device)
    }

    /// A tensor of `dtype` and `shape` on the default device from its elements' little-endian
    /// bytes (a `Bool` byte must be 0 or 1), copied once into the device's buffer: a model's
    /// weights load without a per-element conversion or an intermediate copy. An error names
    /// the shape when the bytes do not fill it exactly.
    pub fn try_from_le_bytes(bytes: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor> {
        let n = size::checked_numel("from_le_bytes", shape, dtype)?;
        if bytes.len() != n * dtype.itemsize() {
            return Err(Error::shape(
                "from_le_bytes",
                alloc::format!(
                    "{} bytes do not fill shape {shape:?} of {dtype} ({n} elements of {} bytes)",
                    bytes.len(),
                    dtype.itemsize()
                ),
            ));
        }
        if dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
            return Err(Error::shape(
                "from_le_bytes",
                alloc::format!("bool bytes must be 0 or 1 (shape {shape:?})"),
            ));
        }
        Tensor::from_raw_bytes(bytes, shape, dtype, &crate::context::default_device())
    }

    /// Uploads little-endian `bytes` (exactly `shape`'s elements of `dtype`) to `device`.
    pub(crate) fn from_raw_bytes(
        bytes: &[u8],
        shape: &[usize],
        dtype: DType,
        device: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let n = size::checked_numel("from_bytes", shape, dtype)?;
        let buf = Buffer::new(device.clone(), dtype, n)?;
        buf.copy_in(bytes)?;
        Ok(Tensor::from_lazy(LazyBuffer::from_buffer(
            buf,
            &dims(shape),
        )))
    }

    /// [`Tensor::try_from_slice`], panicking on a size mismatch.
    #[track_caller]
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        must(Tensor::try_from_slice(data, shape))
    }

    /// A tensor of `shape` filled with `value` converted to `dtype`; an error naming the shape
    /// when it is too large to exist.
    pub fn try_full(shape: &[usize], value: f64, dtype: DType) -> Result<Tensor> {
        Tensor::try_full_on(shape, value, dtype, &crate::context::default_device())
    }

    /// [`Tensor::try_full`] on a given device (a constant built beside a tensor it combines
    /// with must live on that tensor's device).
    pub fn try_full_on(
        shape: &[usize],
        value: f64,
        dtype: DType,
        dev: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        size::checked_numel("full", shape, dtype)?;
        Ok(Tensor::from_lazy(LazyBuffer::constant(
            dev,
            Scalar::from_f64(value, dtype),
            &dims(shape),
        )))
    }
    /// [`Tensor::try_full`], panicking on a shape too large to exist.
    pub fn full(shape: &[usize], value: f64, dtype: DType) -> Tensor {
        must(Tensor::try_full(shape, value, dtype))
    }

    /// Zeros; an error naming the shape when it is too large to exist.
    pub fn try_zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::try_full(shape, 0.0, dtype)
    }
    /// [`Tensor::try_zeros`], panicking on a shape too large to exist.
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full(shape, 0.0, dtype)
    }

    /// Ones; an error naming the shape when it is too large to exist.
    pub fn try_ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::try_full(shape, 1.0, dtype)
    }
    /// [`Tensor::try_ones`], panicking on a shape too large to exist.
    pub fn ones(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::full(shape, 1.0, dtype)
    }

    /// A tensor like `self` (shape, device) filled with `value` in `self`'s dtype.
    pub fn const_like(&self, value: f64) -> Tensor {
        let v = Scalar::from_f64(value, self.dtype());
        Tensor::from_lazy(LazyBuffer::constant(
            self.lazy().device(),
            v,
            self.lazy().shape(),
        ))
    }

    /// The shape (a symbolic dimension reports its bound value, or its largest value when
    /// unbound; see [`Tensor::sym_shape`]).
    pub fn shape(&self) -> Vec<usize> {
        self.lazy()
            .shape()
            .iter()
            .map(|d| d.resolved().max(0) as usize)
            .collect()
    }

    /// [`Tensor::shape`] without specializing a capture in progress to the bound values
    /// ([`crate::symbolic::Watch`]): for ranks and error messages only, never for a number that
    /// ends up in the graph.
    pub(crate) fn shape_quiet(&self) -> Vec<usize> {
        self.lazy()
            .shape()
            .iter()
            .map(|d| d.resolved_quiet().max(0) as usize)
            .collect()
    }

    /// The element dtype.
    pub fn dtype(&self) -> DType {
        self.lazy().dtype()
    }

    /// The device the tensor computes on.
    pub fn device(&self) -> Arc<dyn Device> {
        self.lazy().device().clone()
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.lazy().shape().len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// Computes the tensor's value (fused kernels); afterwards it is backed by a buffer.
    pub fn realize(&self) -> Result<&Tensor> {
        Tensor::realize_all(&[self])?;
        Ok(self)
    }

    /// Computes several tensors together (shared work is scheduled once). Each tensor then holds
    /// its computed buffer, so reading it later never recomputes it (which could also see
    /// buffers updated in place since).
    pub fn realize_all(tensors: &[&Tensor]) -> Result<()> {
        let nodes: Vec<LazyBuffer> = tensors.iter().map(|t| t.contiguous_node()).collect();
        crate::realize::realize(&nodes)?;
        for (t, n) in tensors.iter().zip(nodes) {
            let n = n.settled();
            if !n.ptr_eq(&t.lazy()) {
                *t.0.lazy.lock() = n;
            }
        }
        Ok(())
    }

    /// Writes `value` into this tensor's buffer in place (lazily: the write happens when the
    /// tensor is next realized). Shapes and dtypes must match. An unrealized target is computed
    /// first, so it has a buffer to write into.
    ///
    /// ```
    /// use picograd_core::{Tensor, ops::AluOp};
    /// let w = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let step = w.try_alu(AluOp::Mul, &[&w.const_like(3.0)]).unwrap();
    /// w.try_assign(&step).unwrap();
    /// assert_eq!(w.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    /// ```
    pub fn try_assign(&self, value: &Tensor) -> Result<()> {
        let mut target = self.lazy();
        // Only buffers made from data and earlier assigns belong to one tensor; computed nodes
        // are hash-consed (two `zeros(..).contiguous()` are one node), so writing into one would
        // change every tensor built the same way. Those get a private copy first.
        // Graphs built from this tensor before the copy keep reading the old buffer: make
        // parameters with `try_own` before building graphs from them (as `nn` does).
        let owned = matches!(target.op(), Some((LazyOp::Buffer | LazyOp::Assign, _)));
        if !owned || target.realized().is_none() {
            target = self.owned_node()?;
        }
        *self.0.lazy.lock() = target.assign(&value.lazy())?;
        Ok(())
    }

    /// The same values in a new buffer that no other tensor shares — what a parameter updated
    /// in place needs (equal lazy expressions are one hash-consed node, so two parameters
    /// initialized the same way would otherwise share memory). Gradient history is not kept.
    pub fn try_own(&self) -> Result<Tensor> {
        Ok(Tensor::from_lazy(self.owned_node()?))
    }

    fn owned_node(&self) -> Result<LazyBuffer> {
        let node = self.contiguous_node();
        crate::realize::realize(core::slice::from_ref(&node))?;
        let src = node
            .realized()
            .ok_or_else(|| Error::internal("own: tensor not realized"))?;
        let own = Buffer::new(src.device().clone(), src.dtype(), src.len())?;
        own.copy_in(&src.to_bytes()?)?;
        Ok(LazyBuffer::from_buffer(own, node.shape()))
    }

    /// [`Tensor::try_assign`], panicking on a shape or dtype mismatch.
    #[track_caller]
    pub fn assign(&self, value: &Tensor) {
        must(self.try_assign(value))
    }

    fn contiguous_node(&self) -> LazyBuffer {
        self.lazy().contiguous()
    }

    /// The raw little-endian bytes of the values, in row-major order.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.realize()?;
        let buf = self
            .lazy()
            .realized()
            .ok_or_else(|| Error::internal("realize left the tensor without a buffer"))?;
        let mut bytes = buf.to_bytes()?;
        bytes.truncate(self.numel() * self.dtype().itemsize());
        Ok(bytes)
    }

    /// The values in row-major order. `T` must match the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(Error::dtype(
                "to_vec",
                alloc::format!("tensor is {} but {} was asked for", self.dtype(), T::DTYPE),
            ));
        }
        let bytes = self.to_bytes()?;
        Ok(bytes
            .chunks_exact(T::DTYPE.itemsize())
            .map(T::get)
            .collect())
    }

    /// The values converted to f64, in row-major order (any dtype).
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        Ok(bytes_to_f64(&self.to_bytes()?, self.dtype()))
    }

    /// The single value of a one-element tensor.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "item",
                alloc::format!("needs one element, shape is {:?}", self.shape()),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    // ---- broadcasting and elementwise ----

    /// The shape two shapes broadcast to, numpy style.
    pub fn broadcast_shape(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
        let n = a.len().max(b.len());
        let pad = |s: &[usize]| {
            core::iter::repeat_n(1, n - s.len())
                .chain(s.iter().copied())
                .collect::<Vec<_>>()
        };
        let (pa, pb) = (pad(a), pad(b));
        pa.iter()
            .zip(&pb)
            .map(|(&x, &y)| match (x, y) {
                _ if x == y => Ok(x),
                (1, _) => Ok(y),
                (_, 1) => Ok(x),
                _ => Err(Error::shape(
                    op,
                    alloc::format!("shapes {a:?} and {b:?} do not broadcast"),
                )),
            })
            .collect()
    }

    /// `self` broadcast to `shape` (reshape to add leading 1s, then expand).
    pub fn try_broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        if self.shape() == shape {
            return Ok(self.clone());
        }
        size::checked_numel("broadcast_to", shape, self.dtype())?;
        let own = self.shape();
        if own.len() > shape.len() {
            return Err(Error::shape(
                "broadcast_to",
                alloc::format!("cannot broadcast {own:?} to {shape:?}"),
            ));
        }
        let mut padded = alloc::vec![1usize; shape.len() - own.len()];
        padded.extend(&own);
        if padded.iter().zip(shape).any(|(&a, &b)| a != b && a != 1) {
            return Err(Error::shape(
                "broadcast_to",
                alloc::format!("cannot broadcast {own:?} to {shape:?}"),
            ));
        }
        let r = Tensor::derive(
            FnKind::Reshape,
            &[self],
            self.lazy().reshape(&dims(&padded))?,
        );
        let e = r.lazy().expand(&dims(shape))?;
        Ok(Tensor::derive(FnKind::Expand, &[&r], e))
    }

    /// Applies an elementwise op after promoting dtypes and broadcasting shapes.
    pub fn try_alu(&self, op: AluOp, others: &[&Tensor]) -> Result<Tensor> {
        if let Some(t) = self.sharded_alu(op, others)? {
            return Ok(t);
        }
        let mut shape = self.sym_shape();
        for o in others {
            shape = Tensor::broadcast_shape_sym(op.name(), &shape, &o.sym_shape())?;
        }
        // `where`'s condition keeps its own dtype; the operands it selects between promote.
        let values: Vec<&Tensor> = if op == AluOp::Where {
            others.to_vec()
        } else {
            core::iter::once(self)
                .chain(others.iter().copied())
                .collect()
        };
        let dtype = values
            .iter()
            .skip(1)
            .fold(values[0].dtype(), |d, t| d.promote(t.dtype()));
        let prep = |t: &Tensor, is_value: bool| -> Result<Tensor> {
            let t = t.try_broadcast_to_sym(&shape)?;
            Ok(if is_value { t.cast(dtype) } else { t })
        };
        let mut operands = alloc::vec![prep(self, op != AluOp::Where)?];
        for o in others {
            operands.push(prep(o, true)?);
        }
        let lazies: Vec<LazyBuffer> = operands.iter().map(Tensor::lazy).collect();
        let refs: Vec<&LazyBuffer> = lazies[1..].iter().collect();
        let out = lazies[0].alu(op, &refs)?;
        let parents: Vec<&Tensor> = operands.iter().collect();
        Ok(Tensor::derive(FnKind::Alu(op), &parents, out))
    }

    /// Converts to `dtype`.
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype() {
            return self.clone();
        }
        Tensor::derive(FnKind::Cast, &[self], self.lazy().cast(dtype))
    }

    // ---- reductions ----

    /// Normalizes possibly negative axes against the rank.
    /// An axis given twice is an error too (`sum` over axis 1 twice is not a sum over it).
    pub fn resolve_axes(&self, op: &'static str, axes: &[isize]) -> Result<Vec<usize>> {
        let n = self.ndim() as isize;
        let resolved = axes
            .iter()
            .map(|&a| {
                let r = if a < 0 { a + n } else { a };
                if r < 0 || r >= n.max(1) || (n == 0) {
                    Err(Error::axis(
                        op,
                        alloc::format!("axis {a} is out of range for shape {:?}", self.shape()),
                    ))
                } else {
                    Ok(r as usize)
                }
            })
            .collect::<Result<Vec<usize>>>()?;
        if let Some(pos) = (1..resolved.len()).find(|&i| resolved[..i].contains(&resolved[i])) {
            return Err(Error::axis(
                op,
                alloc::format!(
                    "axis {} is given twice in {axes:?} (shape {:?})",
                    axes[pos],
                    self.shape()
                ),
            ));
        }
        Ok(resolved)
    }

    /// Reduces over `axes` (all axes when empty... use `None`), keeping them as 1 if `keepdim`.
    pub fn try_reduce(
        &self,
        op: ReduceOp,
        axes: Option<&[isize]>,
        keepdim: bool,
    ) -> Result<Tensor> {
        if let Some(t) = self.sharded_reduce(op, axes, keepdim)? {
            return Ok(t);
        }
        let axes: Vec<usize> = match axes {
            None => (0..self.ndim()).collect(),
            Some(a) => self.resolve_axes(op.name(), a)?,
        };
        let r = Tensor::derive(
            FnKind::Reduce(op, axes.clone()),
            &[self],
            self.lazy().reduce(op, &axes)?,
        );
        if keepdim {
            return Ok(r);
        }
        let shape: Vec<Sint> = self
            .sym_shape()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, d)| d)
            .collect();
        let out = r.lazy().reshape(&shape)?;
        Ok(Tensor::derive(FnKind::Reshape, &[&r], out))
    }

    // ---- movement ----

    /// Reshapes; one dimension may be `-1` (inferred). On a symbolic tensor the inferred
    /// dimension is the symbolic element count over the others' product when that division is
    /// exact for every value of the variables (`(N,16,4,4)` to `[-1, 256]` gives `(N, 256)`), so
    /// it stays symbolic; otherwise it is computed from the bound values.
    pub fn try_reshape(&self, shape: &[isize]) -> Result<Tensor> {
        if let Some(sym) = self.infer_sym(shape) {
            return self.try_reshape_sym(&sym);
        }
        let n = self.numel();
        let fixed: Vec<usize> = shape
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .collect();
        let known = size::checked_numel("reshape", &fixed, self.dtype())?;
        let infer = shape.iter().filter(|&&d| d == -1).count();
        if infer > 1
            || shape.iter().any(|&d| d < -1)
            || (infer == 1 && (known == 0 || n % known != 0))
        {
            return Err(Error::shape(
                "reshape",
                alloc::format!("cannot reshape {} to {:?}", fmt_dims(&self.shape()), shape),
            ));
        }
        let new: Vec<usize> = shape
            .iter()
            .map(|&d| if d == -1 { n / known } else { d as usize })
            .collect();
        if new.iter().product::<usize>() != n {
            return Err(Error::shape(
                "reshape",
                alloc::format!(
                    "cannot reshape {} ({n} elements) to {:?}",
                    fmt_dims(&self.shape()),
                    new
                ),
            ));
        }
        Ok(Tensor::derive(
            FnKind::Reshape,
            &[self],
            self.lazy().reshape(&dims(&new))?,
        ))
    }

    /// The symbolic shape `shape` (with one `-1`) means, when `self` is symbolic and the
    /// inferred size divides out exactly (the remainder simplifies to 0 over the variables'
    /// whole ranges); `None` leaves the reshape to the concrete path.
    fn infer_sym(&self, shape: &[isize]) -> Option<Vec<Sint>> {
        let infer = shape.iter().filter(|&&d| d == -1).count();
        if !self.is_symbolic() || infer != 1 || shape.iter().any(|&d| d < -1) {
            return None;
        }
        let known = shape
            .iter()
            .filter(|&&d| d >= 0)
            .try_fold(1i64, |acc, &d| acc.checked_mul(d as i64))?;
        if known <= 0 {
            return None;
        }
        let total = crate::shape::prod(&self.sym_shape());
        if total.modulo(known).as_const() != Some(0) {
            return None;
        }
        let inferred = total.floordiv(known);
        Some(
            shape
                .iter()
                .map(|&d| match d {
                    -1 => inferred.clone(),
                    _ => crate::symbolic::Node::cst(d as i64),
                })
                .collect(),
        )
    }

    /// Reorders axes.
    pub fn try_permute(&self, order: &[usize]) -> Result<Tensor> {
        Ok(Tensor::derive(
            FnKind::Permute(order.to_vec()),
            &[self],
            self.lazy().permute(order)?,
        ))
    }

    /// Expands size-1 axes to `shape`.
    pub fn try_expand(&self, shape: &[usize]) -> Result<Tensor> {
        self.try_broadcast_to(shape)
    }

    /// Pads each axis with `(before, after)` zeros.
    pub fn try_pad(&self, arg: &[(usize, usize)]) -> Result<Tensor> {
        let shape = self.shape();
        let padded = arg
            .iter()
            .zip(&shape)
            .enumerate()
            .map(|(axis, (&p, &d))| size::padded_dim("pad", axis, d, p))
            .collect::<Result<Vec<usize>>>()?;
        size::checked_numel("pad", &padded, self.dtype())?;
        let a: Vec<(i64, i64)> = arg.iter().map(|&(b, e)| (b as i64, e as i64)).collect();
        Ok(Tensor::derive(
            FnKind::Pad(a.clone()),
            &[self],
            self.lazy().pad(&a)?,
        ))
    }

    /// Keeps `[start, end)` of each axis.
    pub fn try_shrink(&self, arg: &[(usize, usize)]) -> Result<Tensor> {
        let a: Vec<(i64, i64)> = arg.iter().map(|&(b, e)| (b as i64, e as i64)).collect();
        Ok(Tensor::derive(
            FnKind::Shrink(a.clone()),
            &[self],
            self.lazy().shrink(&a)?,
        ))
    }

    /// Reverses the given axes.
    pub fn try_flip(&self, axes: &[isize]) -> Result<Tensor> {
        let axes = self.resolve_axes("flip", axes)?;
        let arg: Vec<i64> = (0..self.ndim())
            .map(|i| if axes.contains(&i) { -1 } else { 1 })
            .collect();
        self.try_stride(&arg)
    }

    /// Every `step`-th element per axis (negative steps flip).
    pub fn try_stride(&self, steps: &[i64]) -> Result<Tensor> {
        Ok(Tensor::derive(
            FnKind::Stride(steps.to_vec()),
            &[self],
            self.lazy().stride(steps)?,
        ))
    }

    /// Moves the tensor to `device` (a copy when it is another device).
    pub fn to_device(&self, device: &Arc<dyn Device>) -> Tensor {
        Tensor::derive(FnKind::Copy, &[self], self.lazy().copy_to(device))
    }
}

/// `[2, 3]`-style text.
pub fn fmt_dims(d: &[usize]) -> String {
    alloc::format!("{d:?}")
}

impl core::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "<Tensor {} {} on {}>",
            fmt_shape(self.lazy().shape()),
            self.dtype(),
            self.device().name()
        )
    }
}

impl core::fmt::Display for Tensor {
    /// The values, nested by axis like numpy (computes the tensor; prints the error if that fails).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let vals = match self.to_f64_vec() {
            Ok(v) => v,
            Err(e) => return write!(f, "<Tensor {:?}: {e}>", self.shape()),
        };
        let shape = self.shape();
        let is_float = self.dtype().is_float();
        let is_bool = self.dtype() == DType::Bool;
        let one = |v: f64| -> String {
            if is_bool {
                String::from(if v != 0.0 { "true" } else { "false" })
            } else if is_float {
                alloc::format!("{v:.4}")
            } else {
                alloc::format!("{v}")
            }
        };
        fn rec(
            f: &mut core::fmt::Formatter<'_>,
            vals: &[f64],
            shape: &[usize],
            one: &dyn Fn(f64) -> String,
            depth: usize,
        ) -> core::fmt::Result {
            if shape.is_empty() {
                return f.write_str(&one(vals[0]));
            }
            let inner: usize = shape[1..].iter().product();
            f.write_str("[")?;
            for i in 0..shape[0] {
                if i > 0 {
                    if shape.len() > 1 {
                        write!(f, ",\n{:width$}", "", width = depth + 1)?;
                    } else {
                        f.write_str(", ")?;
                    }
                }
                rec(
                    f,
                    &vals[i * inner..(i + 1) * inner],
                    &shape[1..],
                    one,
                    depth + 1,
                )?;
            }
            f.write_str("]")
        }
        rec(f, &vals, &shape, &one, 0)
    }
}
