//! [`ShapeTracker`]: a stack of views that together map a tensor position to a buffer index.
//!
//! The first view reads the buffer; each later view reads the flat row-major positions of the
//! view before it. Movement ops change only the last view, except a reshape that one view cannot
//! express, which stacks a new one; [`ShapeTracker::simplify`] merges the last two views back
//! into one whenever one view says the same thing.
//!
//! Invariants: there is at least one view; every view but the last has constant dimensions
//! after its outermost one (so its flat positions can be unravelled with constant divisions; an
//! outermost symbolic size, a batch, is never divided by).

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::view::{consts, fmt_tuple, prod, sints_usize, Sint, View};
use crate::error::{Error, Result};
use crate::symbolic::{Kind, Node};

/// Zero-copy movement ops over a flat buffer: a stack of [`View`]s (see the module doc).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ShapeTracker {
    views: Vec<View>,
}

impl ShapeTracker {
    /// The row-major layout of `shape`.
    pub fn from_shape(shape: &[Sint]) -> ShapeTracker {
        ShapeTracker::from_view(View::from_shape(shape))
    }

    /// The row-major layout of a constant shape.
    pub fn from_dims(dims: &[usize]) -> ShapeTracker {
        ShapeTracker::from_shape(&sints_usize(dims))
    }

    /// A tracker of the single view `view`.
    pub fn from_view(view: View) -> ShapeTracker {
        ShapeTracker { views: vec![view] }
    }

    /// The views, the one reading the buffer first.
    pub fn views(&self) -> &[View] {
        &self.views
    }

    fn last(&self) -> &View {
        &self.views[self.views.len() - 1]
    }

    fn with_last(&self, view: View) -> ShapeTracker {
        let mut views = self.views.clone();
        let n = views.len();
        views[n - 1] = view;
        ShapeTracker { views }
    }

    /// The tracker with the offset of the view that reads the buffer (the first) replaced by
    /// `offset`: the same access pattern, moved.
    pub fn with_buffer_offset(&self, offset: Sint) -> ShapeTracker {
        let v = &self.views[0];
        let mut views = self.views.clone();
        views[0] = View::new(
            v.shape().to_vec(),
            v.strides().to_vec(),
            offset,
            v.mask().map(<[_]>::to_vec),
        );
        ShapeTracker { views }
    }

    /// The shape of the tensor the tracker describes.
    pub fn shape(&self) -> &[Sint] {
        self.last().shape()
    }

    /// The number of elements (product of the shape), symbolic when a dimension is.
    pub fn size(&self) -> Sint {
        prod(self.shape())
    }

    /// Is the tensor its buffer, read in row-major order from index 0 with nothing masked?
    pub fn contiguous(&self) -> bool {
        self.views.len() == 1 && self.last().contiguous()
    }

    /// The symbolic variables in every view, each once, sorted by name.
    pub fn vars(&self) -> Vec<Node> {
        let mut out: Vec<Node> = self.views.iter().flat_map(View::vars).collect();
        out.sort_by(|a, b| a.var_name().cmp(&b.var_name()));
        out.dedup();
        out
    }

    /// The values of the bound variables in every view (see
    /// [`Variable::bind`](crate::symbolic::Variable::bind)), sorted by name; an error when a
    /// name is bound to two values.
    pub fn var_vals(&self) -> crate::error::Result<crate::symbolic::VarVals> {
        let mut out = crate::symbolic::VarVals::new();
        for v in self.vars() {
            if let (Some(name), Some(val)) = (v.var_name(), v.bound_value()) {
                crate::symbolic::merge_val(&mut out, name, val)?;
            }
        }
        Ok(out)
    }

    /// The tracker with every bound variable replaced by its unbound variable: the same views
    /// for every value in the variables' bounds (what a kernel is compiled for).
    pub fn unbind(&self) -> ShapeTracker {
        if self.vars().iter().all(|v| v.bound_value().is_none()) {
            return self.clone();
        }
        let views = self.views.iter().map(unbind_view).collect();
        ShapeTracker { views }
    }

    /// The shape with the dimensions in `axes` reduced to 1.
    pub fn reduce_shape(&self, axes: &[usize]) -> Vec<Sint> {
        let one = Node::cst(1);
        let dims = self.shape().iter().enumerate();
        dims.map(|(i, s)| {
            if axes.contains(&i) {
                one.clone()
            } else {
                s.clone()
            }
        })
        .collect()
    }

