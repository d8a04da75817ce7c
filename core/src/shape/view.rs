//! One strided, offset, optionally masked window onto a flat buffer: [`View`].
//!
//! A view maps a position `(i0, i1, ...)` in its shape to the buffer index
//! `offset + i0*s0 + i1*s1 + ...`, valid only where every `ik` lies inside the mask (outside it the
//! element reads as padding). Movement ops on a view are zero-copy: each builds a new view.
//!
//! Invariant: every view is canonical, because [`View::new`] is the only way to build one: size-1
//! dimensions have stride 0, a dimension of size 0 makes the whole view the plain empty view, a
//! mask covering every position is dropped, a mask that admits nothing is all `(0, 0)`, a
//! dimension masked to one position has stride 0 (its offset folded in), and `contiguous` is true
//! exactly when the view is the row-major layout of its shape with offset 0 and no mask.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::reshape::{merge_dims, reshape_mask, reshape_strides};
use crate::error::{Error, Result};
use crate::symbolic::Node;

/// A dimension, stride or offset: usually a constant, possibly symbolic (a `Var` in a shape).
pub type Sint = Node;

/// A shape of constant dimensions.
pub fn sints(dims: &[i64]) -> Vec<Sint> {
    dims.iter().map(|&d| Node::cst(d)).collect()
}

/// A shape of constant dimensions, from `usize`s.
pub fn sints_usize(dims: &[usize]) -> Vec<Sint> {
    dims.iter().map(|&d| Node::cst(d as i64)).collect()
}

/// The product of `dims` (the number of elements of a shape), symbolic when a dimension is.
pub fn prod(dims: &[Sint]) -> Sint {
    dims.iter().fold(Node::cst(1), |acc, d| acc * d)
}

/// The row-major strides of `shape`, 0 for size-1 dimensions.
pub fn strides_for_shape(shape: &[Sint]) -> Vec<Sint> {
    // Constant shapes (most of them) need no symbolic products: replays build output views
    // per call.
    if let Some(dims) = consts(shape) {
        let mut out = vec![Node::cst(0); shape.len()];
        let mut acc = 1i64;
        for (i, &d) in dims.iter().enumerate().rev() {
            if d != 1 {
                out[i] = Node::cst(acc);
            }
            match acc.checked_mul(d) {
                Some(a) => acc = a,
                // Out of i64: the symbolic products below say what that means.
                None => return strides_symbolic(shape),
            }
        }
        return out;
    }
    strides_symbolic(shape)
}

fn strides_symbolic(shape: &[Sint]) -> Vec<Sint> {
    let mut out = vec![Node::cst(0); shape.len()];
    let mut acc = Node::cst(1);
    for (i, s) in shape.iter().enumerate().rev() {
        if !is_one(s) {
            out[i] = acc.clone();
        }
        acc = &acc * s;
    }
    out
}

/// The dimensions as constants, when all are.
pub(crate) fn consts(dims: &[Sint]) -> Option<Vec<i64>> {
    dims.iter().map(Node::as_const).collect()
}

fn is_one(n: &Node) -> bool {
    n.as_const() == Some(1)
}

fn is_zero(n: &Node) -> bool {
    n.as_const() == Some(0)
}

/// `ceil(x / a)` for `a > 0`.
fn ceildiv(x: &Node, a: i64) -> Node {
    (x + (a - 1)).floordiv(a)
}

/// The larger of two nodes, when bounds decide it: their own bounds, or the bounds of their
/// difference (so `max(N, N)` or `max(N + 1, N)` over a symbolic batch `N` is decided, as a
/// masked axis of a symbolic size keeps that size through pads and shrinks of other axes).
fn smax(a: Node, b: Node) -> Result<Node> {
    let diff = &a - &b;
    if a.vmin() >= b.vmax() || diff.vmin() >= 0 {
        Ok(a)
    } else if b.vmin() >= a.vmax() || diff.vmax() <= 0 {
        Ok(b)
    } else {
        Err(Error::Unsupported(format!(
            "max({a}, {b}) of a symbolic mask"
        )))
    }
}

