//! Shape and layout ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice,
//! Pad, Expand, Tile, Shape, Size, ConstantOfShape, Range, Constant, Dropout, DepthToSpace,
//! SpaceToDepth, EyeLike, Trilu, OneHot. Shape-valued inputs (a Reshape's shape, a Slice's
//! starts, ...) are read back as host integers; attributes that later opsets turned into inputs
//! are read from wherever the model's opset puts them.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::{checked_numel, dtype_of, tensor_from_proto};
use super::{dim_axis, norm_axis, one, Handler};

/// The handler for `op` if it is a shape op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Reshape" => reshape,
        "Flatten" => flatten,
        "Transpose" => transpose,
        "Squeeze" => squeeze,
        "Unsqueeze" => unsqueeze,
        "Concat" => concat,
        "Split" => split,
        "Slice" => slice,
        "Pad" => pad,
        "Expand" => expand,
        "Tile" => tile,
        "Shape" => shape_op,
        "Size" => |n| one(Tensor::try_from_slice(&[n.input(0)?.numel() as i64], &[])?),
        "ConstantOfShape" => constant_of_shape,
        "Range" => range,
        "Constant" => constant,
        "Dropout" => dropout,
        "DepthToSpace" => depth_to_space,
        "SpaceToDepth" => space_to_depth,
        "EyeLike" => eye_like,
        "Trilu" => trilu,
        "OneHot" => one_hot,
        "CenterCropPad" => center_crop_pad,
        "OptionalHasElement" => |n| one(Tensor::try_from_slice(&[n.opt(0).is_some()], &[])?),
        "OptionalGetElement" => |n| one(n.input(0)?.clone()),
        "ReverseSequence" => reverse_sequence,
        "TensorScatter" => tensor_scatter,
        _ => return None,
    })
}

/// `usize` dims as `isize` for `try_reshape`.
pub fn isz(d: &[usize]) -> Vec<isize> {
    d.iter().map(|&v| v as isize).collect()
}

/// An ints attribute (older opsets) or ints input `i` (newer ones), whichever the node has.
fn ints_attr_or_input(n: &Node, name: &str, i: usize) -> Result<Option<Vec<i64>>> {
    match n.ints(name) {
        Some(v) => Ok(Some(v)),
        None => n.ints_input(i),
    }
}

fn reshape(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let spec = ints_attr_or_input(n, "shape", 1)?.ok_or_else(|| bad("Reshape", "no shape"))?;
    let allow_zero = n.int("allowzero", 0) != 0;
    if let Some(t) = reshape_symbolic(x, &spec, allow_zero)? {
        return one(t);
    }
    let own = x.shape();
    let mut out = Vec::with_capacity(spec.len());
    for (i, &d) in spec.iter().enumerate() {
        let v = match d {
            0 if !allow_zero => *own
                .get(i)
                .ok_or_else(|| bad("Reshape", "0 copies a missing axis"))?
                as i64,
            d => d,
        };
        out.push(v);
    }
    if out.iter().any(|&d| d < -1) {
        return Err(bad("Reshape", format!("bad shape {spec:?}")));
    }
    if out.iter().all(|&d| d >= 0) {
        checked_numel("Reshape", &out)?;
    }
    let s: Vec<isize> = out.iter().map(|&d| d as isize).collect();
    one(x.try_reshape(&s)?)
}