    /// One index variable per dimension: `idx{i}` ranging over `[0, dim-1]` (a constant 0 for a
    /// dimension of size 1 or 0).
    pub fn idx_vars(&self) -> Vec<Node> {
        idx_vars(self.shape())
    }

    /// `(buffer index, validity)` of the position `idxs` (one node per dimension): validity is 1
    /// where the element is real, 0 where it is padding. Where validity is provably 0 the index
    /// is the constant 0.
    ///
    /// # Panics
    /// If `idxs` does not have one node per dimension.
    pub fn expr_idxs(&self, idxs: &[Node]) -> (Node, Node) {
        assert_eq!(
            idxs.len(),
            self.shape().len(),
            "expr_idxs: one index per dimension of {self}"
        );
        let (mut idx, mut valid) = self.last().expr(idxs, Node::cst(1));
        for view in self.views[..self.views.len() - 1].iter().rev() {
            if valid.vmax() == 0 {
                return (Node::cst(0), valid);
            }
            let view = view.minify();
            let inner = unravel(view.shape(), &idx);
            (idx, valid) = view.expr(&inner, valid);
        }
        (idx, valid)
    }

    /// `(buffer index, validity)` of the row-major flat position `idx`. Errors when a dimension
    /// other than the outermost is symbolic (the algebra divides only by constants).
    pub fn expr_node(&self, idx: &Node) -> Result<(Node, Node)> {
        let shape = self.shape();
        if shape.iter().skip(1).any(|s| !s.is_const()) {
            return Err(Error::Unsupported(format!(
                "expr_node: flat index into symbolic shape {}",
                fmt_tuple(shape)
            )));
        }
        Ok(self.expr_idxs(&unravel(shape, idx)))
    }

    /// The buffer index of position `(0, 0, ...)`.
    pub fn real_offset(&self) -> Node {
        let zeros = vec![Node::cst(0); self.shape().len()];
        self.expr_idxs(&zeros).0
    }

    /// One more than the largest buffer index the tracker can read (0 when it reads nothing): the
    /// buffer size it needs.
    pub fn real_size(&self) -> i64 {
        if self.shape().iter().any(|s| s.vmax() <= 0) {
            return 0;
        }
        let (idx, valid) = self.expr_idxs(&self.idx_vars());
        if valid.vmax() == 0 {
            return 0;
        }
        idx.vmax().saturating_add(1)
    }