/// The smaller of two nodes, when bounds decide it.
fn smin(a: Node, b: Node) -> Result<Node> {
    smax(-a, -b).map(|m| -m)
}

/// Formats items as a Python tuple: `()`, `(a,)`, `(a, b)`.
pub(crate) fn fmt_tuple<T: fmt::Display>(items: &[T]) -> String {
    match items {
        [] => String::from("()"),
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = items.iter().map(|x| format!("{x}")).collect();
            format!("({})", parts.join(", "))
        }
    }
}

fn fmt_mask(mask: &[(Node, Node)]) -> String {
    let pairs: Vec<String> = mask.iter().map(|(b, e)| format!("({b}, {e})")).collect();
    fmt_tuple(&pairs)
}

/// A strided, offset, optionally masked view of a flat buffer. See the module doc.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct View {
    shape: Vec<Sint>,
    strides: Vec<Sint>,
    offset: Sint,
    mask: Option<Vec<(Sint, Sint)>>,
    contiguous: bool,
}

impl View {
    /// A canonical view (see the module doc for what canonical means).
    ///
    /// # Panics
    /// If `strides` or `mask` do not have one entry per dimension of `shape`.
    pub fn new(
        shape: Vec<Sint>,
        strides: Vec<Sint>,
        offset: Sint,
        mask: Option<Vec<(Sint, Sint)>>,
    ) -> View {
        let rank = shape.len();
        assert_eq!(
            strides.len(),
            rank,
            "View::new: {} strides for rank {rank}",
            strides.len()
        );
        if let Some(m) = &mask {
            assert_eq!(
                m.len(),
                rank,
                "View::new: {} mask entries for rank {rank}",
                m.len()
            );
        }
        let zeros = || vec![Node::cst(0); rank];
        if shape.iter().any(is_zero) {
            return View {
                shape,
                strides: zeros(),
                offset: Node::cst(0),
                mask: None,
                contiguous: true,
            };
        }
        let mut strides: Vec<Sint> = shape
            .iter()
            .zip(strides)
            .map(|(s, st)| if is_one(s) { Node::cst(0) } else { st })
            .collect();
        let mut offset = offset;
        let mask = mask.filter(|m| !covers(m, &shape));
        let mask = mask.map(|mut m| {
            if m.iter().any(|(b, e)| (e - b).vmax() <= 0) {
                // Nothing is valid: one canonical form for every empty view.
                strides = zeros();
                offset = Node::cst(0);
                m = vec![(Node::cst(0), Node::cst(0)); rank];
            } else {
                // A dimension that admits one position reads one element: stride 0, offset moved.
                for ((b, e), st) in m.iter().zip(strides.iter_mut()) {
                    if (e - b).as_const() == Some(1) && !is_zero(st) {
                        offset = &offset + &(&*st * b);
                        *st = Node::cst(0);
                    }
                }
            }
            m
        });
        let contiguous = is_zero(&offset) && mask.is_none() && strides == strides_for_shape(&shape);
        View {
            shape,
            strides,
            offset,
            mask,
            contiguous,
        }
    }

    /// The row-major view of `shape`.
    pub fn from_shape(shape: &[Sint]) -> View {
        if shape.iter().any(is_zero) {
            return View::new(shape.to_vec(), strides_for_shape(shape), Node::cst(0), None);
        }
        // What `View::new` makes of the row-major strides (already 0 on size-1 dimensions),
        // without checking them against themselves.
        View {
            shape: shape.to_vec(),
            strides: strides_for_shape(shape),
            offset: Node::cst(0),
            mask: None,
            contiguous: true,
        }
    }

    /// The dimensions.
    pub fn shape(&self) -> &[Sint] {
        &self.shape
    }

    /// The stride of each dimension (0 for size-1 and expanded dimensions).
    pub fn strides(&self) -> &[Sint] {
        &self.strides
    }

