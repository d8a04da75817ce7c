//! `--quantize int8`: post-training quantization of a float ONNX graph with calibration inputs.
//! It lives here, on the ONNX graph, because that is where an fp32 model is still visible as
//! layers (Conv, BatchNormalization, Relu, Gemm, pools); the numbers come from the core's
//! [`picograd_core::quant`] (observers, scales, folding), and the result is the same quantized
//! operators (`QLinearConv`, `com.microsoft.QGemm`, `QuantizeLinear`, `DequantizeLinear`) that
//! the QOperator import runs on integer kernels (`ops/qlinear.rs`), so the importer owns the
//! graph and the core owns the math.
//!
//! Rewritten: Conv [→ BatchNormalization] [→ Relu | Clip(0, 6)] → `QLinearConv` (BatchNorm
//! folded into the weights, the activation into the output range); Gemm (alpha = beta = 1,
//! no transA, 2-D weight initializer) [→ Relu] → `QGemm`; MaxPool (order-preserving),
//! Flatten and Reshape whose input is already int8 run on the int8 codes. A float value an int8 op needs is
//! quantized once (`QuantizeLinear`); an int8 value a float op or a graph output needs is
//! dequantized once (`DequantizeLinear`). Everything else keeps the float path.
//!
//! Invariant: the rewritten graph keeps the float graph's input and output names and types;
//! each int8 value has one (scale, zero point), from the calibration range of the float value
//! it replaces.

use std::collections::{HashMap, HashSet};

use picograd_core::quant::{
    fold_batchnorm, quantize_bias, quantize_weights_per_channel, Activation, Observer, QParams,
};
use picograd_core::{Error, Result, Tensor};

use super::model::Model;
use super::proto::{
    attr_type, AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    ValueInfoProto,
};

/// How activation ranges are taken from the calibration inputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Calibrator {
    /// Smallest and largest value seen.
    MinMax,
    /// The given upper percentile (e.g. 99.99) and its mirror.
    Percentile(f32),
}

/// What [`quantize_int8`] did, for the CLI to print.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuantReport {
    /// Convolutions rewritten to `QLinearConv`.
    pub convs: usize,
    /// Gemms rewritten to `QGemm`.
    pub gemms: usize,
    /// BatchNormalizations folded into a conv.
    pub batchnorms: usize,
    /// Relu / Clip(0, 6) folded into an output range.
    pub activations: usize,
}

/// `proto` with its Conv and Gemm layers as int8 operators, activation scales calibrated by
/// running the float model on each of `samples` (one tensor per model input, in order).
pub fn quantize_int8(
    proto: &ModelProto,
    samples: &[Vec<Tensor>],
    how: Calibrator,
    what: &str,
) -> Result<(ModelProto, QuantReport)> {
    let float = Model::from_proto(proto.clone(), what)?;
    let graph = proto.graph.clone().ok_or_else(|| bad(what, "no graph"))?;
    let groups = find_groups(&graph, float.weights());
    let ranges = calibrate(proto, &groups, samples, how, what)?;
    let mut rw = Rewriter::new(&graph, float.weights(), ranges, what);
    for i in 0..graph.node.len() {
        rw.step(i, &groups)?;
    }
    let mut out = proto.clone();
    let mut g = rw.finish(&graph);
    g.initializer.retain(|t| rw.still_read(&t.name));
    if !out.opset_import.iter().any(|o| o.domain == "com.microsoft") {
        out.opset_import.push(OperatorSetIdProto {
            domain: "com.microsoft".into(),
            version: 1,
        });
    }
    out.graph = Some(g);
    Ok((out, rw.report))
}

fn bad(what: &str, detail: impl Into<String>) -> Error {
    Error::Format {
        file: what.to_string(),
        offset: 0,
        detail: format!("quantize int8: {}", detail.into()),
    }
}

/// A quantizable layer: the Conv or Gemm at `head`, the nodes folded into it, and the value
/// name of the group's output.
#[derive(Clone, Debug)]
struct Group {
    head: usize,
    bn: Option<usize>,
    act: Activation,
    act_node: Option<usize>,
    out: String,
}