    /// One more than the largest buffer index read at a *valid* position (0 when none is
    /// valid), so a padded (gated) read is bounded by what it really loads. The index and each
    /// validity clause `K·a + c < 0` are read as sums of constant multiples of *atoms* (index
    /// variables, or sub-expressions such as `(6·i + j) % 8`); a clause bounds its sum `K·a`,
    /// and where the index's coefficients on `K`'s atoms are a multiple `m·K` (a conv's
    /// `8·(row + tap)` against `0 < row + tap < 9`) that part of the index is bounded by the
    /// clause's range instead of its atoms' own ranges. Groups are disjoint, other clauses are
    /// ignored (ignoring a constraint only widens), and atoms are bounded independently (an
    /// upper bound of a sum), so the result is an upper bound, never above
    /// [`ShapeTracker::real_size`].
    pub fn valid_size(&self) -> i64 {
        let plain = self.real_size();
        if plain == 0 {
            return 0;
        }
        let (idx, valid) = self.expr_idxs(&self.idx_vars());
        let mut atoms: Vec<Node> = Vec::new();
        let Some((coef, c0)) = linear(&idx, &mut atoms) else {
            return plain;
        };
        // Each clause direction (first non-zero coefficient positive) with its bounds.
        let mut dirs: Vec<(Vec<i64>, i64, i64)> = Vec::new();
        let conds = match valid.kind() {
            Kind::And(ts) => ts.clone(),
            _ => vec![valid.clone()],
        };
        for cond in &conds {
            let Kind::Lt(a, b) = cond.kind() else {
                continue;
            };
            let Some((mut k, c)) = linear(&(a - b), &mut atoms) else {
                continue;
            };
            // Atoms found later lengthen later vectors: compare directions without the zeros.
            while k.last() == Some(&0) {
                k.pop();
            }
            // k·a + c < 0: k·a <= -c-1, or with k negated, (-k)·a >= c+1.
            let (mut lo, mut hi) = (i64::MIN, (-c).saturating_sub(1));
            if k.iter().find(|&&v| v != 0).is_some_and(|&v| v < 0) {
                k.iter_mut().for_each(|v| *v = -*v);
                (lo, hi) = (c.saturating_add(1), i64::MAX);
            }
            match dirs.iter_mut().find(|d| d.0 == k) {
                Some(d) => (d.1, d.2) = (d.1.max(lo), d.2.min(hi)),
                None => dirs.push((k, lo, hi)),
            }
        }
        let coef_of = |i: usize| coef.get(i).copied().unwrap_or(0);
        let range = |i: usize| (atoms[i].vmin(), atoms[i].vmax());
        let mut used = vec![false; atoms.len()];
        let mut top = c0;
        for (k, lo, hi) in &dirs {
            let support: Vec<usize> = (0..k.len()).filter(|&i| k[i] != 0).collect();
            let Some(&s0) = support.first() else { continue };
            if support.iter().any(|&i| used[i]) || coef_of(s0) % k[s0] != 0 {
                continue;
            }
            let m = coef_of(s0) / k[s0];
            let multiple = support
                .iter()
                .all(|&i| Some(coef_of(i)) == k[i].checked_mul(m));
            if m == 0 || !multiple {
                continue;
            }
            // The natural range of k·a, narrowed by the clause.
            let (mut nlo, mut nhi) = (0i64, 0i64);
            for &i in &support {
                let (a, b) = range(i);
                let (p, q) = (k[i].saturating_mul(a), k[i].saturating_mul(b));
                (nlo, nhi) = (nlo.saturating_add(p.min(q)), nhi.saturating_add(p.max(q)));
            }
            let (lo, hi) = ((*lo).max(nlo), (*hi).min(nhi));
            if lo > hi {
                return 0;
            }
            top = top.saturating_add(m.saturating_mul(lo).max(m.saturating_mul(hi)));
            support.iter().for_each(|&i| used[i] = true);
        }
        for (i, &k) in coef.iter().enumerate() {
            if !used[i] && k != 0 {
                let (a, b) = range(i);
                top = top.saturating_add(k.saturating_mul(a).max(k.saturating_mul(b)));
            }
        }
        top.saturating_add(1).clamp(0, plain)
    }

    /// The stride of each axis through all views: `Some(st)` when moving one step along the axis
    /// always moves the buffer index by `st`, `None` when it does not (or the axis is masked).
    pub fn real_strides(&self) -> Vec<Option<Node>> {
        self.strides_through(false)
    }

    /// [`ShapeTracker::real_strides`], ignoring where the axis is masked.
    pub fn real_strides_ignore_valid(&self) -> Vec<Option<Node>> {
        self.strides_through(true)
    }

    fn strides_through(&self, ignore_valid: bool) -> Vec<Option<Node>> {
        if self.views.len() == 1 && self.last().mask().is_none() {
            return self.last().strides().iter().cloned().map(Some).collect();
        }
        let idxs = self.idx_vars();
        let (idx, valid) = self.expr_idxs(&idxs);
        let mut out = vec![None; idxs.len()];
        let mut bad = Vec::new();
        for t in terms(&idx) {
            match stride_term(&t, &idxs) {
                Some((i, st)) => out[i] = Some(st),
                None => bad.extend(t.vars()),
            }
        }
        let (idx_vars, valid_vars) = (idx.vars(), valid.vars());
        for (i, v) in idxs.iter().enumerate() {
            if bad.contains(v) || (!ignore_valid && valid_vars.contains(v)) {
                out[i] = None;
            } else if !idx_vars.contains(v) {
                out[i] = Some(Node::cst(0));
            }
        }
        out
    }

    /// The axes whose real stride is 1.
    pub fn unit_stride_axes(&self) -> Vec<usize> {
        let strides = self.real_strides();
        (0..strides.len())
            .filter(|&i| strides[i].as_ref().and_then(Node::as_const) == Some(1))
            .collect()
    }

