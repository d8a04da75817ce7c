//! `Model::run` schedules once per input signature: a repeated signature schedules, lowers and
//! compiles nothing (counted), a new one captures once; cached results equal the uncached
//! `Model::graph` bit for bit (and onnxruntime within tolerance); results of earlier calls keep
//! their values; models that read input values on the host (If on data, a shape given as an
//! input, Gather indices given as an input) are evaluated again each call and stay right.
//!
//! The work counters are process-wide, so every test here takes `SERIAL` first.

mod common;
mod pymodels;

use std::sync::Mutex;

use picograd_core::jit::SignatureCache;
use picograd_core::realize::counters;
use picograd_core::Tensor;
use picograd_onnx::proto::*;
use picograd_onnx::Model;

use common::weight;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: outputs[0].into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A value of element type `elem` whose dims are fixed (`Some`) or unknown (`None`, no
/// `dim_param`: each size is its own signature, which these tests count; a `dim_param` axis is
/// symbolic, see `dynamic_dims.rs`).
fn value_of(name: &str, elem: i32, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            dim_value: *d,
            dim_param: None,
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: elem,
                shape: Some(TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
    }
}

fn model(graph: GraphProto) -> Model {
    let proto = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    Model::from_proto(proto, "test model").unwrap()
}

fn ramp(n: usize, scale: f32, shift: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * scale + shift)
        .collect()
}

/// x[batch,4] → Gemm(4→8) → Relu → Gemm(8→3) → Softmax: batch is symbolic.
fn mlp() -> Model {
    model(GraphProto {
        name: "mlp".into(),
        node: vec![
            node("Gemm", &["x", "w1", "b1"], &["h"], vec![]),
            node("Relu", &["h"], &["r"], vec![]),
            node("Gemm", &["r", "w2", "b2"], &["l"], vec![]),
            node("Softmax", &["l"], &["y"], vec![]),
        ],
        initializer: vec![
            weight("w1", &[4, 8], &ramp(32, 0.1, 0.0)),
            weight("b1", &[8], &ramp(8, 0.05, 0.1)),
            weight("w2", &[8, 3], &ramp(24, 0.2, -0.1)),
            weight("b2", &[3], &[0.1, 0.0, -0.1]),
        ],
        input: vec![value_of("x", 1, &[None, Some(4)])],
        output: vec![value_of("y", 1, &[None, Some(3)])],
        ..Default::default()
    })
}

fn x(batch: usize, shift: f32) -> Tensor {
    Tensor::from_slice(&ramp(batch * 4, 0.3, shift), &[batch, 4])
}

/// The outputs' bytes (realizing them).
fn bytes(ts: &[Tensor]) -> Vec<Vec<u8>> {
    ts.iter().map(|t| t.to_bytes().unwrap()).collect()
}

/// The uncached path's outputs for `inputs`, as bytes.
fn uncached(m: &Model, inputs: &[Tensor]) -> Vec<Vec<u8>> {
    bytes(&m.graph(inputs).unwrap())
}

#[test]
fn a_repeated_signature_schedules_and_compiles_nothing() {
    let _g = serial();
    let m = mlp();
    m.run(&[x(2, 0.0)]).unwrap();
    let before = counters();
    let y = m.run(&[x(2, 1.0)]).unwrap();
    let after = counters();
    assert_eq!(after.scheduled, before.scheduled, "scheduled on a replay");
    assert_eq!(after.lowered, before.lowered, "lowered on a replay");
    assert_eq!(after.compiled, before.compiled, "compiled on a replay");
    assert_eq!(bytes(&y), uncached(&m, &[x(2, 1.0)]));
    // A new batch size captures once, then replays too; the first signature is still held.
    let before = counters();
    m.run(&[x(5, 0.0)]).unwrap();
    assert!(
        counters().scheduled > before.scheduled,
        "a new shape must schedule"
    );
    let before = counters();
    m.run(&[x(5, 2.0)]).unwrap();
    m.run(&[x(2, 3.0)]).unwrap();
    assert_eq!(counters().scheduled, before.scheduled);
    assert_eq!(counters().compiled, before.compiled);
    let s = m.cache_stats();
    assert_eq!((s.captures, s.replays, s.reruns), (2, 3, 0));
}

