//! [`Model`]: a loaded, validated ONNX model. Loading decodes the protobuf (bounded: prost checks
//! every length against the bytes present and caps nesting), converts the initializers to
//! weights, and orders the nodes topologically — refusing cycles, duplicate producers and
//! inputs nothing produces, each error naming the node. Initializer data stored in an external
//! file is read from the model's folder ([`super::external`]); [`Model::load_without_weights`]
//! reads none (for `picograd inspect`). Running evaluates the nodes in that order into lazy
//! tensors, after reporting every unsupported operator at once.
//!
//! [`Model::run`] evaluates through a [`SignatureCache`]: the graph is built, scheduled and
//! compiled once per input signature (shapes, dtypes, device) and replayed afterwards;
//! [`Model::graph`] builds the lazy outputs without running anything (what export captures).
//! In `run`, input axes declared with a `dim_param` are symbolic ([`super::dims`]), so one
//! capture serves every size up to the name's maximum.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use picograd_core::jit::{CacheStats, SignatureCache};
use picograd_core::lowbit::LowBit;
use picograd_core::{Error, Result, Tensor};
use prost::Message;

use super::dims::{symbolic_inputs, DimBounds};
use super::external::{is_external, read_tensor};
use super::node::{in_node, Node};
use super::proto::{GraphProto, ModelProto, NodeProto, ValueInfoProto};
use super::values::{lowbit_of, onnx_code, onnx_type_name, tensor_from_proto, to_i64s};

/// Largest model file read (protobuf's own limit).
pub const MAX_FILE_BYTES: u64 = 2 << 30;
/// Most nodes one graph may have.
pub const MAX_NODES: usize = 1 << 20;

/// A graph input or output: name, ONNX element type and shape (`None` for a symbolic axis).
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSpec {
    /// The value's name in the graph.
    pub name: String,
    /// The ONNX element type code (`1` = FLOAT, ...), 0 when unknown.
    pub elem_type: i32,
    /// The dims; `None` marks a symbolic or unknown axis. `None` for the whole shape when the
    /// rank is unknown.
    pub shape: Option<Vec<Option<i64>>>,
    /// Each axis's `dim_param` name (`batch`), where it has one; empty when the rank is
    /// unknown.
    pub dim_params: Vec<Option<String>>,
}

