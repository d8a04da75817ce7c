//! Bound variables: a [`Variable`] (a name with bounds) bound to a value for one computation,
//! and unbinding, which turns an expression over bound variables back into the symbolic
//! expression plus the values ([`VarVals`]) a kernel is run with.
//!
//! Invariant: a bound variable has the bounds of its variable and a value inside them; apart
//! from the value (kept in the node's identity) it simplifies exactly like the unbound variable,
//! so unbinding an expression gives the expression built over the unbound variable.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use super::{Inner, Kind, Node};
use crate::error::{Error, Result};

/// Values of bound variables, by name, sorted by name (each name once).
pub type VarVals = Vec<(Arc<str>, i64)>;

/// A named integer variable with bounds `[min, max]`, for symbolic shapes: a dimension that may
/// take any value in range while one compiled kernel serves them all.
///
/// ```
/// use picograd_core::symbolic::Variable;
/// let batch = Variable::new("batch", 1, 16).unwrap();
/// let b3 = batch.bind(3).unwrap();
/// assert_eq!((b3.bound_value(), b3.vmin(), b3.vmax()), (Some(3), 1, 16));
/// assert!(batch.bind(17).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Variable(Node);

impl Variable {
    /// A variable named `name` (a C identifier) taking values in `[min, max]`, `0 <= min < max`.
    pub fn new(name: &str, min: i64, max: i64) -> Result<Variable> {
        let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident || name.starts_with("idx") || name.starts_with("ridx") {
            return Err(Error::Symbolic(alloc::format!(
                "variable name {name:?} must be a C identifier not starting with idx/ridx"
            )));
        }
        if min < 0 || min >= max {
            return Err(Error::Symbolic(alloc::format!(
                "variable {name} needs bounds 0 <= min < max, got [{min}, {max}]"
            )));
        }
        Node::try_var(name, min, max).map(Variable)
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.0.var_name().unwrap_or("")
    }

    /// The bounds `(min, max)`.
    pub fn bounds(&self) -> (i64, i64) {
        (self.0.vmin(), self.0.vmax())
    }

    /// The unbound variable as a symbolic node.
    pub fn node(&self) -> &Node {
        &self.0
    }

    /// The variable bound to `value`: a dimension usable in a tensor's shape. A value outside
    /// the bounds is an error naming both.
    pub fn bind(&self, value: i64) -> Result<Node> {
        let (lo, hi) = self.bounds();
        if value < lo || value > hi {
            return Err(Error::Symbolic(alloc::format!(
                "variable {} = {value} is outside its bounds [{lo}, {hi}]",
                self.name()
            )));
        }
        Ok(Node(Arc::new(Inner {
            kind: self.0.kind().clone(),
            min: lo,
            max: hi,
            bound: Some(value),
        })))
    }
}

/// Whether `name` is a variable the scheduler made for itself (a load's offset into its
/// buffer, `schedule/offsets.rs`): such names start with `_`, which no [`Variable`] can (its name
/// starts with a letter), so they never collide with a dimension a caller binds. Their values
/// are the recorded ones on every replay, and export passes them as constants.
pub fn is_internal_var(name: &str) -> bool {
    name.starts_with('_')
}

/// The internal variable `name` (see [`is_internal_var`]) with bounds `[min, max]` (`min < max`)
/// bound to `value`.
pub(crate) fn bound_internal(name: &str, min: i64, max: i64, value: i64) -> Result<Node> {
    if !is_internal_var(name) || min >= max || value < min || value > max {
        return Err(Error::internal(alloc::format!(
            "internal variable {name} = {value} in [{min}, {max}]"
        )));
    }
    let v = Node::try_var(name, min, max)?;
    Ok(Node(Arc::new(Inner {
        kind: v.kind().clone(),
        min,
        max,
        bound: Some(value),
    })))
}

impl Node {
    /// The value a bound variable holds (`None` for anything else).
    pub fn bound_value(&self) -> Option<i64> {
        self.0.bound
    }

    /// The value with every bound variable at its bound value (unbound variables at their
    /// largest value): the concrete size of a bound symbolic dimension. Reading a bound value
    /// this way specializes a capture in progress to it (see [`super::Watch`]); checks that stay
    /// valid at every value use [`Node::resolved_quiet`].
    pub fn resolved(&self) -> i64 {
        super::watch::note(self);
        self.resolved_quiet()
    }

    /// [`Node::resolved`] without noting the read: for checks that hold at every value of the
    /// variables (comparing two expressions over the same variables), never for a number that
    /// ends up in a graph.
    pub(crate) fn resolved_quiet(&self) -> i64 {
        // Fast paths: shapes are mostly constants and lone variables (replays ask per call).
        match (self.as_const(), self.bound_value()) {
            (Some(c), _) | (None, Some(c)) => return c,
            (None, None) => {}
        }
        let vals = self.var_vals().unwrap_or_default();
        self.eval(&|n| {
            vals.iter()
                .find(|(k, _)| &**k == n)
                .map(|(_, v)| *v)
                .or_else(|| {
                    self.vars()
                        .iter()
                        .find(|v| v.var_name() == Some(n))
                        .map(Node::vmax)
                })
        })
        .unwrap_or(self.vmax())
    }

    /// The values of the bound variables the node mentions, sorted by name; an error when one
    /// name is bound to two values.
    pub fn var_vals(&self) -> Result<VarVals> {
        let mut out = VarVals::new();
        self.merge_bound_into(&mut out)?;
        Ok(out)
    }

