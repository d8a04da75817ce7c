//! The QDQ rewrite (`src/qdq.rs`) on hand-built graphs: a `DequantizeLinear → Conv →
//! QuantizeLinear` group becomes one QLinearConv; a group whose float Conv output has a second
//! reader (here: it is also a graph output) keeps the float path. Both forms compute the same
//! quantized output, within one step (the float path rounds the product of two f32 scales
//! twice, the integer path once), and the fused one equals a naive integer reference exactly.
//! ReLU and MaxPool between equal quantization parameters run on the integers.

use picograd_core::Tensor;
use picograd_onnx::proto::*;
use picograd_onnx::Model;

fn tensor(name: &str, dims: &[i64], data_type: i32) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type,
        ..Default::default()
    }
}

fn f32s(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        float_data: v.to_vec(),
        ..tensor(name, dims, 1)
    }
}

/// uint8 (2), int8 (3) or int32 (6) values.
fn ints(name: &str, dims: &[i64], data_type: i32, v: &[i32]) -> TensorProto {
    TensorProto {
        int32_data: v.to_vec(),
        ..tensor(name, dims, data_type)
    }
}

fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

fn value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        ..Default::default()
    }
}

const X: [i32; 16] = [
    0, 9, 200, 31, 77, 128, 255, 3, 64, 90, 17, 250, 5, 140, 33, 101,
];
const W: [i32; 8] = [3, -7, 12, 100, 90, -5, 20, -1]; // [2, 1, 2, 2]
const B: [i32; 2] = [-150, 420];
const SCALES: (f32, [f32; 2], f32) = (0.02, [0.011, 0.0037], 0.05);

/// x_q[1,1,4,4] (uint8, zp 10) ⊛ w[2,1,2,2] (int8 per channel) + b → y_q (uint8, zp 3), in QDQ
/// form; with `float_reader` the Conv's float output is a graph output too.
fn model(float_reader: bool) -> ModelProto {
    let (xs, ws, ys) = SCALES;
    let bias_scales: Vec<f32> = ws.iter().map(|w| xs * w).collect();
    let init = vec![
        ints("xq", &[1, 1, 4, 4], 2, &X),
        f32s("xs", &[], &[xs]),
        ints("xz", &[], 2, &[10]),
        ints("wq", &[2, 1, 2, 2], 3, &W),
        f32s("ws", &[2], &ws),
        ints("wz", &[2], 3, &[0, 0]),
        ints("bq", &[2], 6, &B),
        f32s("bs", &[2], &bias_scales),
        ints("bz", &[2], 6, &[0, 0]),
        f32s("ys", &[], &[ys]),
        ints("yz", &[], 2, &[3]),
    ];
    let axis0 = |mut n: NodeProto| {
        n.attribute.push(AttributeProto {
            name: "axis".into(),
            r#type: attr_type::INT,
            i: 0,
            ..Default::default()
        });
        n
    };
    let nodes = vec![
        node("DequantizeLinear", &["xq", "xs", "xz"], "x"),
        axis0(node("DequantizeLinear", &["wq", "ws", "wz"], "w")),
        axis0(node("DequantizeLinear", &["bq", "bs", "bz"], "b")),
        node("Conv", &["x", "w", "b"], "c"),
        node("QuantizeLinear", &["c", "ys", "yz"], "y"),
    ];
    let mut output = vec![value("y")];
    if float_reader {
        output.push(value("c"));
    }
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(GraphProto {
            name: "qdq".into(),
            node: nodes,
            initializer: init,
            output,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Plain integer loops: the 3×3 outputs of each channel, requantized by the exact f32 ratio
/// `xs·ws/ys`, rounded half to even, plus the zero point, clamped.
fn reference() -> Vec<f64> {
    let (xs, ws, ys) = SCALES;
    let mut out = Vec::new();
    for (c, &w_scale) in ws.iter().enumerate() {
        let ratio = f64::from(xs * w_scale / ys);
        for y in 0..3 {
            for x in 0..3 {
                let mut acc = i64::from(B[c]);
                for (k, (dy, dx)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
                    let xv = i64::from(X[(y + dy) * 4 + x + dx]) - 10;
                    acc += xv * i64::from(W[c * 4 + k]);
                }
                // |acc| < 2^21 and ratio has 24 bits: the product is exact in f64.
                let r = (acc as f64 * ratio).round_ties_even() + 3.0;
                out.push(r.clamp(0.0, 255.0));
            }
        }
    }
    out
}

fn run(m: &Model) -> Vec<f64> {
    let y: Vec<Tensor> = m.run(&[]).unwrap();
    y[0].to_f64_vec().unwrap()
}

#[test]
fn a_qdq_conv_group_becomes_one_integer_conv() {
    let m = Model::from_proto(model(false), "qdq").unwrap();
    let ops: Vec<&str> = m.nodes().map(|n| n.op_type.as_str()).collect();
    assert_eq!(
        ops,
        ["QLinearConv"],
        "the group and its dead DequantizeLinears are gone"
    );
    assert_eq!(run(&m), reference());
}

#[test]
fn a_group_with_a_second_reader_keeps_the_float_path() {
    let m = Model::from_proto(model(true), "qdq").unwrap();
    let ops: Vec<&str> = m.nodes().map(|n| n.op_type.as_str()).collect();
    assert!(
        ops.contains(&"Conv") && !ops.contains(&"QLinearConv"),
        "{ops:?}"
    );
    let (got, want) = (run(&m), reference());
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1.0,
            "float path {g}, integer reference {w}"
        );
    }
}

/// `DequantizeLinear → op → QuantizeLinear` with equal parameters on both sides, for a unary
/// `op` with attributes `attrs`.
fn passthrough(op: &str, attrs: Vec<AttributeProto>) -> ModelProto {
    let mut m = model(false);
    let g = m.graph.as_mut().unwrap();
    let mut n = node(op, &["x"], "c");
    n.attribute = attrs;
    g.node = vec![
        node("DequantizeLinear", &["xq", "xs", "xz"], "x"),
        n,
        node("QuantizeLinear", &["c", "xs", "xz"], "y"),
    ];
    m
}

#[test]
fn relu_and_max_pool_run_on_the_integers() {
    let m = Model::from_proto(passthrough("Relu", vec![]), "relu").unwrap();
    let ops: Vec<&str> = m.nodes().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["Max"], "ReLU is max(q, zero point)");
    let want: Vec<f64> = X.iter().map(|&v| f64::from(v.max(10))).collect();
    assert_eq!(run(&m), want);
    let k = AttributeProto {
        name: "kernel_shape".into(),
        r#type: attr_type::INTS,
        ints: vec![2, 2],
        ..Default::default()
    };
    let m = Model::from_proto(passthrough("MaxPool", vec![k]), "maxpool").unwrap();
    let ops: Vec<&str> = m.nodes().map(|n| n.op_type.as_str()).collect();
    assert_eq!(ops, ["MaxPool"]);
    let want: Vec<f64> = (0..3)
        .flat_map(|y| (0..3).map(move |x| (y, x)))
        .map(|(y, x)| {
            let taps = [
                X[y * 4 + x],
                X[y * 4 + x + 1],
                X[y * 4 + x + 4],
                X[y * 4 + x + 5],
            ];
            f64::from(*taps.iter().max().unwrap())
        })
        .collect();
    assert_eq!(run(&m), want);
}
