//! Writes the seed corpora of the fuzz targets: small valid files of each format, made by
//! picograd's own writers (`.npy`, safetensors, state blob) and, for ONNX, a small CNN plus one
//! single-node model per operator family (so the fuzzer starts from models that load and run).
//! Usage: `cargo run --release --example seeds -- <corpus-dir>`; writes `<corpus-dir>/<target>/seed-*` (a few KB in all).

use std::path::Path;

use picograd_core::{DType, Tensor};
use picograd_onnx::proto::*;
use prost::Message;

fn write(dir: &Path, target: &str, name: &str, bytes: &[u8]) {
    let d = dir.join(target);
    std::fs::create_dir_all(&d).expect("corpus folder");
    std::fs::write(d.join(format!("seed-{name}")), bytes).expect("seed file");
}

fn tensors() -> Vec<(String, Tensor)> {
    let f = Tensor::from_slice(&[1.0f32, -2.0, 3.5, 0.0, 5.0, 6.0], &[2, 3]);
    let i = Tensor::from_slice(&[1i64, 2, 3], &[3]);
    let b = Tensor::from_slice(&[true, false], &[2]);
    let u = Tensor::from_slice(&[7u8], &[]);
    let h = Tensor::from_slice(&[1.0f32, 2.0], &[2]).cast(DType::F16);
    vec![
        ("a.weight".into(), f),
        ("b.idx".into(), i),
        ("c.mask".into(), b),
        ("d.scalar".into(), u),
        ("e.half".into(), h),
    ]
}

fn value(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
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
    }
}

fn ints(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 7,
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn floats(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: v.to_vec(),
        ..Default::default()
    }
}

fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INT,
        i: v,
        ..Default::default()
    }
}

