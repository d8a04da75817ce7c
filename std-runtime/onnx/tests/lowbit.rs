//! ONNX's low-bit element types through the importer, against worked values (the onnx
//! package's node-test data and its reference evaluator): packed int4 initializers (odd length,
//! low nibble first) and float8 codes in `int32_data` decode to their values; `Cast` and
//! `CastLike` round onto float8 with and without saturation (the type found through an
//! `Identity`); `QuantizeLinear` /
//! `DequantizeLinear` reach int4 and float8 with per-axis and blocked scales; a model input
//! declared INT4 takes its carrier (i8); short packed data is an error naming the tensor.

use picograd_core::{DType, Error, Tensor};
use picograd_onnx::proto::*;
use picograd_onnx::Model;

fn info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
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
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
    }
}

fn int_attr(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INT,
        i,
        ..Default::default()
    }
}

fn node(op: &str, ins: &[&str], out: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute: attrs,
        ..Default::default()
    }
}

fn model(
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    ins: Vec<ValueInfoProto>,
    outs: Vec<ValueInfoProto>,
) -> Model {
    let graph = GraphProto {
        name: "lowbit".into(),
        node: nodes,
        initializer: inits,
        input: ins,
        output: outs,
        ..Default::default()
    };
    let proto = ModelProto {
        ir_version: 10,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 23,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    Model::from_proto(proto, "lowbit test").unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.cast(DType::F32).to_vec::<f32>().unwrap()
}

const FLOAT: i32 = 1;
const INT8: i32 = 3;
const F8E4M3FN: i32 = 17;
const F8E5M2: i32 = 19;
const INT4: i32 = 22;

#[test]
fn packed_int4_and_float8_initializers_decode() {
    // int4 [1, -2, 3] packed as onnx.helper.make_tensor does: 0xE1, 0x03 (odd length, padded).
    let w4 = TensorProto {
        name: "w4".into(),
        dims: vec![3],
        data_type: INT4,
        raw_data: vec![0xE1, 0x03].into(),
        ..Default::default()
    };
    // float8 e4m3fn codes in int32_data: 0x38 = 1.0, 0x7E = 448, 0xD0 = -8, 0x7F = NaN.
    let w8 = TensorProto {
        name: "w8".into(),
        dims: vec![4],
        data_type: F8E4M3FN,
        int32_data: vec![0x38, 0x7E, 0xD0, 0x7F],
        ..Default::default()
    };
    let m = model(
        vec![
            node("Cast", &["w4"], "a", vec![int_attr("to", FLOAT as i64)]),
            node("Cast", &["w8"], "b", vec![int_attr("to", FLOAT as i64)]),
        ],
        vec![w4.clone(), w8],
        vec![],
        vec![info("a", FLOAT, &[3]), info("b", FLOAT, &[4])],
    );
    assert_eq!(m.weights()["w4"].dtype(), DType::I8);
    let out = m.run(&[]).unwrap();
    assert_eq!(f32s(&out[0]), vec![1.0, -2.0, 3.0]);
    let b = f32s(&out[1]);
    assert_eq!(&b[..3], &[1.0, 448.0, -8.0]);
    assert!(b[3].is_nan());
    // One byte short of three nibbles: an error naming the initializer.
    let short = TensorProto {
        raw_data: vec![0xE1].into(),
        ..w4
    };
    let proto = ModelProto {
        graph: Some(GraphProto {
            initializer: vec![short],
            ..Default::default()
        }),
        ..Default::default()
    };
    match Model::from_proto(proto, "short.onnx") {
        Err(Error::Format { file, detail, .. }) => {
            assert!(
                file.contains("w4") && detail.contains("2 bytes"),
                "{file}: {detail}"
            );
        }
        other => panic!("expected a format error, got {:?}", other.err()),
    }
}

// Input and outputs of onnx's test_cast_FLOAT_to_FLOAT8E4M3FN and
// test_cast_no_saturate_FLOAT_to_FLOAT8E5M2.
const X: [f32; 8] = [
    0.478_925_47,
    0.819_105_45,
    1e6,
    1e-7,
    f32::INFINITY,
    f32::NEG_INFINITY,
    -1e-7,
    -1e6,
];

#[test]
fn cast_and_castlike_round_onto_float8() {
    let like = TensorProto {
        name: "like".into(),
        dims: vec![0],
        data_type: F8E5M2,
        ..Default::default()
    };
    let m = model(
        vec![
            node("Cast", &["x"], "sat", vec![int_attr("to", F8E4M3FN as i64)]),
            // The type reaches CastLike through a node that only moves data.
            node("Identity", &["like"], "like2", vec![]),
            node(
                "CastLike",
                &["x", "like2"],
                "nosat",
                vec![int_attr("saturate", 0)],
            ),
        ],
        vec![like],
        vec![info("x", FLOAT, &[8])],
        vec![info("sat", F8E4M3FN, &[8]), info("nosat", F8E5M2, &[8])],
    );
    let out = m.run(&[Tensor::from_slice(&X, &[8])]).unwrap();
    let inf = f32::INFINITY;
    assert_eq!(
        f32s(&out[0]),
        vec![0.46875, 0.8125, 448.0, 0.0, 448.0, -448.0, -0.0, -448.0]
    );
    assert_eq!(
        f32s(&out[1]),
        vec![0.5, 0.875, inf, 0.0, inf, -inf, -0.0, -inf]
    );
}

#[test]
fn quantize_and_dequantize_reach_int4_and_float8() {
    // test_quantizelinear_int4: per-axis (axis 0) scales, int4 zero points.
    let x: Vec<f32> = vec![
        0.0, 2.5, 4.8, 8.6, -30.0, -20.0, 6.0, 9.0, 12.0, 15.0, 16.0, 40.0,
    ];
    let scale = TensorProto {
        name: "s".into(),
        dims: vec![3],
        data_type: FLOAT,
        float_data: vec![2.0, 3.0, 4.0],
        ..Default::default()
    };
    let zp4 = TensorProto {
        name: "z".into(),
        dims: vec![3],
        data_type: INT4,
        raw_data: vec![0x11, 0x01].into(),
        ..Default::default()
    };
    // Blocked: scales [3, 2] over x [3, 4] with block_size 2 along axis 1, into int8.
    let blocks = TensorProto {
        name: "bs".into(),
        dims: vec![3, 2],
        data_type: FLOAT,
        float_data: vec![1.0, 2.0, 4.0, 8.0, 0.5, 1.0],
        ..Default::default()
    };
    let m = model(
        vec![
            node(
                "QuantizeLinear",
                &["x", "s", "z"],
                "q",
                vec![int_attr("axis", 0)],
            ),
            node(
                "DequantizeLinear",
                &["q", "s", "z"],
                "dq",
                vec![int_attr("axis", 0)],
            ),
            node(
                "QuantizeLinear",
                &["x", "bs"],
                "qb",
                vec![
                    int_attr("axis", 1),
                    int_attr("block_size", 2),
                    int_attr("output_dtype", INT8 as i64),
                ],
            ),
        ],
        vec![scale, zp4, blocks],
        vec![info("x", FLOAT, &[3, 4])],
        vec![
            info("q", INT4, &[3, 4]),
            info("dq", FLOAT, &[3, 4]),
            info("qb", INT8, &[3, 4]),
        ],
    );
    let out = m.run(&[Tensor::from_slice(&x, &[3, 4])]).unwrap();
    assert_eq!(out[0].dtype(), DType::I8);
    let q = vec![1.0, 2.0, 3.0, 5.0, -8.0, -6.0, 3.0, 4.0, 4.0, 5.0, 5.0, 7.0];
    assert_eq!(f32s(&out[0]), q);
    let dq: Vec<f32> = q
        .iter()
        .enumerate()
        .map(|(i, v)| (v - 1.0) * [2.0, 3.0, 4.0][i / 4])
        .collect();
    assert_eq!(f32s(&out[1]), dq);
    // round(x / s) per block, half to even (2.5 → 2, 4.8 / 2 → 2, -30 / 4 → -8 (−7.5), ...).
    let qb = vec![
        0.0, 2.0, 2.0, 4.0, -8.0, -5.0, 1.0, 1.0, 24.0, 30.0, 16.0, 40.0,
    ];
    assert_eq!(f32s(&out[2]), qb);

    // test_quantizelinear_e4m3fn: a one-element float8 zero point is per tensor.
    let zp8 = TensorProto {
        name: "z8".into(),
        dims: vec![1],
        data_type: F8E4M3FN,
        int32_data: vec![0],
        ..Default::default()
    };
    let two = TensorProto {
        name: "two".into(),
        dims: vec![],
        data_type: FLOAT,
        float_data: vec![2.0],
        ..Default::default()
    };
    let m = model(
        vec![node("QuantizeLinear", &["x", "two", "z8"], "q", vec![])],
        vec![zp8, two],
        vec![info("x", FLOAT, &[5])],
        vec![info("q", F8E4M3FN, &[5])],
    );
    let x = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 100_000.0, 200.0], &[5]);
    let out = m.run(&[x]).unwrap();
    assert_eq!(f32s(&out[0]), vec![0.0, 0.5, 1.0, 448.0, 96.0]);
}

#[test]
fn an_int4_input_takes_its_carrier() {
    let m = model(
        vec![node("Cast", &["x"], "y", vec![int_attr("to", INT8 as i64)])],
        vec![],
        vec![info("x", INT4, &[3])],
        vec![info("y", INT8, &[3])],
    );
    let x = Tensor::from_slice(&[-8i8, 0, 7], &[3]);
    assert_eq!(
        m.run(&[x]).unwrap()[0].to_vec::<i8>().unwrap(),
        vec![-8, 0, 7]
    );
    let wrong = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    let e = m.run(&[wrong]).unwrap_err().to_string();
    assert!(e.contains("INT4"), "{e}");
}