/// Quantizable groups by head node index.
fn find_groups(g: &GraphProto, w: &HashMap<String, Tensor>) -> HashMap<usize, Group> {
    let readers = readers(g);
    let sole = |name: &str| -> Option<usize> {
        match readers.get(name).map(Vec::as_slice) {
            Some([r]) if !g.output.iter().any(|o| o.name == name) => Some(*r),
            _ => None,
        }
    };
    let mut groups = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        if !(is_conv(n, w) || is_gemm(n, w)) {
            continue;
        }
        let mut grp = Group {
            head: i,
            bn: None,
            act: Activation::None,
            act_node: None,
            out: n.output[0].clone(),
        };
        if let Some(b) = sole(&grp.out).filter(|&b| n.op_type == "Conv" && is_bn(&g.node[b], w)) {
            grp.bn = Some(b);
            grp.out = g.node[b].output[0].clone();
        }
        if let Some(a) = sole(&grp.out) {
            if let Some(act) = activation(&g.node[a], w) {
                grp.act = act;
                grp.act_node = Some(a);
                grp.out = g.node[a].output[0].clone();
            }
        }
        groups.insert(i, grp);
    }
    groups
}

fn readers(g: &GraphProto) -> HashMap<&str, Vec<usize>> {
    let mut r: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        for x in n.input.iter().filter(|x| !x.is_empty()) {
            r.entry(x.as_str()).or_default().push(i);
        }
    }
    r
}

fn default_domain(n: &NodeProto) -> bool {
    n.domain.is_empty() || n.domain == "ai.onnx"
}

fn attr_i(n: &NodeProto, name: &str, d: i64) -> i64 {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .map_or(d, |a| a.i)
}

fn attr_f(n: &NodeProto, name: &str, d: f32) -> f32 {
    n.attribute
        .iter()
        .find(|a| a.name == name)
        .map_or(d, |a| a.f)
}

fn has_weight(n: &NodeProto, i: usize, w: &HashMap<String, Tensor>) -> bool {
    n.input.get(i).is_some_and(|x| w.contains_key(x))
}

fn is_conv(n: &NodeProto, w: &HashMap<String, Tensor>) -> bool {
    default_domain(n)
        && n.op_type == "Conv"
        && has_weight(n, 1, w)
        && w[&n.input[1]].ndim() == 4
        && (n.input.len() < 3 || n.input[2].is_empty() || has_weight(n, 2, w))
}

fn is_gemm(n: &NodeProto, w: &HashMap<String, Tensor>) -> bool {
    default_domain(n)
        && n.op_type == "Gemm"
        && has_weight(n, 1, w)
        && w[&n.input[1]].ndim() == 2
        && (n.input.len() < 3 || n.input[2].is_empty() || has_weight(n, 2, w))
        && attr_i(n, "transA", 0) == 0
        && attr_f(n, "alpha", 1.0) == 1.0
        && attr_f(n, "beta", 1.0) == 1.0
}

fn is_bn(n: &NodeProto, w: &HashMap<String, Tensor>) -> bool {
    default_domain(n)
        && n.op_type == "BatchNormalization"
        && n.output.len() == 1
        && (1..5).all(|i| has_weight(n, i, w))
}

/// The activation `n` is, if it can fold into a clamp: Relu, or Clip with constant 0 and 6.
fn activation(n: &NodeProto, w: &HashMap<String, Tensor>) -> Option<Activation> {
    if !default_domain(n) {
        return None;
    }
    match n.op_type.as_str() {
        "Relu" => Some(Activation::Relu),
        "Clip" => {
            let c = |i: usize| -> Option<f32> {
                let t = w.get(n.input.get(i)?)?;
                t.to_vec::<f32>().ok()?.first().copied()
            };
            (n.input.len() == 3 && c(1) == Some(0.0) && c(2) == Some(6.0))
                .then_some(Activation::Relu6)
        }
        _ => None,
    }
}