    /// The axes of size other than 1 that read the same element at every position (stride 0):
    /// broadcast axes.
    pub fn expanded_axes(&self) -> Vec<usize> {
        let strides = self.real_strides();
        let shape = self.shape();
        let zero = |st: &Option<Node>| st.as_ref().and_then(Node::as_const) == Some(0);
        (0..shape.len())
            .filter(|&i| shape[i].as_const() != Some(1) && zero(&strides[i]))
            .collect()
    }

    /// Does any axis broadcast (see [`ShapeTracker::expanded_axes`])?
    pub fn is_expanded(&self) -> bool {
        !self.expanded_axes().is_empty()
    }

    /// Does the validity depend on `axis` (is part of it padding)?
    pub fn axis_is_masked(&self, axis: usize) -> bool {
        let idxs = self.idx_vars();
        let (_, valid) = self.expr_idxs(&idxs);
        idxs.get(axis).is_some_and(|v| valid.vars().contains(v))
    }

    /// Merges the last two views while one view can say what they say together.
    pub fn simplify(&self) -> ShapeTracker {
        let mut views = self.views.clone();
        while views.len() >= 2 {
            let n = views.len();
            let Some(merged) = merge_views(&views[n - 2], &views[n - 1]) else {
                break;
            };
            views.truncate(n - 2);
            views.push(merged);
        }
        ShapeTracker { views }
    }

    /// Reads the same elements in row-major order as `new_shape`, stacking a view when the last
    /// one cannot express it. Errors when the sizes differ, or when a stacked view would sit on
    /// a view with a symbolic dimension other than the outermost: indexing through a stacked
    /// view unravels a flat position by the inner view's sizes, and the algebra divides only
    /// by constants (the outermost size is never divided by, so a symbolic batch may sit there).
    pub fn reshape(&self, new_shape: &[Sint]) -> Result<ShapeTracker> {
        if let Some(v) = self.last().reshape(new_shape)? {
            return Ok(self.with_last(v));
        }
        if self.shape().iter().skip(1).any(|d| !d.is_const()) {
            return Err(Error::Unsupported(format!(
                "reshape of the non-contiguous symbolic shape {} to {}",
                fmt_tuple(self.shape()),
                fmt_tuple(new_shape)
            )));
        }
        let mut views = self.views.clone();
        views.push(View::from_shape(new_shape));
        Ok(ShapeTracker { views })
    }

    /// See [`View::permute`].
    pub fn permute(&self, order: &[usize]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().permute(order)?))
    }

    /// See [`View::expand`].
    pub fn expand(&self, new_shape: &[Sint]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().expand(new_shape)?))
    }

    /// See [`View::pad`].
    pub fn pad(&self, arg: &[(i64, i64)]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().pad(arg)?))
    }

    /// See [`View::pad_nodes`].
    pub fn pad_nodes(&self, arg: &[(Sint, Sint)]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().pad_nodes(arg)?))
    }

    /// See [`View::shrink`].
    pub fn shrink(&self, arg: &[(i64, i64)]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().shrink(arg)?))
    }

    /// See [`View::shrink_nodes`].
    pub fn shrink_nodes(&self, arg: &[(Sint, Sint)]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().shrink_nodes(arg)?))
    }

    /// See [`View::stride`].
    pub fn stride(&self, mul: &[i64]) -> Result<ShapeTracker> {
        Ok(self.with_last(self.last().stride(mul)?))
    }
}

fn idx_vars(shape: &[Sint]) -> Vec<Node> {
    let var = |(i, s): (usize, &Sint)| match s.vmax() {
        m if m <= 1 => Node::cst(0),
        m => Node::var(&format!("idx{i}"), 0, m - 1),
    };
    shape.iter().enumerate().map(var).collect()
}

/// The row-major position in `shape` of the flat index `idx`. Dimensions other than the
/// outermost are constant (the tracker's invariant); the outermost is left undivided by modulo
/// when it is symbolic.
fn unravel(shape: &[Sint], idx: &Node) -> Vec<Node> {
    let mut out = Vec::with_capacity(shape.len());
    let mut acc = 1i64;
    for (i, d) in shape.iter().enumerate().rev() {
        let q = idx.floordiv(acc);
        match d.as_const() {
            Some(d) => {
                out.push(q.modulo(d.max(1)));
                acc = acc.saturating_mul(d.max(1));
            }
            None => {
                debug_assert_eq!(i, 0, "unravel: symbolic inner dimension");
                out.push(q);
            }
        }
    }
    out.reverse();
    out
}