    /// The buffer index of position `(0, 0, ...)`.
    pub fn offset(&self) -> &Sint {
        &self.offset
    }

    /// The valid range `[begin, end)` of each dimension; `None` when every position is valid.
    pub fn mask(&self) -> Option<&[(Sint, Sint)]> {
        self.mask.as_deref()
    }

    /// Is this the row-major layout of its shape, with offset 0 and no mask?
    pub fn contiguous(&self) -> bool {
        self.contiguous
    }

    /// The number of positions (product of the shape).
    pub fn size(&self) -> Sint {
        prod(&self.shape)
    }

    /// The symbolic variables in the shape, strides, offset and mask, each once, sorted by name.
    pub fn vars(&self) -> Vec<Node> {
        let mask = self.mask.iter().flatten().flat_map(|(b, e)| [b, e]);
        let all = self
            .shape
            .iter()
            .chain(&self.strides)
            .chain([&self.offset])
            .chain(mask);
        let mut out: Vec<Node> = all.flat_map(Node::vars).collect();
        out.sort_by(|a, b| a.var_name().cmp(&b.var_name()));
        out.dedup();
        out
    }

    /// `(buffer index, validity)` of the position `idxs` (one node per dimension), with validity
    /// anded onto `valid`. Validity is 1 where the position is inside the mask, else 0.
    pub fn expr(&self, idxs: &[Node], valid: Node) -> (Node, Node) {
        let mut terms = vec![self.offset.clone()];
        let mut conds = vec![valid];
        for (i, idx) in idxs.iter().enumerate() {
            let (s, st) = (&self.shape[i], &self.strides[i]);
            if !is_one(s) && !is_zero(st) {
                terms.push(idx * st);
            }
            if let Some((b, e)) = self.mask.as_ref().map(|m| &m[i]) {
                if !is_zero(b) {
                    conds.push((b - 1).lt(idx));
                }
                if e != s {
                    conds.push(idx.lt(e));
                }
            }
        }
        (Node::sum(terms), Node::ands(conds))
    }

    fn check_rank(&self, op: &'static str, n: usize) -> Result<()> {
        if n == self.shape.len() {
            return Ok(());
        }
        Err(Error::shape(
            op,
            format!(
                "{n} arguments for shape {} of rank {}",
                fmt_tuple(&self.shape),
                self.shape.len()
            ),
        ))
    }

    /// Pads each dimension with `(before, after)` invalid positions. Negative padding is an error.
    pub fn pad(&self, arg: &[(i64, i64)]) -> Result<View> {
        self.pad_nodes(&pairs(arg))
    }

    /// [`View::pad`] with symbolic amounts; each must be provably non-negative.
    pub fn pad_nodes(&self, arg: &[(Sint, Sint)]) -> Result<View> {
        self.check_rank("pad", arg.len())?;
        if arg.iter().any(|(b, e)| b.vmin() < 0 || e.vmin() < 0) {
            return Err(Error::shape(
                "pad",
                format!(
                    "negative padding {} for shape {}",
                    fmt_mask(arg),
                    fmt_tuple(&self.shape)
                ),
            ));
        }
        if arg.iter().all(|(b, e)| is_zero(b) && is_zero(e)) {
            return Ok(self.clone());
        }
        let region: Vec<(Node, Node)> = self
            .shape
            .iter()
            .zip(arg)
            .map(|(s, (b, e))| (-b, s + e))
            .collect();
        let mask = self
            .shape
            .iter()
            .zip(arg)
            .map(|(s, (b, _))| (b.clone(), s + b))
            .collect();
        self.resize(&region, Some(mask))
    }

    /// Keeps the range `[begin, end)` of each dimension; it must lie inside the dimension.
    pub fn shrink(&self, arg: &[(i64, i64)]) -> Result<View> {
        self.shrink_nodes(&pairs(arg))
    }

