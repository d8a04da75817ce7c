//! Ops with data-dependent output sizes, computed on the host (not exportable, like NonZero):
//! NonMaxSuppression (greedy per batch and class, highest score first, lower index first on
//! ties) and Unique (sorted or first-occurrence order, with or without an axis).

use std::cmp::Ordering;

use picograd_core::{Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::to_f64s;
use super::{norm_axis, one, Handler};

/// The handler for `op` if it is one of these ops.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "NonMaxSuppression" => nms,
        "Unique" => unique,
        _ => return None,
    })
}

/// A box as `(y_min, x_min, y_max, x_max)`, from corners (either order) or centre + size.
fn corners(b: &[f64], centre: bool) -> [f64; 4] {
    if centre {
        let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
        return [b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw];
    }
    [
        b[0].min(b[2]),
        b[1].min(b[3]),
        b[0].max(b[2]),
        b[1].max(b[3]),
    ]
}

/// Does `a` overlap `b` by more than `threshold` (intersection over union)?
fn suppresses(a: [f64; 4], b: [f64; 4], threshold: f64) -> bool {
    let ih = a[2].min(b[2]) - a[0].max(b[0]);
    let iw = a[3].min(b[3]) - a[1].max(b[1]);
    if ih <= 0.0 || iw <= 0.0 {
        return false;
    }
    let inter = ih * iw;
    let area = |r: [f64; 4]| (r[2] - r[0]) * (r[3] - r[1]);
    let union = area(a) + area(b) - inter;
    if area(a) <= 0.0 || area(b) <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

fn nms(n: &Node) -> Result<Vec<Tensor>> {
    let (boxes, scores) = (n.input(0)?, n.input(1)?);
    let (bs, ss) = (boxes.shape(), scores.shape());
    if bs.len() != 3 || bs[2] != 4 || ss.len() != 3 || ss[0] != bs[0] || ss[2] != bs[1] {
        return Err(bad(n.op(), format!("boxes {bs:?} and scores {ss:?}")));
    }
    let first = |i: usize| -> Result<Option<f64>> {
        Ok(n.floats_input(i)?.and_then(|v| v.first().copied()))
    };
    let limit = first(2)?.unwrap_or(0.0).max(0.0) as usize;
    let iou = first(3)?.unwrap_or(0.0);
    let min_score = first(4)?;
    let centre = n.int("center_point_box", 0) != 0;
    let (bv, sv) = (to_f64s(boxes)?, to_f64s(scores)?);
    let mut out: Vec<i64> = Vec::new();
    for b in 0..bs[0] {
        let rect = |i: usize| corners(&bv[(b * bs[1] + i) * 4..][..4], centre);
        for c in 0..ss[1] {
            let score = |i: usize| sv[(b * ss[1] + c) * ss[2] + i];
            let mut cand: Vec<usize> = (0..ss[2])
                .filter(|&i| min_score.is_none_or(|t| score(i) > t))
                .collect();
            // Highest first; a NaN score sorts last (a total order: `sort_by` may panic on
            // a comparison that is not one).
            cand.sort_by(|&p, &q| match (score(p).is_nan(), score(q).is_nan()) {
                (false, false) => score(q).partial_cmp(&score(p)).unwrap_or(Ordering::Equal),
                (a, b) => a.cmp(&b),
            });
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= limit {
                    break;
                }
                if kept.iter().all(|&k| !suppresses(rect(i), rect(k), iou)) {
                    kept.push(i);
                    out.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    one(Tensor::try_from_slice(&out, &[out.len() / 3, 3])?)
}

/// Unique slices along `axis` (or elements of the flattened tensor): the values, the first
/// index of each, the inverse map and the counts.
fn unique(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let xs = x.shape();
    let vals = to_f64s(x)?;
    let (outer, len, inner, axis) = match n.has("axis") {
        true => {
            let a = norm_axis(n.op(), n.int("axis", 0), xs.len())?;
            let outer: usize = xs[..a].iter().product();
            (outer, xs[a], xs[a + 1..].iter().product::<usize>(), Some(a))
        }
        false => (1, vals.len(), 1, None),
    };
    let slice = |j: usize| -> Vec<f64> {
        (0..outer)
            .flat_map(|o| (0..inner).map(move |i| (o, i)))
            .map(|(o, i)| vals[(o * len + j) * inner + i])
            .collect()
    };
    let items: Vec<Vec<f64>> = (0..len).map(slice).collect();
    let mut firsts: Vec<usize> = Vec::new();
    for j in 0..len {
        if !firsts.iter().any(|&f| same(&items[f], &items[j])) {
            firsts.push(j);
        }
    }
    if n.int("sorted", 1) != 0 {
        firsts.sort_by(|&p, &q| cmp_slices(&items[p], &items[q]));
    }
    let inverse: Vec<i64> = (0..len)
        .map(|j| {
            firsts
                .iter()
                .position(|&f| same(&items[f], &items[j]))
                .unwrap_or(0) as i64
        })
        .collect();
    let counts: Vec<i64> = (0..firsts.len())
        .map(|u| inverse.iter().filter(|&&v| v == u as i64).count() as i64)
        .collect();
    let picked = picked_values(x, axis, &firsts)?;
    let idx: Vec<i64> = firsts.iter().map(|&f| f as i64).collect();
    let k = idx.len();
    Ok(vec![
        picked,
        Tensor::try_from_slice(&idx, &[k])?,
        Tensor::try_from_slice(&inverse, &[len])?,
        Tensor::try_from_slice(&counts, &[k])?,
    ])
}

/// numpy's order for `unique`: by value, NaN after every number (a total order, which
/// `sort_by` needs: with NaN compared as "equal" to everything the sort may panic).
fn nan_last(x: f64, y: f64) -> Ordering {
    match (x.is_nan(), y.is_nan()) {
        (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (a, b) => a.cmp(&b),
    }
}

fn cmp_slices(a: &[f64], b: &[f64]) -> Ordering {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| nan_last(x, y))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

/// Equal slices, NaN equal to NaN (numpy's `unique` collapses NaNs, `equal_nan=True`).
fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(&x, &y)| x == y || x.is_nan() && y.is_nan())
}

/// The slices `firsts` of `x` along `axis` (elements of the flattened tensor without one),
/// exact in `x`'s dtype.
fn picked_values(x: &Tensor, axis: Option<usize>, firsts: &[usize]) -> Result<Tensor> {
    let (src, a) = match axis {
        Some(a) => (x.clone(), a),
        None => (x.try_reshape(&[-1])?, 0),
    };
    let parts: Vec<Tensor> = firsts
        .iter()
        .map(|&f| {
            let mut keep: Vec<(usize, usize)> = src.shape().iter().map(|&d| (0, d)).collect();
            keep[a] = (f, f + 1);
            src.try_shrink(&keep)
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&Tensor> = parts.iter().collect();
    if refs.is_empty() {
        let mut s = src.shape();
        s[a] = 0;
        return src.try_shrink(&s.iter().map(|&d| (0, d)).collect::<Vec<_>>());
    }
    let t = Tensor::try_cat(&refs, a as isize)?;
    t.realize()?;
    Ok(t)
}