/// A Reshape of a symbolic tensor that keeps its symbolic axes symbolic: each symbolic axis
/// is copied by a `0` at its own position (ONNX's `[0, -1]`, `[0, K]`) and the constant axes
/// are rearranged, or the spec is `[-1, K..]`-like (the core infers the symbolic size). The
/// `-1` is inferred from the constant axes alone, exactly (the copied symbolic ones cancel).
/// `None` leaves every other spec to the concrete path (it reads the bound sizes).
fn reshape_symbolic(x: &Tensor, spec: &[i64], allow_zero: bool) -> Result<Option<Tensor>> {
    use picograd_core::symbolic::Node as Dim;
    let own = x.sym_shape();
    if !x.is_symbolic() || spec.iter().any(|&d| d < -1) {
        return Ok(None);
    }
    let copies = |i: usize| !allow_zero && spec.get(i) == Some(&0) && i < own.len();
    let sym_copied = (0..own.len()).all(|i| own[i].is_const() || copies(i));
    if !sym_copied {
        // `[-1, K]` with no copy: the core infers the symbolic size when it divides exactly.
        if spec.iter().all(|&d| d != 0) && spec.contains(&-1) {
            let s: Vec<isize> = spec.iter().map(|&d| d as isize).collect();
            return Ok(Some(x.try_reshape(&s)?));
        }
        return Ok(None);
    }
    let const_in: i64 = (0..own.len())
        .filter(|&i| !copies(i))
        .filter_map(|i| own[i].as_const())
        .product();
    let const_out: i64 = (0..spec.len())
        .filter(|&i| !copies(i) && spec[i] != -1)
        .map(|i| spec[i])
        .product();
    let infer = spec.iter().filter(|&&d| d == -1).count();
    let inferred = match infer {
        0 => None,
        1 if const_out > 0 && const_in % const_out == 0 => Some(const_in / const_out),
        _ => return Ok(None),
    };
    let dims: Vec<Dim> = (0..spec.len())
        .map(|i| match spec[i] {
            _ if copies(i) => own[i].clone(),
            -1 => Dim::cst(inferred.unwrap_or(0)),
            d => Dim::cst(d),
        })
        .collect();
    Ok(Some(x.try_reshape_sym(&dims)?))
}

fn flatten(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let mut a = n.int("axis", 1);
    if a < 0 {
        a += x.ndim() as i64;
    }
    if a < 0 || a as usize > x.ndim() {
        return Err(bad("Flatten", format!("axis {a} for rank {}", x.ndim())));
    }
    if x.is_symbolic() {
        // Products of the axes' expressions: a symbolic batch before the axis stays symbolic.
        let s = x.sym_shape();
        let (outer, inner) = s.split_at(a as usize);
        let dims = [
            picograd_core::shape::prod(outer),
            picograd_core::shape::prod(inner),
        ];
        return one(x.try_reshape_sym(&dims)?);
    }
    let shape = x.shape();
    let outer: usize = shape[..a as usize].iter().product();
    let inner: usize = shape[a as usize..].iter().product();
    one(x.try_reshape(&[outer as isize, inner as isize])?)
}

fn transpose(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let r = x.ndim();
    let perm: Vec<usize> = match n.ints("perm") {
        Some(p) => p
            .iter()
            .map(|&a| norm_axis("Transpose", a, r))
            .collect::<Result<_>>()?,
        None => (0..r).rev().collect(),
    };
    one(x.try_permute(&perm)?)
}

fn squeeze(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let shape = x.shape();
    let axes = match ints_attr_or_input(n, "axes", 1)? {
        Some(a) => a
            .iter()
            .map(|&a| dim_axis("Squeeze", a, shape.len()))
            .collect::<Result<Vec<_>>>()?,
        None => (0..shape.len()).filter(|&i| shape[i] == 1).collect(),
    };
    if axes.iter().any(|&a| shape[a] != 1) {
        return Err(bad(
            "Squeeze",
            format!("axes {axes:?} of shape {shape:?} are not all 1"),
        ));
    }
    let out: Vec<usize> = (0..shape.len())
        .filter(|i| !axes.contains(i))
        .map(|i| shape[i])
        .collect();
    one(x.try_reshape(&isz(&out))?)
}

fn unsqueeze(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let shape = x.shape();
    let axes = ints_attr_or_input(n, "axes", 1)?.ok_or_else(|| bad("Unsqueeze", "no axes"))?;
    let rank = shape.len() + axes.len();
    let mut ax: Vec<usize> = axes
        .iter()
        .map(|&a| norm_axis("Unsqueeze", a, rank))
        .collect::<Result<_>>()?;
    ax.sort_unstable();
    ax.dedup();
    if ax.len() != axes.len() {
        return Err(bad("Unsqueeze", format!("repeated axes {axes:?}")));
    }
    let mut it = shape.iter();
    let out: Vec<usize> = (0..rank)
        .map(|i| {
            if ax.contains(&i) {
                1
            } else {
                *it.next().unwrap_or(&1)
            }
        })
        .collect();
    one(x.try_reshape(&isz(&out))?)
}