    /// [`View::shrink`] with symbolic ranges; each must provably lie inside its dimension.
    pub fn shrink_nodes(&self, arg: &[(Sint, Sint)]) -> Result<View> {
        self.check_rank("shrink", arg.len())?;
        let inside = |s: &Node, (b, e): &(Node, Node)| {
            b.vmin() >= 0 && (e - b).vmin() >= 0 && (s - e).vmin() >= 0
        };
        if let Some(i) = self.shape.iter().zip(arg).position(|(s, r)| !inside(s, r)) {
            return Err(Error::shape(
                "shrink",
                format!(
                    "range {} is outside shape {} (axis {i})",
                    fmt_mask(arg),
                    fmt_tuple(&self.shape)
                ),
            ));
        }
        self.resize(arg, None)
    }

    /// The window `region` (per dimension `[begin, end)`, which may reach outside the view), with
    /// `mask` (in the window's coordinates) anded onto the moved old mask.
    fn resize(&self, region: &[(Node, Node)], mask: Option<Vec<(Node, Node)>>) -> Result<View> {
        let mut terms: Vec<Node> = self
            .strides
            .iter()
            .zip(region)
            .map(|(st, (b, _))| st * b)
            .collect();
        terms.push(self.offset.clone());
        let mask = match (&self.mask, mask) {
            (None, m) => m,
            (Some(old), m) => Some(move_mask(old, region, m)?),
        };
        let shape = region.iter().map(|(b, e)| e - b).collect();
        Ok(View::new(
            shape,
            self.strides.clone(),
            Node::sum(terms),
            mask,
        ))
    }

    /// Broadcasts size-1 dimensions to `new_shape`; other dimensions must stay as they are.
    pub fn expand(&self, new_shape: &[Sint]) -> Result<View> {
        let bad = |what: String| {
            Err(Error::shape(
                "expand",
                format!(
                    "cannot expand {} to {}: {what}",
                    fmt_tuple(&self.shape),
                    fmt_tuple(new_shape)
                ),
            ))
        };
        if new_shape.len() != self.shape.len() {
            return bad(String::from("ranks differ"));
        }
        let pairs = self.shape.iter().zip(new_shape);
        if let Some(i) = pairs.clone().position(|(s, ns)| s != ns && !is_one(s)) {
            return bad(format!("axis {i} is not of size 1"));
        }
        if new_shape.iter().any(|ns| ns.vmin() < 0) {
            return bad(String::from("negative dimension"));
        }
        if self.shape.iter().any(is_zero) {
            return Ok(View::from_shape(new_shape));
        }
        let mask = self.mask.as_ref().map(|m| {
            m.iter()
                .zip(pairs)
                .map(|((b, e), (s, ns))| match () {
                    _ if s == ns => (b.clone(), e.clone()),
                    _ if is_zero(b) && is_one(e) => (Node::cst(0), ns.clone()),
                    _ => (Node::cst(0), Node::cst(0)),
                })
                .collect()
        });
        Ok(View::new(
            new_shape.to_vec(),
            self.strides.clone(),
            self.offset.clone(),
            mask,
        ))
    }

    /// Reorders the dimensions: dimension `i` of the result is dimension `order[i]` of this view.
    pub fn permute(&self, order: &[usize]) -> Result<View> {
        let rank = self.shape.len();
        let mut seen = vec![false; rank];
        let valid = order.len() == rank
            && order
                .iter()
                .all(|&a| a < rank && !core::mem::replace(&mut seen[a], true));
        if !valid {
            return Err(Error::axis(
                "permute",
                format!(
                    "{order:?} is not a permutation of the {rank} axes of shape {}",
                    fmt_tuple(&self.shape)
                ),
            ));
        }
        let pick = |v: &[Node]| order.iter().map(|&a| v[a].clone()).collect();
        let mask = self
            .mask
            .as_ref()
            .map(|m| order.iter().map(|&a| m[a].clone()).collect());
        Ok(View::new(
            pick(&self.shape),
            pick(&self.strides),
            self.offset.clone(),
            mask,
        ))
    }