/// Observed ranges of every group's input and output, from running the float model.
fn calibrate(
    proto: &ModelProto,
    groups: &HashMap<usize, Group>,
    samples: &[Vec<Tensor>],
    how: Calibrator,
    what: &str,
) -> Result<HashMap<String, (f32, f32)>> {
    if samples.is_empty() {
        return Err(bad(what, "no calibration inputs"));
    }
    let g = proto.graph.as_ref().ok_or_else(|| bad(what, "no graph"))?;
    let mut names: Vec<String> = Vec::new();
    for grp in groups.values() {
        for n in [&g.node[grp.head].input[0], &grp.out] {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    let mut probe = proto.clone();
    if let Some(pg) = probe.graph.as_mut() {
        pg.output = names
            .iter()
            .map(|n| ValueInfoProto {
                name: n.clone(),
                r#type: None,
            })
            .collect();
    }
    let model = Model::from_proto(probe, what)?;
    let mut obs: Vec<Observer> = names
        .iter()
        .map(|_| match how {
            Calibrator::MinMax => Observer::min_max(),
            Calibrator::Percentile(p) => Observer::percentile(p),
        })
        .collect();
    for (i, s) in samples.iter().enumerate() {
        let outs = model
            .run(s)
            .map_err(|e| bad(what, format!("calibration input {i}: {e}")))?;
        for (o, t) in obs.iter_mut().zip(outs) {
            o.observe(&t.to_vec::<f32>()?);
        }
    }
    let mut ranges = HashMap::new();
    for (n, o) in names.iter().zip(&obs) {
        let r = o
            .range()
            .ok_or_else(|| bad(what, format!("value '{n}' had no finite value")))?;
        ranges.insert(n.clone(), r);
    }
    Ok(ranges)
}

/// Builds the new node list in the float graph's order.
struct Rewriter<'a> {
    /// The float graph's nodes.
    src: Vec<NodeProto>,
    weights: &'a HashMap<String, Tensor>,
    ranges: HashMap<String, (f32, f32)>,
    what: &'a str,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    /// Float value name → (int8 value name, its parameters).
    int8: HashMap<String, (String, QParams)>,
    /// Float values that exist in the new graph.
    float: HashSet<String>,
    folded: HashSet<usize>,
    read: HashSet<String>,
    report: QuantReport,
}

impl<'a> Rewriter<'a> {
    fn new(
        g: &GraphProto,
        weights: &'a HashMap<String, Tensor>,
        ranges: HashMap<String, (f32, f32)>,
        what: &'a str,
    ) -> Rewriter<'a> {
        let mut float: HashSet<String> = g.input.iter().map(|v| v.name.clone()).collect();
        float.extend(g.initializer.iter().map(|t| t.name.clone()));
        Rewriter {
            src: g.node.clone(),
            weights,
            ranges,
            what,
            nodes: Vec::new(),
            inits: Vec::new(),
            int8: HashMap::new(),
            float,
            folded: HashSet::new(),
            read: HashSet::new(),
            report: QuantReport::default(),
        }
    }

    fn step(&mut self, i: usize, groups: &HashMap<usize, Group>) -> Result<()> {
        if self.folded.contains(&i) {
            return Ok(());
        }
        let g = &groups;
        let n = self.node_of(i);
        if let Some(grp) = g.get(&i) {
            return self.layer(&n, grp);
        }
        let int_input = n.input.first().and_then(|x| self.int8.get(x)).cloned();
        let on_ints = matches!(n.op_type.as_str(), "MaxPool" | "Flatten" | "Reshape")
            && default_domain(&n)
            && n.output.len() == 1;
        match int_input {
            Some((xq, q)) if on_ints => {
                let mut m = n.clone();
                m.input[0] = xq;
                for x in m.input.iter().skip(1) {
                    self.need_float(x);
                }
                let yq = format!("{}.q", n.output[0]);
                m.output[0] = yq.clone();
                self.int8.insert(n.output[0].clone(), (yq, q));
                self.push(m);
            }
            _ => {
                for x in &n.input {
                    self.need_float(x);
                }
                self.float.extend(n.output.iter().cloned());
                self.push(n);
            }
        }
        Ok(())
    }

    fn node_of(&self, i: usize) -> NodeProto {
        self.src[i].clone()
    }

    fn push(&mut self, n: NodeProto) {
        self.read.extend(n.input.iter().cloned());
        self.nodes.push(n);
    }

    /// Makes float value `x` available, dequantizing its int8 form if that is all there is.
    fn need_float(&mut self, x: &str) {
        if x.is_empty() || self.float.contains(x) {
            return;
        }
        if let Some((xq, q)) = self.int8.get(x).cloned() {
            let (s, z) = self.qparams_inits(x, q);
            self.push(node("DequantizeLinear", &[&xq, &s, &z], x, Vec::new(), ""));
            self.float.insert(x.to_string());
        }
    }

    /// Makes int8 value of float `x` available, quantizing it with its calibrated range.
    fn need_int8(&mut self, x: &str) -> Result<(String, QParams)> {
        if let Some(v) = self.int8.get(x) {
            return Ok(v.clone());
        }
        let (lo, hi) = self.range(x)?;
        let q = QParams::asymmetric(lo, hi);
        let (s, z) = self.qparams_inits(x, q);
        let xq = format!("{x}.q");
        self.need_float(x);
        self.push(node("QuantizeLinear", &[x, &s, &z], &xq, Vec::new(), ""));
        self.int8.insert(x.to_string(), (xq.clone(), q));
        Ok((xq, q))
    }

    fn range(&self, x: &str) -> Result<(f32, f32)> {
        self.ranges
            .get(x)
            .copied()
            .ok_or_else(|| bad(self.what, format!("no calibration range for '{x}'")))
    }

    /// Scale and zero-point initializers of value `x`.
    fn qparams_inits(&mut self, x: &str, q: QParams) -> (String, String) {
        let (s, z) = (format!("{x}.scale"), format!("{x}.zero_point"));
        if !self.inits.iter().any(|t| t.name == s) {
            self.inits.push(f32_init(&s, &[], &[q.scale]));
            self.inits.push(i8_init(&z, &[], &[q.zero_point as i8]));
        }
        (s, z)
    }

    fn weight(&self, name: &str) -> Result<Vec<f32>> {
        self.weights
            .get(name)
            .ok_or_else(|| bad(self.what, format!("no initializer '{name}'")))?
            .to_vec::<f32>()
    }

    /// One Conv or Gemm group as a QLinearConv or QGemm.
    fn layer(&mut self, n: &NodeProto, grp: &Group) -> Result<()> {
        let (xq, xp) = self.need_int8(&n.input[0])?;
        let gemm = n.op_type == "Gemm";
        let (w, shape, b) = self.float_params(n, grp)?;
        let out = shape[0];
        let wq = quantize_weights_per_channel(&w, out)?;
        let bq = quantize_bias(&b, xp.scale, &wq.scales)?;
        let (lo, hi) = self.range(&grp.out)?;
        let (lo, hi) = grp.act.range(lo, hi);
        let yp = QParams::asymmetric(lo, hi);
        // Named after the layer's output: unique even when two layers share a weight.
        let base = &n.output[0];
        let names = [
            format!("{base}.w_q"),
            format!("{base}.w_scale"),
            format!("{base}.w_zero_point"),
            format!("{base}.bias_q"),
        ];
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        self.inits.push(i8_init(&names[0], &dims, &wq.values));
        self.inits
            .push(f32_init(&names[1], &[out as i64], &wq.scales));
        self.inits
            .push(i8_init(&names[2], &[out as i64], &vec![0; out]));
        self.inits.push(i32_init(&names[3], &[out as i64], &bq));
        let (xs, xz) = self.qparams_inits(&n.input[0], xp);
        let (ys, yz) = self.qparams_inits(&grp.out, yp);
        let yq = format!("{}.q", grp.out);
        let m = if gemm {
            self.report.gemms += 1;
            let ins = [
                &xq, &xs, &xz, &names[0], &names[1], &names[2], &names[3], &ys, &yz,
            ];
            node(
                "QGemm",
                &ins.map(String::as_str),
                &yq,
                vec![int_attr("transB", 1)],
                "com.microsoft",
            )
        } else {
            self.report.convs += 1;
            let ins = [
                &xq, &xs, &xz, &names[0], &names[1], &names[2], &ys, &yz, &names[3],
            ];
            let mut m = node("QLinearConv", &ins.map(String::as_str), &yq, Vec::new(), "");
            m.attribute = n.attribute.clone();
            m
        };
        self.push(m);
        self.int8.insert(grp.out.clone(), (yq, yp));
        Ok(())
    }

    /// The layer's weights (one row per output channel), their shape and its bias, with the
    /// group's BatchNormalization folded in; marks the folded nodes.
    fn float_params(
        &mut self,
        n: &NodeProto,
        grp: &Group,
    ) -> Result<(Vec<f32>, Vec<usize>, Vec<f32>)> {
        let mut shape = self.weights[&n.input[1]].shape().to_vec();
        let mut w = self.weight(&n.input[1])?;
        if n.op_type == "Gemm" && attr_i(n, "transB", 0) == 0 {
            // [K, N] → [N, K]: one row per output, the per-channel axis.
            let (k, m) = (shape[0], shape[1]);
            w = (0..m * k).map(|i| w[(i % k) * m + i / k]).collect();
            shape = vec![m, k];
        }
        let out = shape[0];
        let mut b = match n.input.get(2).filter(|x| !x.is_empty()) {
            Some(x) => self.weight(x)?,
            None => vec![0.0; out],
        };
        if b.len() != out {
            let detail = format!(
                "bias of node '{}' has {} values for {out} outputs",
                n.name,
                b.len()
            );
            return Err(bad(self.what, detail));
        }
        if let Some(bi) = grp.bn {
            let bn = self.node_of(bi);
            let p: Vec<Vec<f32>> = (1..5)
                .map(|k| self.weight(&bn.input[k]))
                .collect::<Result<_>>()?;
            let eps = attr_f(&bn, "epsilon", 1e-5);
            (w, b) = fold_batchnorm(&w, Some(&b), &p[0], &p[1], &p[2], &p[3], eps)?;
            self.folded.insert(bi);
            self.report.batchnorms += 1;
        }
        if let Some(a) = grp.act_node {
            self.folded.insert(a);
            self.report.activations += 1;
        }
        Ok((w, shape, b))
    }

    /// The new graph: the float graph's interface, the new nodes, old and new initializers.
    fn finish(&mut self, g: &GraphProto) -> GraphProto {
        for o in &g.output {
            self.need_float(&o.name);
        }
        self.read.extend(g.output.iter().map(|o| o.name.clone()));
        let mut out = g.clone();
        out.node = std::mem::take(&mut self.nodes);
        out.initializer.extend(std::mem::take(&mut self.inits));
        out.value_info.clear();
        out
    }

    fn still_read(&self, name: &str) -> bool {
        self.read.contains(name)
    }
}

fn node(
    op: &str,
    ins: &[&str],
    out: &str,
    attribute: Vec<AttributeProto>,
    domain: &str,
) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.to_string()],
        name: format!("{op}:{out}"),
        op_type: op.to_string(),
        domain: domain.to_string(),
        attribute,
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INT,
        i,
        ..AttributeProto::default()
    }
}

fn tensor(name: &str, dims: &[i64], data_type: i32, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type,
        raw_data: raw.into(),
        ..TensorProto::default()
    }
}

fn f32_init(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    tensor(
        name,
        dims,
        1,
        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )
}

fn i8_init(name: &str, dims: &[i64], v: &[i8]) -> TensorProto {
    tensor(name, dims, 3, v.iter().map(|&x| x as u8).collect())
}

fn i32_init(name: &str, dims: &[i64], v: &[i32]) -> TensorProto {
    tensor(
        name,
        dims,
        6,
        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )
}
