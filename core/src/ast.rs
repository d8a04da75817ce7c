//! Kernel ASTs: what one kernel computes, as a DAG whose leaves are buffer loads and constants
//! and whose root stores into the output buffer.
//!
//! Invariants: every leaf carries a ShapeTracker over the kernel's shape; the DAG holds at most
//! one `Reduce`; leaves inside the reduce's subtree have the reduce's input shape, the rest (and
//! the store) have its output shape (reduced axes of size 1). Buffer numbers: 0 is the output,
//! then inputs in first-use order.
//!
//! A node used twice (`x*x`, `max(x, -x)`) is one shared node, so an AST is a DAG: along a chain
//! of such ops its tree would double at every step. Every walk here therefore visits each
//! distinct node once (by identity) and uses an explicit stack, never recursion, so neither
//! sharing nor depth costs more than the DAG's size. Equality and hashing are structural (a tree
//! and a DAG spelling the same expression are equal); the hash is computed once, at construction.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::hash::{Hash, Hasher};

use hashbrown::{HashMap, HashSet};

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

/// A shared AST node. Cheap to clone; equal and hashed by structure (see the module doc).
#[derive(Clone)]
pub struct Ast(Arc<AstNode>);

/// The data of an AST node.
pub struct AstNode {
    /// What it does.
    pub op: AstOp,
    /// Its value's dtype.
    pub dtype: DType,
    /// Its operands.
    pub src: Vec<Ast>,
    /// The structural hash of the node and everything below it, computed once by [`Ast::new`].
    hash: u64,
}

/// FNV-1a, 64 bits: deterministic across processes and builds, and needs no std.
struct Fnv64(u64);

impl Hasher for Fnv64 {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

impl Ast {
    /// A new node.
    pub fn new(op: AstOp, dtype: DType, src: Vec<Ast>) -> Ast {
        let mut h = Fnv64(0xcbf2_9ce4_8422_2325);
        op.hash(&mut h);
        dtype.hash(&mut h);
        src.len().hash(&mut h);
        for s in &src {
            h.write_u64(s.0.hash);
        }
        let hash = h.finish();
        Ast(Arc::new(AstNode {
            op,
            dtype,
            src,
            hash,
        }))
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

    /// The node's identity (its address): equal for clones, distinct for distinct live nodes.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Every distinct node once, each before its operands, in the order a recursive pre-order
    /// walk would first reach them.
    pub fn nodes(&self) -> Vec<&Ast> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut stack = alloc::vec![self];
        while let Some(n) = stack.pop() {
            if !seen.insert(n.id()) {
                continue;
            }
            out.push(n);
            stack.extend(n.src().iter().rev());
        }
        out
    }

    /// Every distinct node once, each after its operands (the order a recursive post-order walk
    /// would finish them), not descending below nodes for which `stop` holds.
    pub fn toposort_until(&self, stop: impl Fn(&Ast) -> bool) -> Vec<&Ast> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut stack = alloc::vec![(self, false)];
        while let Some((n, done)) = stack.pop() {
            if done {
                out.push(n);
                continue;
            }
            if !seen.insert(n.id()) {
                continue;
            }
            stack.push((n, true));
            if !stop(n) {
                stack.extend(n.src().iter().rev().map(|s| (s, false)));
            }
        }
        out
    }

    /// Every distinct node once, each after its operands.
    pub fn toposort(&self) -> Vec<&Ast> {
        self.toposort_until(|_| false)
    }

    /// The reduce node, if the kernel has one.
    pub fn find_reduce(&self) -> Option<&Ast> {
        self.nodes()
            .into_iter()
            .find(|n| matches!(n.op(), AstOp::Reduce(..)))
    }

    /// Rebuilds the DAG with every leaf's ShapeTracker mapped by `f(st, inside_reduce)`. Shared
    /// nodes stay shared (each is mapped once per side of the reduce it is read on).
    pub fn map_sts(&self, f: &mut dyn FnMut(&ShapeTracker, bool) -> ShapeTracker) -> Ast {
        self.map_ops(&mut |op, inside| match op {
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
        })
    }