    /// Takes every `mul[i]`-th position of dimension `i`; a negative step walks it backwards from
    /// the end (`-1` flips). A zero step is an error.
    pub fn stride(&self, mul: &[i64]) -> Result<View> {
        self.check_rank("stride", mul.len())?;
        if mul.contains(&0) {
            return Err(Error::shape(
                "stride",
                format!("zero step in {mul:?} for shape {}", fmt_tuple(&self.shape)),
            ));
        }
        let strides = self
            .strides
            .iter()
            .zip(mul)
            .map(|(st, &m)| st * m)
            .collect();
        let shape = self
            .shape
            .iter()
            .zip(mul)
            .map(|(s, &m)| ceildiv(s, m.abs()))
            .collect();
        let mut terms = vec![self.offset.clone()];
        for ((s, st), &m) in self.shape.iter().zip(&self.strides).zip(mul) {
            if m < 0 {
                terms.push((s - 1) * st);
            }
        }
        let mask = self.mask.as_ref().map(|mask| {
            mask.iter()
                .zip(&self.shape)
                .zip(mul)
                .map(|(((b, e), s), &m)| {
                    let a = m.abs();
                    if m > 0 {
                        (ceildiv(b, a), ceildiv(e, a))
                    } else {
                        (ceildiv(&(s - e), a), ceildiv(&(s - b), a))
                    }
                })
                .collect()
        });
        Ok(View::new(shape, strides, Node::sum(terms), mask))
    }

    /// Reads the same positions in row-major order as `new_shape`. `Ok(None)` when one view cannot
    /// express the result (the caller stacks a new view); an error when the sizes differ.
    pub fn reshape(&self, new_shape: &[Sint]) -> Result<Option<View>> {
        if self.shape == new_shape {
            return Ok(Some(self.clone()));
        }
        let (old_size, new_size) = (self.size(), prod(new_shape));
        if new_shape.iter().any(|s| s.vmin() < 0) || old_size != new_size {
            return Err(Error::shape(
                "reshape",
                format!(
                    "cannot reshape {} (size {old_size}) to {} (size {new_size})",
                    fmt_tuple(&self.shape),
                    fmt_tuple(new_shape)
                ),
            ));
        }
        if self.contiguous || self.shape.iter().any(is_zero) {
            return Ok(Some(View::from_shape(new_shape)));
        }
        if let Some(v) = self
            .reshape_unit_dims(new_shape)
            .or_else(|| self.reshape_merged(new_shape))
        {
            return Ok(Some(v));
        }
        if let Some(v) = self.reshape_under_prefix(new_shape)? {
            return Ok(Some(v));
        }
        Ok(self.reshape_strided(new_shape))
    }

    /// A reshape that keeps a leading run of dimensions (the same expressions in both shapes,
    /// every symbolic dimension among them) and reshapes only the constant dimensions after
    /// it: row-major order factors over the kept run, so the tail reshapes as a view of its
    /// own and the kept dimensions keep their strides and mask. How a symbolic batch rides
    /// through the window reshapes of pooling. `None` when the shapes are constant (the
    /// whole-view rules apply) or share no such run.
    fn reshape_under_prefix(&self, new_shape: &[Sint]) -> Result<Option<View>> {
        let p = (self.shape.iter().zip(new_shape))
            .take_while(|(a, b)| a == b)
            .count();
        let tail_const = |s: &[Sint]| s[p..].iter().all(Node::is_const);
        let symbolic = self.shape.iter().any(|d| !d.is_const());
        if p == 0 || !symbolic || !tail_const(&self.shape) || !tail_const(new_shape) {
            return Ok(None);
        }
        let tail_mask = self.mask.as_ref().map(|m| m[p..].to_vec());
        let tail = View::new(
            self.shape[p..].to_vec(),
            self.strides[p..].to_vec(),
            Node::cst(0),
            tail_mask,
        );
        let Some(t) = tail.reshape(&new_shape[p..])? else {
            return Ok(None);
        };
        let full = |shape: &[Sint]| -> Vec<(Node, Node)> {
            shape.iter().map(|d| (Node::cst(0), d.clone())).collect()
        };
        let mask = match (&self.mask, &t.mask) {
            (None, None) => None,
            (own, tm) => {
                let mut m = own
                    .as_ref()
                    .map_or_else(|| full(&self.shape[..p]), |m| m[..p].to_vec());
                m.extend(tm.clone().unwrap_or_else(|| full(&t.shape)));
                Some(m)
            }
        };
        let mut strides = self.strides[..p].to_vec();
        strides.extend(t.strides);
        let mut shape = self.shape[..p].to_vec();
        shape.extend(t.shape);
        Ok(Some(View::new(
            shape,
            strides,
            &self.offset + &t.offset,
            mask,
        )))
    }