impl ValueSpec {
    fn from_proto(v: &ValueInfoProto) -> ValueSpec {
        let tt = v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
        ValueSpec {
            name: v.name.clone(),
            elem_type: tt.map_or(0, |t| t.elem_type),
            shape: tt.and_then(|t| t.shape.as_ref()).map(|s| {
                s.dim
                    .iter()
                    .map(|d| d.dim_value.filter(|&v| v > 0))
                    .collect()
            }),
            dim_params: tt
                .and_then(|t| t.shape.as_ref())
                .map(|s| {
                    s.dim
                        .iter()
                        .map(|d| match d.dim_value {
                            Some(v) if v > 0 => None,
                            _ => d.dim_param.clone().filter(|p| !p.is_empty()),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// `FLOAT[1,3,?,?]`-style text.
    pub fn describe(&self) -> String {
        let dims = match &self.shape {
            None => "?".to_string(),
            Some(s) => s
                .iter()
                .map(|d| d.map_or("?".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join(","),
        };
        format!("{}[{dims}]", onnx_type_name(self.elem_type))
    }
}

/// Where the initializers' data comes from when a model is loaded.
#[derive(Clone, Copy, Debug)]
enum WeightSource<'a> {
    /// In the protobuf, or in external files in this folder (the model file's folder).
    Folder(&'a Path),
    /// In the protobuf only: external data is refused (no file to resolve it against).
    Embedded,
    /// Not read at all: the model can be inspected but not run.
    Skip,
}

/// A loaded ONNX model.
pub struct Model {
    graph: GraphProto,
    opset: i64,
    /// Every operator set the model imports: (domain, version).
    pub opsets: Vec<(String, i64)>,
    /// Node indices in evaluation order.
    order: Vec<usize>,
    weights: HashMap<String, Tensor>,
    /// The values holding a low-bit ONNX type ([`super::lowbit_types`]).
    lowbits: HashMap<String, LowBit>,
    /// False when loaded by [`Model::load_without_weights`].
    weights_loaded: bool,
    inputs: Vec<ValueSpec>,
    outputs: Vec<ValueSpec>,
    /// The producer recorded in the file.
    pub producer: String,
    /// Captures of [`Model::run`], one per input signature.
    cache: SignatureCache,
    /// The bounds of the `dim_param` axes [`Model::run`] makes symbolic.
    dims: DimBounds,
    /// Set once building the graph over symbolic inputs failed (an operator that needs a
    /// concrete size and refuses a symbolic one): `run` then uses the sizes as given.
    concrete_only: AtomicBool,
}

/// An unsupported operator, with the node that uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// Domain-qualified op type (`Loop`, `com.microsoft.FusedConv`).
    pub op: String,
    /// The node's name (or `#index` when unnamed).
    pub node: String,
}

fn node_label(n: &NodeProto, i: usize) -> String {
    if n.name.is_empty() {
        format!("#{i}")
    } else {
        n.name.clone()
    }
}

fn is_default_domain(d: &str) -> bool {
    d.is_empty() || d == "ai.onnx"
}

impl Model {
    /// Reads and validates the model file at `path`, with its weights (external data files
    /// are read from the model's folder).
    pub fn load(path: &Path) -> Result<Model> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Model::load_with(path, WeightSource::Folder(dir))
    }

    /// Reads and validates the model file at `path` without reading any weight data (external
    /// data files need not exist): enough to list inputs, outputs, operators and parameter
    /// counts. [`Model::run`] refuses such a model.
    pub fn load_without_weights(path: &Path) -> Result<Model> {
        Model::load_with(path, WeightSource::Skip)
    }

    fn load_with(path: &Path, source: WeightSource<'_>) -> Result<Model> {
        let what = path.display().to_string();
        let io = |e: std::io::Error| Error::Io {
            path: what.clone(),
            detail: e.to_string(),
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_BYTES {
            return Err(Error::Format {
                file: what,
                offset: 0,
                detail: format!("{len} bytes is larger than the 2 GiB protobuf limit"),
            });
        }
        // Decoded from a shared buffer, raw tensor data stays in place (slices of the file).
        let bytes = prost::bytes::Bytes::from(std::fs::read(path).map_err(io)?);
        Model::from_proto_with(decode(bytes, &what)?, &what, source)
    }

    /// Decodes and validates a model from its bytes; `what` names the source in errors.
    /// External tensor data is refused: there is no folder to find it in ([`Model::load`]).
    pub fn from_bytes(bytes: &[u8], what: &str) -> Result<Model> {
        Model::from_proto(decode(bytes, what)?, what)
    }

    /// Validates a decoded model (external tensor data is refused, as for
    /// [`Model::from_bytes`]).
    pub fn from_proto(proto: ModelProto, what: &str) -> Result<Model> {
        Model::from_proto_with(proto, what, WeightSource::Embedded)
    }

    fn from_proto_with(proto: ModelProto, what: &str, source: WeightSource<'_>) -> Result<Model> {
        let fmt = |d: String| Error::Format {
            file: what.to_string(),
            offset: 0,
            detail: d,
        };
        let mut graph = proto
            .graph
            .ok_or_else(|| fmt("the model has no graph".into()))?;
        if graph.node.len() > MAX_NODES {
            return Err(fmt(format!("{} nodes is too many", graph.node.len())));
        }
        let opsets: Vec<(String, i64)> = proto
            .opset_import
            .iter()
            .map(|o| (o.domain.clone(), o.version))
            .collect();
        let opset = opsets
            .iter()
            .filter(|(d, _)| is_default_domain(d))
            .map(|o| o.1)
            .max()
            .unwrap_or(1);
        let mut weights = HashMap::new();
        for t in &graph.initializer {
            let label = format!("initializer '{}'", t.name);
            let w = match source {
                WeightSource::Skip => continue,
                WeightSource::Folder(dir) if is_external(t) => read_tensor(t, &label, dir)?,
                WeightSource::Folder(_) | WeightSource::Embedded => {
                    tensor_from_proto(t, &format!("{what}: {label}"))?
                }
            };
            // Weights never change: the scheduler may copy them into another layout once
            // per capture (a batch-1 layer's transposed weight into vector panels).
            if let Some(b) = w.lazy().realized() {
                b.mark_constant();
            }
            weights.insert(t.name.clone(), w);
        }
        // QDQ groups become integer operators before anything reads the node list.
        super::qdq::fuse(&mut graph, &weights);
        let initializers: HashSet<&str> =
            graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let order = topo_order(&graph, &initializers).map_err(fmt)?;
        let inputs = graph
            .input
            .iter()
            .filter(|v| !initializers.contains(v.name.as_str()))
            .map(ValueSpec::from_proto)
            .collect();
        let outputs = graph.output.iter().map(ValueSpec::from_proto).collect();
        let lowbits = super::lowbit_types::infer(&graph, &order);
        Ok(Model {
            graph,
            opset,
            opsets,
            order,
            weights,
            lowbits,
            weights_loaded: !matches!(source, WeightSource::Skip),
            inputs,
            outputs,
            producer: proto.producer_name,
            cache: SignatureCache::new(),
            dims: DimBounds::default(),
            concrete_only: AtomicBool::new(false),
        })
    }

    /// Sets the largest size of the input axes named `name` by a `dim_param` (default
    /// [`DEFAULT_MAX_DIM`](super::dims::DEFAULT_MAX_DIM)); [`Model::run`] accepts sizes 1 to `max` with one capture. An error
    /// when no input axis has that name, or `max` is below 1.
    pub fn with_max_dim(mut self, name: &str, max: i64) -> Result<Model> {
        if !self.dim_params().iter().any(|p| p == name) {
            return Err(Error::shape(
                "onnx",
                format!(
                    "no input axis is named '{name}' (dim_params: {})",
                    self.dim_params().join(", ")
                ),
            ));
        }
        self.dims.set_max(name, max)?;
        self.cache.clear();
        Ok(self)
    }

    /// The `dim_param` names of the input axes, sorted, each once.
    pub fn dim_params(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .inputs
            .iter()
            .flat_map(|i| i.dim_params.iter().flatten().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The bounds `[1, max]` of the input axes named `name` in [`Model::run`].
    pub fn dim_bounds(&self, name: &str) -> (i64, i64) {
        self.dims.bounds(name)
    }

    /// The inputs a caller supplies (graph inputs that are not weights), in order.
    pub fn inputs(&self) -> &[ValueSpec] {
        &self.inputs
    }

    /// The graph outputs, in order.
    pub fn outputs(&self) -> &[ValueSpec] {
        &self.outputs
    }

    /// The default-domain opset version the model imports.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// The nodes, in evaluation order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeProto> {
        self.order.iter().map(|&i| &self.graph.node[i])
    }

    /// For a graph output that a ZipMap node makes (scikit-learn's sequence of
    /// `{label: probability}` maps), the integer class labels of its columns: picograd returns
    /// that output as the probability tensor `[N, classes]`, columns in this order.
    pub fn zipmap_labels(&self, output: &str) -> Option<Vec<i64>> {
        self.graph
            .node
            .iter()
            .find(|n| n.output.iter().any(|o| o == output))
            .and_then(super::ops::zipmap_labels)
    }

    /// The weights (initializers) by name.
    pub fn weights(&self) -> &HashMap<String, Tensor> {
        &self.weights
    }

    /// Number of scalar parameters in the weights (from the initializers' shapes, so it is
    /// known without reading them).
    pub fn parameter_count(&self) -> u64 {
        self.graph
            .initializer
            .iter()
            .map(|t| {
                t.dims
                    .iter()
                    .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?))
                    .unwrap_or(0)
            })
            .fold(0u64, u64::saturating_add)
    }

    /// Number of weight tensors (initializers), known without reading them.
    pub fn weight_count(&self) -> usize {
        self.graph
            .initializer
            .iter()
            .map(|t| t.name.as_str())
            .collect::<HashSet<_>>()
            .len()
    }

    /// Every node whose operator picograd cannot run.
    pub fn unsupported(&self) -> Vec<UnsupportedOp> {
        self.order
            .iter()
            .map(|&i| (i, &self.graph.node[i]))
            .filter(|(_, n)| {
                let control = super::control::runs_subgraphs(&n.domain, &n.op_type);
                super::ops::handler_in(&n.domain, &n.op_type).is_none() && !control
            })
            .map(|(i, n)| UnsupportedOp {
                op: if is_default_domain(&n.domain) {
                    n.op_type.clone()
                } else {
                    format!("{}.{}", n.domain, n.op_type)
                },
                node: node_label(n, i),
            })
            .collect()
    }

    /// Fails with one error listing every unsupported operator and node, if there are any.
    pub fn check_supported(&self) -> Result<()> {
        let bad = self.unsupported();
        if bad.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = bad
            .iter()
            .map(|u| format!("{} (node '{}')", u.op, u.node))
            .collect();
        Err(Error::Unsupported(format!(
            "{} ONNX node(s) use operators picograd does not support: {}",
            bad.len(),
            list.join(", ")
        )))
    }

    /// Runs the model on `inputs` (one per [`Model::inputs`], in order) and returns the outputs,
    /// in [`Model::outputs`] order.
    ///
    /// The first call with a given input signature (each input's shape and dtype, and the
    /// device) builds the graph, schedules, compiles and runs it, recording the kernels; later
    /// calls with that signature replay them: a loop of `run` costs what a hand-written
    /// [`Jit`](picograd_core::jit::Jit) replay costs. The results come back realized, each in
    /// its own new buffer: they keep their values whatever runs later. A model that reads input
    /// values on the host while its graph is built (control flow on data, shapes computed from
    /// values, `NonZero`, Gather indices given as an input, which are range-checked) is
    /// evaluated again on every call instead, and returns lazy outputs as [`Model::graph`]
    /// does. [`DEFAULT_SIGNATURES`](picograd_core::jit::DEFAULT_SIGNATURES) signatures are kept
    /// (least recently used go first; [`Model::set_cache_capacity`]); each holds its
    /// intermediate buffers. `run` may be called from several threads; replays of one
    /// signature take turns.
    ///
    /// Input axes declared with a `dim_param` are symbolic here: sizes 1 to the name's maximum
    /// ([`Model::with_max_dim`], default [`DEFAULT_MAX_DIM`](super::dims::DEFAULT_MAX_DIM)) share one capture and one set of
    /// compiled kernels (a size above a maximum set with [`Model::with_max_dim`] is an error;
    /// above the default maximum that axis stays concrete, with a capture of its own). Operators that compute a shape or a
    /// constant from such a size specialize the capture to it (the cache captures again at
    /// other sizes); an operator that refuses a symbolic size makes `run` use concrete sizes
    /// from then on.
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.check_arity(inputs)?;
        if !self.concrete_only.load(Ordering::Relaxed) {
            if let Some(sym) = symbolic_inputs(&self.inputs, &self.dims, inputs)? {
                if let Ok(out) = self.cache.call(&sym, |ins| self.graph(ins)) {
                    return Ok(out);
                }
                // Bad input fails with concrete sizes too (and its error is returned); a
                // model that runs with them refused a symbolic size.
                let out = self.cache.call(inputs, |ins| self.graph(ins))?;
                self.concrete_only.store(true, Ordering::Relaxed);
                return Ok(out);
            }
        }
        self.cache.call(inputs, |ins| self.graph(ins))
    }

    /// What [`Model::run`]'s cache has done so far (captures, replays, re-evaluations).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Sets how many input signatures [`Model::run`] keeps captures for (at least 1).
    pub fn set_cache_capacity(&self, capacity: usize) {
        self.cache.set_capacity(capacity);
    }

    /// Builds the outputs for `inputs` (one per [`Model::inputs`], in order) as lazy tensors,
    /// in [`Model::outputs`] order, without caching: every call evaluates every node again.
    /// What export captures.
    pub fn graph(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        self.check_arity(inputs)?;
        let named: Vec<(String, Tensor)> = self
            .inputs
            .iter()
            .zip(inputs)
            .map(|(s, t)| (s.name.clone(), t.clone()))
            .collect();
        self.run_named(&named)
    }

    fn check_arity(&self, inputs: &[Tensor]) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::shape(
                "onnx",
                format!(
                    "the model takes {} input(s) ({}), {} given",
                    self.inputs.len(),
                    self.inputs
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    inputs.len()
                ),
            ));
        }
        Ok(())
    }

    /// Builds the outputs for named inputs as lazy tensors, uncached (as [`Model::graph`]);
    /// graph inputs left out fall back to their initializer.
    pub fn run_named(&self, inputs: &[(String, Tensor)]) -> Result<Vec<Tensor>> {
        if !self.weights_loaded {
            return Err(Error::Unsupported(
                "the model was loaded without its weights (Model::load_without_weights): \
                 load it with Model::load to run it"
                    .into(),
            ));
        }
        self.check_supported()?;
        let mut env: HashMap<&str, Tensor> = HashMap::new();
        for (name, w) in &self.weights {
            env.insert(name, w.clone());
        }
        for (name, t) in inputs {
            self.check_input(name, t)?;
            env.insert(name, t.clone());
        }
        for spec in &self.inputs {
            if !env.contains_key(spec.name.as_str()) {
                return Err(Error::shape(
                    "onnx",
                    format!("input '{}' was not given", spec.name),
                ));
            }
        }
        let known = self.host_known(inputs);
        for &i in &self.order {
            let node = &self.graph.node[i];
            check_indices(node, &env, &known).map_err(|e| in_node(e, node))?;
            self.eval_node(node, &mut env)
                .map_err(|e| in_node(e, node))?;
        }
        self.outputs
            .iter()
            .map(|o| {
                env.get(o.name.as_str()).cloned().ok_or_else(|| {
                    Error::shape(
                        "onnx",
                        format!("graph output '{}' was never computed", o.name),
                    )
                })
            })
            .collect()
    }

    /// The values whose data is on the host before anything is computed: the caller's inputs,
    /// the initializers and the outputs of `Constant` nodes.
    fn host_known<'a>(&'a self, inputs: &'a [(String, Tensor)]) -> HashSet<&'a str> {
        let consts = self.graph.node.iter().filter(|n| {
            n.op_type == "Constant" && is_default_domain(&n.domain) && n.input.is_empty()
        });
        (inputs.iter().map(|(n, _)| n.as_str()))
            .chain(self.weights.keys().map(String::as_str))
            .chain(consts.flat_map(|n| n.output.iter().map(String::as_str)))
            .collect()
    }

    fn check_input(&self, name: &str, t: &Tensor) -> Result<()> {
        let Some(spec) = self.inputs.iter().find(|s| s.name == name) else {
            return Err(Error::shape(
                "onnx",
                format!("the model has no input named '{name}'"),
            ));
        };
        // As onnxruntime does: the element type must be the declared one (no silent casts,
        // no f64 run of an f32 model), and every fixed axis its declared size; symbolic axes
        // take any size.
        // Symbolic sizes are compared as expressions (reading their values would specialize
        // the capture in progress to them).
        let shape = t.sym_shape();
        let got = || {
            format!(
                "{}[{}]",
                onnx_type_name(onnx_code(t.dtype())),
                shape
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        // A low-bit input (float8, int4, ...) comes as its carrier dtype (f32, i8, u8).
        let type_ok = spec.elem_type == 0
            || onnx_code(t.dtype()) == spec.elem_type
            || lowbit_of(spec.elem_type).is_some_and(|k| k.carrier() == t.dtype());
        let shape_ok = spec.shape.as_ref().is_none_or(|dims| {
            dims.len() == shape.len()
                && dims
                    .iter()
                    .zip(&shape)
                    .all(|(d, s)| d.is_none_or(|d| s.as_const() == Some(d)))
        });
        if type_ok && shape_ok {
            return Ok(());
        }
        let what = if type_ok { "shape" } else { "element type" };
        Err(Error::shape(
            "onnx",
            format!(
                "input '{name}': wrong {what}: the model expects {}, got {}",
                spec.describe(),
                got()
            ),
        ))
    }

    /// Evaluates one node in scope `env` and binds its outputs there.
    pub(crate) fn eval_node<'a>(
        &self,
        node: &'a NodeProto,
        env: &mut HashMap<&'a str, Tensor>,
    ) -> Result<()> {
        let inputs = node
            .input
            .iter()
            .map(|name| {
                if name.is_empty() {
                    return Ok(None);
                }
                env.get(name.as_str())
                    .cloned()
                    .map(Some)
                    .ok_or_else(|| Error::shape("onnx", format!("input '{name}' has no value")))
            })
            .collect::<Result<Vec<_>>>()?;
        let lowbits = node
            .input
            .iter()
            .map(|name| self.lowbits.get(name).copied())
            .collect();
        let ctx = Node {
            proto: node,
            inputs,
            opset: self.opset,
            lowbits,
        };
        let outs = if super::control::runs_subgraphs(&node.domain, &node.op_type) {
            super::control::eval(self, node, &ctx, env)?
        } else {
            let handler = super::ops::handler_in(&node.domain, &node.op_type)
                .ok_or_else(|| Error::Unsupported(format!("operator {}", node.op_type)))?;
            handler(&ctx)?
        };
        for (k, name) in node.output.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let t = outs.get(k).cloned().ok_or_else(|| {
                Error::Unsupported(format!(
                    "{}: output {k} ('{name}') is not produced",
                    node.op_type
                ))
            })?;
            env.insert(name, t);
        }
        Ok(())
    }
}

/// Every input name of the nodes inside `n`'s subgraph attributes, at any depth.
fn subgraph_reads(n: &NodeProto) -> Vec<&str> {
    let mut out = Vec::new();
    for g in n.attribute.iter().filter_map(|a| a.g.as_ref()) {
        for sn in &g.node {
            out.extend(sn.input.iter().map(String::as_str));
            out.extend(subgraph_reads(sn));
        }
    }
    out
}

/// Orders the nodes so each comes after the producers of its inputs (Kahn's algorithm).
fn topo_order(
    graph: &GraphProto,
    initializers: &HashSet<&str>,
) -> std::result::Result<Vec<usize>, String> {
    let mut known: HashSet<&str> = graph.input.iter().map(|v| v.name.as_str()).collect();
    known.extend(initializers.iter().copied());
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if known.contains(o.as_str()) || producer.insert(o, i).is_some() {
                return Err(format!(
                    "value '{o}' is produced twice (node '{}')",
                    node_label(n, i)
                ));
            }
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); graph.node.len()];
    let mut pending = vec![0usize; graph.node.len()];
    for (i, n) in graph.node.iter().enumerate() {
        // Values a subgraph of this node reads from the enclosing scope come first too.
        for name in subgraph_reads(n) {
            if let Some(&p) = producer.get(name) {
                users[p].push(i);
                pending[i] += 1;
            }
        }
        for name in n.input.iter().filter(|s| !s.is_empty()) {
            match producer.get(name.as_str()) {
                Some(&p) => {
                    users[p].push(i);
                    pending[i] += 1;
                }
                None if known.contains(name.as_str()) => {}
                None => {
                    return Err(format!(
                        "node '{}' ({}) reads '{name}', which no input, weight or node provides",
                        node_label(n, i),
                        n.op_type
                    ))
                }
            }
        }
    }
    let mut ready: Vec<usize> = (0..graph.node.len())
        .filter(|&i| pending[i] == 0)
        .rev()
        .collect();
    let mut order = Vec::with_capacity(graph.node.len());
    while let Some(i) = ready.pop() {
        order.push(i);
        for &u in users[i].iter().rev() {
            pending[u] -= 1;
            if pending[u] == 0 {
                ready.push(u);
            }
        }
    }
    if let Some(i) = (0..graph.node.len()).find(|&i| pending[i] > 0) {
        let n = &graph.node[i];
        return Err(format!(
            "the graph has a cycle through node '{}' ({})",
            node_label(n, i),
            n.op_type
        ));
    }
    for o in &graph.output {
        if !known.contains(o.name.as_str()) && !producer.contains_key(o.name.as_str()) {
            return Err(format!(
                "graph output '{}' is not produced by any node",
                o.name
            ));
        }
    }
    Ok(order)
}

