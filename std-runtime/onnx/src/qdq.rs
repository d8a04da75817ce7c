//! QDQ recognition: rewrites the `DequantizeLinear → op → QuantizeLinear` groups that
//! `onnxruntime.quantization.quantize_static` writes into the quantized operators of
//! `ops/qlinear.rs`, so they run as integer kernels rather than dequantize → float →
//! quantize, as onnxruntime's own QDQ fusion does.
//!
//! Recognised, when every float operand comes from a DequantizeLinear and the op's only
//! consumer is one QuantizeLinear: Conv → QLinearConv, MatMul → QLinearMatMul, Gemm → QGemm,
//! Add → QLinearAdd, Mul → QLinearMul, AveragePool (unpadded) → QLinearAveragePool,
//! GlobalAveragePool → QLinearGlobalAveragePool; and MaxPool, Relu, Reshape, Flatten, Transpose,
//! Squeeze, Unsqueeze on the integers directly when the input's and the output's (scale, zero
//! point) are the same initializer values. Anything else keeps the float path.
//!
//! Invariant: a rewrite keeps every value name the rest of the graph reads (the fused node
//! takes the QuantizeLinear's output name); DequantizeLinear nodes left with no reader are
//! dropped. The rewrite never changes a value that is not a recognised group's output.

use std::collections::{HashMap, HashSet};

use picograd_core::{DType, Tensor};

use super::proto::{AttributeProto, GraphProto, NodeProto};
use super::values::to_f64s;

/// The QDQ groups of `graph` lowered to quantized operators; `weights` are its initializers.
pub fn fuse(graph: &mut GraphProto, weights: &HashMap<String, Tensor>) {
    let g = Groups::new(graph, weights);
    let mut replaced: HashMap<usize, NodeProto> = HashMap::new();
    let mut dropped: HashSet<usize> = HashSet::new();
    for (i, n) in graph.node.iter().enumerate() {
        if let Some((q, fused)) = g.group(n) {
            if dropped.contains(&q) || replaced.contains_key(&q) {
                continue;
            }
            replaced.insert(i, fused);
            dropped.insert(q);
        }
    }
    if replaced.is_empty() {
        return;
    }
    let mut nodes: Vec<NodeProto> = Vec::with_capacity(graph.node.len());
    for (i, n) in graph.node.drain(..).enumerate() {
        if dropped.contains(&i) {
            continue;
        }
        nodes.push(replaced.remove(&i).unwrap_or(n));
    }
    graph.node = drop_dead_dequantize(nodes, graph);
}

/// `nodes` without the DequantizeLinear nodes nobody reads any more.
fn drop_dead_dequantize(nodes: Vec<NodeProto>, graph: &GraphProto) -> Vec<NodeProto> {
    let mut read: HashSet<String> = graph.output.iter().map(|o| o.name.clone()).collect();
    for n in &nodes {
        read.extend(n.input.iter().cloned());
        for a in &n.attribute {
            if a.g.is_some() {
                // A subgraph may read anything: keep every value alive.
                return nodes;
            }
        }
    }
    nodes
        .into_iter()
        .filter(|n| !(is_op(n, "DequantizeLinear") && n.output.iter().all(|o| !read.contains(o))))
        .collect()
}

fn is_op(n: &NodeProto, op: &str) -> bool {
    n.op_type == op && matches!(n.domain.as_str(), "" | "ai.onnx")
}

/// The graph's producers and readers, for matching groups.
struct Groups<'a> {
    nodes: &'a [NodeProto],
    producer: HashMap<&'a str, usize>,
    readers: HashMap<&'a str, Vec<usize>>,
    outputs: HashSet<&'a str>,
    weights: &'a HashMap<String, Tensor>,
}

/// A DequantizeLinear's operands: (quantized value, scale, zero point, axis).
struct Dq<'a> {
    q: &'a str,
    scale: &'a str,
    zp: &'a str,
    axis: i64,
}