    /// A reshape of an unmasked view that only merges runs of adjacent dimensions which walk
    /// memory as one (`stride[i-1] == stride[i] * shape[i]`, as an expanded run of stride 0
    /// does), symbolic dimensions included; `None` when the reshape does more.
    fn reshape_merged(&self, new_shape: &[Sint]) -> Option<View> {
        if self.mask.is_some() {
            return None;
        }
        let old: Vec<(&Sint, &Sint)> = (self.shape.iter().zip(&self.strides))
            .filter(|(d, _)| !is_one(d))
            .collect();
        let mut next = old.iter();
        let mut strides = Vec::with_capacity(new_shape.len());
        for nd in new_shape {
            if is_one(nd) {
                strides.push(Node::cst(0));
                continue;
            }
            let &(d, st) = next.next()?;
            let (mut size, mut stride) = (d.clone(), st.clone());
            while size != *nd {
                let &(d, st) = next.next()?;
                if stride != st * d {
                    return None;
                }
                size = &size * d;
                stride = st.clone();
            }
            strides.push(stride);
        }
        if next.next().is_some() {
            return None;
        }
        Some(View::new(
            new_shape.to_vec(),
            strides,
            self.offset.clone(),
            None,
        ))
    }

    /// A reshape that only adds or drops dimensions of size 1 (any other dimension, symbolic
    /// ones included, keeps its stride and mask): `None` when the reshape does more, or drops a
    /// size-1 dimension that is masked out.
    fn reshape_unit_dims(&self, new_shape: &[Sint]) -> Option<View> {
        let kept =
            |s: &[Sint]| -> Vec<usize> { (0..s.len()).filter(|&i| !is_one(&s[i])).collect() };
        let (old_kept, new_kept) = (kept(&self.shape), kept(new_shape));
        let same = old_kept.len() == new_kept.len()
            && old_kept
                .iter()
                .zip(&new_kept)
                .all(|(&o, &n)| self.shape[o] == new_shape[n]);
        let valid_unit = |i: usize| {
            self.mask.as_ref().is_none_or(|m| {
                !is_one(&self.shape[i]) || (m[i].0.as_const() == Some(0) && is_one(&m[i].1))
            })
        };
        if !same || !(0..self.shape.len()).all(valid_unit) {
            return None;
        }
        let mut strides = vec![Node::cst(0); new_shape.len()];
        let unit = (Node::cst(0), Node::cst(1));
        let mut mask = self.mask.as_ref().map(|_| vec![unit; new_shape.len()]);
        for (&o, &n) in old_kept.iter().zip(&new_kept) {
            strides[n] = self.strides[o].clone();
            if let (Some(m), Some(old)) = (mask.as_mut(), self.mask.as_ref()) {
                m[n] = old[o].clone();
            }
        }
        Some(View::new(
            new_shape.to_vec(),
            strides,
            self.offset.clone(),
            mask,
        ))
    }