fn concat(n: &Node) -> Result<Vec<Tensor>> {
    let ts: Vec<&Tensor> = n.inputs.iter().flatten().collect();
    let first = ts.first().ok_or_else(|| bad("Concat", "no inputs"))?;
    let a = norm_axis("Concat", n.int("axis", 0), first.ndim())?;
    one(Tensor::try_cat(&ts, a as isize)?)
}

fn split(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let a = dim_axis("Split", n.int("axis", 0), x.ndim())?;
    let dim = x.shape()[a];
    let outputs = n.proto.output.len();
    let sizes: Vec<usize> = match ints_attr_or_input(n, "split", 1)? {
        Some(s) => s.iter().map(|&v| v.max(0) as usize).collect(),
        None => {
            let parts = n.int("num_outputs", outputs as i64).max(1);
            if parts as u64 > outputs.max(1) as u64 {
                return Err(bad(
                    "Split",
                    format!("num_outputs {parts} for a node with {outputs} outputs"),
                ));
            }
            let parts = parts as usize;
            let each = dim.div_ceil(parts);
            (0..parts)
                .map(|i| each.min(dim.saturating_sub(i * each)))
                .collect()
        }
    };
    if sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s)) != Some(dim) {
        return Err(bad(
            "Split",
            format!("sizes {sizes:?} do not add up to {dim}"),
        ));
    }
    let mut out = Vec::with_capacity(sizes.len());
    let mut start = 0;
    for s in sizes {
        let mut arg: Vec<(usize, usize)> = x.shape().iter().map(|&d| (0, d)).collect();
        arg[a] = (start, start + s);
        out.push(x.try_shrink(&arg)?);
        start += s;
    }
    Ok(out)
}

fn slice(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let shape = x.shape();
    let (starts, ends, axes, steps) = if n.opset < 10 {
        (n.ints("starts"), n.ints("ends"), n.ints("axes"), None)
    } else {
        (
            n.ints_input(1)?,
            n.ints_input(2)?,
            n.ints_input(3)?,
            n.ints_input(4)?,
        )
    };
    let starts = starts.ok_or_else(|| bad("Slice", "no starts"))?;
    let ends = ends.ok_or_else(|| bad("Slice", "no ends"))?;
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(bad(
            "Slice",
            "starts, ends, axes and steps differ in length",
        ));
    }
    let mut arg: Vec<(i64, i64, i64)> = shape.iter().map(|&d| (0, d as i64, 1)).collect();
    for k in 0..starts.len() {
        let a = norm_axis("Slice", axes[k], shape.len())?;
        let d = shape[a] as i64;
        let clamp = |v: i64| v.clamp(-d - 1, d);
        arg[a] = (clamp(starts[k]), clamp(ends[k]), steps[k]);
    }
    one(x.try_slice(&arg)?)
}

fn pad(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let r = x.ndim();
    let (pads, value) = if n.opset < 11 {
        (
            n.ints("pads").or(n.ints("paddings")),
            n.float("value", 0.0) as f64,
        )
    } else {
        let v = n
            .floats_input(2)?
            .and_then(|v| v.first().copied())
            .unwrap_or(0.0);
        (n.ints_input(1)?, v)
    };
    let pads = pads.ok_or_else(|| bad("Pad", "no pads"))?;
    let axes: Vec<usize> = match n.ints_input(3)? {
        Some(a) => a
            .iter()
            .map(|&v| norm_axis("Pad", v, r))
            .collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(bad(
            "Pad",
            format!("{} pads for {} axes", pads.len(), axes.len()),
        ));
    }
    let mut full = vec![(0i64, 0i64); r];
    for (k, &a) in axes.iter().enumerate() {
        full[a] = (pads[k], pads[k + axes.len()]);
    }
    let mode = n.string("mode", "constant");
    one(pad_full(x, &full, &mode, value)?)
}

