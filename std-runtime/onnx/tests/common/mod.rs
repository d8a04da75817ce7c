//! Model builders shared by the ONNX tests: the hand-built protobuf messages of a tiny CNN
//! (`x[1,1,4,4]` → Conv → Relu → GlobalAveragePool → Flatten → Gemm), used by this crate's
//! `onnx_import.rs` and by `picograd-cli`'s `tests/compile.rs` (included there by path).

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
