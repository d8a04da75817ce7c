//! The `ai.onnx.ml` operators scikit-learn models use as skl2onnx writes them by default:
//! LinearClassifier, LinearRegressor, Normalizer, Scaler, ZipMap, Binarizer and
//! ArrayFeatureExtractor (skl2onnx's MLPClassifier and LogisticRegression also use the standard
//! Cast, MatMul, Add, Relu, Softmax, ArgMax and Reshape). All are lazy tensor compositions, so
//! such models also export.
//!
//! Semantics follow onnxruntime's CPU kernels: features are computed in f32; a binary
//! LinearClassifier (one coefficient row, two labels) reports the scores `[1 - s, s]` (after
//! the logistic function with `post_transform = LOGISTIC`) and the label `labels[s > 0]`;
//! Normalizer's MAX divides by the signed row maximum.
//! ZipMap's sequence of `{label: probability}` maps has no tensor form: picograd passes the
//! probability tensor through (the labels stay in the node, [`zipmap_labels`]). String class
//! labels have no picograd type: they are refused with an error naming what avoids them.

use picograd_core::{DType, Result, Tensor};

use super::{one, Handler};
use crate::node::{bad, Node};
use crate::proto::NodeProto;

pub(super) fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Binarizer" => binarizer,
        "ArrayFeatureExtractor" => array_feature_extractor,
        "LinearClassifier" => linear_classifier,
        "LinearRegressor" => linear_regressor,
        "Normalizer" => normalizer,
        "Scaler" => scaler,
        "ZipMap" => zipmap,
        _ => return None,
    })
}

/// What avoids string class labels, for the errors.
const STRING_LABELS_HELP: &str = "string class labels have no picograd tensor type: fit the \
    estimator with integer class labels (e.g. encode them with sklearn's LabelEncoder), or \
    convert with skl2onnx's options={id(model): {'zipmap': False}} where only the ZipMap \
    output carries them";

/// The integer class labels of a ZipMap node (`classlabels_int64s`), in column order; `None`
/// for other nodes or string labels.
pub fn zipmap_labels(node: &NodeProto) -> Option<Vec<i64>> {
    let ml = node.domain == "ai.onnx.ml";
    if !ml || node.op_type != "ZipMap" {
        return None;
    }
    node.attribute
        .iter()
        .find(|a| a.name == "classlabels_int64s")
        .map(|a| a.ints.clone())
}

fn binarizer(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let t = f64::from(n.float("threshold", 0.0));
    one(x.try_gt(t)?.cast(x.dtype()))
}

fn array_feature_extractor(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let idx = n.input(1)?.cast(DType::I64).try_reshape(&[-1])?;
    let mut shape = x.shape();
    let Some(last) = shape.len().checked_sub(1) else {
        return Err(bad(n.op(), "the input is a scalar"));
    };
    shape[last] = idx.numel();
    let mut at = vec![1isize; shape.len()];
    at[last] = -1;
    let idx = idx.try_reshape(&at)?.try_expand(&shape)?;
    one(x.try_gather(-1, &idx)?)
}

/// The input as f32 rows `[N, C]` (a vector is one row), as onnxruntime's ml kernels see it.
fn rows(n: &Node) -> Result<Tensor> {
    let x = n.input(0)?.cast(DType::F32);
    match x.shape().len() {
        1 => x.try_reshape(&[1, -1]),
        2 => Ok(x),
        r => Err(bad(
            n.op(),
            format!("input of rank {r}; expected [N, C] or [C]"),
        )),
    }
}

/// A float-list attribute that must be present.
fn floats(n: &Node, name: &str) -> Result<Vec<f32>> {
    n.floats(name)
        .ok_or_else(|| bad(n.op(), format!("attribute '{name}' is missing")))
}

/// `x @ coefficientsᵀ + intercepts` for `targets` rows of coefficients.
fn linear(n: &Node, x: &Tensor, coef: &[f32], intercepts: &[f32]) -> Result<Tensor> {
    let c = x.shape()[1];
    if c == 0 || coef.is_empty() || coef.len() % c != 0 {
        return Err(bad(
            n.op(),
            format!(
                "{} coefficients do not make rows of the input's {c} features",
                coef.len()
            ),
        ));
    }
    let e = coef.len() / c;
    let w = Tensor::try_from_slice(coef, &[e, c])?.try_transpose(0, 1)?;
    let y = x.try_matmul(&w)?;
    match intercepts.len() {
        0 => Ok(y),
        k if k == e => y.try_add(&Tensor::try_from_slice(intercepts, &[e])?),
        k => Err(bad(
            n.op(),
            format!("{k} intercepts for {e} coefficient rows"),
        )),
    }
}

/// The `post_transform` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Post {
    None,
    Logistic,
    Softmax,
    SoftmaxZero,
}

fn post_transform(n: &Node) -> Result<Post> {
    match n.string("post_transform", "NONE").as_str() {
        "NONE" => Ok(Post::None),
        "LOGISTIC" => Ok(Post::Logistic),
        "SOFTMAX" => Ok(Post::Softmax),
        "SOFTMAX_ZERO" => Ok(Post::SoftmaxZero),
        other => Err(bad(
            n.op(),
            format!("post_transform {other:?} is not supported (NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO are)"),
        )),
    }
}

