//! The lazy graph: [`LazyBuffer`]s are nodes that say how to compute a buffer, not its data.
//!
//! A lazy buffer is either a *base* (an op over sources, or a realized/constant leaf) whose shape is
//! contiguous, or a *view* of a base through a ShapeTracker (movement ops never compute anything).
//! Invariants: nodes are immutable and hash-consed — building the same op over the same sources
//! twice gives the same node (so common subexpressions are shared), through a global
//! `spin::Mutex<HashMap<Key, Weak<_>>>` where dead nodes drop out; a view's base is always a base;
//! a realized buffer sits behind the base's own lock and is set at most once.

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::hash::{Hash, Hasher};

use hashbrown::HashMap;
use spin::Mutex;

use crate::device::{Buffer, Device};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{AluOp, ReduceOp, Scalar};
use crate::shape::{ShapeTracker, Sint};

mod max_hoist;
pub mod split_reduce;
pub use split_reduce::SPLIT_THRESHOLD;

/// What a base computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LazyOp {
    /// A buffer filled from outside (data copied in, or an input placeholder): always realized.
    Buffer,
    /// A constant of the base's shape (bases of constants are shape `[]`, viewed by expand).
    Const(Scalar),
    /// An elementwise op over same-shaped sources.
    Alu(AluOp),
    /// A reduction over `axes`; the output keeps them as size 1.
    Reduce(ReduceOp, Vec<usize>),
    /// Conversion to the base's dtype.
    Cast,
    /// Reinterpretation of bits as the base's dtype.
    Bitcast,
    /// A materialized copy of the source (forces a kernel boundary).
    Contiguous,
    /// A copy of the source from another device.
    Copy,
    /// Writes the value (source 1) into the realized buffer of the target (source 0), in place.
    Assign,
}

/// A node of the lazy graph. Cheap to clone.
#[derive(Clone)]
pub struct LazyBuffer(Arc<LazyNode>);

/// The data of a lazy node.
pub struct LazyNode {
    dtype: DType,
    device: Arc<dyn Device>,
    st: ShapeTracker,
    kind: Kind,
    realized: Mutex<Option<Arc<Buffer>>>,
}

enum Kind {
    Base { op: LazyOp, srcs: Vec<LazyBuffer> },
    View { base: LazyBuffer },
}

/// The hash-consing key: everything that determines a node's value. Sources are identified by
/// address; a live node keeps its sources alive, so a live entry's addresses cannot be reused.
#[derive(PartialEq, Eq, Hash)]
struct Key {
    op: Option<LazyOp>,
    srcs: Vec<usize>,
    dtype: DType,
    st: ShapeTracker,
    device: usize,
}

static CONS: Mutex<Option<HashMap<Key, Weak<LazyNode>>>> = Mutex::new(None);

fn addr<T: ?Sized>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as *const u8 as usize
}

/// How many hash-consed nodes are alive (for tests that check a loop's graph stays bounded).
pub fn live_interned_nodes() -> usize {
    CONS.lock()
        .as_ref()
        .map_or(0, |m| m.values().filter(|w| w.strong_count() > 0).count())
}

fn intern(key: Key, make: impl FnOnce() -> LazyNode) -> LazyBuffer {
    let mut guard = CONS.lock();
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(node) = map.get(&key).and_then(Weak::upgrade) {
        return LazyBuffer(node);
    }
    // Sweep dead entries now and then so the table tracks the live graph.
    if map.len() > 1024 && map.len().is_power_of_two() {
        map.retain(|_, w| w.strong_count() > 0);
    }
    let node = Arc::new(make());
    map.insert(key, Arc::downgrade(&node));
    LazyBuffer(node)
}

impl LazyBuffer {
    fn new_base(
        device: &Arc<dyn Device>,
        dtype: DType,
        shape: &[Sint],
        op: LazyOp,
        srcs: Vec<LazyBuffer>,
    ) -> LazyBuffer {
        let st = ShapeTracker::from_shape(shape);
        let key = Key {
            op: Some(op.clone()),
            srcs: srcs.iter().map(|s| addr(&s.0)).collect(),
            dtype,
            st: st.clone(),
            device: addr(device),
        };
        intern(key, || LazyNode {
            dtype,
            device: device.clone(),
            st,
            kind: Kind::Base { op, srcs },
            realized: Mutex::new(None),
        })
    }

