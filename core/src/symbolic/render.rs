//! Printing nodes: `Display` shows the algebra (`//` and `%` are floor operations); [`Node::render_c`]
//! gives C that computes the same value.
//!
//! Invariant: C's `/` and `%` truncate, so they appear only where bounds prove the dividend
//! non-negative; elsewhere the C calls `pg_floordiv`/`pg_floormod`, which the C renderer defines.

use alloc::format;
use alloc::string::String;
use core::fmt;

use super::{Kind, Node};

/// How a node is spelled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Math,
    C,
}

impl Node {
    /// C source computing this node's value. Variables render as their names.
    ///
    /// ```
    /// use picograd_core::symbolic::Node;
    /// let a = Node::var("a", 0, 99);
    /// assert_eq!((&a * 4 + 1).floordiv(2).render_c(), "(a*2)");
    /// // a-50 may be negative: C's `%` would truncate, so the floor helper is used.
    /// assert_eq!((&a - 50).modulo(7).render_c(), "((a+6)%7)");
    /// let s = Node::var("s", -5, 5);
    /// assert_eq!(s.floordiv(2).render_c(), "pg_floordiv(s,2)");
    /// ```
    pub fn render_c(&self) -> String {
        render(self, Syntax::C)
    }
}

fn render(n: &Node, s: Syntax) -> String {
    match n.kind() {
        Kind::Const(v) => format!("{v}"),
        Kind::Var(name) => String::from(&**name),
        Kind::Sum(ts) => {
            let mut out = String::from("(");
            for (i, t) in ts.iter().enumerate() {
                let (b, k) = match t.kind() {
                    Kind::Mul(b, k) if k.is_const() => (b, k.as_const().unwrap_or(1)),
                    _ => (t, 1),
                };
                match (i, t.as_const(), k) {
                    (0, _, _) => out.push_str(&render(t, s)),
                    (_, Some(v), _) if v < 0 => out.push_str(&format!("-{}", v.unsigned_abs())),
                    (_, None, -1) => out.push_str(&format!("-({})", render(b, s))),
                    _ => out.push_str(&format!("+{}", render(t, s))),
                }
            }
            out.push(')');
            out
        }
        Kind::Mul(a, b) => format!("({}*{})", render(a, s), render(b, s)),
        Kind::Div(a, c) => match s {
            Syntax::Math => format!("({}//{c})", render(a, s)),
            Syntax::C if a.vmin() >= 0 => format!("({}/{c})", render(a, s)),
            Syntax::C => format!("pg_floordiv({},{c})", render(a, s)),
        },
        Kind::Mod(a, c) => match s {
            Syntax::Math => format!("({}%{c})", render(a, s)),
            Syntax::C if a.vmin() >= 0 => format!("({}%{c})", render(a, s)),
            Syntax::C => format!("pg_floormod({},{c})", render(a, s)),
        },
        Kind::Lt(a, b) => format!("({}<{})", render(a, s), render(b, s)),
        Kind::And(ts) if ts.len() == 1 => match s {
            Syntax::Math => format!("({} != 0)", render(&ts[0], s)),
            Syntax::C => format!("({}!=0)", render(&ts[0], s)),
        },
        Kind::And(ts) => match s {
            Syntax::Math => {
                let parts: alloc::vec::Vec<String> = ts.iter().map(|t| render(t, s)).collect();
                format!("({})", parts.join(" and "))
            }
            Syntax::C => {
                let parts: alloc::vec::Vec<String> = ts.iter().map(render_c_truth).collect();
                format!("({})", parts.join("&&"))
            }
        },
    }
}

/// An operand of C's `&&`: comparisons and ands as they are, anything else as `(x!=0)`, so C
/// compilers see no arithmetic in a boolean context (gcc's `-Wint-in-bool-context`).
fn render_c_truth(n: &Node) -> String {
    match n.kind() {
        Kind::Lt(..) | Kind::And(..) => render(n, Syntax::C),
        _ => format!("({}!=0)", render(n, Syntax::C)),
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render(self, Syntax::Math))
    }
}
