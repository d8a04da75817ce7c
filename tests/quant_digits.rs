//! The digits CNN quantized by picograd's own calibration (`--quantize int8`): trained briefly
//! in picograd, written as a float ONNX graph (Reshape → Conv → Relu → MaxPool → Conv → Relu →
//! MaxPool → Flatten → Gemm), calibrated on 64 training images, it loses at most 1 point of
//! test accuracy (360 images) against fp32, and its bundle compiled for Cortex-M4 gives the
//! same outputs under QEMU as the desktop on a few test images (all 360 with
//! `QUANT_DIGITS_DEVICE_IMAGES=360`, what `scripts/quant-digits.sh` runs).

use picograd::nn::{Conv2d, Linear, Module};
use picograd::Tensor;
use picograd_cli::{compile, CompileOptions};
use picograd_onnx::proto::*;
use picograd_onnx::quantize::{quantize_int8, Calibrator};
use picograd_onnx::Model;

#[path = "../examples/common/digits.rs"]
mod digits;
#[allow(dead_code)]
#[path = "../examples/common/train.rs"]
mod train;

fn init(name: &str, dims: &[usize], t: &Tensor) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: 1,
        float_data: t.to_vec::<f32>().unwrap(),
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
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

/// A float value `[N, d]` with a symbolic batch axis.
fn batch_value(name: &str, d: i64) -> ValueInfoProto {
    let dim = vec![
        Dimension {
            dim_value: None,
            dim_param: Some("N".into()),
        },
        Dimension {
            dim_value: Some(d),
            dim_param: None,
        },
    ];
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

/// The trained CNN as an ONNX graph `image [N, 64] → logits [N, 10]`.
fn to_onnx(cnn: &train::Cnn) -> ModelProto {
    let conv = |x: &str, y: &str| {
        node(
            "Conv",
            &[x, &format!("{y}.w"), &format!("{y}.b")],
            y,
            vec![ints("pads", &[1, 1, 1, 1])],
        )
    };
    let pool = |x: &str, y: &str| {
        node(
            "MaxPool",
            &[x],
            y,
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        )
    };
    let w = |c: &Conv2d, n: &str| {
        vec![
            init(&format!("{n}.w"), &c.weight.shape(), &c.weight),
            init(
                &format!("{n}.b"),
                &[c.weight.shape()[0]],
                c.bias.as_ref().unwrap(),
            ),
        ]
    };
    let fc: &Linear = &cnn.fc;
    let mut gemm = node("Gemm", &["f", "fc.w", "fc.b"], "logits", Vec::new());
    gemm.attribute.push(AttributeProto {
        name: "transB".into(),
        r#type: attr_type::INT,
        i: 1,
        ..Default::default()
    });
    let mut initializer = vec![TensorProto {
        name: "shape".into(),
        dims: vec![4],
        data_type: 7,
        int64_data: vec![-1, 1, 8, 8],
        ..Default::default()
    }];
    initializer.extend(w(&cnn.c1, "c1"));
    initializer.extend(w(&cnn.c2, "c2"));
    initializer.push(init("fc.w", &fc.weight.shape(), &fc.weight));
    initializer.push(init("fc.b", &[10], fc.bias.as_ref().unwrap()));
    let graph = GraphProto {
        name: "digits_cnn".into(),
        node: vec![
            node("Reshape", &["image", "shape"], "x", Vec::new()),
            conv("x", "c1"),
            node("Relu", &["c1"], "r1", Vec::new()),
            pool("r1", "p1"),
            conv("p1", "c2"),
            node("Relu", &["c2"], "r2", Vec::new()),
            pool("r2", "p2"),
            node("Flatten", &["p2"], "f", Vec::new()),
            gemm,
        ],
        initializer,
        input: vec![batch_value("image", 64)],
        output: vec![batch_value("logits", 10)],
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

fn predictions(logits: &[f32]) -> Vec<usize> {
    logits
        .chunks(10)
        .map(|r| (0..10).fold(0, |b, i| if r[i] > r[b] { i } else { b }))
        .collect()
}

fn right(p: &[usize], labels: &[u8]) -> usize {
    p.iter()
        .zip(labels)
        .filter(|(p, &y)| **p == usize::from(y))
        .count()
}

#[test]
fn digits_cnn_quantized_by_calibration_keeps_accuracy_and_matches_on_cortex_m4() {
    picograd::init();
    let data = digits::load().unwrap();
    let (train_set, test_set) = digits::split(&data);
    let cnn = train::Cnn {
        c1: Conv2d::new(1, 8, 3, 1, 1, 3),
        c2: Conv2d::new(8, 16, 3, 1, 1, 4),
        fc: Linear::new(64, 10, true, 5),
    };
    let plan = train::Plan {
        epochs: 3,
        adam: picograd::nn::optim::AdamConfig::adam(0.01),
    };
    train::train(&cnn, &train_set, &plan).unwrap();

    let proto = to_onnx(&cnn);
    let float = Model::from_proto(proto.clone(), "digits cnn").unwrap();
    let x = Tensor::from_slice(&test_set.images, &[test_set.len(), 64]);
    let fp32 = float.run(std::slice::from_ref(&x)).unwrap()[0]
        .to_vec::<f32>()
        .unwrap();
    // The ONNX graph is the trained model: same predictions as picograd's forward.
    let direct = picograd::no_grad(|| cnn.forward(&x))
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(predictions(&fp32), predictions(&direct));

    let calib: Vec<Vec<Tensor>> = (0..64)
        .map(|i| {
            vec![Tensor::from_slice(
                &train_set.images[i * 64..(i + 1) * 64],
                &[1, 64],
            )]
        })
        .collect();
    let (q, report) = quantize_int8(&proto, &calib, Calibrator::MinMax, "digits cnn").unwrap();
    assert_eq!((report.convs, report.gemms, report.activations), (2, 1, 2));
    let int8 = Model::from_proto(q, "digits cnn int8").unwrap();
    let host = int8.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap();
    let (rf, rq) = (
        right(&predictions(&fp32), &test_set.labels),
        right(&predictions(&host), &test_set.labels),
    );
    println!("fp32 {rf}/360 right, int8 {rq}/360 right");
    assert!(
        rf * 100 >= 85 * 360,
        "the float model only got {rf}/360 right"
    );
    // At most 1 point lost: (rf - rq) / 360 <= 0.01.
    assert!(
        (rf as f64 - rq as f64) / 360.0 <= 0.01,
        "fp32 {rf}/360, int8 {rq}/360"
    );

    let n: usize = std::env::var("QUANT_DIGITS_DEVICE_IMAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6)
        .clamp(1, 360);
    let dir = picograd::runtime::private_fs::private_temp_dir("picograd-quant-digits-")
        .unwrap()
        .keep();
    // Batches of at most 60 images: 360 at once would not fit the part's 256 KiB of RAM.
    for start in (0..n).step_by(60) {
        let end = n.min(start + 60);
        let feed = Tensor::from_slice(&test_set.images[start * 64..end * 64], &[end - start, 64]);
        let opts = CompileOptions {
            inputs: vec![feed],
            ..CompileOptions::new("cortex-m4", &dir)
        };
        let r = compile(&int8, &opts).unwrap();
        println!("{r}");
        let check = r
            .check
            .expect("inputs were given: the device run is checked");
        let diff = check.max_abs_diff();
        println!("device vs desktop on images {start}..{end}: max abs diff {diff}");
        assert_eq!(
            diff, 0.0,
            "images {start}..{end}: device and desktop int8 outputs differ"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
