//! `Model::run` schedules once per input signature: this prints, for one ONNX model, the time
//! of the first `run` (build the graph, schedule, compile — compiles come from
//! `$PICOGRAD_CACHE` when it holds them), of a warm `run` (a replay of the cached capture), of a
//! hand-written `jit::Jit` replay around `Model::graph`, and of the uncached path (`graph` +
//! realize every call, what `run` did before), with the warm `run` ÷ JIT ratio. Medians over
//! interleaved runs; nothing is asserted (timings are not tests).
//!
//! usage: `cargo run --release --example onnx_run_cache [MODEL.onnx [RUNS]]` — zero-valued
//! inputs of the model's declared shapes (symbolic axes 1); without a model, a built-in MLP
//! (64 → 256 → 10, batch 1).

use std::path::Path;
use std::time::{Duration, Instant};

use picograd::jit::Jit;
use picograd::Tensor;
use picograd_onnx::proto::*;
use picograd_onnx::Model;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    picograd::runtime::install();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(50);
    let t = Instant::now();
    let (name, model) = match args.first() {
        Some(p) => (p.clone(), Model::load(Path::new(p))?),
        None => ("built-in MLP 64-256-10".to_string(), builtin_mlp()?),
    };
    let load = t.elapsed();
    let inputs = picograd_cli::compile::zero_inputs(&model, &[])?;
    let t = Instant::now();
    realized(model.run(&inputs)?)?;
    let first = t.elapsed();
    let jit = Jit::new(|io: &[Tensor]| model.graph(io));
    realized(jit.call(&inputs)?)?;
    let (mut warm, mut replay, mut uncached) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        warm.push(time(|| realized(model.run(&inputs)?))?);
        replay.push(time(|| realized(jit.call(&inputs)?))?);
        if i < runs.min(5) {
            uncached.push(time(|| realized(model.graph(&inputs)?))?);
        }
    }
    let (w, j, u) = (median(warm), median(replay), median(uncached));
    println!("model: {name} (loaded in {load:.2?}); {runs} interleaved runs, medians");
    println!("first Model::run (graph + schedule + compile + run): {first:>12.3?}");
    println!("uncached (Model::graph + realize, per call):        {u:>12.3?}");
    println!("hand-written Jit replay:                             {j:>12.3?}");
    println!("warm Model::run (cached replay):                     {w:>12.3?}");
    println!(
        "warm run / JIT replay = {:.3}; uncached / warm run = {:.1}; first / warm run = {:.1}",
        w.as_secs_f64() / j.as_secs_f64(),
        u.as_secs_f64() / w.as_secs_f64(),
        first.as_secs_f64() / w.as_secs_f64()
    );
    let s = model.cache_stats();
    println!(
        "cache: {} capture(s), {} replay(s), {} re-evaluation(s)",
        s.captures, s.replays, s.reruns
    );
    Ok(())
}

/// Realizes `outs` (a replay's are already; the uncached path's are lazy).
fn realized(outs: Vec<Tensor>) -> Res<Vec<Tensor>> {
    Tensor::realize_all(&outs.iter().collect::<Vec<_>>())?;
    Ok(outs)
}

fn time(f: impl FnOnce() -> Res<Vec<Tensor>>) -> Res<Duration> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn builtin_mlp() -> Res<Model> {
    let ramp = |n: usize, s: f32| -> Vec<f32> {
        (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) * s).collect()
    };
    let weight = |name: &str, dims: &[i64], vals: Vec<f32>| TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: vals,
        ..Default::default()
    };
    let value = |name: &str, dims: &[i64]| ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d),
                            dim_param: None,
                        })
                        .collect(),
                }),
            }),
            ..Default::default()
        }),
    };
    let node = |op: &str, ins: &[&str], out: &str| NodeProto {
        op_type: op.into(),
        name: out.into(),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    };
    let graph = GraphProto {
        name: "mlp".into(),
        node: vec![
            node("Gemm", &["x", "w1", "b1"], "h"),
            node("Relu", &["h"], "r"),
            node("Gemm", &["r", "w2", "b2"], "l"),
            node("Softmax", &["l"], "y"),
        ],
        initializer: vec![
            weight("w1", &[64, 256], ramp(64 * 256, 0.01)),
            weight("b1", &[256], ramp(256, 0.01)),
            weight("w2", &[256, 10], ramp(2560, 0.01)),
            weight("b2", &[10], ramp(10, 0.01)),
        ],
        input: vec![value("x", &[1, 64])],
        output: vec![value("y", &[1, 10])],
        ..Default::default()
    };
    let proto = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    Ok(Model::from_proto(proto, "built-in MLP")?)
}