    /// A realized buffer holding `buf`'s data, with shape `shape` (never shared with other nodes).
    pub fn from_buffer(buf: Buffer, shape: &[Sint]) -> LazyBuffer {
        LazyBuffer::from_shared_buffer(Arc::new(buf), shape)
    }

    /// A realized node over a buffer that may be shared with others (a capture's output slot).
    /// Like every buffer node, it is never hash-consed.
    pub fn from_shared_buffer(buf: Arc<Buffer>, shape: &[Sint]) -> LazyBuffer {
        let node = LazyNode {
            dtype: buf.dtype(),
            device: buf.device().clone(),
            st: ShapeTracker::from_shape(shape),
            kind: Kind::Base {
                op: LazyOp::Buffer,
                srcs: Vec::new(),
            },
            realized: Mutex::new(Some(buf)),
        };
        LazyBuffer(Arc::new(node))
    }

    /// The constant `v` broadcast to `shape`: a `[]`-shaped constant base viewed by expand.
    pub fn constant(device: &Arc<dyn Device>, v: Scalar, shape: &[Sint]) -> LazyBuffer {
        let base = LazyBuffer::new_base(device, v.dtype(), &[], LazyOp::Const(v), Vec::new());
        let ones: Vec<Sint> = shape.iter().map(|_| Sint::cst(1)).collect();
        let st = ShapeTracker::from_shape(&[]);
        let st = match st.reshape(&ones).and_then(|s| s.expand(shape)) {
            Ok(s) => s,
            Err(e) => panic!("constant of shape {shape:?}: {e}"),
        };
        base.view_with(st)
    }

