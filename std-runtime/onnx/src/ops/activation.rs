//! Activation functions and the softmax family: Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Gelu,
//! HardSwish, HardSigmoid, Elu, Selu, Celu, Softplus, Softsign, Mish, Swish, ThresholdedRelu,
//! Shrink, Softmax, LogSoftmax, Hardmax (opset < 13: over the flattened trailing axes). Where
//! picograd's Tensor API has the function (softmax family, elu, selu, celu, softplus, mish,
//! hard sigmoid/swish, leaky relu) the handler calls it; the rest are composed here.

use picograd_core::{Result, Tensor};

use super::super::node::Node;
use super::{math, norm_axis, one, Handler};

/// The handler for `op` if it is an activation.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Relu" => |n| one(n.input(0)?.relu()),
        "Sigmoid" => |n| one(n.input(0)?.sigmoid()),
        "Tanh" => |n| one(n.input(0)?.tanh()),
        "LeakyRelu" => leaky_relu,
        "PRelu" => prelu,
        "Gelu" => gelu,
        "HardSigmoid" => |n| {
            let (a, b) = (n.float("alpha", 0.2), n.float("beta", 0.5));
            one(n.input(0)?.hardsigmoid(a.into(), b.into()))
        },
        "HardSwish" => |n| one(n.input(0)?.hardswish()),
        "Elu" => |n| one(n.input(0)?.elu(n.float("alpha", 1.0).into())),
        "Celu" => |n| one(n.input(0)?.celu(n.float("alpha", 1.0).into())),
        "Selu" => selu,
        "Softplus" => |n| one(n.input(0)?.softplus(1.0)),
        "Softsign" => |n| {
            let x = n.input(0)?;
            one(x.try_div(x.abs().try_add(1.0)?)?)
        },
        "Mish" => |n| one(n.input(0)?.mish()),
        "Swish" => |n| {
            let x = n.input(0)?;
            one(x.try_mul(x.try_mul(n.float("alpha", 1.0) as f64)?.sigmoid())?)
        },
        "ThresholdedRelu" => |n| {
            let x = n.input(0)?;
            one(x.try_gt(n.float("alpha", 1.0) as f64)?.try_where(x, 0.0)?)
        },
        "Shrink" => shrink,
        "SwiGLU" => |n| {
            let (a, b) = (n.input(0)?, n.input(1)?);
            let gate = a.try_mul(f64::from(n.float("alpha", 1.0)))?.sigmoid();
            one(a.try_mul(&gate)?.try_mul(b)?)
        },
        "Softmax" => |n| softmax_like(n, Tensor::try_softmax),
        "LogSoftmax" => |n| softmax_like(n, Tensor::try_log_softmax),
        "Hardmax" => |n| softmax_like(n, hardmax),
        _ => return None,
    })
}

fn leaky_relu(n: &Node) -> Result<Vec<Tensor>> {
    one(n.input(0)?.leaky_relu(n.float("alpha", 0.01).into()))
}

fn prelu(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let slope = n.input(1)?;
    one(x.try_lt(0.0)?.try_where(x.try_mul(slope)?, x)?)
}

fn gelu(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    if n.string("approximate", "none") == "tanh" {
        return one(x.gelu());
    }
    let e = math::erf(&x.try_mul(std::f64::consts::FRAC_1_SQRT_2)?)?;
    one(x.try_mul(e.try_add(1.0)?)?.try_mul(0.5)?)
}

fn selu(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    if !n.has("alpha") && !n.has("gamma") {
        return one(x.selu());
    }
    let a = n.float("alpha", 1.673_263_2) as f64;
    let g = n.float("gamma", 1.050_701) as f64;
    one(x.elu(a).try_mul(g)?)
}

fn shrink(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let l = n.float("lambd", 0.5) as f64;
    let b = n.float("bias", 0.0) as f64;
    let lo = x.try_add(b)?;
    let hi = x.try_sub(b)?;
    let r = x
        .try_lt(-l)?
        .try_where(&lo, x.try_gt(l)?.try_where(&hi, 0.0)?)?;
    one(r.cast(x.dtype()))
}

/// Applies `f` over one axis (opset ≥ 13) or over the axes from `axis` on, flattened (older).
fn softmax_like(n: &Node, f: fn(&Tensor, isize) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    // The rank, not the sizes: a symbolic axis stays symbolic (opset >= 13).
    let rank = x.ndim();
    if n.opset >= 13 {
        let a = norm_axis(n.op(), n.int("axis", -1), rank)?;
        return one(f(x, a as isize)?);
    }
    let shape = x.shape();
    let a = norm_axis(n.op(), n.int("axis", 1), rank)?;
    let outer: usize = shape[..a].iter().product();
    let flat = x.try_reshape(&[outer as isize, -1])?;
    let s: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    one(f(&flat, 1)?.try_reshape(&s)?)
}

fn hardmax(x: &Tensor, axis: isize) -> Result<Tensor> {
    let idx = super::reduce::arg_extreme(x, axis, true, false)?;
    let Some(&n) = x.shape().get(axis as usize) else {
        return Err(super::super::node::bad(
            "Hardmax",
            "a scalar has no axis to take the max of",
        ));
    };
    let ar = Tensor::try_arange(0.0, n as f64, 1.0, picograd_core::DType::I64)?;
    let mut shp = vec![1usize; x.ndim()];
    shp[axis as usize] = n;
    let ar = ar.try_reshape(&shp.iter().map(|&d| d as isize).collect::<Vec<_>>())?;
    one_hot_eq(&idx, &ar, x)
}

fn one_hot_eq(idx: &Tensor, ar: &Tensor, like: &Tensor) -> Result<Tensor> {
    Ok(idx.try_eq(ar)?.cast(like.dtype()))
}