/// Pads (or, for negative amounts, crops) every axis by `(before, after)`.
pub fn pad_full(x: &Tensor, pads: &[(i64, i64)], mode: &str, value: f64) -> Result<Tensor> {
    let shape = x.shape();
    let crop: Vec<(usize, usize)> = shape
        .iter()
        .zip(pads)
        .map(|(&d, &(b, e))| {
            // i128: pads of any i64 value (i64::MIN included) negate without overflow.
            let (d, b, e) = (d as i128, b as i128, e as i128);
            let lo = (-b).clamp(0, d);
            let hi = (d - (-e).max(0)).clamp(lo, d);
            (lo as usize, hi as usize)
        })
        .collect();
    let x = x.try_shrink(&crop)?;
    let grow: Vec<(usize, usize)> = pads
        .iter()
        .map(|&(b, e)| (b.max(0) as usize, e.max(0) as usize))
        .collect();
    for &(b, e) in &grow {
        super::super::values::checked_numel("Pad", &[b as i64, e as i64])?;
    }
    match mode {
        "constant" => x.try_pad_value(&grow, value),
        "edge" | "reflect" | "wrap" => {
            let mut y = x;
            for (a, &(b, e)) in grow.iter().enumerate() {
                y = pad_axis(&y, a, b, e, mode)?;
            }
            Ok(y)
        }
        m => Err(bad("Pad", format!("mode '{m}'"))),
    }
}

/// Pads one axis by copying edge values, reflecting, or wrapping around.
fn pad_axis(x: &Tensor, a: usize, b: usize, e: usize, mode: &str) -> Result<Tensor> {
    if b == 0 && e == 0 {
        return Ok(x.clone());
    }
    let d = x.shape()[a];
    let part = |lo: usize, hi: usize| -> Result<Tensor> {
        let mut arg: Vec<(usize, usize)> = x.shape().iter().map(|&v| (0, v)).collect();
        arg[a] = (lo, hi);
        x.try_shrink(&arg)
    };
    let (before, after) = match mode {
        "edge" if d > 0 => {
            let mut s = x.shape();
            s[a] = b;
            let l = part(0, 1)?.try_expand(&s)?;
            s[a] = e;
            (l, part(d - 1, d)?.try_expand(&s)?)
        }
        "reflect" if b < d && e < d => (
            part(1, b + 1)?.try_flip(&[a as isize])?,
            part(d - 1 - e, d - 1)?.try_flip(&[a as isize])?,
        ),
        "wrap" if b <= d && e <= d => (part(d - b, d)?, part(0, e)?),
        _ => {
            return Err(bad(
                "Pad",
                format!("{mode} padding of {b}/{e} on an axis of {d}"),
            ))
        }
    };
    Tensor::try_cat(&[&before, x, &after], a as isize)
}

fn expand(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let spec = n.ints_input(1)?.ok_or_else(|| bad("Expand", "no shape"))?;
    checked_numel("Expand", &spec)?;
    let s: Vec<usize> = spec.iter().map(|&d| d as usize).collect();
    let out = Tensor::broadcast_shape("Expand", &x.shape(), &s)?;
    one(x.try_expand(&out)?)
}

fn tile(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let reps = n.ints_input(1)?.ok_or_else(|| bad("Tile", "no repeats"))?;
    let shape = x.shape();
    if reps.len() != shape.len() || reps.iter().any(|&r| r < 0) {
        return Err(bad("Tile", format!("repeats {reps:?} for shape {shape:?}")));
    }
    let total: Vec<i64> = shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| {
            (d as i64)
                .checked_mul(r)
                .ok_or_else(|| bad("Tile", format!("repeats {reps:?} for shape {shape:?}")))
        })
        .collect::<Result<_>>()?;
    checked_numel("Tile", &total)?;
    let inter: Vec<usize> = shape.iter().flat_map(|&d| [1, d]).collect();
    let big: Vec<usize> = shape
        .iter()
        .zip(&reps)
        .flat_map(|(&d, &r)| [r as usize, d])
        .collect();
    let y = x.try_reshape(&isz(&inter))?.try_expand(&big)?;
    let out: Vec<usize> = total.iter().map(|&v| v as usize).collect();
    one(y.try_reshape(&isz(&out))?)
}