fn attr_is(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// A model of one node `op` reading input `x` (`[1, 2, 4, 4]`) and `extra` initializers.
fn single(
    op: &str,
    extra: Vec<TensorProto>,
    attrs: Vec<AttributeProto>,
    outs: usize,
) -> ModelProto {
    let mut input = vec!["x".to_string()];
    input.extend(extra.iter().map(|t| t.name.clone()));
    let output: Vec<String> = (0..outs).map(|k| format!("y{k}")).collect();
    ModelProto {
        ir_version: 10,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 23,
        }],
        graph: Some(GraphProto {
            name: op.into(),
            node: vec![NodeProto {
                op_type: op.into(),
                name: "n".into(),
                input,
                output: output.clone(),
                attribute: attrs,
                ..Default::default()
            }],
            initializer: extra,
            input: vec![value("x", &[1, 2, 4, 4])],
            output: output.iter().map(|o| value(o, &[])).collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn models() -> Vec<(&'static str, ModelProto)> {
    let w: Vec<f32> = (0..36).map(|k| k as f32 / 8.0 - 2.0).collect();
    let mut out = vec![
        (
            "conv",
            single(
                "Conv",
                vec![floats("w", &[2, 2, 3, 3], &w)],
                vec![attr_is("pads", &[1, 1, 1, 1])],
                1,
            ),
        ),
        (
            "maxpool",
            single(
                "MaxPool",
                vec![],
                vec![
                    attr_is("kernel_shape", &[2, 2]),
                    attr_is("strides", &[2, 2]),
                ],
                2,
            ),
        ),
        (
            "gather",
            single(
                "Gather",
                vec![ints("i", &[2], &[0, 1])],
                vec![attr_i("axis", 2)],
                1,
            ),
        ),
        (
            "reshape",
            single("Reshape", vec![ints("s", &[2], &[2, -1])], vec![], 1),
        ),
        (
            "slice",
            single(
                "Slice",
                vec![ints("a", &[1], &[1]), ints("b", &[1], &[3])],
                vec![],
                1,
            ),
        ),
        (
            "pad",
            single(
                "Pad",
                vec![ints("p", &[8], &[0, 0, 1, 1, 0, 0, 1, 1])],
                vec![],
                1,
            ),
        ),
        ("unique", single("Unique", vec![], vec![], 4)),
        (
            "softmax",
            single("Softmax", vec![], vec![attr_i("axis", 1)], 1),
        ),
        (
            "topk",
            single("TopK", vec![ints("k", &[1], &[2])], vec![], 2),
        ),
        ("resize", single("Resize", vec![], vec![], 1)),
        ("lrn", single("LRN", vec![], vec![attr_i("size", 3)], 1)),
        ("split", single("Split", vec![], vec![attr_i("axis", 1)], 2)),
        ("nonzero", single("NonZero", vec![], vec![], 1)),
        (
            "instnorm",
            single(
                "InstanceNormalization",
                vec![
                    floats("s", &[2], &[1.0, 2.0]),
                    floats("b", &[2], &[0.0, 1.0]),
                ],
                vec![],
                1,
            ),
        ),
        (
            "reducesum",
            single("ReduceSum", vec![ints("a", &[1], &[1])], vec![], 1),
        ),
        (
            "matmul",
            single("MatMul", vec![floats("m", &[4, 2], &w[..8])], vec![], 1),
        ),
    ];
    // One node per family the handlers' checks cover, on `x` and two small literals (many
    // refuse them with an error, which still starts the fuzzer inside the handler).
    for op in [
        "Attention",
        "RotaryEmbedding",
        "LinearAttention",
        "RNN",
        "GRU",
        "LSTM",
        "Col2Im",
        "DepthToSpace",
        "SpaceToDepth",
        "Tile",
        "Squeeze",
        "Unsqueeze",
        "ScatterElements",
        "GatherElements",
        "GatherND",
        "ScatterND",
        "ConvTranspose",
        "QuantizeLinear",
        "DequantizeLinear",
        "DFT",
        "STFT",
        "Einsum",
        "CumSum",
        "ArgMax",
        "Hardmax",
        "TensorScatter",
        "ReverseSequence",
        "GroupNormalization",
        "MaxUnpool",
        "Det",
        "Compress",
        "OneHot",
        "Expand",
        "ConstantOfShape",
        "Range",
        "Trilu",
        "CenterCropPad",
        "GridSample",
        "AffineGrid",
        "NonMaxSuppression",
        "MelWeightMatrix",
        "HannWindow",
        "LpPool",
        "GlobalLpPool",
        "LayerNormalization",
        "MeanVarianceNormalization",
        "Flatten",
        "Transpose",
        "Concat",
        "Where",
        "Or",
        "BitShift",
        "Mod",
        "Clip",
        "Cast",
        "Shrink",
        "CausalConvWithState",
        "SwiGLU",
        "Celu",
        "EyeLike",
    ] {
        let extra = vec![ints("a", &[2], &[1, 2]), floats("b", &[2], &[0.5, 2.0])];
        out.push((op, single(op, extra, vec![attr_i("axis", 1)], 2)));
    }
    out
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: seeds <corpus-dir>");
    let dir = Path::new(&dir);
    for (name, t) in tensors() {
        let bytes = picograd_onnx::npy::to_bytes(&t).expect("npy bytes");
        write(dir, "npy", &name, &bytes);
    }
    let named = tensors();
    write(
        dir,
        "safetensors",
        "all",
        &picograd_runtime::safetensors::to_bytes(&named).unwrap(),
    );
    write(
        dir,
        "safetensors",
        "one",
        &picograd_runtime::safetensors::to_bytes(&named[..1]).unwrap(),
    );
    write(
        dir,
        "state_blob",
        "all",
        &picograd_core::nn::state::save_blob(&named).unwrap(),
    );
    write(
        dir,
        "state_blob",
        "one",
        &picograd_core::nn::state::save_blob(&named[1..2]).unwrap(),
    );
    for (name, m) in models() {
        write(dir, "onnx_load_run", name, &m.encode_to_vec());
    }
}
