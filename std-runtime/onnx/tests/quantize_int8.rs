//! `--quantize int8` (`src/quantize.rs`) on a hand-built float graph, Conv → BatchNormalization
//! → Relu → MaxPool → Flatten → Gemm: after calibration the graph holds only integer layers
//! (QLinearConv, QGemm, int8 MaxPool/Flatten) between one QuantizeLinear and one
//! DequantizeLinear, and its outputs stay within a few output steps of the float model's on
//! inputs it was not calibrated on; a Gemm weight stored [K, N] and a 100th-percentile range
//! give the same int8 model as [N, K] and min/max. Bad calibration inputs are errors naming
//! the shapes.

use picograd_core::Tensor;
use picograd_onnx::proto::*;
use picograd_onnx::quantize::{quantize_int8, Calibrator};
use picograd_onnx::Model;

#[allow(dead_code)] // the shared model builders; this test takes two of them
mod common;
use common::{attr_ints, weight};

/// A fixed pseudo-random stream in [-1, 1).
fn noise(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

fn value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        ..Default::default()
    }
}

/// The test graph; with `trans_b` false the Gemm weight is stored `[K, N]` (no transB).
fn float_model_with(trans_b: bool) -> ModelProto {
    let pads = attr_ints("pads", &[1, 1, 1, 1]);
    let k2 = attr_ints("kernel_shape", &[2, 2]);
    let s2 = attr_ints("strides", &[2, 2]);
    let mut gemm = node("Gemm", &["f", "gw", "gb"], "y", Vec::new());
    let gw = noise(180, 2);
    let gw = if trans_b {
        gemm.attribute.push(AttributeProto {
            name: "transB".into(),
            r#type: attr_type::INT,
            i: 1,
            ..Default::default()
        });
        weight("gw", &[5, 36], &gw)
    } else {
        let t: Vec<f32> = (0..180).map(|i| gw[(i % 5) * 36 + i / 5]).collect();
        weight("gw", &[36, 5], &t)
    };
    let graph = GraphProto {
        node: vec![
            node("Conv", &["x", "cw", "cb"], "c", vec![pads]),
            node(
                "BatchNormalization",
                &["c", "g", "be", "mu", "var"],
                "n",
                Vec::new(),
            ),
            node("Relu", &["n"], "r", Vec::new()),
            node("MaxPool", &["r"], "p", vec![k2, s2]),
            node("Flatten", &["p"], "f", Vec::new()),
            gemm,
        ],
        initializer: vec![
            weight("cw", &[4, 1, 3, 3], &noise(36, 1)),
            weight("cb", &[4], &[0.1, -0.2, 0.3, 0.0]),
            weight("g", &[4], &[2.0, 0.5, 1.5, 3.0]),
            weight("be", &[4], &[0.2, 0.1, -0.3, 0.5]),
            weight("mu", &[4], &[0.1, -0.1, 0.2, 0.0]),
            weight("var", &[4], &[0.5, 2.0, 1.0, 0.25]),
            gw,
            weight("gb", &[5], &[0.5, -0.5, 0.25, 0.0, 1.0]),
        ],
        input: vec![value("x")],
        output: vec![value("y")],
        ..Default::default()
    };
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

fn float_model() -> ModelProto {
    float_model_with(true)
}

fn input(seed: u32) -> Tensor {
    Tensor::from_slice(&noise(2 * 36, seed), &[2, 1, 6, 6])
}

#[test]
fn calibrated_graph_is_integer_and_close_to_float() {
    let proto = float_model();
    let calib: Vec<Vec<Tensor>> = (10..26).map(|s| vec![input(s)]).collect();
    let (q, report) = quantize_int8(&proto, &calib, Calibrator::MinMax, "tiny").unwrap();
    assert_eq!((report.convs, report.gemms), (1, 1));
    assert_eq!((report.batchnorms, report.activations), (1, 1));
    let ops: Vec<&str> = q
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .map(|n| n.op_type.as_str())
        .collect();
    assert_eq!(
        ops,
        [
            "QuantizeLinear",
            "QLinearConv",
            "MaxPool",
            "Flatten",
            "QGemm",
            "DequantizeLinear"
        ]
    );
    let qmodel = Model::from_proto(q.clone(), "tiny int8").unwrap();
    let fmodel = Model::from_proto(proto, "tiny").unwrap();
    let init = &q.graph.as_ref().unwrap().initializer;
    let ys = init.iter().find(|t| t.name == "y.scale").unwrap();
    let step = f32::from_le_bytes(ys.raw_data[..4].try_into().unwrap());
    let mut worst = 0f32;
    for s in 40..44 {
        let x = input(s);
        let want = fmodel.run(std::slice::from_ref(&x)).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let got = qmodel.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap();
        for (a, b) in want.iter().zip(&got) {
            worst = worst.max((a - b).abs() / step);
        }
    }
    println!("worst error: {worst} output steps");
    // Input, weight and two activation roundings: a few output steps, not a wrong layer.
    assert!(
        worst <= 4.0,
        "quantized output {worst} steps from the float one"
    );
}

#[test]
fn bad_calibration_inputs_are_errors() {
    let proto = float_model();
    let e = quantize_int8(&proto, &[], Calibrator::MinMax, "tiny").unwrap_err();
    assert!(format!("{e}").contains("no calibration inputs"), "{e}");
    let wrong = vec![vec![Tensor::from_slice(&[0f32; 8], &[1, 1, 2, 4])]];
    let e = quantize_int8(&proto, &wrong, Calibrator::Percentile(99.9), "tiny").unwrap_err();
    let msg = format!("{e}");
    assert!(
        msg.contains("calibration input 0") && msg.contains("[1, 8]"),
        "{e}"
    );
}

#[test]
fn gemm_weights_stored_k_by_n_and_percentile_100_quantize_the_same() {
    let calib: Vec<Vec<Tensor>> = (10..14).map(|s| vec![input(s)]).collect();
    let run_with = |proto: ModelProto, how: Calibrator| {
        let (q, _) = quantize_int8(&proto, &calib, how, "tiny").unwrap();
        let m = Model::from_proto(q, "tiny int8").unwrap();
        m.run(&[input(50)]).unwrap()[0].to_vec::<f32>().unwrap()
    };
    let run = |proto: ModelProto| run_with(proto, Calibrator::MinMax);
    assert_eq!(run(float_model_with(true)), run(float_model_with(false)));
    // The 100th percentile and its mirror are the max and the min.
    let p100 = run_with(float_model(), Calibrator::Percentile(100.0));
    assert_eq!(p100, run(float_model()));
    let p90 = run_with(float_model(), Calibrator::Percentile(90.0));
    assert_ne!(p90, p100, "a 90th-percentile range is narrower");
}