fn shape_op(n: &Node) -> Result<Vec<Tensor>> {
    let s = n.input(0)?.shape();
    let r = s.len() as i64;
    let fix = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let (a, b) = (fix(n.int("start", 0)), fix(n.int("end", r)));
    let vals: Vec<i64> = s[a..b.max(a)].iter().map(|&d| d as i64).collect();
    one(Tensor::try_from_slice(&vals, &[vals.len()])?)
}

fn constant_of_shape(n: &Node) -> Result<Vec<Tensor>> {
    let spec = n
        .ints_input(0)?
        .ok_or_else(|| bad("ConstantOfShape", "no shape"))?;
    checked_numel("ConstantOfShape", &spec)?;
    let s: Vec<usize> = spec.iter().map(|&d| d as usize).collect();
    let (v, d) = match n.tensor("value") {
        Some(t) => {
            let t = tensor_from_proto(t, "ConstantOfShape value")?;
            (t.to_f64_vec()?.first().copied().unwrap_or(0.0), t.dtype())
        }
        None => (0.0, DType::F32),
    };
    one(Tensor::try_full(&s, v, d)?)
}

fn range(n: &Node) -> Result<Vec<Tensor>> {
    let start = n.input(0)?;
    let get = |i: usize| -> Result<f64> {
        n.floats_input(i)?
            .and_then(|v| v.first().copied())
            .ok_or_else(|| bad("Range", "empty start/limit/delta"))
    };
    let (s, l, d) = (get(0)?, get(1)?, get(2)?);
    if d == 0.0 || !(s.is_finite() && l.is_finite() && d.is_finite()) {
        return Err(bad("Range", format!("range({s}, {l}, {d})")));
    }
    let count = ((l - s) / d).ceil().max(0.0);
    checked_numel("Range", &[count as i64])?;
    let vals: Vec<f64> = (0..count as usize).map(|i| s + i as f64 * d).collect();
    one(Tensor::try_from_f64s(&vals, &[vals.len()], start.dtype())?)
}

fn constant(n: &Node) -> Result<Vec<Tensor>> {
    let out = constant_value(n)?;
    // A Constant node's value never changes, as an initializer's does not: the layout pass may
    // copy it once per capture, and Gather reads its indices at import.
    for t in &out {
        if let Some(b) = t.lazy().realized() {
            b.mark_constant();
        }
    }
    Ok(out)
}

fn constant_value(n: &Node) -> Result<Vec<Tensor>> {
    if let Some(t) = n.tensor("value") {
        return one(tensor_from_proto(t, "Constant value")?);
    }
    if n.has("value_float") {
        return one(Tensor::try_from_slice(&[n.float("value_float", 0.0)], &[])?);
    }
    if let Some(v) = n.floats("value_floats") {
        return one(Tensor::try_from_slice(&v, &[v.len()])?);
    }
    if n.has("value_int") {
        return one(Tensor::try_from_slice(&[n.int("value_int", 0)], &[])?);
    }
    if let Some(v) = n.ints("value_ints") {
        return one(Tensor::try_from_slice(&v, &[v.len()])?);
    }
    Err(bad(
        "Constant",
        "only tensor, float(s) and int(s) values are supported",
    ))
}

fn dropout(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let training = n
        .ints_input(2)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0)
        != 0;
    let ratio = n
        .floats_input(1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0.0);
    if training && ratio != 0.0 {
        return Err(bad(
            "Dropout",
            "training mode with a nonzero ratio (random) is not supported",
        ));
    }
    Ok(vec![
        x.clone(),
        Tensor::try_full(&x.shape(), 1.0, DType::Bool)?,
    ])
}

fn depth_to_space(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let [nn, c, h, w] = four(x, "DepthToSpace")?;
    let b = blocksize(n, c, h, w)?;
    let c2 = c / (b * b);
    let y = if n.string("mode", "DCR") == "CRD" {
        x.try_reshape(&isz(&[nn, c2, b, b, h, w]))?
            .try_permute(&[0, 1, 4, 2, 5, 3])?
    } else {
        x.try_reshape(&isz(&[nn, b, b, c2, h, w]))?
            .try_permute(&[0, 3, 4, 1, 5, 2])?
    };
    one(y.try_reshape(&isz(&[nn, c2, h * b, w * b]))?)
}

