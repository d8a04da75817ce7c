//! Ops computed on the host from realized values: their output shape depends on the data
//! (NonZero, Compress) or they reorder data in ways the lazy op set cannot express cheaply yet
//! (GatherND, ScatterND), plus the window generators; TopK, once here, is the shared lazy
//! `topk` now. Element bytes are moved as they are,
//! so every dtype keeps its exact values. These run eagerly and are not exportable.

use picograd_core::{DType, Error, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::{checked_numel, dtype_of, tensor_from_le_bytes, to_i64s};
use super::{dim_axis, one, Handler};

/// The handler for `op` if it runs on the host.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "TopK" => top_k,
        "NonZero" => non_zero,
        "Compress" => compress,
        "GatherND" => gather_nd,
        "ScatterND" => scatter_nd,
        "HannWindow" => |n| window(n, &[0.5, 0.5]),
        "HammingWindow" => |n| window(n, &[25.0 / 46.0, 21.0 / 46.0]),
        "BlackmanWindow" => |n| window(n, &[0.42, 0.5, 0.08]),
        "Resize" | "Upsample" => super::resize::resize,
        "BitCast" => bit_cast,
        "Det" => det,
        _ => return None,
    })
}

/// A realized tensor on the host: its bytes, shape and dtype.
struct Host {
    bytes: Vec<u8>,
    shape: Vec<usize>,
    dtype: DType,
}