    /// Reshape of a non-contiguous view with constant dimensions and mask.
    fn reshape_strided(&self, new_shape: &[Sint]) -> Option<View> {
        let (old, new) = (consts(&self.shape)?, consts(new_shape)?);
        let mask = self.const_mask()?;
        if mask.as_ref().is_some_and(|m| m.iter().any(|(b, e)| b >= e)) {
            // An all-invalid view stays all-invalid; a scalar cannot carry a mask.
            let none = vec![(Node::cst(0), Node::cst(0)); new.len()];
            let strides = vec![Node::cst(0); new.len()];
            return (!new.is_empty())
                .then(|| View::new(new_shape.to_vec(), strides, Node::cst(0), Some(none)));
        }
        let strides = reshape_strides(&old, &self.strides, mask.as_deref(), &new)?;
        let new_mask = reshape_mask(mask.as_deref(), &old, &new)?;
        let mut terms = vec![self.offset.clone()];
        for ((b, _), st) in mask.iter().flatten().zip(&self.strides) {
            terms.push(st * *b);
        }
        for ((b, _), st) in new_mask.iter().zip(&strides) {
            terms.push(-(st * *b));
        }
        let new_mask = new_mask
            .iter()
            .map(|&(b, e)| (Node::cst(b), Node::cst(e)))
            .collect();
        Some(View::new(
            new_shape.to_vec(),
            strides,
            Node::sum(terms),
            Some(new_mask),
        ))
    }

    /// The same view with its dimensions merged as far as strides and mask allow (fewer
    /// dimensions index with fewer divisions).
    pub fn minify(&self) -> View {
        let (Some(dims), Some(mask)) = (consts(&self.shape), self.const_mask()) else {
            return self.clone();
        };
        let groups = merge_dims(&dims, &self.strides, mask.as_deref());
        let merged: Vec<Sint> = groups.iter().map(|g| Node::cst(g.size)).collect();
        match self.reshape(&merged) {
            Ok(Some(v)) => v,
            _ => self.clone(),
        }
    }

    /// The mask as constants: `Some(None)` without a mask, `None` when it is symbolic.
    fn const_mask(&self) -> Option<Option<Vec<(i64, i64)>>> {
        let Some(m) = &self.mask else {
            return Some(None);
        };
        let pairs = m.iter().map(|(b, e)| Some((b.as_const()?, e.as_const()?)));
        pairs.collect::<Option<Vec<_>>>().map(Some)
    }
}

/// Does `mask` admit every position of `shape`?
fn covers(mask: &[(Node, Node)], shape: &[Node]) -> bool {
    mask.iter()
        .zip(shape)
        .all(|((b, e), s)| is_zero(b) && e == s)
}

fn pairs(arg: &[(i64, i64)]) -> Vec<(Node, Node)> {
    arg.iter()
        .map(|&(b, e)| (Node::cst(b), Node::cst(e)))
        .collect()
}

/// Moves `old` into the coordinates of the window `region`, clipped to it, and intersects it
/// with `extra` when given.
fn move_mask(
    old: &[(Node, Node)],
    region: &[(Node, Node)],
    extra: Option<Vec<(Node, Node)>>,
) -> Result<Vec<(Node, Node)>> {
    let zero = || Node::cst(0);
    let mut moved = Vec::with_capacity(old.len());
    for ((mb, me), (rb, re)) in old.iter().zip(region) {
        let width = re - rb;
        let b = smax(zero(), smin(mb - rb, width.clone())?)?;
        let e = smax(zero(), smin(me - rb, width)?)?;
        moved.push((b, e));
    }
    let Some(extra) = extra else { return Ok(moved) };
    moved
        .into_iter()
        .zip(extra)
        .map(|((b1, e1), (b2, e2))| Ok((smax(b1, b2)?, smin(e1, e2)?)))
        .collect()
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mask = self
            .mask
            .as_deref()
            .map_or_else(|| String::from("None"), fmt_mask);
        let contiguous = if self.contiguous { "True" } else { "False" };
        write!(
            f,
            "View(shape={}, strides={}, offset={}, mask={mask}, contiguous={contiguous})",
            fmt_tuple(&self.shape),
            fmt_tuple(&self.strides),
            self.offset
        )
    }
}
