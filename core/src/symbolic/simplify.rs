//! The simplifying constructors of [`Node`]: every rule a node is built with.
//!
//! Each rule is directional (the result is never bigger than the expression it replaces, counted in
//! nodes) and exact for every assignment within bounds. `//` and `%` are floor division and floor
//! modulo by a positive constant `c`; the identities used are stated beside each rule. The one
//! trap to avoid: `//` does not distribute over `+` ((1+1)//2 = 1 but 1//2 + 1//2 = 0); it only
//! splits off terms that are exact multiples of `c`.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::{Add, Mul, Neg, Sub};

use super::{Kind, Node};

/// `x // c` for `c > 0`, on plain integers.
fn fdiv(x: i64, c: i64) -> i64 {
    x.div_euclid(c)
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

impl Node {
    /// Splits a term into (base, coefficient): `x*c` → (x, c); anything else → (itself, 1).
    fn split_coef(&self) -> (Node, i64) {
        match self.kind() {
            Kind::Mul(x, c) if c.is_const() => (x.clone(), c.as_const().unwrap_or(1)),
            _ => (self.clone(), 1),
        }
    }

    /// The terms of a sum (a non-sum is its own single term).
    fn terms(&self) -> Vec<Node> {
        match self.kind() {
            Kind::Sum(ts) => ts.clone(),
            _ => alloc::vec![self.clone()],
        }
    }

    /// The sum of `terms`, flattened, with like terms and constants combined.
    pub fn sum(terms: Vec<Node>) -> Node {
        let mut konst = 0i64;
        let mut coefs: BTreeMap<Node, i64> = BTreeMap::new();
        for t in terms.iter().flat_map(Node::terms) {
            if let Some(v) = t.as_const() {
                konst = konst.wrapping_add(v);
                continue;
            }
            let (base, c) = t.split_coef();
            let e = coefs.entry(base).or_insert(0);
            *e = e.wrapping_add(c);
        }
        konst = konst.wrapping_add(merge_div_mod(&mut coefs));
        let mut out: Vec<Node> = coefs
            .into_iter()
            .filter(|(_, c)| *c != 0)
            .map(|(b, c)| b.mul_node(&Node::cst(c)))
            .collect();
        if out.is_empty() {
            return Node::cst(konst);
        }
        if konst != 0 {
            out.push(Node::cst(konst));
        }
        if out.len() == 1 {
            return out.pop().unwrap_or_else(|| Node::cst(0));
        }
        let (min, max) = out.iter().fold((0i64, 0i64), |(lo, hi), t| {
            (lo.saturating_add(t.vmin()), hi.saturating_add(t.vmax()))
        });
        Node::make(Kind::Sum(out), min, max)
    }

    /// `self * other`.
    pub fn mul_node(&self, other: &Node) -> Node {
        match (self.as_const(), other.as_const()) {
            (Some(a), Some(b)) => Node::cst(a.wrapping_mul(b)),
            (Some(_), None) => other.mul(self),
            (None, Some(c)) => self.mul_const(c),
            (None, None) => {
                let corners = [
                    self.vmin().saturating_mul(other.vmin()),
                    self.vmin().saturating_mul(other.vmax()),
                    self.vmax().saturating_mul(other.vmin()),
                    self.vmax().saturating_mul(other.vmax()),
                ];
                let min = corners.iter().copied().min().unwrap_or(0);
                let max = corners.iter().copied().max().unwrap_or(0);
                let (a, b) = if self <= other {
                    (self, other)
                } else {
                    (other, self)
                };
                Node::make(Kind::Mul(a.clone(), b.clone()), min, max)
            }
        }
    }

    fn mul_const(&self, c: i64) -> Node {
        // x*0 = 0; x*1 = x.
        if c == 0 {
            return Node::cst(0);
        }
        if c == 1 {
            return self.clone();
        }
        match self.kind() {
            Kind::Const(v) => Node::cst(v.wrapping_mul(c)),
            // (x*a)*c = x*(a*c)
            Kind::Mul(x, a) if a.is_const() => {
                x.mul_const(a.as_const().unwrap_or(1).wrapping_mul(c))
            }
            // (a+b)*c = a*c + b*c: keeps sums flat so like terms meet.
            Kind::Sum(ts) => Node::sum(ts.iter().map(|t| t.mul_const(c)).collect()),
            _ => {
                let (lo, hi) = (self.vmin().saturating_mul(c), self.vmax().saturating_mul(c));
                Node::make(
                    Kind::Mul(self.clone(), Node::cst(c)),
                    lo.min(hi),
                    lo.max(hi),
                )
            }
        }
    }

    /// Floor division by a positive constant.
    ///
    /// # Panics
    /// If `c <= 0`: index algebra divides only by positive constants.
    pub fn floordiv(&self, c: i64) -> Node {
        assert!(
            c > 0,
            "symbolic floordiv by {c}: the divisor must be positive"
        );
        if c == 1 {
            return self.clone();
        }
        // Bounds decide: every value lies in one block of c.
        let (lo, hi) = (fdiv(self.vmin(), c), fdiv(self.vmax(), c));
        if lo == hi {
            return Node::cst(lo);
        }
        match self.kind() {
            // (x*k)//c = x*(k/c) when c | k.
            Kind::Mul(x, k) if k.as_const().is_some_and(|k| k % c == 0) => {
                x.mul_const(k.as_const().unwrap_or(0) / c)
            }
            // (x*k)//c = (x*(k/g))//(c/g) where g = gcd(k, c) > 1: the same rational, so the same
            // floor.
            Kind::Mul(x, k) if k.as_const().is_some_and(|k| gcd(k, c) > 1) => {
                let g = gcd(k.as_const().unwrap_or(1), c);
                x.mul_const(k.as_const().unwrap_or(g) / g).floordiv(c / g)
            }
            // (x//a)//c = x//(a*c) for positive a, c.
            Kind::Div(x, a) => match a.checked_mul(c) {
                Some(ac) => x.floordiv(ac),
                None => Node::make(Kind::Div(self.clone(), c), lo, hi),
            },
            Kind::Sum(ts) => self.sum_floordiv(ts, c),
            _ => Node::make(Kind::Div(self.clone(), c), lo, hi),
        }
    }

    fn sum_floordiv(&self, ts: &[Node], c: i64) -> Node {
        // (c*q + r)//c = q + r//c: split off the terms that are exact multiples of c (constants
        // included, by their floor quotient).
        let mut quotient = Vec::new();
        let mut rest = Vec::new();
        for t in ts {
            let (base, k) = t.split_coef();
            match t.as_const() {
                Some(v) => {
                    quotient.push(Node::cst(fdiv(v, c)));
                    rest.push(Node::cst(v.rem_euclid(c)));
                }
                None if k % c == 0 => quotient.push(base.mul_const(k / c)),
                None => rest.push(t.clone()),
            }
        }
        // Split when a variable term divides out, or when the remainder folds to a constant;
        // splitting off a constant alone would make the expression bigger.
        if quotient.iter().any(|q| q.as_const() != Some(0)) {
            let rest_div = Node::sum(rest).floordiv(c);
            if quotient.iter().any(|q| !q.is_const()) || rest_div.is_const() {
                quotient.push(rest_div);
                return Node::sum(quotient);
            }
        }
        // (g*x)//(g*c') = x//c' where g divides every coefficient and c.
        let g = ts.iter().fold(c, |g, t| {
            let k = t.as_const().unwrap_or_else(|| t.split_coef().1);
            gcd(g, k)
        });
        if g > 1 {
            let reduced = ts
                .iter()
                .map(|t| match t.as_const() {
                    Some(v) => Node::cst(v / g),
                    None => {
                        let (b, k) = t.split_coef();
                        b.mul_const(k / g)
                    }
                })
                .collect();
            return Node::sum(reduced).floordiv(c / g);
        }
        // (g*X + r)//c = X//(c/g) when g | c and r lies in [0, g-1]: (g*X + r)//g = X.
        if let Some((x, _, g)) = split_small_remainder(ts, c) {
            return x.floordiv(c / g);
        }
        Node::make(
            Kind::Div(self.clone(), c),
            fdiv(self.vmin(), c),
            fdiv(self.vmax(), c),
        )
    }

    /// Floor modulo by a positive constant (result in `[0, c-1]`).
    ///
    /// # Panics
    /// If `c <= 0`: index algebra takes the modulo only of positive constants.
    pub fn modulo(&self, c: i64) -> Node {
        assert!(
            c > 0,
            "symbolic modulo by {c}: the divisor must be positive"
        );
        if c == 1 {
            return Node::cst(0);
        }
        // Bounds decide: every value lies in the block [c*q, c*q + c-1], so x%c = x - c*q.
        let q = fdiv(self.vmin(), c);
        if q == fdiv(self.vmax(), c) {
            return self.sub_node(&Node::cst(q.wrapping_mul(c)));
        }
        match self.kind() {
            // (x*k)%c = ((k%c)*x)%c, and 0 when c | k.
            Kind::Mul(x, k) if k.is_const() => {
                let k = k.as_const().unwrap_or(1);
                if k % c == 0 {
                    return Node::cst(0);
                }
                if k.rem_euclid(c) != k {
                    return x.mul_const(k.rem_euclid(c)).modulo(c);
                }
                self.make_mod(c)
            }
            // (x%a)%c = x%c when c | a.
            Kind::Mod(x, a) if a % c == 0 => x.modulo(c),
            Kind::Sum(ts) => {
                // (c*q + r)%c = r%c: reduce every coefficient and the constant modulo c.
                let reduced: Vec<Node> = ts
                    .iter()
                    .map(|t| match t.as_const() {
                        Some(v) => Node::cst(v.rem_euclid(c)),
                        None => {
                            let (b, k) = t.split_coef();
                            b.mul_const(k.rem_euclid(c))
                        }
                    })
                    .collect();
                let s = Node::sum(reduced);
                if s != *self {
                    return s.modulo(c);
                }
                // (g*X + r)%c = g*(X%(c/g)) + r when g | c and r lies in [0, g-1]: the block of
                // c that g*X + r falls in is the block of c/g that X falls in, scaled by g.
                if let Some((x, r, g)) = split_small_remainder(ts, c) {
                    return x.modulo(c / g).mul_const(g).add_node(&r);
                }
                self.make_mod(c)
            }
            _ => self.make_mod(c),
        }
    }

    fn make_mod(&self, c: i64) -> Node {
        let hi = if self.vmin() >= 0 {
            self.vmax().min(c - 1)
        } else {
            c - 1
        };
        Node::make(Kind::Mod(self.clone(), c), 0, hi)
    }

    /// `self < other` as 0/1.
    pub fn lt(&self, other: &Node) -> Node {
        // x < x = 0.
        if self == other {
            return Node::cst(0);
        }
        // Bounds decide.
        if self.vmax() < other.vmin() {
            return Node::cst(1);
        }
        if self.vmin() >= other.vmax() {
            return Node::cst(0);
        }
        if let Some(c) = other.as_const() {
            if let Some(n) = self.lt_const(c) {
                return n;
            }
        }
        Node::make(Kind::Lt(self.clone(), other.clone()), 0, 1)
    }

    fn lt_const(&self, c: i64) -> Option<Node> {
        match self.kind() {
            // x*k < c  ⟺  x < ceil(c/k) for k > 0 (x integer).
            Kind::Mul(x, k) if k.as_const().is_some_and(|k| k > 0) => {
                let k = k.as_const().unwrap_or(1);
                Some(x.lt(&Node::cst(-fdiv(-c, k))))
            }
            Kind::Sum(ts) => {
                // x + k < c  ⟺  x < c - k.
                if let Some(k) = ts.last().and_then(Node::as_const) {
                    let x = Node::sum(ts[..ts.len() - 1].to_vec());
                    return Some(x.lt(&Node::cst(c.wrapping_sub(k))));
                }
                self.sum_lt_gcd(ts, c)
            }
            _ => None,
        }
    }

    fn sum_lt_gcd(&self, ts: &[Node], c: i64) -> Option<Node> {
        // g*X + r < c  ⟺  X < c/g, when g | c and r lies in [0, g-1]; the terms with a
        // coefficient other than ±1 make up g*X, the rest make up r.
        let (big, small): (Vec<Node>, Vec<Node>) =
            ts.iter().cloned().partition(|t| t.split_coef().1.abs() > 1);
        let g = big.iter().fold(0, |g, t| gcd(g, t.split_coef().1));
        if g <= 1 {
            return None;
        }
        let bound = if small.is_empty() {
            // g*X < c  ⟺  X < ceil(c/g).
            -fdiv(-c, g)
        } else {
            let r = Node::sum(small);
            if c % g != 0 || r.vmin() < 0 || r.vmax() >= g {
                return None;
            }
            c / g
        };
        let x = Node::sum(
            big.iter()
                .map(|t| {
                    let (b, k) = t.split_coef();
                    b.mul_const(k / g)
                })
                .collect(),
        );
        Some(x.lt(&Node::cst(bound)))
    }

    /// Logical and: 1 when every node is nonzero, else 0. Flattened, constants folded, duplicates
    /// dropped.
    pub fn ands(nodes: Vec<Node>) -> Node {
        let mut out: Vec<Node> = Vec::new();
        for n in nodes {
            let parts = match n.kind() {
                Kind::And(ts) => ts.clone(),
                _ => alloc::vec![n],
            };
            for p in parts {
                // x and y = 0 when x is always 0; x and y = y when x is never 0.
                if p.vmin() == 0 && p.vmax() == 0 {
                    return Node::cst(0);
                }
                if p.vmin() > 0 || p.vmax() < 0 {
                    continue;
                }
                out.push(p);
            }
        }
        out.sort();
        out.dedup();
        // Every operand left can be 0, so the and can be 0; it is never more than 1.
        match out.len() {
            0 => Node::cst(1),
            // A lone 0/1 operand is its own truth value; any other stays `x != 0`.
            1 if out[0].vmin() >= 0 && out[0].vmax() <= 1 => {
                out.pop().unwrap_or_else(|| Node::cst(1))
            }
            _ => Node::make(Kind::And(out), 0, 1),
        }
    }

    /// `self + other`.
    pub fn add_node(&self, other: &Node) -> Node {
        Node::sum(alloc::vec![self.clone(), other.clone()])
    }

    /// `self - other`.
    pub fn sub_node(&self, other: &Node) -> Node {
        Node::sum(alloc::vec![self.clone(), other.mul_const(-1)])
    }
}

/// Splits the terms of a sum into `g*X + r` for the `//` and `%` by `c` rules: `g` is the greatest
/// common divisor of `c` and the coefficients other than ±1 (the terms with those coefficients,
/// and each constant's multiple of `g`, make up `g*X`), and `r` is the rest. `None` unless
/// `g > 1`, `X` is not constant and `r` lies in `[0, g-1]` for every assignment.
fn split_small_remainder(ts: &[Node], c: i64) -> Option<(Node, Node, i64)> {
    let coef = |t: &Node| if t.is_const() { 1 } else { t.split_coef().1 };
    let g = ts.iter().map(coef).filter(|k| k.abs() > 1).fold(c, gcd);
    if g <= 1 || g == c {
        return None;
    }
    let (mut big, mut small) = (Vec::new(), Vec::new());
    for t in ts {
        match t.as_const() {
            Some(v) => {
                big.push(Node::cst(fdiv(v, g)));
                small.push(Node::cst(v.rem_euclid(g)));
            }
            None => {
                let (b, k) = t.split_coef();
                if k % g == 0 {
                    big.push(b.mul_const(k / g));
                } else {
                    small.push(t.clone());
                }
            }
        }
    }
    let (x, r) = (Node::sum(big), Node::sum(small));
    (!x.is_const() && r.vmin() >= 0 && r.vmax() < g).then_some((x, r, g))
}

/// `x%c + (x//c)*c = x` (floor semantics): a sum holding `k*(x%c)` and `k*c*(x//c)` holds `k*x`.
/// Returns the constant that the merged `x`s contribute.
fn merge_div_mod(coefs: &mut BTreeMap<Node, i64>) -> i64 {
    let mut konst = 0i64;
    loop {
        let found = coefs.iter().find_map(|(b, &k)| match b.kind() {
            Kind::Mod(x, c) if k != 0 => {
                let div = x.floordiv(*c);
                (coefs.get(&div) == Some(&k.wrapping_mul(*c)))
                    .then(|| (b.clone(), div, x.clone(), k))
            }
            _ => None,
        });
        let Some((m, d, x, k)) = found else {
            return konst;
        };
        coefs.remove(&m);
        coefs.remove(&d);
        // x may itself be a sum: fold it back in term by term.
        for t in x.terms() {
            if let Some(v) = t.as_const() {
                konst = konst.wrapping_add(v.wrapping_mul(k));
                continue;
            }
            let (b, c) = t.split_coef();
            let e = coefs.entry(b).or_insert(0);
            *e = e.wrapping_add(c.wrapping_mul(k));
        }
    }
}

// Operators forward to the simplifying constructors for every owned/borrowed pairing, as std does
// for its numeric types; a macro keeps the sixteen impls from drifting apart.
macro_rules! forward_binop {
    ($trait:ident, $method:ident, $f:expr) => {
        impl $trait<&Node> for &Node {
            type Output = Node;
            fn $method(self, rhs: &Node) -> Node {
                $f(self, rhs)
            }
        }
        impl $trait<Node> for &Node {
            type Output = Node;
            fn $method(self, rhs: Node) -> Node {
                $f(self, &rhs)
            }
        }
        impl $trait<&Node> for Node {
            type Output = Node;
            fn $method(self, rhs: &Node) -> Node {
                $f(&self, rhs)
            }
        }
        impl $trait<Node> for Node {
            type Output = Node;
            fn $method(self, rhs: Node) -> Node {
                $f(&self, &rhs)
            }
        }
        impl $trait<i64> for &Node {
            type Output = Node;
            fn $method(self, rhs: i64) -> Node {
                $f(self, &Node::cst(rhs))
            }
        }
        impl $trait<i64> for Node {
            type Output = Node;
            fn $method(self, rhs: i64) -> Node {
                $f(&self, &Node::cst(rhs))
            }
        }
    };
}
forward_binop!(Add, add, Node::add_node);
forward_binop!(Sub, sub, Node::sub_node);
forward_binop!(Mul, mul, Node::mul_node);

impl Neg for &Node {
    type Output = Node;
    fn neg(self) -> Node {
        self.mul_const(-1)
    }
}
impl Neg for Node {
    type Output = Node;
    fn neg(self) -> Node {
        self.mul_const(-1)
    }
}