#[test]
fn results_keep_their_values_after_later_calls() {
    let _g = serial();
    let m = mlp();
    let inputs: Vec<Tensor> = (0..4).map(|k| x(3, k as f32)).collect();
    let want: Vec<_> = inputs
        .iter()
        .map(|t| uncached(&m, std::slice::from_ref(t)))
        .collect();
    // Call 1 captures, calls 2-4 replay; nothing is read until every call has run.
    let got: Vec<Vec<Tensor>> = inputs
        .iter()
        .map(|t| m.run(std::slice::from_ref(t)).unwrap())
        .collect();
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(&bytes(g), w, "call {k}'s result changed");
    }
    assert_ne!(want[0], want[1], "the inputs must give different outputs");
}

#[test]
fn the_signature_cache_is_bounded() {
    let _g = serial();
    let m = mlp();
    m.set_cache_capacity(1);
    for batch in [1, 2, 1, 2] {
        let y = m.run(&[x(batch, 0.5)]).unwrap();
        assert_eq!(bytes(&y), uncached(&m, &[x(batch, 0.5)]));
    }
    let s = m.cache_stats();
    assert_eq!((s.captures, s.replays), (4, 0), "one signature at a time");
}

#[test]
fn runs_from_several_threads_take_turns() {
    let _g = serial();
    let m = mlp();
    let want: Vec<_> = (0..4).map(|k| uncached(&m, &[x(2, k as f32)])).collect();
    m.run(&[x(2, 9.0)]).unwrap();
    std::thread::scope(|s| {
        for (k, w) in want.iter().enumerate() {
            let m = &m;
            s.spawn(move || {
                for _ in 0..5 {
                    let y = m.run(&[x(2, k as f32)]).unwrap();
                    assert_eq!(&bytes(&y), w, "thread {k}");
                }
            });
        }
    });
    assert_eq!(m.cache_stats().replays, 20);
}

