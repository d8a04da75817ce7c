//! Kernel ASTs: what one kernel computes, as a tree whose leaves are buffer loads and constants
//! and whose root stores into the output buffer.
//!
//! Invariants: every leaf carries a ShapeTracker over the kernel's shape; the tree holds at most
//! one `Reduce`; leaves inside the reduce's subtree have the reduce's input shape, the rest (and
//! the store) have its output shape (reduced axes of size 1). Buffer numbers: 0 is the output,
//! then inputs in first-use order.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::dtype::DType;
use crate::ops::{AluOp, ReduceOp, Scalar};
use crate::shape::ShapeTracker;

/// One node of a kernel AST.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AstOp {
    /// Read buffer `buf` through `st`.
    Load {
        /// Buffer number.
        buf: usize,
        /// How the kernel's index maps into it.
        st: ShapeTracker,
    },
    /// A constant (zero where `st` is masked out).
    Const {
        /// The value.
        val: Scalar,
        /// Where it is valid.
        st: ShapeTracker,
    },
    /// Write the single source into buffer `buf` through `st` (the root).
    Store {
        /// Buffer number.
        buf: usize,
        /// How the kernel's index maps into it.
        st: ShapeTracker,
    },
    /// An elementwise op.
    Alu(AluOp),
    /// A reduction over axes (of the kernel's full shape).
    Reduce(ReduceOp, Vec<usize>),
    /// A conversion to the node's dtype.
    Cast,
    /// A bit reinterpretation as the node's dtype.
    Bitcast,
}

/// A shared AST node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ast(Arc<AstNode>);

/// The data of an AST node.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AstNode {
    /// What it does.
    pub op: AstOp,
    /// Its value's dtype.
    pub dtype: DType,
    /// Its operands.
    pub src: Vec<Ast>,
}

impl Ast {
    /// A new node.
    pub fn new(op: AstOp, dtype: DType, src: Vec<Ast>) -> Ast {
        Ast(Arc::new(AstNode { op, dtype, src }))
    }

    /// The op.
    pub fn op(&self) -> &AstOp {
        &self.0.op
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The operands.
    pub fn src(&self) -> &[Ast] {
        &self.0.src
    }

    /// The reduce node, if the kernel has one.
    pub fn find_reduce(&self) -> Option<&Ast> {
        if matches!(self.op(), AstOp::Reduce(..)) {
            return Some(self);
        }
        self.src().iter().find_map(Ast::find_reduce)
    }

    /// Rebuilds the tree with every leaf's ShapeTracker mapped by `f(st, inside_reduce)`.
    pub fn map_sts(&self, f: &mut dyn FnMut(&ShapeTracker, bool) -> ShapeTracker) -> Ast {
        self.map_sts_inner(f, false)
    }

    fn map_sts_inner(
        &self,
        f: &mut dyn FnMut(&ShapeTracker, bool) -> ShapeTracker,
        inside: bool,
    ) -> Ast {
        let op = match self.op() {
            AstOp::Load { buf, st } => AstOp::Load {
                buf: *buf,
                st: f(st, inside),
            },
            AstOp::Const { val, st } => AstOp::Const {
                val: *val,
                st: f(st, inside),
            },
            AstOp::Store { buf, st } => AstOp::Store {
                buf: *buf,
                st: f(st, inside),
            },
            other => other.clone(),
        };
        let inside = inside || matches!(self.op(), AstOp::Reduce(..));
        let src = self
            .src()
            .iter()
            .map(|s| s.map_sts_inner(f, inside))
            .collect();
        Ast::new(op, self.dtype(), src)
    }

    fn write_tree(&self, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
        write!(f, "{:indent$}", "", indent = depth * 2)?;
        match self.op() {
            AstOp::Load { buf, st } => writeln!(f, "LOAD buf{buf} {} {st}", self.dtype()),
            AstOp::Const { val, st } => writeln!(f, "CONST {val} {} {st}", self.dtype()),
            AstOp::Store { buf, st } => writeln!(f, "STORE buf{buf} {} {st}", self.dtype()),
            AstOp::Alu(op) => writeln!(f, "{} {}", op.name().to_uppercase(), self.dtype()),
            AstOp::Reduce(op, axes) => writeln!(
                f,
                "REDUCE_{} {axes:?} {}",
                op.name().to_uppercase(),
                self.dtype()
            ),
            AstOp::Cast => writeln!(f, "CAST {}", self.dtype()),
            AstOp::Bitcast => writeln!(f, "BITCAST {}", self.dtype()),
        }?;
        self.src()
            .iter()
            .try_for_each(|s| s.write_tree(f, depth + 1))
    }
}

impl fmt::Display for Ast {
    /// An indented tree, root first, e.g. `STORE buf0 f32 ...` then `  ADD f32` then its operands.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_tree(f, 0)
    }
}