fn decode(bytes: impl prost::bytes::Buf, what: &str) -> Result<ModelProto> {
    ModelProto::decode(bytes).map_err(|e| Error::Format {
        file: what.to_string(),
        offset: 0,
        detail: format!("not a valid ONNX protobuf: {e}"),
    })
}

/// For a Gather, GatherElements, ScatterElements or Scatter whose indices are known on the host
/// (a caller-given model input, an initializer, a `Constant`): every index must lie in
/// `[-size, size)` of the data's indexed axis, as ONNX allows. Checked before the node is
/// evaluated, so an out-of-range index is an error naming the input, the index and the axis
/// size rather than plausible-looking output (the lazy ops would read 0 or drop the write).
/// GatherND and ScatterND run on the host and check every index themselves; OneHot defines an
/// out-of-range index (a row of `off_value`), so it is not an error there.
fn check_indices(
    node: &NodeProto,
    env: &HashMap<&str, Tensor>,
    known: &HashSet<&str>,
) -> Result<()> {
    let op: &'static str = match node.op_type.as_str() {
        "Gather" => "Gather",
        "GatherElements" => "GatherElements",
        "ScatterElements" => "ScatterElements",
        "Scatter" => "Scatter",
        _ => return Ok(()),
    };
    if !is_default_domain(&node.domain) || node.input.len() < 2 {
        return Ok(());
    }
    let (data, ids) = (node.input[0].as_str(), node.input[1].as_str());
    if !known.contains(ids) {
        return Ok(());
    }
    let (Some(data), Some(ids_t)) = (env.get(data), env.get(ids)) else {
        return Ok(());
    };
    let rank = data.shape().len() as i64;
    let axis = node
        .attribute
        .iter()
        .find(|a| a.name == "axis")
        .map_or(0, |a| a.i);
    let axis = if axis < 0 { axis + rank } else { axis };
    let Some(size) = usize::try_from(axis)
        .ok()
        .and_then(|a| data.shape().get(a).copied())
    else {
        return Ok(()); // the operator itself reports the bad axis
    };
    if !ids_t.dtype().is_int() {
        return Ok(());
    }
    let size = size as i64;
    if let Some((k, &v)) = to_i64s(ids_t)?
        .iter()
        .enumerate()
        .find(|(_, &v)| v < -size || v >= size)
    {
        return Err(Error::shape(
            op,
            format!(
                "input '{ids}' holds index {v} (element {k}), out of range for axis {axis} of \
                 size {size} (valid: {} to {})",
                -size,
                size - 1
            ),
        ));
    }
    Ok(())
}

/// The protobuf of the model file at `path`, undecoded beyond the messages (what a graph
/// rewrite such as `--quantize int8` starts from); errors name the file.
pub fn read_proto(path: &Path) -> Result<ModelProto> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Io {
        path: what.clone(),
        detail: e.to_string(),
    })?;
    decode(prost::bytes::Bytes::from(bytes), &what)
}