/// Several models: the replayed outputs equal the uncached graph's bit for bit, and
/// onnxruntime's within tolerance; each model is cached (one capture, then replays).
#[test]
fn cached_outputs_equal_uncached_bit_for_bit() {
    let _g = serial();
    let tiny = Model::from_proto(common::tiny_cnn(), "tiny_cnn").unwrap();
    let xs = Tensor::from_slice(&ramp(16, 0.25, 0.1), &[1, 1, 4, 4]);
    check_cached("tiny_cnn", &tiny, &[xs], None);
    for case in [
        "lstm_forward",
        "lstm_bidirectional",
        "gru_reverse",
        "external_data",
    ] {
        let Some(dir) = pymodels::make(case) else {
            return;
        };
        let m = Model::load(&dir.join("model.onnx")).unwrap();
        let want = pymodels::expected(&dir);
        check_cached(case, &m, &pymodels::inputs(&dir), Some(&want));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Runs `m` on doubled inputs (capture), then on `inputs` (replay), and compares.
fn check_cached(what: &str, m: &Model, inputs: &[Tensor], ort: Option<&[Vec<f64>]>) {
    let doubled: Vec<Tensor> = inputs.iter().map(|t| t.try_add(t).unwrap()).collect();
    let first = m.run(&doubled).unwrap();
    let replayed = m.run(inputs).unwrap();
    assert_eq!(bytes(&replayed), uncached(m, inputs), "{what}: replay");
    assert_eq!(bytes(&first), uncached(m, &doubled), "{what}: capture");
    let s = m.cache_stats();
    assert_eq!((s.captures, s.replays, s.reruns), (1, 1, 0), "{what}");
    for (k, (got, want)) in replayed.iter().zip(ort.unwrap_or(&[])).enumerate() {
        let got = got.to_f64_vec().unwrap();
        pymodels::assert_close(&format!("{what} output {k}"), &got, want, 1e-4);
    }
}

/// y = If(sum(x) > 0, x * 2, -x): the branch depends on the data.
fn if_model() -> Model {
    let branch = |name: &str, n: NodeProto| GraphProto {
        name: name.into(),
        node: vec![n],
        output: vec![value_of(name, 1, &[Some(3)])],
        ..Default::default()
    };
    let graph = |name: &str, g: GraphProto| AttributeProto {
        name: name.into(),
        r#type: attr_type::GRAPH,
        g: Some(g),
        ..Default::default()
    };
    let keep0 = AttributeProto {
        name: "keepdims".into(),
        r#type: attr_type::INT,
        i: 0,
        ..Default::default()
    };
    model(GraphProto {
        name: "if".into(),
        node: vec![
            node("ReduceSum", &["x"], &["s"], vec![keep0]),
            node("Greater", &["s", "zero"], &["c"], vec![]),
            node(
                "If",
                &["c"],
                &["y"],
                vec![
                    graph(
                        "then_branch",
                        branch("t", node("Mul", &["x", "two"], &["t"], vec![])),
                    ),
                    graph(
                        "else_branch",
                        branch("e", node("Neg", &["x"], &["e"], vec![])),
                    ),
                ],
            ),
        ],
        initializer: vec![weight("zero", &[], &[0.0]), weight("two", &[], &[2.0])],
        input: vec![value_of("x", 1, &[Some(3)])],
        output: vec![value_of("y", 1, &[Some(3)])],
        ..Default::default()
    })
}

#[test]
fn data_dependent_control_flow_is_evaluated_each_call() {
    let _g = serial();
    let m = if_model();
    for (xs, want) in [
        ([1.0f32, 2.0, -0.5], [2.0f32, 4.0, -1.0]),
        ([-1.0, -2.0, 0.5], [1.0, 2.0, -0.5]),
        ([3.0, 0.0, 0.0], [6.0, 0.0, 0.0]),
    ] {
        let y = m.run(&[Tensor::from_slice(&xs, &[3])]).unwrap();
        assert_eq!(y[0].to_vec::<f32>().unwrap(), want, "x = {xs:?}");
    }
    let s = m.cache_stats();
    assert_eq!((s.captures, s.replays, s.reruns), (0, 0, 3));
}

#[test]
fn shapes_and_indices_given_as_inputs_are_read_each_call() {
    let _g = serial();
    // Reshape(x, shape): two calls with the same signature but different shape values.
    let m = model(GraphProto {
        name: "reshape".into(),
        node: vec![node("Reshape", &["x", "shape"], &["y"], vec![])],
        input: vec![
            value_of("x", 1, &[Some(6)]),
            value_of("shape", 7, &[Some(2)]),
        ],
        output: vec![value_of("y", 1, &[None, None])],
        ..Default::default()
    });
    let xs = Tensor::from_slice(&ramp(6, 1.0, 0.0), &[6]);
    for dims in [[2i64, 3], [3, 2], [1, 6]] {
        let shape = Tensor::from_slice(&dims, &[2]);
        let y = m.run(&[xs.clone(), shape]).unwrap();
        assert_eq!(y[0].shape(), vec![dims[0] as usize, dims[1] as usize]);
        assert_eq!(y[0].to_vec::<f32>().unwrap(), ramp(6, 1.0, 0.0));
    }
    assert_eq!(m.cache_stats().reruns, 3);
    // Gather(table, ids): a good call, then an out-of-range index is still refused.
    let g = model(GraphProto {
        name: "gather".into(),
        node: vec![node("Gather", &["table", "ids"], &["y"], vec![])],
        initializer: vec![weight("table", &[4], &[10.0, 11.0, 12.0, 13.0])],
        input: vec![value_of("ids", 7, &[Some(2)])],
        output: vec![value_of("y", 1, &[Some(2)])],
        ..Default::default()
    });
    let y = g.run(&[Tensor::from_slice(&[3i64, 0], &[2])]).unwrap();
    assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![13.0, 10.0]);
    let e = g.run(&[Tensor::from_slice(&[1i64, 4], &[2])]).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

#[test]
fn a_user_function_that_reads_its_input_is_rerun() {
    let _g = serial();
    let cache = SignatureCache::new();
    // Scales by the input's first element, read on the host: not replayable.
    let f = |x: &[Tensor]| {
        let k = x[0].to_vec::<f32>()?[0];
        Ok(vec![x[0].try_mul(k)?])
    };
    for v in [2.0f32, 3.0] {
        let y = cache
            .call(&[Tensor::from_slice(&[v, 1.0], &[2])], f)
            .unwrap();
        assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![v * v, v]);
    }
    // An input-derived value realized and read on the host taints the capture just as well.
    let g = |x: &[Tensor]| {
        let s = x[0].try_sum(&[0], false)?.to_vec::<f32>()?[0];
        Ok(vec![x[0].try_add(s)?])
    };
    for v in [1.0f32, 5.0] {
        let y = cache
            .call(&[Tensor::from_slice(&[v, 1.0, 0.0], &[3])], g)
            .unwrap();
        assert_eq!(
            y[0].to_vec::<f32>().unwrap(),
            vec![2.0 * v + 1.0, v + 2.0, v + 1.0]
        );
    }
    let s = cache.stats();
    assert_eq!((s.captures, s.replays, s.reruns), (0, 0, 4));
}

/// An int64 initializer.
fn int_weight(name: &str, dims: &[i64], vals: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 7,
        int64_data: vals.to_vec(),
        ..Default::default()
    }
}

