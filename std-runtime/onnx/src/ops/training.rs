//! The `ai.onnx.preview.training` optimizers: Adagrad, Adam and Momentum (standard and
//! Nesterov), each updating n tensors at once from inputs `R, T, X1..Xn, G1..Gn, (state)..`.
//! The step count `T` is read on the host (it picks the bias correction); everything else is
//! lazy. Outputs are the new X's, then each new state group in input order.

use picograd_core::{Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::to_f64s;
use super::Handler;

/// The handler for training-domain op `op`.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Adagrad" => adagrad,
        "Adam" => adam,
        "Momentum" => momentum,
        _ => return None,
    })
}

/// `(R, T, groups)`: the rate, the step, and `groups` lists of n tensors (X, G, states...).
fn unpack(n: &Node, groups: usize) -> Result<(Tensor, f64, Vec<Vec<Tensor>>)> {
    let rest: Vec<Tensor> = n.inputs.iter().skip(2).flatten().cloned().collect();
    if rest.is_empty() || rest.len() % groups != 0 {
        return Err(bad(
            n.op(),
            format!("{} tensors for {groups} groups", rest.len()),
        ));
    }
    let k = rest.len() / groups;
    let t = to_f64s(n.input(1)?)?.first().copied().unwrap_or(0.0);
    let split = rest.chunks(k).map(<[Tensor]>::to_vec).collect();
    Ok((n.input(0)?.clone(), t, split))
}

fn attr(n: &Node, name: &str, default: f32) -> f64 {
    f64::from(n.float(name, default))
}

/// `norm · x + g`.
fn regularized(n: &Node, x: &Tensor, g: &Tensor) -> Result<Tensor> {
    x.try_mul(attr(n, "norm_coefficient", 0.0))?.try_add(g)
}

fn adagrad(n: &Node) -> Result<Vec<Tensor>> {
    let (r, t, v) = unpack(n, 3)?;
    let rate = r.try_div(1.0 + t * attr(n, "decay_factor", 0.0))?;
    let eps = attr(n, "epsilon", 0.0);
    let (mut xs, mut hs) = (Vec::new(), Vec::new());
    for ((x, g), h) in v[0].iter().zip(&v[1]).zip(&v[2]) {
        let gr = regularized(n, x, g)?;
        let h_new = h.try_add(gr.try_mul(&gr)?)?;
        let step = rate.try_mul(&gr)?.try_div(h_new.sqrt().try_add(eps)?)?;
        xs.push(x.try_sub(&step)?.cast(x.dtype()));
        hs.push(h_new.cast(h.dtype()));
    }
    xs.extend(hs);
    Ok(xs)
}

fn adam(n: &Node) -> Result<Vec<Tensor>> {
    let (r, t, v) = unpack(n, 4)?;
    let (alpha, beta) = (attr(n, "alpha", 0.9), attr(n, "beta", 0.999));
    let eps = attr(n, "epsilon", 1e-6);
    let post = attr(n, "norm_coefficient_post", 0.0);
    let rate = if t > 0.0 {
        r.try_mul((1.0 - beta.powf(t)).sqrt() / (1.0 - alpha.powf(t)))?
    } else {
        r
    };
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for (((x, g), m), h) in v[0].iter().zip(&v[1]).zip(&v[2]).zip(&v[3]) {
        let gr = regularized(n, x, g)?;
        let m_new = m.try_mul(alpha)?.try_add(gr.try_mul(1.0 - alpha)?)?;
        let h_new = h
            .try_mul(beta)?
            .try_add(gr.try_mul(&gr)?.try_mul(1.0 - beta)?)?;
        let step = rate.try_mul(m_new.try_div(h_new.sqrt().try_add(eps)?)?)?;
        xs.push(x.try_sub(&step)?.try_mul(1.0 - post)?.cast(x.dtype()));
        vs.push(m_new);
        hs.push(h_new);
    }
    xs.extend(vs);
    xs.extend(hs);
    Ok(xs)
}

fn momentum(n: &Node) -> Result<Vec<Tensor>> {
    let (r, t, v) = unpack(n, 3)?;
    let alpha = attr(n, "alpha", 0.0);
    let beta = if t > 0.0 { attr(n, "beta", 0.0) } else { 1.0 };
    let nesterov = n.string("mode", "standard") == "nesterov";
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for ((x, g), m) in v[0].iter().zip(&v[1]).zip(&v[2]) {
        let gr = regularized(n, x, g)?;
        let m_new = m.try_mul(alpha)?.try_add(gr.try_mul(beta)?)?;
        let dir = if nesterov {
            gr.try_add(m_new.try_mul(alpha)?)?
        } else {
            m_new.clone()
        };
        xs.push(x.try_sub(r.try_mul(&dir)?)?);
        vs.push(m_new);
    }
    xs.extend(vs);
    Ok(xs)
}
