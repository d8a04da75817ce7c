//! Control flow: If, Loop and Scan (opset ≥ 9) evaluate their subgraph attributes with the
//! enclosing scope visible; so does FlexAttention (`ai.onnx.preview`), whose `score_mod` and
//! `prob_mod` graphs rewrite the scores and the probabilities. Conditions and trip counts are read on the host, so a model using
//! them runs eagerly at those points; loop bodies are unrolled into the lazy graph.
//!
//! Invariant: a subgraph sees every value of the scope it is nested in, plus its own
//! initializers and inputs; its node order is found afresh (nodes run once all their inputs
//! exist), and a subgraph that cannot make progress is an error naming its graph.

use std::collections::HashMap;

use picograd_core::{DType, Error, Result, Tensor};

use super::model::Model;
use super::node::{bad, Node};
use super::proto::{GraphProto, NodeProto};
use super::values::{tensor_from_proto, to_f64s, to_i64s};

/// Is `op` a control-flow operator evaluated here?
pub fn is_control(op: &str) -> bool {
    matches!(op, "If" | "Loop" | "Scan")
}

/// Is `op` of operator set `domain` evaluated here (it runs subgraphs)?
pub fn runs_subgraphs(domain: &str, op: &str) -> bool {
    match domain {
        "" | "ai.onnx" => is_control(op),
        "ai.onnx.preview" => op == "FlexAttention",
        _ => false,
    }
}

/// The scope a node runs in: value name → tensor.
pub type Env<'a> = HashMap<&'a str, Tensor>;

/// Evaluates control-flow node `n` (inputs already gathered) in scope `env`.
pub fn eval<'a>(
    model: &Model,
    node: &'a NodeProto,
    n: &Node,
    env: &Env<'a>,
) -> Result<Vec<Tensor>> {
    let graph = |name: &str| -> Result<&'a GraphProto> {
        node.attribute
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.g.as_ref())
            .ok_or_else(|| bad(&node.op_type, format!("no '{name}' subgraph")))
    };
    match node.op_type.as_str() {
        "If" => {
            let cond = to_f64s(n.input(0)?)?;
            let branch = if cond.first().is_some_and(|&c| c != 0.0) {
                graph("then_branch")?
            } else {
                graph("else_branch")?
            };
            run_graph(model, branch, env, &[])
        }
        "Loop" => run_loop(model, graph("body")?, n, env),
        "FlexAttention" => flex_attention(model, node, n, env),
        _ => run_scan(model, graph("body")?, n, env),
    }
}

/// Runs `g` with `args` bound to its inputs, in a scope that extends `outer`.
pub fn run_graph<'a>(
    model: &Model,
    g: &'a GraphProto,
    outer: &Env<'a>,
    args: &[Tensor],
) -> Result<Vec<Tensor>> {
    let mut env = scope(g, outer, args)?;
    let mut todo: Vec<&NodeProto> = g.node.iter().collect();
    while !todo.is_empty() {
        let at = next_ready(g, &todo, &env)?;
        model.eval_node(todo.remove(at), &mut env)?;
    }
    let missing = |o: &str| bad("subgraph", format!("'{}' does not produce '{o}'", g.name));
    g.output
        .iter()
        .map(|o| {
            env.get(o.name.as_str())
                .cloned()
                .ok_or_else(|| missing(&o.name))
        })
        .collect()
}

/// `outer` plus the subgraph's initializers and its inputs bound to `args`.
fn scope<'a>(g: &'a GraphProto, outer: &Env<'a>, args: &[Tensor]) -> Result<Env<'a>> {
    if args.len() != g.input.len() {
        let (want, got) = (g.input.len(), args.len());
        let msg = format!("'{}' takes {want} inputs, {got} given", g.name);
        return Err(bad("subgraph", msg));
    }
    let mut env = outer.clone();
    for t in &g.initializer {
        env.insert(t.name.as_str(), tensor_from_proto(t, &g.name)?);
    }
    for (v, a) in g.input.iter().zip(args) {
        env.insert(v.name.as_str(), a.clone());
    }
    Ok(env)
}