/// The terms of a sum (a non-sum is its own single term).
fn terms(n: &Node) -> Vec<Node> {
    match n.kind() {
        Kind::Sum(ts) => ts.clone(),
        _ => vec![n.clone()],
    }
}

/// `idx_i * st` (or `idx_i`, stride 1), with `st` free of index variables, as `(i, st)`.
fn stride_term(t: &Node, idxs: &[Node]) -> Option<(usize, Node)> {
    let pos = |n: &Node| n.var_name().and_then(|_| idxs.iter().position(|v| v == n));
    let free = |n: &Node| n.vars().iter().all(|v| !idxs.contains(v));
    if let Some(i) = pos(t) {
        return Some((i, Node::cst(1)));
    }
    match t.kind() {
        Kind::Mul(a, b) => match (pos(a), pos(b)) {
            (Some(i), _) if free(b) => Some((i, b.clone())),
            (_, Some(i)) if free(a) => Some((i, a.clone())),
            _ => None,
        },
        _ => None,
    }
}

/// One view saying what `outer` read through `inner` says, when there is one.
fn merge_views(inner: &View, outer: &View) -> Option<View> {
    if inner.contiguous() || outer.shape().iter().any(|s| s.as_const() == Some(0)) {
        return Some(outer.clone());
    }
    if outer.contiguous() && outer.shape() == inner.shape() {
        return Some(inner.clone());
    }
    if outer.contiguous() && outer.size() == inner.size() {
        if let Ok(Some(v)) = inner.reshape(outer.shape()) {
            return Some(v);
        }
    }
    if let Some(mask) = outer.mask() {
        return merge_masked(inner, outer, mask);
    }
    merge_linear(inner, outer)
}

/// Merges through `outer`'s mask: merge the unmasked window, then pad it back out.
fn merge_masked(inner: &View, outer: &View, mask: &[(Sint, Sint)]) -> Option<View> {
    if mask.iter().any(|(b, e)| (e - b).vmax() <= 0) {
        // `outer` reads nothing: it needs nothing beneath it.
        return Some(outer.clone());
    }
    let window = outer.shrink_nodes(mask).ok()?;
    if window.mask().is_some() {
        return None;
    }
    let merged = merge_views(inner, &window)?;
    let pads: Vec<(Sint, Sint)> = mask
        .iter()
        .zip(outer.shape())
        .map(|((b, e), s)| (b.clone(), s - e))
        .collect();
    merged.pad_nodes(&pads).ok()
}

/// Merges when the composed index is linear in the position and the composed validity a box.
fn merge_linear(inner: &View, outer: &View) -> Option<View> {
    let dims = consts(outer.shape())?;
    let idxs = idx_vars(outer.shape());
    let pair = ShapeTracker {
        views: vec![inner.clone(), outer.clone()],
    };
    let (idx, valid) = pair.expr_idxs(&idxs);
    let mut strides = vec![Node::cst(0); dims.len()];
    let mut offset = Vec::new();
    for t in terms(&idx) {
        if t.vars().iter().all(|v| !idxs.contains(v)) {
            offset.push(t);
            continue;
        }
        let (i, st) = stride_term(&t, &idxs)?;
        strides[i] = st;
    }
    let mask = mask_from_valid(&valid, &idxs, &dims)?;
    Some(View::new(
        outer.shape().to_vec(),
        strides,
        Node::sum(offset),
        mask,
    ))
}