    /// The node's dtype.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The device it computes on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.0.device
    }

    /// Its shape.
    pub fn shape(&self) -> &[Sint] {
        self.0.st.shape()
    }

    /// How this node indexes its base.
    pub fn st(&self) -> &ShapeTracker {
        &self.0.st
    }

    /// Is it a base (not a view)?
    pub fn is_base(&self) -> bool {
        matches!(self.0.kind, Kind::Base { .. })
    }

    /// Its base (itself, for a base).
    pub fn base(&self) -> &LazyBuffer {
        match &self.0.kind {
            Kind::Base { .. } => self,
            Kind::View { base } => base,
        }
    }

    /// The base's op and sources (`None` for a view).
    pub fn op(&self) -> Option<(&LazyOp, &[LazyBuffer])> {
        match &self.0.kind {
            Kind::Base { op, srcs } => Some((op, srcs)),
            Kind::View { .. } => None,
        }
    }

    /// The constant value, when this is (a view of) a constant base without padding.
    pub fn as_const(&self) -> Option<Scalar> {
        match self.base().op() {
            Some((LazyOp::Const(v), _)) if !self.0.st.has_mask() => Some(*v),
            _ => None,
        }
    }

    /// The realized buffer of the base, if it has been computed.
    pub fn realized(&self) -> Option<Arc<Buffer>> {
        self.base().0.realized.lock().clone()
    }

    /// What a tensor holding this node should hold once it is realized: for a realized in-place
    /// write (`Assign`), a plain buffer node over the same buffer — so the tensor no longer
    /// keeps alive the graph that computed it (a parameter updated every step would otherwise
    /// hold every earlier step's graph). Anything else is kept as it is (computed nodes are
    /// hash-consed and may be shared; their buffers are not the tensor's own).
    pub fn settled(&self) -> LazyBuffer {
        let is_assign = matches!(self.op(), Some((LazyOp::Assign, _)));
        match self.realized() {
            Some(buf) if is_assign && self.is_base() => {
                LazyBuffer::from_shared_buffer(buf, self.shape())
            }
            _ => self.clone(),
        }
    }

    /// Records the base's computed buffer. Errors if it is already realized.
    pub fn set_realized(&self, buf: Arc<Buffer>) -> Result<()> {
        let mut slot = self.base().0.realized.lock();
        if slot.is_some() {
            return Err(Error::internal("lazy: buffer realized twice"));
        }
        *slot = Some(buf);
        Ok(())
    }

    /// A stable identity for maps keyed by node.
    pub fn id(&self) -> usize {
        addr(&self.0)
    }

    /// Are both the same node?
    pub fn ptr_eq(&self, other: &LazyBuffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    fn view_with(&self, st: ShapeTracker) -> LazyBuffer {
        let base = self.base();
        if st == base.0.st && base.realized().is_none() {
            return base.clone();
        }
        if st == base.0.st {
            return base.clone();
        }
        let key = Key {
            op: None,
            srcs: alloc::vec![addr(&base.0)],
            dtype: base.0.dtype,
            st: st.clone(),
            device: addr(&base.0.device),
        };
        intern(key, || LazyNode {
            dtype: base.0.dtype,
            device: base.0.device.clone(),
            st,
            kind: Kind::View { base: base.clone() },
            realized: Mutex::new(None),
        })
    }

    /// The base of `self` read through `st`, which maps positions to the base's row-major
    /// buffer (the scheduler's layout copies start from a kernel's view of a buffer).
    pub(crate) fn view_through(&self, st: ShapeTracker) -> LazyBuffer {
        self.view_with(st)
    }

    /// Reshapes (zero-copy).
    pub fn reshape(&self, shape: &[Sint]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.reshape(shape)?))
    }

    /// Permutes axes (zero-copy).
    pub fn permute(&self, order: &[usize]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.permute(order)?))
    }

    /// Expands size-1 axes (zero-copy).
    pub fn expand(&self, shape: &[Sint]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.expand(shape)?))
    }

    /// Pads with zeros (zero-copy: a mask).
    pub fn pad(&self, arg: &[(i64, i64)]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.pad(arg)?))
    }

    /// Keeps `[start, end)` of each axis (zero-copy).
    pub fn shrink(&self, arg: &[(i64, i64)]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.shrink(arg)?))
    }

    /// Keeps `[start, end)` of each axis, the bounds symbolic (zero-copy).
    pub fn shrink_nodes(&self, arg: &[(Sint, Sint)]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.shrink_nodes(arg)?))
    }

    /// Pads with zeros, the amounts symbolic (zero-copy: a mask).
    pub fn pad_nodes(&self, arg: &[(Sint, Sint)]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.pad_nodes(arg)?))
    }

    /// Takes every `k`-th element per axis; negative `k` flips (zero-copy).
    pub fn stride(&self, arg: &[i64]) -> Result<LazyBuffer> {
        Ok(self.view_with(self.0.st.stride(arg)?))
    }

    /// An elementwise op over `self` and `others` (same shapes; the caller broadcasts). Constant
    /// operands fold.
    pub fn alu(&self, op: AluOp, others: &[&LazyBuffer]) -> Result<LazyBuffer> {
        let mut srcs = alloc::vec![self.clone()];
        srcs.extend(others.iter().map(|s| (*s).clone()));
        let value_dtype = srcs.last().map_or(self.dtype(), |s| s.dtype());
        if !op.defined_on(value_dtype) {
            return Err(Error::dtype(
                op.name(),
                alloc::format!("{} is not defined on {value_dtype}", op.name()),
            ));
        }
        if srcs.len() != op.arity() {
            return Err(Error::shape(
                op.name(),
                alloc::format!("takes {} operands, got {}", op.arity(), srcs.len()),
            ));
        }
        for s in &srcs[1..] {
            if s.shape() != self.shape() {
                return Err(Error::shape(
                    op.name(),
                    alloc::format!(
                        "operand shapes differ: {:?} vs {:?}",
                        fmt_shape(self.shape()),
                        fmt_shape(s.shape())
                    ),
                ));
            }
        }
        if let Some(o) = srcs
            .iter()
            .find(|s| !Arc::ptr_eq(s.device(), self.device()))
        {
            let (a, b) = (self.device().name(), o.device().name());
            let which = if a == b {
                alloc::format!("two distinct {a} devices")
            } else {
                alloc::format!("{a} and {b}")
            };
            return Err(Error::Device(alloc::format!(
                "{}: operands on different devices ({which}); move one with to_device",
                op.name()
            )));
        }
        let dtype = alu_dtype(op, &srcs);
        if let Some(v) = fold_consts(op, &srcs, dtype) {
            return Ok(LazyBuffer::constant(self.device(), v, self.shape()));
        }
        Ok(LazyBuffer::new_base(
            self.device(),
            dtype,
            self.shape(),
            LazyOp::Alu(op),
            srcs,
        ))
    }

    /// Converts to `dtype` (a no-op when it already is).
    pub fn cast(&self, dtype: DType) -> LazyBuffer {
        if dtype == self.dtype() {
            return self.clone();
        }
        if let Some(v) = self.as_const() {
            return LazyBuffer::constant(self.device(), v.cast(dtype), self.shape());
        }
        LazyBuffer::new_base(
            self.device(),
            dtype,
            self.shape(),
            LazyOp::Cast,
            alloc::vec![self.clone()],
        )
    }

    /// Reinterprets the bits as `dtype` (same item size).
    pub fn bitcast(&self, dtype: DType) -> Result<LazyBuffer> {
        if dtype.itemsize() != self.dtype().itemsize() {
            return Err(Error::dtype(
                "bitcast",
                alloc::format!("{} and {} differ in size", self.dtype(), dtype),
            ));
        }
        Ok(LazyBuffer::new_base(
            self.device(),
            dtype,
            self.shape(),
            LazyOp::Bitcast,
            alloc::vec![self.clone()],
        ))
    }

    /// Reduces over `axes`, keeping them as size 1. A float sum longer than
    /// [`SPLIT_THRESHOLD`] is built as block sums (see [`split_reduce`]): the order of its
    /// additions is fixed here, for every device. A float max over an elementwise op monotone in
    /// one operand, its others constant along `axes` (`relu(x + b)` pooled), applies the op
    /// once after the max (see `max_hoist`).
    pub fn reduce(&self, op: ReduceOp, axes: &[usize]) -> Result<LazyBuffer> {
        let mut axes: Vec<usize> = axes.to_vec();
        axes.sort_unstable();
        axes.dedup();
        if let Some(&bad) = axes.iter().find(|&&a| a >= self.shape().len()) {
            return Err(Error::axis(
                op.name(),
                alloc::format!(
                    "axis {bad} is out of range for shape {}",
                    fmt_shape(self.shape())
                ),
            ));
        }
        if axes.is_empty() {
            return Ok(self.clone());
        }
        if let Some(split) = split_reduce::split_sum(self, op, &axes)? {
            return Ok(split);
        }
        if let Some(hoisted) = max_hoist::hoist(self, op, &axes)? {
            return Ok(hoisted);
        }
        let shape: Vec<Sint> = self
            .shape()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if axes.contains(&i) {
                    Sint::cst(1)
                } else {
                    s.clone()
                }
            })
            .collect();
        Ok(LazyBuffer::new_base(
            self.device(),
            self.dtype(),
            &shape,
            LazyOp::Reduce(op, axes),
            alloc::vec![self.clone()],
        ))
    }

    /// A node that materializes `self` into its own buffer (a kernel boundary).
    pub fn contiguous(&self) -> LazyBuffer {
        if self.is_base() && !matches!(self.op(), Some((LazyOp::Const(_), _))) {
            return self.clone();
        }
        LazyBuffer::new_base(
            self.device(),
            self.dtype(),
            self.shape(),
            LazyOp::Contiguous,
            alloc::vec![self.clone()],
        )
    }

    /// A node that, when realized, writes `value` into `self`'s buffer (in place) and stands for
    /// the result. `self` must be a realized base; shapes and dtypes must match.
    pub fn assign(&self, value: &LazyBuffer) -> Result<LazyBuffer> {
        if !self.is_base() || self.realized().is_none() {
            return Err(Error::Device(alloc::format!(
                "assign: the target {self:?} must be a realized buffer"
            )));
        }
        if value.shape() != self.shape() || value.dtype() != self.dtype() {
            return Err(Error::shape(
                "assign",
                alloc::format!(
                    "value {} {} does not match target {} {}",
                    fmt_shape(value.shape()),
                    value.dtype(),
                    fmt_shape(self.shape()),
                    self.dtype()
                ),
            ));
        }
        if !Arc::ptr_eq(value.device(), self.device()) {
            return Err(Error::Device(alloc::format!(
                "assign: value on {} but target on {}",
                value.device().name(),
                self.device().name()
            )));
        }
        // Never hash-consed: each assign is a distinct write.
        let node = LazyNode {
            dtype: self.dtype(),
            device: self.device().clone(),
            st: ShapeTracker::from_shape(self.shape()),
            kind: Kind::Base {
                op: LazyOp::Assign,
                srcs: alloc::vec![self.clone(), value.clone()],
            },
            realized: Mutex::new(None),
        };
        Ok(LazyBuffer(Arc::new(node)))
    }

    /// A node holding `self`'s values on `device`.
    pub fn copy_to(&self, device: &Arc<dyn Device>) -> LazyBuffer {
        if Arc::ptr_eq(device, self.device()) {
            return self.clone();
        }
        let src = self.contiguous();
        LazyBuffer::new_base(
            device,
            self.dtype(),
            self.shape(),
            LazyOp::Copy,
            alloc::vec![src],
        )
    }
}