fn space_to_depth(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let [nn, c, h, w] = four(x, "SpaceToDepth")?;
    let b = blocksize(n, c, h, w)?;
    // DCR puts the block offsets before the channel, CRD after it.
    let order = if n.string("mode", "DCR") == "CRD" {
        [0, 1, 3, 5, 2, 4]
    } else {
        [0, 3, 5, 1, 2, 4]
    };
    let y = x
        .try_reshape(&isz(&[nn, c, h / b, b, w / b, b]))?
        .try_permute(&order)?;
    one(y.try_reshape(&isz(&[nn, c * b * b, h / b, w / b]))?)
}

/// The `blocksize` attribute, which must be positive and small enough that `c·b²`, `h·b` and
/// `w·b` exist.
fn blocksize(n: &Node, c: usize, h: usize, w: usize) -> Result<usize> {
    let b = n.int("blocksize", 1);
    let ok = usize::try_from(b).ok().filter(|&b| {
        b > 0
            && b.checked_mul(b)
                .and_then(|bb| bb.checked_mul(c.max(1)))
                .is_some_and(|v| v <= isize::MAX as usize)
            && b.checked_mul(h.max(w).max(1))
                .is_some_and(|v| v <= isize::MAX as usize)
    });
    ok.ok_or_else(|| {
        bad(
            n.op(),
            format!("blocksize {b} for input [_, {c}, {h}, {w}]"),
        )
    })
}

fn four(x: &Tensor, op: &str) -> Result<[usize; 4]> {
    let s = x.shape();
    s.as_slice()
        .try_into()
        .map_err(|_| bad(op, format!("needs a 4-D input, got {s:?}")))
}

/// `col − row` for an `r×c` grid, as i64.
fn diag_offsets(r: usize, c: usize) -> Result<Tensor> {
    let rows = Tensor::try_arange(0.0, r as f64, 1.0, DType::I64)?.try_reshape(&[r as isize, 1])?;
    let cols = Tensor::try_arange(0.0, c as f64, 1.0, DType::I64)?.try_reshape(&[1, c as isize])?;
    cols.try_sub(&rows)
}

fn eye_like(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let [r, c]: [usize; 2] = x
        .shape()
        .as_slice()
        .try_into()
        .map_err(|_| bad("EyeLike", "needs 2-D"))?;
    let d = match n.int("dtype", -1) {
        -1 => x.dtype(),
        code => dtype_of(code as i32).ok_or_else(|| bad("EyeLike", "dtype"))?,
    };
    one(diag_offsets(r, c)?.try_eq(n.int("k", 0))?.cast(d))
}