/// Applies `post` to scores `[N, E]` row-wise.
fn apply(post: Post, s: &Tensor) -> Result<Tensor> {
    match post {
        Post::None => Ok(s.clone()),
        Post::Logistic => Ok(s.sigmoid()),
        Post::Softmax => s.try_softmax(-1),
        Post::SoftmaxZero => {
            // onnxruntime's SOFTMAX_ZERO: entries within 1e-7 of zero stay zero; a row of
            // zeros becomes 0.5 everywhere.
            let zero = s.abs().try_le(1e-7)?;
            let e = s.try_sub(&s.try_max(&[-1], true)?)?.exp();
            let e = zero.try_where(0.0, &e)?;
            let sum = e.try_sum(&[-1], true)?;
            let p = e.try_div(&sum)?;
            sum.try_eq(0.0)?.try_where(0.5, &p)
        }
    }
}

/// Integer labels picked by `index` (any integer tensor) from `labels`.
fn pick_labels(labels: &[i64], index: &Tensor) -> Result<Tensor> {
    let table = Tensor::try_from_slice(labels, &[labels.len()])?;
    table.try_gather(0, &index.cast(DType::I64))
}

fn linear_classifier(n: &Node) -> Result<Vec<Tensor>> {
    if n.has("classlabels_strings") {
        return Err(bad(n.op(), STRING_LABELS_HELP));
    }
    let x = rows(n)?;
    let scores = linear(
        n,
        &x,
        &floats(n, "coefficients")?,
        &floats(n, "intercepts")?,
    )?;
    let post = post_transform(n)?;
    let labels = n.ints("classlabels_ints");
    let e = scores.shape()[1];
    if e == 1 {
        // Binary: one score s per row; onnxruntime requires the two labels.
        let labels = match labels.as_deref() {
            Some(&[neg, pos]) => [neg, pos],
            _ => {
                return Err(bad(
                    n.op(),
                    "one coefficient row needs exactly two classlabels_ints",
                ))
            }
        };
        let positive = scores.try_gt(0.0)?;
        let s = match post {
            Post::Logistic => scores.sigmoid(),
            Post::None | Post::Softmax | Post::SoftmaxZero => scores.clone(),
        };
        let z = Tensor::try_cat(&[&s.try_mul(-1.0)?.try_add(1.0)?, &s], 1)?;
        let y = pick_labels(&labels, &positive.try_reshape(&[-1])?)?;
        return Ok(vec![y, z]);
    }
    let index = scores.try_argmax(Some(-1), false)?;
    let y = match labels {
        Some(l) if l.len() == e => pick_labels(&l, &index)?,
        Some(l) => {
            return Err(bad(
                n.op(),
                format!("{} classlabels_ints for {e} coefficient rows", l.len()),
            ))
        }
        None => index.cast(DType::I64),
    };
    Ok(vec![y, apply(post, &scores)?])
}

fn linear_regressor(n: &Node) -> Result<Vec<Tensor>> {
    let x = rows(n)?;
    let coef = floats(n, "coefficients")?;
    let intercepts = n.floats("intercepts").unwrap_or_default();
    let y = linear(n, &x, &coef, &intercepts)?;
    let targets = n.int("targets", 1);
    if usize::try_from(targets).ok() != Some(y.shape()[1]) {
        return Err(bad(
            n.op(),
            format!(
                "targets = {targets} but the coefficients make {} outputs",
                y.shape()[1]
            ),
        ));
    }
    match post_transform(n)? {
        Post::None => one(y),
        other => Err(bad(
            n.op(),
            format!("post_transform {other:?} on a regressor is not supported (NONE is)"),
        )),
    }
}

fn normalizer(n: &Node) -> Result<Vec<Tensor>> {
    let x = rows(n)?;
    // As onnxruntime: MAX divides by the row's (signed) largest value, L1 by the sum of
    // magnitudes, L2 by the Euclidean length; a row whose divisor is 0 is left as it is.
    let norm = match n.string("norm", "MAX").as_str() {
        "MAX" => x.try_max(&[-1], true)?,
        "L1" => x.abs().try_sum(&[-1], true)?,
        "L2" => x.try_mul(&x)?.try_sum(&[-1], true)?.sqrt(),
        other => return Err(bad(n.op(), format!("norm {other:?} (MAX, L1, L2)"))),
    };
    let y = x.try_div(&norm.try_eq(0.0)?.try_where(1.0, &norm)?)?;
    one(y.try_reshape(&shape_of(n.input(0)?))?)
}

fn scaler(n: &Node) -> Result<Vec<Tensor>> {
    let x = rows(n)?;
    let c = x.shape()[1];
    let per_feature = |name: &str, default: f32| -> Result<Tensor> {
        let v = n.floats(name).unwrap_or_else(|| vec![default]);
        if v.len() != 1 && v.len() != c {
            return Err(bad(
                n.op(),
                format!("'{name}' has {} values for {c} features", v.len()),
            ));
        }
        Tensor::try_from_slice(&v, &[v.len()])
    };
    let y = x
        .try_sub(&per_feature("offset", 0.0)?)?
        .try_mul(&per_feature("scale", 1.0)?)?;
    one(y.try_reshape(&shape_of(n.input(0)?))?)
}

/// `t`'s shape as reshape arguments.
fn shape_of(t: &Tensor) -> Vec<isize> {
    t.shape().iter().map(|&d| d as isize).collect()
}

fn zipmap(n: &Node) -> Result<Vec<Tensor>> {
    if n.has("classlabels_strings") {
        return Err(bad(n.op(), STRING_LABELS_HELP));
    }
    let labels = n
        .ints("classlabels_int64s")
        .ok_or_else(|| bad(n.op(), "no classlabels_int64s"))?;
    let x = rows(n)?;
    if x.shape()[1] != labels.len() {
        return Err(bad(
            n.op(),
            format!(
                "{} labels for {} probability columns",
                labels.len(),
                x.shape()[1]
            ),
        ));
    }
    one(x)
}
