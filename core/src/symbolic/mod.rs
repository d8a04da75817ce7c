//! Symbolic integer index expressions with bounds.
//!
//! A [`Node`] is an immutable, shared expression over named integer variables: constants, sums,
//! products, floor division and modulo by positive constants, `<`, and logical and. Every node
//! carries bounds `[min, max]` that contain every value it can take, and every constructor
//! simplifies using them (see `simplify.rs` for the rules), so `(a*40+b)//20` *is* `a*2` when `b`
//! lies in `[0, 19]`.
//!
//! Invariants: a simplified node evaluates exactly like the expression it was built from, for every
//! assignment of its variables within their bounds; its bounds contain every value it takes. Bounds
//! arithmetic saturates at the ends of i64, which keeps it sound (a saturated bound is still a
//! bound); values are computed with wrapping i64 arithmetic.

mod bind;
mod render;
mod simplify;
mod watch;

pub(crate) use bind::bound_internal;
pub use bind::{fmt_vals, is_internal_var, merge_val, VarVals, Variable};
pub use watch::{Specialization, Watch};

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cmp::Ordering;
use core::hash::{Hash, Hasher};

use crate::error::{Error, Result};

/// A symbolic integer expression. Cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct Node(Arc<Inner>);

#[derive(PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Inner {
    kind: Kind,
    min: i64,
    max: i64,
    /// For a variable bound to a value (see [`Variable::bind`]): the value. Part of the node's
    /// identity, so graphs over different values stay distinct until the scheduler unbinds them.
    bound: Option<i64>,
}