/// The first node of `todo` whose inputs all exist in `env`.
fn next_ready(g: &GraphProto, todo: &[&NodeProto], env: &Env<'_>) -> Result<usize> {
    let known = |i: &String| i.is_empty() || env.contains_key(i.as_str());
    if let Some(at) = todo.iter().position(|nd| nd.input.iter().all(known)) {
        return Ok(at);
    }
    let missing = todo
        .iter()
        .flat_map(|nd| nd.input.iter())
        .find(|i| !known(i))
        .cloned()
        .unwrap_or_default();
    let msg = format!("'{}': no value '{missing}' is produced", g.name);
    Err(bad("subgraph", msg))
}

/// Most iterations a Loop may run (its trip count and condition are data).
const MAX_TRIPS: i64 = 1 << 16;

fn run_loop<'a>(
    model: &Model,
    body: &'a GraphProto,
    n: &Node,
    env: &Env<'a>,
) -> Result<Vec<Tensor>> {
    let trips = match n.opt(0) {
        Some(m) => to_i64s(m)?.first().copied().unwrap_or(0),
        None => MAX_TRIPS,
    };
    let mut cond = match n.opt(1) {
        Some(c) => c.clone(),
        None => Tensor::try_from_slice(&[true], &[])?,
    };
    let mut carried: Vec<Tensor> = n
        .inputs
        .iter()
        .skip(2)
        .map(|t| {
            t.clone()
                .ok_or_else(|| bad("Loop", "missing loop-carried value"))
        })
        .collect::<Result<_>>()?;
    let mut scans: Vec<Vec<Tensor>> = Vec::new();
    let mut i = 0;
    while i < trips.min(MAX_TRIPS) && to_f64s(&cond)?.first().is_some_and(|&c| c != 0.0) {
        let mut args = vec![Tensor::try_from_slice(&[i], &[])?, cond.clone()];
        args.extend(carried.iter().cloned());
        let outs = run_graph(model, body, env, &args)?;
        let k = carried.len();
        if outs.len() < 1 + k {
            return Err(bad("Loop", "the body returns fewer values than it carries"));
        }
        cond = outs[0].clone();
        carried = outs[1..=k].to_vec();
        scans.resize(outs.len() - 1 - k, Vec::new());
        for (s, t) in scans.iter_mut().zip(&outs[1 + k..]) {
            s.push(t.clone());
        }
        i += 1;
    }
    for s in &scans {
        carried.push(stack(s, 0)?);
    }
    Ok(carried)
}

fn stack(ts: &[Tensor], axis: isize) -> Result<Tensor> {
    let refs: Vec<&Tensor> = ts.iter().collect();
    Tensor::try_stack(&refs, axis)
}

/// Scan's per-input (or per-output) attribute list, defaulting to `default`.
fn per_item(n: &Node, name: &str, count: usize, default: i64) -> Vec<i64> {
    n.ints(name).unwrap_or_else(|| vec![default; count])
}

fn run_scan<'a>(
    model: &Model,
    body: &'a GraphProto,
    n: &Node,
    env: &Env<'a>,
) -> Result<Vec<Tensor>> {
    if n.opset < 9 {
        let msg = "Scan: opset 8 (batched) Scan is not supported";
        return Err(Error::Unsupported(msg.into()));
    }
    let m = n.int("num_scan_inputs", 0).max(0) as usize;
    let all: Vec<Tensor> = n.inputs.iter().flatten().cloned().collect();
    if m > all.len() {
        return Err(bad("Scan", format!("{m} scan inputs of {}", all.len())));
    }
    let states_n = all.len() - m;
    let seqs = scan_first(n, &all[states_n..])?;
    let dirs = per_item(n, "scan_input_directions", m, 0);
    if seqs.iter().any(|s| s.ndim() == 0) {
        return Err(bad(
            "Scan",
            "a scan input is a scalar: it has no axis to scan",
        ));
    }
    let len = seqs.first().map_or(0, |s| s.shape()[0]);
    let mut states: Vec<Tensor> = all[..states_n].to_vec();
    let mut outs: Vec<Vec<Tensor>> = Vec::new();
    for step in 0..len {
        let mut args = states.clone();
        for (s, &d) in seqs.iter().zip(&dirs) {
            let at = if d != 0 { len - 1 - step } else { step };
            args.push(
                s.try_shrink(&first_axis(&s.shape(), at))?
                    .try_squeeze(Some(0))?,
            );
        }
        let res = run_graph(model, body, env, &args)?;
        if res.len() < states_n {
            return Err(bad("Scan", "the body returns fewer values than it carries"));
        }
        states = res[..states_n].to_vec();
        outs.resize(res.len() - states_n, Vec::new());
        for (o, t) in outs.iter_mut().zip(&res[states_n..]) {
            o.push(t.clone());
        }
    }
    states.extend(scan_outputs(n, outs)?);
    Ok(states)
}