/// `y = x[:, 2, :]` (a Constant node's index) and `z = Gather(x, axis 2, [[-1, 0], [1, 3]])` (an
/// initializer's): views of `x`, so no reduction runs, the capture replays, and the values are
/// the naive gather's.
fn constant_gather(idx: &[i64]) -> Model {
    let c = AttributeProto {
        name: "value_int".into(),
        r#type: attr_type::INT,
        i: 2,
        ..Default::default()
    };
    let axis = |a| AttributeProto {
        name: "axis".into(),
        r#type: attr_type::INT,
        i: a,
        ..Default::default()
    };
    model(GraphProto {
        name: "constant gather".into(),
        node: vec![
            node("Constant", &[], &["two"], vec![c]),
            node("Gather", &["x", "two"], &["y"], vec![axis(1)]),
            node("Gather", &["x", "idx"], &["z"], vec![axis(2)]),
        ],
        initializer: vec![int_weight("idx", &[2, 2], idx)],
        input: vec![value_of("x", 1, &[Some(2), Some(3), Some(4)])],
        output: vec![
            value_of("y", 1, &[Some(2), Some(4)]),
            value_of("z", 1, &[Some(2), Some(3), Some(2), Some(2)]),
        ],
        ..Default::default()
    })
}

#[test]
fn gathers_at_constant_indices_are_views() {
    let _g = serial();
    let idx = [-1i64, 0, 1, 3];
    let m = constant_gather(&idx);
    for shift in [0.0f32, 100.0] {
        let xs = ramp(24, 1.0, shift);
        let before = counters();
        let out = m.run(&[Tensor::from_slice(&xs, &[2, 3, 4])]).unwrap();
        assert_eq!(
            counters().reduce_ops,
            before.reduce_ops,
            "a gather at constant indices reduced"
        );
        let y: Vec<f32> = (0..2)
            .flat_map(|b| (0..4).map(move |k| b * 12 + 8 + k))
            .map(|i| xs[i])
            .collect();
        let z: Vec<f32> = (0..6)
            .flat_map(|bc| idx.iter().map(move |&i| bc * 4 + i.rem_euclid(4) as usize))
            .map(|i| xs[i])
            .collect();
        assert_eq!(out[0].shape(), vec![2, 4]);
        assert_eq!(out[0].to_vec::<f32>().unwrap(), y);
        assert_eq!(out[1].shape(), vec![2, 3, 2, 2]);
        assert_eq!(out[1].to_vec::<f32>().unwrap(), z);
    }
    let s = m.cache_stats();
    assert_eq!((s.captures, s.replays, s.reruns), (1, 1, 0));
    // A constant index out of range is refused, naming it, its axis and the node.
    let bad = constant_gather(&[0, 1, 4, 2]);
    let e = bad
        .run(&[Tensor::from_slice(&ramp(24, 1.0, 0.0), &[2, 3, 4])])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index 4") && e.contains("axis 2 of size 4") && e.contains("node 'z'"),
        "{e}"
    );
}