impl Host {
    fn of(t: &Tensor) -> Result<Host> {
        Ok(Host {
            bytes: t.to_bytes()?,
            shape: t.shape(),
            dtype: t.dtype(),
        })
    }
    fn size(&self) -> usize {
        self.dtype.itemsize()
    }
    fn tensor(bytes: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor> {
        tensor_from_le_bytes(bytes, shape, dtype)
    }
}

/// TopK with the shared lazy `topk` (a stable sort: ties keep the lower index first).
fn top_k(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let k = n
        .ints_input(1)?
        .and_then(|v| v.first().copied())
        .unwrap_or(n.int("k", 1));
    let a = dim_axis("TopK", n.int("axis", -1), x.ndim())?;
    let d = x.shape()[a];
    if k < 0 || k as usize > d {
        return Err(bad("TopK", format!("k = {k} for an axis of {d}")));
    }
    let (v, i) = x.try_topk(k as usize, a as isize, n.int("largest", 1) != 0)?;
    Ok(vec![v, i.cast(DType::I64)])
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Determinants of the trailing square matrices, by Gaussian elimination with partial pivoting
/// in f64.
fn det(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let s = x.shape();
    let k = s.len();
    if k < 2 || s[k - 1] != s[k - 2] {
        return Err(bad(
            "Det",
            format!("input {s:?} is not a stack of square matrices"),
        ));
    }
    let m = s[k - 1];
    let vals = x.to_f64_vec()?;
    let dets: Vec<f64> = if m == 0 {
        // The determinant of a 0×0 matrix is 1 (the empty product).
        vec![1.0; s[..k - 2].iter().product()]
    } else {
        vals.chunks(m * m).map(|a| lu_det(a.to_vec(), m)).collect()
    };
    one(Tensor::try_from_f64s(&dets, &s[..k - 2], x.dtype())?)
}

fn lu_det(mut a: Vec<f64>, m: usize) -> f64 {
    let mut d = 1.0;
    for c in 0..m {
        let p = (c..m)
            .max_by(|&i, &j| a[i * m + c].abs().total_cmp(&a[j * m + c].abs()))
            .unwrap_or(c);
        if a[p * m + c] == 0.0 {
            return 0.0;
        }
        if p != c {
            for j in 0..m {
                a.swap(p * m + j, c * m + j);
            }
            d = -d;
        }
        d *= a[c * m + c];
        for r in c + 1..m {
            let f = a[r * m + c] / a[c * m + c];
            for j in c..m {
                a[r * m + j] -= f * a[c * m + j];
            }
        }
    }
    d
}

/// Reinterprets the element bytes as another type of the same width.
fn bit_cast(n: &Node) -> Result<Vec<Tensor>> {
    let h = Host::of(n.input(0)?)?;
    let code = n.int("to", 0) as i32;
    let to = dtype_of(code).ok_or_else(|| bad("BitCast", format!("to type {code}")))?;
    if to.itemsize() != h.dtype.itemsize() {
        return Err(bad(
            "BitCast",
            format!("{} to {to} changes the width", h.dtype),
        ));
    }
    one(Host::tensor(&h.bytes, &h.shape, to)?)
}

fn non_zero(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let shape = x.shape();
    let vals = x.to_f64_vec()?;
    let st = strides(&shape);
    let hits: Vec<usize> = (0..vals.len()).filter(|&i| vals[i] != 0.0).collect();
    let mut out = Vec::with_capacity(hits.len() * shape.len());
    for (a, &s) in st.iter().enumerate() {
        out.extend(hits.iter().map(|&i| ((i / s) % shape[a]) as i64));
    }
    one(Tensor::try_from_slice(&out, &[shape.len(), hits.len()])?)
}

fn compress(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let cond = to_i64s(n.input(1)?)?;
    let (x, a) = if n.has("axis") {
        let a = dim_axis("Compress", n.int("axis", 0), x.ndim())?;
        (x.clone(), a)
    } else {
        (x.try_reshape(&[-1])?, 0)
    };
    let h = Host::of(&x)?;
    let d = h.shape[a];
    let keep: Vec<usize> = (0..d.min(cond.len())).filter(|&i| cond[i] != 0).collect();
    let inner: usize = h.shape[a + 1..].iter().product();
    let outer: usize = h.shape[..a].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for &j in &keep {
            let start = (o * d + j) * inner;
            out.extend_from_slice(&h.bytes[start * h.size()..(start + inner) * h.size()]);
        }
    }
    let mut s = h.shape.clone();
    s[a] = keep.len();
    one(Host::tensor(&out, &s, h.dtype)?)
}

/// For GatherND/ScatterND: the flat element offset of each index tuple, and the slice length.
fn nd_offsets(
    op: &'static str,
    data: &[usize],
    idx: &Host,
    ivals: &[i64],
    batch: usize,
) -> Result<(Vec<usize>, usize)> {
    let k = *idx.shape.last().ok_or_else(|| bad(op, "0-d indices"))?;
    if batch >= idx.shape.len()
        || batch.checked_add(k).is_none_or(|d| d > data.len())
        || idx.shape[..batch] != data[..batch]
    {
        return Err(bad(op, format!("index depth {k} for data {data:?}")));
    }
    let st = strides(data);
    let slice: usize = data[batch + k..].iter().product();
    let per_batch: usize = idx.shape[batch..idx.shape.len() - 1].iter().product();
    let mut offs = Vec::with_capacity(ivals.len() / k.max(1));
    for (t, tuple) in ivals.chunks(k.max(1)).enumerate() {
        let b = t.checked_div(per_batch).unwrap_or(0);
        let mut off = 0usize;
        let mut rem = b;
        for a in (0..batch).rev() {
            off += (rem % data[a]) * st[a];
            rem /= data[a];
        }
        for (j, &v) in tuple.iter().enumerate().take(k) {
            let dim = data[batch + j] as i64;
            // ONNX: an index in [-dim, 0) counts from the end.
            let w = if v < 0 { v + dim } else { v };
            if w < 0 || w >= dim {
                return Err(Error::shape(
                    op,
                    format!(
                        "index {v} (element {}) is out of range for axis {} of size {dim} \
                         (valid: {} to {})",
                        t * k + j,
                        batch + j,
                        -dim,
                        dim - 1
                    ),
                ));
            }
            off += w as usize * st[batch + j];
        }
        offs.push(off);
    }
    Ok((offs, slice))
}

fn gather_nd(n: &Node) -> Result<Vec<Tensor>> {
    let h = Host::of(n.input(0)?)?;
    let idx = Host::of(n.input(1)?)?;
    let ivals = to_i64s(n.input(1)?)?;
    let batch = n.int("batch_dims", 0).max(0) as usize;
    let (offs, slice) = nd_offsets("GatherND", &h.shape, &idx, &ivals, batch)?;
    let mut out = Vec::with_capacity(offs.len() * slice * h.size());
    for o in offs {
        out.extend_from_slice(&h.bytes[o * h.size()..(o + slice) * h.size()]);
    }
    let k = idx.shape[idx.shape.len() - 1];
    let mut s = idx.shape[..idx.shape.len() - 1].to_vec();
    s.extend(&h.shape[batch + k..]);
    one(Host::tensor(&out, &s, h.dtype)?)
}

fn scatter_nd(n: &Node) -> Result<Vec<Tensor>> {
    let data = n.input(0)?;
    let h = Host::of(data)?;
    let idx = Host::of(n.input(1)?)?;
    let ivals = to_i64s(n.input(1)?)?;
    let (offs, slice) = nd_offsets("ScatterND", &h.shape, &idx, &ivals, 0)?;
    // Updates move as the data's element bytes, so they take its dtype first.
    let upd = &n.input(2)?.cast(h.dtype);
    if Some(upd.numel()) != offs.len().checked_mul(slice) {
        return Err(bad("ScatterND", "updates do not match the indices"));
    }
    let mode = n.string("reduction", "none");
    if mode == "none" {
        let u = Host::of(upd)?;
        let mut out = h.bytes.clone();
        let sz = h.size();
        for (t, &o) in offs.iter().enumerate() {
            out[o * sz..(o + slice) * sz]
                .copy_from_slice(&u.bytes[t * slice * sz..(t + 1) * slice * sz]);
        }
        return one(Host::tensor(&out, &h.shape, h.dtype)?);
    }
    let mut vals = data.to_f64_vec()?;
    let u = upd.to_f64_vec()?;
    for (t, &o) in offs.iter().enumerate() {
        for j in 0..slice {
            let (v, w) = (&mut vals[o + j], u[t * slice + j]);
            *v = match mode.as_str() {
                "add" => *v + w,
                "mul" => *v * w,
                "max" => v.max(w),
                "min" => v.min(w),
                m => return Err(bad("ScatterND", format!("reduction '{m}'"))),
            };
        }
    }
    one(Tensor::try_from_f64s(&vals, &h.shape, h.dtype)?)
}

/// `Σ_k (−1)^k·c_k·cos(2πkn/N)` windows (Hann, Hamming, Blackman).
fn window(n: &Node, coef: &[f64]) -> Result<Vec<Tensor>> {
    let size = n
        .ints_input(0)?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    checked_numel(n.op(), &[size])?;
    let periodic = n.int("periodic", 1) != 0;
    let denom = if periodic { size } else { size - 1 }.max(1) as f64;
    let vals: Vec<f64> = (0..size)
        .map(|i| {
            coef.iter()
                .enumerate()
                .map(|(k, c)| {
                    let s = if k % 2 == 0 { 1.0 } else { -1.0 };
                    s * c * (2.0 * std::f64::consts::PI * k as f64 * i as f64 / denom).cos()
                })
                .sum()
        })
        .collect();
    let d = dtype_of(n.int("output_datatype", 1) as i32)
        .ok_or_else(|| bad(n.op(), "output_datatype"))?;
    one(Tensor::try_from_f64s(&vals, &[vals.len()], d)?)
}