impl Drop for LazyNode {
    /// Drops a deep graph without recursing (a chain of 100,000 ops would overflow the stack
    /// dropping node by node): the sources this node held the last reference to are taken
    /// apart here, one at a time, with an explicit stack.
    fn drop(&mut self) {
        let mut stack = Vec::new();
        take_sources(&mut self.kind, &mut stack);
        while let Some(b) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(b.0) {
                take_sources(&mut node.kind, &mut stack);
            }
        }
    }
}

/// Moves a node's sources (or a view's base) onto `out`, leaving it a sourceless base.
fn take_sources(kind: &mut Kind, out: &mut Vec<LazyBuffer>) {
    let empty = Kind::Base {
        op: LazyOp::Buffer,
        srcs: Vec::new(),
    };
    match core::mem::replace(kind, empty) {
        Kind::Base { srcs, .. } => out.extend(srcs),
        Kind::View { base } => out.push(base),
    }
}

/// The dtype an ALU op gives from its (already promoted) operands
/// ([`AluOp::result_dtype`]); `Where` takes its value operands' dtype.
fn alu_dtype(op: AluOp, srcs: &[LazyBuffer]) -> DType {
    let values = if op == AluOp::Where {
        srcs[1].dtype()
    } else {
        srcs[0].dtype()
    };
    op.result_dtype(values)
}

fn fold_consts(op: AluOp, srcs: &[LazyBuffer], dtype: DType) -> Option<Scalar> {
    let vals: Vec<Scalar> = srcs
        .iter()
        .map(LazyBuffer::as_const)
        .collect::<Option<_>>()?;
    crate::ops::eval_alu(op, &vals, dtype)
}

/// `(2, 3)`-style text for error messages.
pub fn fmt_shape(shape: &[Sint]) -> alloc::string::String {
    let parts: Vec<alloc::string::String> = shape.iter().map(|s| alloc::format!("{s}")).collect();
    if parts.len() == 1 {
        alloc::format!("({},)", parts[0])
    } else {
        alloc::format!("({})", parts.join(", "))
    }
}

impl PartialEq for LazyBuffer {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other)
    }
}
impl Eq for LazyBuffer {}
impl Hash for LazyBuffer {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}

impl core::fmt::Debug for LazyBuffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0.kind {
            Kind::Base { op, srcs } => write!(
                f,
                "<{:?} {} {} srcs={}>",
                op,
                self.dtype(),
                fmt_shape(self.shape()),
                srcs.len()
            ),
            Kind::View { base } => write!(f, "<view {} of {:?}>", fmt_shape(self.shape()), base),
        }
    }
}
