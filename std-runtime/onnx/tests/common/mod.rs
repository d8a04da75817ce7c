//! Model builders shared by the ONNX tests: the hand-built protobuf messages of a tiny CNN
//! (`x[1,1,4,4]` → Conv → Relu → GlobalAveragePool → Flatten → Gemm), used by this crate's
//! `onnx_import.rs` and by `picograd-cli`'s `tests/compile.rs` (included there by path), and of
//! a CNN over a `dim_param` batch ([`batch_cnn`], `dynamic_dims.rs` and the CLI's export of a
//! run-time batch).

use picograd_onnx::proto::*;

/// An INTS attribute.
pub fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn node(
    op: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// An f32 initializer.
pub fn weight(name: &str, dims: &[i64], vals: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: vals.to_vec(),
        ..Default::default()
    }
}

/// A float tensor value of fixed shape `dims`.
pub fn value(name: &str, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| Dimension {
            dim_value: Some(d),
            dim_param: None,
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
    }
}

/// x[1,1,4,4] → Conv(2 filters 3×3, pad 1) → Relu → GlobalAveragePool → Flatten → Gemm(2→3).
pub fn tiny_cnn() -> ModelProto {
    let w: Vec<f32> = (0..18).map(|i| (i as f32 - 9.0) / 10.0).collect();
    let graph = GraphProto {
        name: "tiny".into(),
        node: vec![
            node(
                "Conv",
                "conv",
                &["x", "w", "b"],
                &["c"],
                vec![attr_ints("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", "relu", &["c"], &["r"], vec![]),
            node("GlobalAveragePool", "gap", &["r"], &["g"], vec![]),
            node("Flatten", "flat", &["g"], &["f"], vec![]),
            node(
                "Gemm",
                "fc",
                &["f", "fw", "fb"],
                &["y"],
                vec![AttributeProto {
                    name: "transB".into(),
                    r#type: attr_type::INT,
                    i: 1,
                    ..Default::default()
                }],
            ),
        ],
        initializer: vec![
            weight("w", &[2, 1, 3, 3], &w),
            weight("b", &[2], &[0.1, -0.2]),
            weight("fw", &[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]),
            weight("fb", &[3], &[0.0, 0.5, -0.5]),
        ],
        input: vec![value("x", &[1, 1, 4, 4])],
        output: vec![value("y", &[1, 3])],
        ..Default::default()
    };
    opset17(graph)
}

/// `graph` as a model of IR version 8 importing the default domain at opset 17.
fn opset17(graph: GraphProto) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// An INT attribute.
#[allow(dead_code)] // not every test binary including this module uses it
pub fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INT,
        i: v,
        ..Default::default()
    }
}

/// A float value whose `None` dims are the `dim_param` `batch`.
#[allow(dead_code)] // not every test binary including this module uses it
pub fn batch_value(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let mut v = value(name, &[]);
    let dim = dims
        .iter()
        .map(|d| Dimension {
            dim_value: *d,
            dim_param: d.is_none().then(|| "batch".to_string()),
        })
        .collect();
    if let Some(t) = v.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.shape = Some(TensorShapeProto { dim });
    }
    v
}

/// `(i·7 mod 11 − 5)·scale + shift`: small exact-ish values for weights and inputs.
#[allow(dead_code)] // not every test binary including this module uses it
pub fn ramp(n: usize, scale: f32, shift: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * scale + shift)
        .collect()
}

/// The weights of [`batch_cnn`]: conv `[4,1,3,3]`, its bias `[4]`, the Gemm's `[64,3]`, `[3]`.
#[allow(dead_code)] // not every test binary including this module uses it
pub fn batch_cnn_weights() -> [Vec<f32>; 4] {
    [
        ramp(36, 0.1, 0.02),
        ramp(4, 0.05, 0.0),
        ramp(64 * 3, 0.03, -0.01),
        vec![0.1, 0.0, -0.1],
    ]
}

/// A CNN over a `dim_param` batch: `x[batch,1,8,8]` → Conv(4 filters 3×3, pad 1) → Relu →
/// MaxPool 2×2 = `p[batch,4,4,4]` → AveragePool 3×3 stride 1 pad 1 (padding not counted) →
/// Flatten → Gemm(64→3) = `y[batch,3]`; GlobalAveragePool(p) → Reshape `[0, 4]` =
/// `g[batch,4]`; the average pool → Reshape `[-1, 16]` = `q[batch·4,16]`.
#[allow(dead_code)] // not every test binary including this module uses it
pub fn batch_cnn() -> ModelProto {
    let [w, b, fw, fb] = batch_cnn_weights();
    let graph = GraphProto {
        name: "batch_cnn".into(),
        node: vec![
            node(
                "Conv",
                "conv",
                &["x", "w", "b"],
                &["c"],
                vec![attr_ints("pads", &[1, 1, 1, 1])],
            ),
            node("Relu", "relu", &["c"], &["r"], vec![]),
            node(
                "MaxPool",
                "pool",
                &["r"],
                &["p"],
                vec![
                    attr_ints("kernel_shape", &[2, 2]),
                    attr_ints("strides", &[2, 2]),
                ],
            ),
            node(
                "AveragePool",
                "avg",
                &["p"],
                &["a"],
                vec![
                    attr_ints("kernel_shape", &[3, 3]),
                    attr_ints("pads", &[1, 1, 1, 1]),
                    attr_int("count_include_pad", 0),
                ],
            ),
            node("Flatten", "flat", &["a"], &["f"], vec![attr_int("axis", 1)]),
            node("Gemm", "fc", &["f", "fw", "fb"], &["y"], vec![]),
            node("GlobalAveragePool", "gap", &["p"], &["gp"], vec![]),
            node("Reshape", "rg", &["gp", "shape_g"], &["g"], vec![]),
            node("Reshape", "rq", &["a", "shape_q"], &["q"], vec![]),
        ],
        initializer: vec![
            weight("w", &[4, 1, 3, 3], &w),
            weight("b", &[4], &b),
            weight("fw", &[64, 3], &fw),
            weight("fb", &[3], &fb),
            TensorProto {
                name: "shape_g".into(),
                dims: vec![2],
                data_type: 7,
                int64_data: vec![0, 4],
                ..Default::default()
            },
            TensorProto {
                name: "shape_q".into(),
                dims: vec![2],
                data_type: 7,
                int64_data: vec![-1, 16],
                ..Default::default()
            },
        ],
        input: vec![batch_value("x", &[None, Some(1), Some(8), Some(8)])],
        output: vec![
            batch_value("y", &[None, Some(3)]),
            batch_value("g", &[None, Some(4)]),
            unshaped("q"),
        ],
        ..Default::default()
    };
    opset17(graph)
}

/// A float value with no declared shape.
#[allow(dead_code)] // not every test binary including this module uses it
pub fn unshaped(name: &str) -> ValueInfoProto {
    let mut v = value(name, &[]);
    if let Some(t) = v.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.shape = None;
    }
    v
}