/// The box `valid` describes, as a mask (`Some(None)` when everything is valid); `None` when
/// `valid` is not a conjunction of bounds on single index variables.
fn mask_from_valid(valid: &Node, idxs: &[Node], dims: &[i64]) -> Option<Option<Vec<(Sint, Sint)>>> {
    match valid.as_const() {
        Some(1) => return Some(None),
        // Nothing is valid: an empty window on some axis says so, but a rank-0 view has no axis
        // to carry it, so that pair cannot merge.
        Some(_) if dims.is_empty() => return None,
        Some(_) => return Some(Some(vec![(Node::cst(0), Node::cst(0)); dims.len()])),
        None => {}
    }
    let mut bounds: Vec<(i64, i64)> = dims.iter().map(|&d| (0, d)).collect();
    let conds = match valid.kind() {
        Kind::And(ts) => ts.clone(),
        _ => vec![valid.clone()],
    };
    for c in &conds {
        let Kind::Lt(a, b) = c.kind() else {
            return None;
        };
        let (i, lo, hi) = bound_of(a, b, idxs)?;
        bounds[i] = (bounds[i].0.max(lo), bounds[i].1.min(hi));
    }
    Some(Some(
        bounds
            .into_iter()
            .map(|(b, e)| (Node::cst(b), Node::cst(e.max(b))))
            .collect(),
    ))
}

/// `n` as `(coefficient per atom, constant)`: a sum of constants and constant multiples of
/// atoms (any other term, e.g. an index variable or `(6·i + j) % 8`), each atom found in or
/// added to `atoms` (coefficients past the end are 0). `None` on overflow.
fn linear(n: &Node, atoms: &mut Vec<Node>) -> Option<(Vec<i64>, i64)> {
    let (mut coef, mut c): (Vec<i64>, i64) = (Vec::new(), 0);
    for t in terms(n) {
        if let Some(v) = t.as_const() {
            c = c.checked_add(v)?;
            continue;
        }
        let (atom, k) = match t.kind() {
            Kind::Mul(a, b) => match (a.as_const(), b.as_const()) {
                (None, Some(k)) => (a.clone(), k),
                (Some(k), None) => (b.clone(), k),
                _ => (t.clone(), 1),
            },
            _ => (t.clone(), 1),
        };
        let i = match atoms.iter().position(|x| *x == atom) {
            Some(i) => i,
            None => {
                atoms.push(atom);
                atoms.len() - 1
            }
        };
        if coef.len() <= i {
            coef.resize(i + 1, 0);
        }
        coef[i] = coef[i].checked_add(k)?;
    }
    coef.resize(atoms.len(), 0);
    Some((coef, c))
}

/// `a < b` as `lo <= idx_i < hi`, when `a - b` is `k*idx_i + c`.
fn bound_of(a: &Node, b: &Node, idxs: &[Node]) -> Option<(usize, i64, i64)> {
    let (mut axis, mut k, mut c) = (None, 0i64, 0i64);
    for t in terms(&(a - b)) {
        if let Some(v) = t.as_const() {
            c = c.checked_add(v)?;
            continue;
        }
        let (i, st) = stride_term(&t, idxs)?;
        if axis.replace(i).is_some() {
            return None;
        }
        k = st.as_const()?;
    }
    let i = axis?;
    match k {
        // k*idx + c < 0  ⟺  idx < ceil(-c/k)  (k > 0)
        k if k > 0 => Some((i, i64::MIN, -c.div_euclid(k))),
        // -m*idx + c < 0  ⟺  idx > c/m  ⟺  idx >= floor(c/m) + 1  (m = -k > 0)
        k if k < 0 => Some((i, c.div_euclid(k.checked_neg()?) + 1, i64::MAX)),
        _ => None,
    }
}

impl fmt::Display for ShapeTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ShapeTracker(views={})", fmt_tuple(&self.views))
    }
}

impl ShapeTracker {
    /// A tracker from a stack of views, or `None` if it breaks the invariant (no views, or a
    /// symbolic dimension other than the outermost below the last view).
    pub(crate) fn from_views(views: Vec<View>) -> Option<ShapeTracker> {
        let n = views.len();
        let inner_const = |v: &View| v.shape().iter().skip(1).all(Node::is_const);
        let ok = n > 0 && views[..n - 1].iter().all(inner_const);
        ok.then_some(ShapeTracker { views })
    }
}

fn unbind_view(v: &View) -> View {
    let un = |ns: &[Sint]| ns.iter().map(Node::unbind).collect::<Vec<_>>();
    let mask = v
        .mask()
        .map(|m| m.iter().map(|(b, e)| (b.unbind(), e.unbind())).collect());
    View::new(un(v.shape()), un(v.strides()), v.offset().unbind(), mask)
}