    /// Adds the values of the bound variables the node mentions to `vals` (kept sorted by
    /// name, as [`merge_val`] does); an error when a name is bound to two values. Allocates
    /// only for a name `vals` does not hold yet: replays call it on every input dimension.
    pub fn merge_bound_into(&self, vals: &mut VarVals) -> Result<()> {
        match self.kind() {
            Kind::Const(_) => Ok(()),
            Kind::Var(name) => match self.bound_value() {
                Some(v) => merge_arc(vals, name, v),
                None => Ok(()),
            },
            Kind::Sum(ts) | Kind::And(ts) => ts.iter().try_for_each(|t| t.merge_bound_into(vals)),
            Kind::Mul(a, b) | Kind::Lt(a, b) => {
                a.merge_bound_into(vals)?;
                b.merge_bound_into(vals)
            }
            Kind::Div(a, _) | Kind::Mod(a, _) => a.merge_bound_into(vals),
        }
    }

    /// Do the two nodes differ at most in the values their variables are bound to
    /// (`a.unbind() == b.unbind()`, without building either)? A replay checks its inputs'
    /// shapes against the captured ones this way.
    pub fn eq_unbound(&self, other: &Node) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        if (self.vmin(), self.vmax()) != (other.vmin(), other.vmax()) {
            return false;
        }
        let all = |a: &[Node], b: &[Node]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.eq_unbound(y))
        };
        match (self.kind(), other.kind()) {
            (Kind::Const(a), Kind::Const(b)) => a == b,
            (Kind::Var(a), Kind::Var(b)) => a == b,
            (Kind::Sum(a), Kind::Sum(b)) | (Kind::And(a), Kind::And(b)) => all(a, b),
            (Kind::Mul(a, b), Kind::Mul(c, d)) | (Kind::Lt(a, b), Kind::Lt(c, d)) => {
                a.eq_unbound(c) && b.eq_unbound(d)
            }
            (Kind::Div(a, x), Kind::Div(b, y)) | (Kind::Mod(a, x), Kind::Mod(b, y)) => {
                x == y && a.eq_unbound(b)
            }
            (
                Kind::Const(_)
                | Kind::Var(_)
                | Kind::Sum(_)
                | Kind::And(_)
                | Kind::Mul(..)
                | Kind::Lt(..)
                | Kind::Div(..)
                | Kind::Mod(..),
                _,
            ) => false,
        }
    }

    /// The node with every bound variable replaced by its unbound variable.
    pub fn unbind(&self) -> Node {
        if self.is_const() {
            return self.clone();
        }
        if self.vars().iter().all(|v| v.bound_value().is_none()) {
            return self.clone();
        }
        self.substitute(&|name| {
            self.vars()
                .into_iter()
                .find(|v| v.var_name() == Some(name))
                .map(|v| match v.kind() {
                    Kind::Var(_) => Node::var(name, v.vmin(), v.vmax()),
                    _ => v,
                })
        })
    }
}

impl Node {
    /// The node with each bound variable named in `vals` bound to that value instead (others
    /// kept): a captured output shape at a replay's values. A value outside a variable's
    /// bounds is an error.
    pub fn rebind(&self, vals: &VarVals) -> Result<Node> {
        if self.is_const() {
            return Ok(self.clone());
        }
        let vars = self.vars();
        if vars.iter().all(|v| v.bound_value().is_none()) {
            return Ok(self.clone());
        }
        let mut bound = Vec::new();
        for v in &vars {
            let name = v.var_name().unwrap_or("");
            if let Some((_, val)) = vals.iter().find(|(k, _)| &**k == name) {
                bound.push(Variable(Node::var(name, v.vmin(), v.vmax())).bind(*val)?);
            }
        }
        Ok(self.substitute(&|name| bound.iter().find(|b| b.var_name() == Some(name)).cloned()))
    }
}

/// Adds `name = val` to `vals` (kept sorted by name); an error when `name` already holds
/// another value.
pub fn merge_val(vals: &mut VarVals, name: &str, val: i64) -> Result<()> {
    match vals.binary_search_by(|(k, _)| (**k).cmp(name)) {
        Ok(i) if vals[i].1 == val => Ok(()),
        Ok(i) => Err(Error::Symbolic(alloc::format!(
            "variable {name} is bound to both {} and {val} in one computation",
            vals[i].1
        ))),
        Err(i) => {
            vals.insert(i, (Arc::from(name), val));
            Ok(())
        }
    }
}

/// [`merge_val`] for a name already shared: inserting it clones the `Arc`.
fn merge_arc(vals: &mut VarVals, name: &Arc<str>, val: i64) -> Result<()> {
    match vals.binary_search_by(|(k, _)| (**k).cmp(&**name)) {
        Ok(i) if vals[i].1 == val => Ok(()),
        Ok(_) => merge_val(vals, name, val),
        Err(i) => {
            vals.insert(i, (name.clone(), val));
            Ok(())
        }
    }
}

/// `name=value, ...` text of bound values (for errors and debug output).
pub fn fmt_vals(vals: &VarVals) -> String {
    let parts: Vec<String> = vals
        .iter()
        .map(|(k, v)| alloc::format!("{k}={v}"))
        .collect();
    parts.join(", ")
}