/// The shape of a node. Constructed only through [`Node`]'s simplifying constructors, which keep
/// these forms canonical.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub enum Kind {
    /// An integer constant.
    Const(i64),
    /// A named variable; its bounds are the node's bounds.
    Var(Arc<str>),
    /// A sum of two or more terms; at most one is a constant, and it comes last.
    Sum(Vec<Node>),
    /// A product. The right side is a constant other than 0 and 1, or (for symbolic shapes) any
    /// non-constant node.
    Mul(Node, Node),
    /// Floor division by a constant greater than 1.
    Div(Node, i64),
    /// Floor modulo by a constant greater than 1 (result in `[0, c-1]`).
    Mod(Node, i64),
    /// `lhs < rhs`, 1 if true and 0 if false.
    Lt(Node, Node),
    /// Logical and: 1 when every operand is nonzero, else 0. Two or more operands, or one that is
    /// not 0/1-valued (then it reads `x != 0`).
    And(Vec<Node>),
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}
impl Eq for Node {}
impl Hash for Node {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}
impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Node {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

impl Node {
    fn make(kind: Kind, min: i64, max: i64) -> Node {
        debug_assert!(min <= max, "bounds [{min}, {max}] are empty");
        Node(Arc::new(Inner {
            kind,
            min,
            max,
            bound: None,
        }))
    }

    /// The constant `v`.
    pub fn cst(v: i64) -> Node {
        Node::make(Kind::Const(v), v, v)
    }

    /// A variable named `name` taking values in `[min, max]`. A variable whose range is one value
    /// is that constant.
    ///
    /// # Panics
    /// If `min > max`; see [`Node::try_var`].
    pub fn var(name: &str, min: i64, max: i64) -> Node {
        match Node::try_var(name, min, max) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        }
    }

    /// A variable, or an error when its range is empty.
    pub fn try_var(name: &str, min: i64, max: i64) -> Result<Node> {
        if min > max {
            return Err(Error::Symbolic(alloc::format!(
                "variable {name} has an empty range [{min}, {max}]"
            )));
        }
        if min == max {
            return Ok(Node::cst(min));
        }
        Ok(Node::make(Kind::Var(Arc::from(name)), min, max))
    }

    /// The node's form.
    pub fn kind(&self) -> &Kind {
        &self.0.kind
    }

    /// The smallest value the node can take.
    pub fn vmin(&self) -> i64 {
        self.0.min
    }

    /// The largest value the node can take.
    pub fn vmax(&self) -> i64 {
        self.0.max
    }

    /// The value, when the node is a constant.
    pub fn as_const(&self) -> Option<i64> {
        match self.0.kind {
            Kind::Const(v) => Some(v),
            _ => None,
        }
    }

    /// Is this node a constant?
    pub fn is_const(&self) -> bool {
        self.as_const().is_some()
    }

    /// The variables the node mentions, each once, sorted by name.
    pub fn vars(&self) -> Vec<Node> {
        let mut out = Vec::new();
        self.collect_vars(&mut out);
        out.sort_by(|a, b| a.var_name().cmp(&b.var_name()));
        out.dedup();
        out
    }

    fn collect_vars(&self, out: &mut Vec<Node>) {
        match self.kind() {
            Kind::Const(_) => {}
            Kind::Var(_) => out.push(self.clone()),
            Kind::Sum(ts) | Kind::And(ts) => ts.iter().for_each(|t| t.collect_vars(out)),
            Kind::Mul(a, b) | Kind::Lt(a, b) => {
                a.collect_vars(out);
                b.collect_vars(out);
            }
            Kind::Div(a, _) | Kind::Mod(a, _) => a.collect_vars(out),
        }
    }

    /// The variable's name, when the node is a variable.
    pub fn var_name(&self) -> Option<&str> {
        match &self.0.kind {
            Kind::Var(n) => Some(n),
            _ => None,
        }
    }

    /// Evaluates the node with each variable's value given by `env`. Errors when a variable is
    /// unbound or its value lies outside its bounds (where simplification assumed it would not).
    ///
    /// ```
    /// use picograd_core::symbolic::Node;
    /// let a = Node::var("a", 0, 10);
    /// let e = (&a * 3 + 4).floordiv(2);
    /// assert_eq!(e.eval(&|n| (n == "a").then_some(5)).unwrap(), 9);
    /// ```
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64> {
        Ok(match self.kind() {
            Kind::Const(v) => *v,
            Kind::Var(name) => {
                let v = env(name)
                    .ok_or_else(|| Error::Symbolic(alloc::format!("variable {name} is unbound")))?;
                if v < self.vmin() || v > self.vmax() {
                    return Err(Error::Symbolic(alloc::format!(
                        "variable {name} = {v} is outside its bounds [{}, {}]",
                        self.vmin(),
                        self.vmax()
                    )));
                }
                v
            }
            Kind::Sum(ts) => {
                let mut acc = 0i64;
                for t in ts {
                    acc = acc.wrapping_add(t.eval(env)?);
                }
                acc
            }
            Kind::Mul(a, b) => a.eval(env)?.wrapping_mul(b.eval(env)?),
            Kind::Div(a, c) => a.eval(env)?.div_euclid(*c),
            Kind::Mod(a, c) => a.eval(env)?.rem_euclid(*c),
            Kind::Lt(a, b) => i64::from(a.eval(env)? < b.eval(env)?),
            Kind::And(ts) => {
                let mut all = true;
                for t in ts {
                    all &= t.eval(env)? != 0;
                }
                i64::from(all)
            }
        })
    }

    /// Rebuilds the node with variables replaced where `f` gives a replacement, simplifying as it
    /// goes. Binding every variable to a constant folds the node to a constant.
    pub fn substitute(&self, f: &dyn Fn(&str) -> Option<Node>) -> Node {
        match self.kind() {
            Kind::Const(_) => self.clone(),
            Kind::Var(name) => f(name).unwrap_or_else(|| self.clone()),
            Kind::Sum(ts) => Node::sum(ts.iter().map(|t| t.substitute(f)).collect()),
            Kind::Mul(a, b) => a.substitute(f).mul_node(&b.substitute(f)),
            Kind::Div(a, c) => a.substitute(f).floordiv(*c),
            Kind::Mod(a, c) => a.substitute(f).modulo(*c),
            Kind::Lt(a, b) => a.substitute(f).lt(&b.substitute(f)),
            Kind::And(ts) => Node::ands(ts.iter().map(|t| t.substitute(f)).collect()),
        }
    }

    /// The number of nodes in the expression tree (a size measure for rules and tests).
    pub fn size(&self) -> usize {
        1 + match self.kind() {
            Kind::Const(_) | Kind::Var(_) => 0,
            Kind::Sum(ts) | Kind::And(ts) => ts.iter().map(Node::size).sum(),
            Kind::Mul(a, b) | Kind::Lt(a, b) => a.size() + b.size(),
            Kind::Div(a, _) | Kind::Mod(a, _) => a.size(),
        }
    }
}

/// A variable binding for [`Node::eval`] from a slice of `(name, value)` pairs.
pub fn bindings<'a>(pairs: &'a [(&'a str, i64)]) -> impl Fn(&str) -> Option<i64> + 'a {
    move |n| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| *v)
}

impl From<i64> for Node {
    fn from(v: i64) -> Node {
        Node::cst(v)
    }
}

impl core::fmt::Debug for Node {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{self} [{}, {}]", self.vmin(), self.vmax())
    }
}

// Tensors are shared across test threads; their shapes hold nodes.
const _: () = {
    const fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<Node>();
};