    /// Rebuilds the DAG with every node's op mapped by `f(op, inside_reduce)` (operands and
    /// dtypes kept). Shared nodes stay shared (each is mapped once per side of the reduce it is
    /// read on).
    pub fn map_ops(&self, f: &mut dyn FnMut(&AstOp, bool) -> AstOp) -> Ast {
        let mut done: HashMap<(usize, bool), Ast> = HashMap::new();
        // (node, inside a reduce, operands pushed)
        let mut stack = alloc::vec![(self, false, false)];
        while let Some((n, inside, expanded)) = stack.pop() {
            if done.contains_key(&(n.id(), inside)) {
                continue;
            }
            let below = inside || matches!(n.op(), AstOp::Reduce(..));
            if !expanded {
                stack.push((n, inside, true));
                stack.extend(n.src().iter().rev().map(|s| (s, below, false)));
                continue;
            }
            let op = f(n.op(), inside);
            let src = n
                .src()
                .iter()
                .map(|s| done[&(s.id(), below)].clone())
                .collect();
            done.insert((n.id(), inside), Ast::new(op, n.dtype(), src));
        }
        done.remove(&(self.id(), false))
            .unwrap_or_else(|| self.clone())
    }

    fn write_line(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.op() {
            AstOp::Load { buf, st } => write!(f, "LOAD buf{buf} {} {st}", self.dtype()),
            AstOp::Const { val, st } => write!(f, "CONST {val} {} {st}", self.dtype()),
            AstOp::Store { buf, st } => write!(f, "STORE buf{buf} {} {st}", self.dtype()),
            AstOp::Alu(op) => write!(f, "{} {}", op.name().to_uppercase(), self.dtype()),
            AstOp::Reduce(op, axes) => write!(
                f,
                "REDUCE_{} {axes:?} {}",
                op.name().to_uppercase(),
                self.dtype()
            ),
            AstOp::Cast => write!(f, "CAST {}", self.dtype()),
            AstOp::Bitcast => write!(f, "BITCAST {}", self.dtype()),
        }
    }
}

impl fmt::Display for Ast {
    /// An indented tree, root first, e.g. `STORE buf0 f32 ...` then `  ADD f32` then its operands.
    /// A node read more than once is printed in full once, tagged `#k`, and as `#k` where it is
    /// read again, so the text stays as large as the DAG.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut uses: HashMap<usize, usize> = HashMap::new();
        for n in self.nodes() {
            for s in n.src() {
                *uses.entry(s.id()).or_insert(0) += 1;
            }
        }
        let mut tags: HashMap<usize, usize> = HashMap::new();
        let mut stack = alloc::vec![(self, 0usize)];
        while let Some((n, depth)) = stack.pop() {
            write!(f, "{:indent$}", "", indent = depth * 2)?;
            if let Some(t) = tags.get(&n.id()) {
                writeln!(f, "#{t}")?;
                continue;
            }
            n.write_line(f)?;
            if uses.get(&n.id()).copied().unwrap_or(0) > 1 {
                let t = tags.len();
                tags.insert(n.id(), t);
                write!(f, " #{t}")?;
            }
            writeln!(f)?;
            stack.extend(n.src().iter().rev().map(|s| (s, depth + 1)));
        }
        Ok(())
    }
}

impl fmt::Debug for Ast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl PartialEq for Ast {
    /// Structural equality, one comparison per distinct pair of nodes (no recursion).
    fn eq(&self, other: &Ast) -> bool {
        let mut same: HashSet<(usize, usize)> = HashSet::new();
        let mut stack = alloc::vec![(self, other)];
        while let Some((a, b)) = stack.pop() {
            if Arc::ptr_eq(&a.0, &b.0) || !same.insert((a.id(), b.id())) {
                continue;
            }
            let (x, y) = (&*a.0, &*b.0);
            if x.hash != y.hash || x.dtype != y.dtype || x.src.len() != y.src.len() || x.op != y.op
            {
                return false;
            }
            stack.extend(x.src.iter().zip(&y.src));
        }
        true
    }
}

impl Eq for Ast {}

impl Hash for Ast {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl Drop for AstNode {
    /// Drops a deep DAG without recursing: operands this node held the last reference to are
    /// taken apart here, one at a time.
    fn drop(&mut self) {
        let mut stack = core::mem::take(&mut self.src);
        while let Some(a) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(a.0) {
                stack.append(&mut node.src);
            }
        }
    }
}