impl<'a> Groups<'a> {
    fn new(graph: &'a GraphProto, weights: &'a HashMap<String, Tensor>) -> Groups<'a> {
        let mut producer = HashMap::new();
        let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, n) in graph.node.iter().enumerate() {
            for o in &n.output {
                producer.insert(o.as_str(), i);
            }
            for s in &n.input {
                readers.entry(s.as_str()).or_default().push(i);
            }
        }
        Groups {
            nodes: &graph.node,
            producer,
            readers,
            outputs: graph.output.iter().map(|o| o.name.as_str()).collect(),
            weights,
        }
    }

    /// The DequantizeLinear producing `name`, with a zero point.
    fn dq(&self, name: &str) -> Option<Dq<'a>> {
        let n = &self.nodes[*self.producer.get(name)?];
        if !is_op(n, "DequantizeLinear") || n.input.len() < 3 || n.input[2].is_empty() {
            return None;
        }
        Some(Dq {
            q: &n.input[0],
            scale: &n.input[1],
            zp: &n.input[2],
            axis: attr_int(n, "axis").unwrap_or(1),
        })
    }

    /// The one QuantizeLinear reading `name` (index and node), if that is its only reader.
    fn only_q(&self, name: &str) -> Option<(usize, &'a NodeProto)> {
        if self.outputs.contains(name) {
            return None;
        }
        match self.readers.get(name)?.as_slice() {
            [q] if is_op(&self.nodes[*q], "QuantizeLinear")
                && self.nodes[*q].input.len() >= 3
                && !self.nodes[*q].input[2].is_empty() =>
            {
                Some((*q, &self.nodes[*q]))
            }
            _ => None,
        }
    }

    /// The group rooted at float op `n`: the QuantizeLinear it ends in and the fused node.
    fn group(&self, n: &'a NodeProto) -> Option<(usize, NodeProto)> {
        if !matches!(n.domain.as_str(), "" | "ai.onnx") {
            return None;
        }
        let out = n.output.first()?;
        if n.output.iter().skip(1).any(|o| !o.is_empty()) {
            return None;
        }
        let (qi, q) = self.only_q(out)?;
        let (ys, yz) = (q.input[1].as_str(), q.input[2].as_str());
        if self.len(ys)? != 1 {
            return None;
        }
        let y = q.output.first()?.clone();
        let fused = match n.op_type.as_str() {
            "Conv" => self.conv(n, ys, yz)?,
            "MatMul" => self.matmul(n, ys, yz)?,
            "Gemm" => self.gemm(n, ys, yz)?,
            "Add" => self.binary(n, "QLinearAdd", ys, yz)?,
            "Mul" => self.binary(n, "QLinearMul", ys, yz)?,
            "AveragePool" if unpadded(n) => self.pool(n, "QLinearAveragePool", ys, yz)?,
            "GlobalAveragePool" => self.pool(n, "QLinearGlobalAveragePool", ys, yz)?,
            "MaxPool" | "Reshape" | "Flatten" | "Transpose" | "Squeeze" | "Unsqueeze" => {
                self.passthrough(n, ys, yz)?
            }
            "Relu" => self.relu(n, ys, yz)?,
            _ => return None,
        };
        Some((
            qi,
            NodeProto {
                output: vec![y],
                ..fused
            },
        ))
    }

    fn conv(&self, n: &NodeProto, ys: &str, yz: &str) -> Option<NodeProto> {
        let (x, w) = (self.dq(n.input.first()?)?, self.dq(n.input.get(1)?)?);
        if self.len(x.scale)? != 1 || (self.len(w.scale)? > 1 && w.axis != 0) {
            return None;
        }
        let mut ins = vec![x.q, x.scale, x.zp, w.q, w.scale, w.zp, ys, yz];
        if let Some(b) = n.input.get(2).filter(|b| !b.is_empty()) {
            ins.push(self.bias(b)?);
        }
        Some(node("", "QLinearConv", &ins, n.attribute.clone()))
    }

    /// The int32 values under a bias's DequantizeLinear (its scale is x_scale·w_scale by the
    /// quantizer's construction, which onnxruntime's fusion assumes too).
    fn bias(&self, b: &str) -> Option<&'a str> {
        let n = &self.nodes[*self.producer.get(b)?];
        if !is_op(n, "DequantizeLinear") || self.weights.get(&n.input[0])?.dtype() != DType::I32 {
            return None;
        }
        Some(&n.input[0])
    }

    fn matmul(&self, n: &NodeProto, ys: &str, yz: &str) -> Option<NodeProto> {
        let (a, b) = (self.dq(n.input.first()?)?, self.dq(n.input.get(1)?)?);
        let b_rank = self.weights.get(b.q).map(|t| t.ndim() as i64);
        let per_col = self.len(b.scale)? > 1;
        if self.len(a.scale)? != 1 || (per_col && Some(b.axis + 1) != b_rank && b.axis != -1) {
            return None;
        }
        let ins = [a.q, a.scale, a.zp, b.q, b.scale, b.zp, ys, yz];
        Some(node("", "QLinearMatMul", &ins, Vec::new()))
    }

    fn gemm(&self, n: &NodeProto, ys: &str, yz: &str) -> Option<NodeProto> {
        let (a, b) = (self.dq(n.input.first()?)?, self.dq(n.input.get(1)?)?);
        let trans_b = attr_int(n, "transB").unwrap_or(0) != 0;
        let out_axis = if trans_b { 0 } else { 1 };
        let beta = n
            .attribute
            .iter()
            .find(|a| a.name == "beta")
            .map_or(1.0, |a| a.f);
        if self.len(a.scale)? != 1 || beta != 1.0 {
            return None;
        }
        if self.len(b.scale)? > 1 && b.axis != out_axis {
            return None;
        }
        let c = match n.input.get(2).filter(|c| !c.is_empty()) {
            Some(c) => self.bias(c)?,
            None => "",
        };
        let ins = [a.q, a.scale, a.zp, b.q, b.scale, b.zp, c, ys, yz];
        let keep = ["transA", "transB", "alpha"];
        let attrs = n
            .attribute
            .iter()
            .filter(|a| keep.contains(&a.name.as_str()))
            .cloned();
        Some(node("com.microsoft", "QGemm", &ins, attrs.collect()))
    }

    fn binary(&self, n: &NodeProto, op: &str, ys: &str, yz: &str) -> Option<NodeProto> {
        let (a, b) = (self.dq(n.input.first()?)?, self.dq(n.input.get(1)?)?);
        if self.len(a.scale)? != 1 || self.len(b.scale)? != 1 {
            return None;
        }
        let ins = [a.q, a.scale, a.zp, b.q, b.scale, b.zp, ys, yz];
        Some(node("com.microsoft", op, &ins, Vec::new()))
    }

    fn pool(&self, n: &NodeProto, op: &str, ys: &str, yz: &str) -> Option<NodeProto> {
        let x = self.dq(n.input.first()?)?;
        if self.len(x.scale)? != 1 {
            return None;
        }
        let ins = [x.q, x.scale, x.zp, ys, yz];
        Some(node("com.microsoft", op, &ins, n.attribute.clone()))
    }

    /// An op that commutes with an affine map of positive scale, on the integers, when the
    /// input and output share (scale, zero point).
    fn passthrough(&self, n: &NodeProto, ys: &str, yz: &str) -> Option<NodeProto> {
        let x = self.dq(n.input.first()?)?;
        if !self.same(x.scale, ys)? || !self.same(x.zp, yz)? {
            return None;
        }
        let mut m = n.clone();
        m.input[0] = x.q.to_string();
        Some(m)
    }

    /// ReLU on the integers is `max(q, zero point)` when input and output share parameters.
    fn relu(&self, n: &NodeProto, ys: &str, yz: &str) -> Option<NodeProto> {
        let x = self.dq(n.input.first()?)?;
        if !self.same(x.scale, ys)? || !self.same(x.zp, yz)? {
            return None;
        }
        Some(node("", "Max", &[x.q, x.zp], Vec::new()))
    }

    /// The element count of initializer `name`.
    fn len(&self, name: &str) -> Option<usize> {
        self.weights.get(name).map(Tensor::numel)
    }

    /// Are initializers `a` and `b` the same dtype, shape and values?
    fn same(&self, a: &str, b: &str) -> Option<bool> {
        let (ta, tb) = (self.weights.get(a)?, self.weights.get(b)?);
        if ta.dtype() != tb.dtype() || ta.shape() != tb.shape() {
            return Some(false);
        }
        Some(to_f64s(ta).ok()? == to_f64s(tb).ok()?)
    }
}

/// An AveragePool without padding or ceil mode (the integer pool's domain).
fn unpadded(n: &NodeProto) -> bool {
    let pads = n.attribute.iter().find(|a| a.name == "pads");
    let auto = n.attribute.iter().find(|a| a.name == "auto_pad");
    pads.is_none_or(|p| p.ints.iter().all(|&v| v == 0))
        && attr_int(n, "ceil_mode").unwrap_or(0) == 0
        && auto.is_none_or(|a| matches!(a.s.as_slice(), b"NOTSET" | b"VALID"))
}

fn attr_int(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute.iter().find(|a| a.name == name).map(|a| a.i)
}

fn node(domain: &str, op: &str, inputs: &[&str], attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        op_type: op.to_string(),
        domain: domain.to_string(),
        attribute,
        ..NodeProto::default()
    }
}