/// Each scan input with its scanned axis (`scan_input_axes`) moved first, the rest in order.
fn scan_first(n: &Node, seqs: &[Tensor]) -> Result<Vec<Tensor>> {
    let axes = per_item(n, "scan_input_axes", seqs.len(), 0);
    seqs.iter()
        .zip(&axes)
        .map(|(t, &a)| {
            let a = norm(a, t.ndim()) as usize;
            let order: Vec<usize> = [a]
                .into_iter()
                .chain((0..t.ndim()).filter(|&i| i != a))
                .collect();
            t.try_permute(&order)
        })
        .collect()
}

/// The per-step outputs stacked along `scan_output_axes`, reversed where
/// `scan_output_directions` says so.
fn scan_outputs(n: &Node, outs: Vec<Vec<Tensor>>) -> Result<Vec<Tensor>> {
    let k = outs.len();
    let axes = per_item(n, "scan_output_axes", k, 0);
    let dirs = per_item(n, "scan_output_directions", k, 0);
    let mut stacked = Vec::with_capacity(k);
    for ((mut o, &a), &d) in outs.into_iter().zip(&axes).zip(&dirs) {
        if d != 0 {
            o.reverse();
        }
        let rank = o.first().map_or(1, |t| t.ndim() + 1);
        stacked.push(stack(&o, norm(a, rank))?);
    }
    Ok(stacked)
}

fn norm(a: i64, rank: usize) -> isize {
    if a < 0 {
        (a + rank as i64) as isize
    } else {
        a as isize
    }
}

/// Keeps index `at` of axis 0.
fn first_axis(shape: &[usize], at: usize) -> Vec<(usize, usize)> {
    let mut keep: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
    keep[0] = (at, at + 1);
    keep
}

/// `softmax(mod(q·kᵀ·scale))·v` with the optional score and probability graphs, computed in f32
/// for half-precision inputs (or `softmax_precision`).
fn flex_attention<'a>(
    model: &Model,
    node: &'a NodeProto,
    n: &Node,
    env: &Env<'a>,
) -> Result<Vec<Tensor>> {
    let (q, k, v) = (n.input(0)?, n.input(1)?, n.input(2)?);
    if q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4 {
        return Err(bad("FlexAttention", "Q, K and V must be 4-D"));
    }
    let (hq, hk) = (q.shape()[1], k.shape()[1]);
    if hk == 0 || hq % hk != 0 {
        return Err(bad(
            "FlexAttention",
            format!("{hq} query heads, {hk} key heads"),
        ));
    }
    let k = super::ops::repeat_heads(k, hq / hk)?;
    let v = super::ops::repeat_heads(v, hq / hk)?;
    let scale = match n.has("scale") {
        true => n.float("scale", 1.0),
        false => 1.0 / (q.shape()[3] as f32).sqrt(),
    };
    let s = f64::from(scale.sqrt());
    let scores = q
        .try_mul(s)?
        .try_matmul(&k.try_mul(s)?.try_transpose(-1, -2)?)?;
    let compute = match n.int("softmax_precision", 0) {
        0 if matches!(q.dtype(), DType::F16 | DType::BF16) => DType::F32,
        0 => q.dtype(),
        code => super::values::dtype_of(code as i32)
            .ok_or_else(|| bad("FlexAttention", format!("softmax_precision {code}")))?,
    };
    let apply = |name: &str, t: Tensor| -> Result<Tensor> {
        match node
            .attribute
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.g.as_ref())
        {
            Some(g) => run_graph(model, g, env, &[t])?
                .into_iter()
                .next()
                .map(|t| t.cast(compute))
                .ok_or_else(|| bad("FlexAttention", format!("{name} has no output"))),
            None => Ok(t),
        }
    };
    let scores = apply("score_mod", scores.cast(compute))?;
    let probs = apply("prob_mod", scores.try_softmax(-1)?)?;
    Ok(vec![probs.try_matmul(&v.cast(compute))?.cast(v.dtype())])
}