fn trilu(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let s = x.shape();
    if s.len() < 2 {
        return Err(bad("Trilu", "needs rank ≥ 2"));
    }
    let k = n
        .ints_input(1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let off = diag_offsets(s[s.len() - 2], s[s.len() - 1])?;
    let keep = if n.int("upper", 1) != 0 {
        off.try_ge(k)?
    } else {
        off.try_le(k)?
    };
    one(keep.try_where(x, x.const_like(0.0))?)
}

fn one_hot(n: &Node) -> Result<Vec<Tensor>> {
    let idx = n.input(0)?;
    let depth = n
        .floats_input(1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0.0) as i64;
    let values = n.input(2)?;
    checked_numel("OneHot", &[idx.numel() as i64, depth])?;
    let rank = idx.ndim() + 1;
    let a = norm_axis("OneHot", n.int("axis", -1), rank)?;
    let idx = idx.cast(DType::I64);
    let idx = idx.try_lt(0)?.try_where(idx.try_add(depth)?, &idx)?;
    let idx = idx.try_unsqueeze(a as isize)?;
    let mut shp = vec![1isize; rank];
    shp[a] = depth as isize;
    let ar = Tensor::try_arange(0.0, depth as f64, 1.0, DType::I64)?.try_reshape(&shp)?;
    let off = values.try_slice(&[(0, 1, 1)])?.try_reshape(&[])?;
    let on = values.try_slice(&[(1, 2, 1)])?.try_reshape(&[])?;
    one(idx.try_eq(&ar)?.try_where(&on, &off)?)
}

/// Crops or zero-pads each listed axis to its target size, centred (the odd cell at the end).
fn center_crop_pad(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let xs = x.shape();
    let sizes = n.ints_input(1)?.unwrap_or_default();
    let axes: Vec<usize> = match n.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&v| norm_axis(n.op(), v, xs.len()))
            .collect::<Result<_>>()?,
        None => (0..xs.len()).collect(),
    };
    if sizes.len() != axes.len() || sizes.iter().any(|&v| v < 0) {
        return Err(bad(n.op(), format!("shape {sizes:?} for axes {axes:?}")));
    }
    let mut keep: Vec<(usize, usize)> = xs.iter().map(|&d| (0, d)).collect();
    let mut pads = vec![(0usize, 0usize); xs.len()];
    for (&a, &want) in axes.iter().zip(&sizes) {
        let (have, want) = (xs[a], want as usize);
        if want < have {
            let start = (have - want) / 2;
            keep[a] = (start, start + want);
        } else {
            let extra = want - have;
            pads[a] = (extra / 2, extra - extra / 2);
        }
    }
    one(x.try_shrink(&keep)?.try_pad(&pads)?)
}

/// `arange(n)` (i64) laid along axis `a` of a rank-`r` tensor.
fn arange_on(n: usize, a: usize, r: usize) -> Result<Tensor> {
    let mut s = vec![1isize; r];
    s[a] = n as isize;
    Tensor::try_arange(0.0, n as f64, 1.0, DType::I64)?.try_reshape(&s)
}

/// Reverses the first `sequence_lens[b]` steps of each batch entry (a gather along time).
fn reverse_sequence(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let (xs, r) = (x.shape(), x.ndim());
    let ba = dim_axis(n.op(), n.int("batch_axis", 1), r)?;
    let ta = dim_axis(n.op(), n.int("time_axis", 0), r)?;
    let lens = n.input(1)?.cast(DType::I64);
    let mut ls = vec![1isize; r];
    ls[ba] = xs[ba] as isize;
    let lens = lens.try_reshape(&ls)?;
    let t = arange_on(xs[ta], ta, r)?;
    let rev = lens.try_sub(1i64)?.try_sub(&t)?;
    let idx = t.try_lt(&lens)?.try_where(&rev, &t)?.try_expand(&xs)?;
    one(x.try_gather(ta as isize, &idx)?)
}

/// Writes `update` into the cache along `axis` from each batch entry's write index (wrapping
/// round in `circular` mode): a gather from the update where a cache cell is written.
fn tensor_scatter(n: &Node) -> Result<Vec<Tensor>> {
    let (cache, upd) = (n.input(0)?, n.input(1)?);
    let (cs, r) = (cache.shape(), cache.ndim());
    let a = dim_axis(n.op(), n.int("axis", -2), r)?;
    if upd.ndim() != r || cs[a] == 0 {
        return Err(bad(
            n.op(),
            format!("update {:?} for cache {cs:?} along axis {a}", upd.shape()),
        ));
    }
    let (len, steps) = (cs[a] as i64, upd.shape()[a] as i64);
    let mut ws = vec![1isize; r];
    ws[0] = cs[0] as isize;
    let write = match n.opt(2) {
        Some(w) => w.cast(DType::I64).try_reshape(&ws)?,
        None => Tensor::try_from_slice(&[0i64], &[1])?.try_reshape(&vec![1; r])?,
    };
    let mut s = arange_on(cs[a], a, r)?.try_sub(&write)?;
    if n.string("mode", "linear") == "circular" {
        s = s.try_rem(len)?.try_add(len)?.try_rem(len)?;
    }
    let s = s.try_ge(0i64)?.try_where(&s, steps)?;
    let hit = s.try_lt(steps)?;
    let idx = hit.try_where(&s, 0i64)?.try_expand(&cs)?;
    one(hit.try_where(&upd.try_gather(a as isize, &idx)?, cache)?)
}
