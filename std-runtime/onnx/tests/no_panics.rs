//! Replays every known panic case of the ONNX operator handlers (issue 16, item 5): unchecked
//! ranks, attributes that overflow or index past a list, sorts that needed a total order, sizes
//! that allocated or looped without bound. Each case is a one-node model built here from the
//! proto structs; it must give an error naming the node (or, where the input is valid, the right
//! answer) — a panic fails the test. Also the `.npy` reader's non-ASCII dtype string.

use picograd_core::{Result, Tensor};
use picograd_onnx::proto::*;
use picograd_onnx::Model;

/// A float initializer.
fn f(dims: &[i64], vals: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: 1,
        float_data: vals.to_vec(),
        ..Default::default()
    }
}

/// An int64 initializer.
fn i(dims: &[i64], vals: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: 7,
        int64_data: vals.to_vec(),
        ..Default::default()
    }
}

/// A uint8 initializer.
fn u8s(dims: &[i64], vals: &[u8]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: 2,
        int32_data: vals.iter().map(|&v| i32::from(v)).collect(),
        ..Default::default()
    }
}

fn zeros(dims: &[i64]) -> TensorProto {
    f(dims, &vec![0.0; dims.iter().product::<i64>() as usize])
}

fn ai(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INT,
        i: v,
        ..Default::default()
    }
}

fn ais(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn astr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::STRING,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn agraph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attr_type::GRAPH,
        g: Some(g),
        ..Default::default()
    }
}

fn value(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: None,
    }
}

/// A model of one node `bad` of `op` (default domain, opset 23) whose inputs are initializers
/// (`None` leaves an optional input empty), with `outputs` outputs, run and realized.
fn run_in(
    domain: &str,
    op: &str,
    inputs: Vec<Option<TensorProto>>,
    attrs: Vec<AttributeProto>,
    outputs: usize,
) -> Result<Vec<Vec<f64>>> {
    let mut init = Vec::new();
    let mut names = Vec::new();
    for (k, t) in inputs.into_iter().enumerate() {
        match t {
            Some(mut t) => {
                t.name = format!("in{k}");
                names.push(t.name.clone());
                init.push(t);
            }
            None => names.push(String::new()),
        }
    }
    let outs: Vec<String> = (0..outputs).map(|k| format!("out{k}")).collect();
    let graph = GraphProto {
        name: "case".into(),
        node: vec![NodeProto {
            op_type: op.into(),
            domain: domain.into(),
            name: "bad".into(),
            input: names,
            output: outs.clone(),
            attribute: attrs,
        }],
        initializer: init,
        output: outs.iter().map(|o| value(o)).collect(),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: 10,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 23,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let model = Model::from_proto(model, "case")?;
    model
        .run(&[])?
        .iter()
        .map(Tensor::to_f64_vec)
        .collect::<Result<_>>()
}

fn run(
    op: &str,
    inputs: Vec<Option<TensorProto>>,
    attrs: Vec<AttributeProto>,
    outputs: usize,
) -> Result<Vec<Vec<f64>>> {
    run_in("", op, inputs, attrs, outputs)
}

/// The case must fail with an error naming node `bad` and its op.
#[track_caller]
fn refused(r: Result<Vec<Vec<f64>>>, op: &str) {
    match r {
        Ok(v) => panic!("{op}: expected an error, got {v:?}"),
        Err(e) => {
            let m = e.to_string();
            assert!(
                m.contains(&format!("in node 'bad' ({op})")),
                "{op}: the error does not name the node: {m}"
            );
        }
    }
}

#[test]
fn attention_rank_checks() {
    // 4-D Q with a 2-D K: K's axis 2 was read unchecked.
    refused(
        run(
            "Attention",
            vec![
                Some(zeros(&[1, 1, 2, 2])),
                Some(zeros(&[2, 2])),
                Some(zeros(&[1, 1, 2, 2])),
            ],
            vec![],
            1,
        ),
        "Attention",
    );
    // A scalar attn_mask: its last axis was read unchecked.
    refused(
        run(
            "Attention",
            vec![
                Some(zeros(&[1, 1, 2, 2])),
                Some(zeros(&[1, 1, 2, 2])),
                Some(zeros(&[1, 1, 2, 2])),
                Some(zeros(&[])),
            ],
            vec![],
            1,
        ),
        "Attention",
    );
    // A scalar nonpad_kv_seqlen, and a 2-D past key.
    let qkv = || {
        vec![
            Some(zeros(&[1, 1, 2, 2])),
            Some(zeros(&[1, 1, 2, 2])),
            Some(zeros(&[1, 1, 2, 2])),
        ]
    };
    let mut lens = qkv();
    lens.extend([None, None, None, Some(i(&[], &[2]))]);
    refused(run("Attention", lens, vec![], 1), "Attention");
    let mut past = qkv();
    past.extend([None, Some(zeros(&[2, 2])), Some(zeros(&[2, 2]))]);
    refused(run("Attention", past, vec![], 1), "Attention");
    // 3-D inputs whose K is 2-D.
    refused(
        run(
            "Attention",
            vec![
                Some(zeros(&[1, 2, 4])),
                Some(zeros(&[2, 4])),
                Some(zeros(&[1, 2, 4])),
            ],
            vec![ai("q_num_heads", 2), ai("kv_num_heads", 2)],
            1,
        ),
        "Attention",
    );
}

#[test]
fn rotary_and_linear_attention_rank_checks() {
    // A 1-D cos cache with position ids.
    refused(
        run(
            "RotaryEmbedding",
            vec![
                Some(zeros(&[1, 1, 2, 4])),
                Some(zeros(&[4])),
                Some(zeros(&[4])),
                Some(i(&[1, 2], &[0, 1])),
            ],
            vec![],
            1,
        ),
        "RotaryEmbedding",
    );
    // 2-D Q (heads() read axis 2).
    refused(
        run(
            "LinearAttention",
            vec![
                Some(zeros(&[2, 4])),
                Some(zeros(&[1, 2, 4])),
                Some(zeros(&[1, 2, 4])),
            ],
            vec![
                ai("q_num_heads", 1),
                ai("kv_num_heads", 1),
                astr("update_rule", "linear"),
            ],
            1,
        ),
        "LinearAttention",
    );
    // A 1-D decay gate.
    refused(
        run(
            "LinearAttention",
            vec![
                Some(zeros(&[1, 2, 4])),
                Some(zeros(&[1, 2, 4])),
                Some(zeros(&[1, 2, 4])),
                None,
                Some(zeros(&[2])),
            ],
            vec![
                ai("q_num_heads", 1),
                ai("kv_num_heads", 1),
                astr("update_rule", "gated"),
            ],
            1,
        ),
        "LinearAttention",
    );
}

#[test]
fn indexing_ops_refuse_scalars() {
    let idx = || Some(i(&[], &[0]));
    refused(
        run("Gather", vec![Some(f(&[], &[1.0])), idx()], vec![], 1),
        "Gather",
    );
    refused(
        run(
            "GatherElements",
            vec![Some(f(&[], &[1.0])), idx()],
            vec![],
            1,
        ),
        "GatherElements",
    );
    refused(
        run(
            "ScatterElements",
            vec![Some(f(&[], &[1.0])), idx(), Some(f(&[], &[2.0]))],
            vec![],
            1,
        ),
        "ScatterElements",
    );
    refused(
        run(
            "TopK",
            vec![Some(f(&[], &[1.0])), Some(i(&[1], &[1]))],
            vec![],
            2,
        ),
        "TopK",
    );
    refused(
        run(
            "Compress",
            vec![Some(f(&[], &[1.0])), Some(i(&[1], &[1]))],
            vec![ai("axis", 0)],
            1,
        ),
        "Compress",
    );
    refused(
        run(
            "ArgMax",
            vec![Some(f(&[], &[1.0]))],
            vec![ai("select_last_index", 1)],
            1,
        ),
        "ArgMax",
    );
    refused(
        run(
            "CumSum",
            vec![Some(f(&[], &[1.0])), Some(i(&[], &[0]))],
            vec![ai("exclusive", 1)],
            1,
        ),
        "CumSum",
    );
    refused(
        run("Hardmax", vec![Some(f(&[], &[1.0]))], vec![], 1),
        "Hardmax",
    );
    refused(
        run(
            "Squeeze",
            vec![Some(f(&[], &[1.0])), Some(i(&[1], &[0]))],
            vec![],
            1,
        ),
        "Squeeze",
    );
    refused(run("Split", vec![Some(f(&[], &[1.0]))], vec![], 1), "Split");
    refused(
        run(
            "ReverseSequence",
            vec![Some(f(&[], &[1.0])), Some(i(&[1], &[1]))],
            vec![],
            1,
        ),
        "ReverseSequence",
    );
    refused(
        run(
            "TensorScatter",
            vec![Some(f(&[], &[1.0])), Some(f(&[], &[1.0]))],
            vec![ai("axis", 0)],
            1,
        ),
        "TensorScatter",
    );
    // A cache axis of size 0 (circular mode took the write index modulo 0).
    refused(
        run(
            "TensorScatter",
            vec![Some(zeros(&[1, 0, 2])), Some(zeros(&[1, 1, 2]))],
            vec![ai("axis", 1), astr("mode", "circular")],
            1,
        ),
        "TensorScatter",
    );
}

#[test]
fn gather_nd_batch_dims_are_checked() {
    let data = || Some(zeros(&[2, 2]));
    let idx = || Some(i(&[2, 1], &[0, 1]));
    refused(
        run(
            "GatherND",
            vec![data(), idx()],
            vec![ai("batch_dims", i64::MAX)],
            1,
        ),
        "GatherND",
    );
    refused(
        run(
            "GatherND",
            vec![data(), idx()],
            vec![ai("batch_dims", 2)],
            1,
        ),
        "GatherND",
    );
    // Updates of another dtype than the data are moved as the data's bytes.
    let y = run(
        "ScatterND",
        vec![
            Some(i(&[4], &[1, 2, 3, 4])),
            Some(i(&[1, 1], &[2])),
            Some(u8s(&[1], &[9])),
        ],
        vec![],
        1,
    )
    .unwrap();
    assert_eq!(y[0], vec![1.0, 2.0, 9.0, 4.0]);
}

#[test]
fn window_ops_check_geometry() {
    // A weight with an empty kernel axis under SAME padding (kernel − 1 underflowed).
    refused(
        run(
            "Conv",
            vec![Some(zeros(&[1, 1, 3, 3])), Some(zeros(&[1, 1, 0, 3]))],
            vec![astr("auto_pad", "SAME_UPPER")],
            1,
        ),
        "Conv",
    );
    // A 1-D pool input (its spatial axes were sliced from axis 2).
    refused(
        run(
            "MaxPool",
            vec![Some(zeros(&[4]))],
            vec![ais("kernel_shape", &[])],
            1,
        ),
        "MaxPool",
    );
    // Pads that overflow the padded size.
    refused(
        run(
            "AveragePool",
            vec![Some(zeros(&[1, 1, 4]))],
            vec![
                ais("kernel_shape", &[2]),
                ais("pads", &[i64::MAX, i64::MAX]),
            ],
            1,
        ),
        "AveragePool",
    );
    // output_shape shorter than the spatial rank, and an empty spatial axis.
    refused(
        run(
            "ConvTranspose",
            vec![Some(zeros(&[1, 1, 2, 2])), Some(zeros(&[1, 1, 2, 2]))],
            vec![ais("output_shape", &[3])],
            1,
        ),
        "ConvTranspose",
    );
    refused(
        run(
            "ConvTranspose",
            vec![Some(zeros(&[1, 1, 0, 2])), Some(zeros(&[1, 1, 2, 2]))],
            vec![],
            1,
        ),
        "ConvTranspose",
    );
    refused(
        run(
            "ConvTranspose",
            vec![Some(zeros(&[1, 1, 2, 2])), Some(zeros(&[1, 1, 2, 2]))],
            vec![ais("output_padding", &[i64::MIN, 0])],
            1,
        ),
        "ConvTranspose",
    );
    refused(
        run(
            "MaxUnpool",
            vec![Some(zeros(&[2, 2])), Some(i(&[2, 2], &[0, 1, 2, 3]))],
            vec![ais("kernel_shape", &[])],
            1,
        ),
        "MaxUnpool",
    );
    refused(
        run(
            "CausalConvWithState",
            vec![
                Some(zeros(&[1, 1, 1])),
                Some(zeros(&[1, 1, 4])),
                None,
                Some(zeros(&[1, 1, 0])),
            ],
            vec![],
            2,
        ),
        "CausalConvWithState",
    );
}

#[test]
fn col2im_checks_pads_and_blocks() {
    let x = || Some(zeros(&[1, 4, 1]));
    refused(
        run(
            "Col2Im",
            vec![x(), Some(i(&[2], &[2, 2])), Some(i(&[2], &[2, 2]))],
            vec![ais("pads", &[0])],
            1,
        ),
        "Col2Im",
    );
    // A block larger than the image.
    refused(
        run(
            "Col2Im",
            vec![x(), Some(i(&[2], &[1, 1])), Some(i(&[2], &[2, 2]))],
            vec![],
            1,
        ),
        "Col2Im",
    );
    // More taps than the input has columns (with 0 columns every tap count divided them).
    refused(
        run(
            "Col2Im",
            vec![
                Some(zeros(&[1, 0, 1])),
                Some(i(&[2], &[1 << 30, 1 << 30])),
                Some(i(&[2], &[1 << 30, 1 << 30])),
            ],
            vec![],
            1,
        ),
        "Col2Im",
    );
}

#[test]
fn normalizations_check_rank_and_bound_work() {
    refused(
        run(
            "GroupNormalization",
            vec![Some(zeros(&[4])), Some(zeros(&[1])), Some(zeros(&[1]))],
            vec![ai("num_groups", 1)],
            1,
        ),
        "GroupNormalization",
    );
    refused(run("LRN", vec![Some(zeros(&[4]))], vec![], 1), "LRN");
    // A window far wider than the channels: the same sums, in bounded work (it looped `size`
    // times).
    let y = run(
        "LRN",
        vec![Some(f(&[1, 2, 1, 1], &[1.0, 2.0]))],
        vec![ai("size", i64::MAX)],
        1,
    )
    .unwrap();
    assert!((y[0][0] - 1.0).abs() < 1e-6 && (y[0][1] - 2.0).abs() < 1e-6);
}

#[test]
fn quantization_checks_axes() {
    for op in ["QuantizeLinear", "DequantizeLinear"] {
        refused(
            run(
                op,
                vec![Some(f(&[], &[1.0])), Some(f(&[2], &[1.0, 1.0]))],
                vec![ai("axis", 0)],
                1,
            ),
            op,
        );
    }
    refused(
        run(
            "ConvInteger",
            vec![
                Some(u8s(&[1, 1, 2, 2], &[0; 4])),
                Some(u8s(&[], &[1])),
                None,
                Some(u8s(&[2], &[0, 0])),
            ],
            vec![],
            1,
        ),
        "ConvInteger",
    );
}

#[test]
fn integer_operators_refuse_bad_operands() {
    let x = || Some(u8s(&[1, 1, 3, 3], &[7; 9]));
    let w = || Some(u8s(&[1, 1, 2, 2], &[1; 4]));
    let one = || Some(f(&[], &[0.5]));
    let z = || Some(u8s(&[], &[3]));
    // A float input, a zero scale and a negative one: errors naming the node, never a panic.
    let float_x = Some(f(&[1, 1, 3, 3], &[0.0; 9]));
    let conv = |x, xs| vec![x, xs, z(), w(), one(), z(), one(), z()];
    refused(
        run("QLinearConv", conv(float_x, one()), vec![], 1),
        "QLinearConv",
    );
    refused(
        run("QLinearConv", conv(x(), Some(f(&[], &[0.0]))), vec![], 1),
        "QLinearConv",
    );
    refused(
        run("QLinearConv", conv(x(), Some(f(&[], &[-1.0]))), vec![], 1),
        "QLinearConv",
    );
    let ms = |op: &str, ins, attrs| run_in("com.microsoft", op, ins, attrs, 1);
    // QLinearAdd with a per-element scale (the integer form needs scalars).
    let two = Some(f(&[2], &[0.5, 0.25]));
    let add = vec![x(), two, z(), x(), one(), z(), one(), z()];
    refused(ms("QLinearAdd", add, vec![]), "QLinearAdd");
    // A padded QLinearAveragePool and a QGemm with a float output are not integer kernels.
    let pool = vec![x(), one(), z(), one(), z()];
    let attrs = vec![ais("kernel_shape", &[2, 2]), ais("pads", &[1, 1, 1, 1])];
    refused(ms("QLinearAveragePool", pool, attrs), "QLinearAveragePool");
    let a = Some(u8s(&[2, 2], &[1; 4]));
    let gemm = vec![a.clone(), one(), z(), a, one(), z(), None];
    refused(ms("QGemm", gemm, vec![]), "QGemm");
    // Well-formed ones run: (7 − 3)·(1 − 0)·4 taps·(0.5·0.5/0.5) + 3 = 11, and with a weight
    // zero point of 3: (7 − 3)·(1 − 3)·4·0.5 + 3 = −13, clamped to 0.
    let mut ok = conv(x(), one());
    ok[5] = Some(u8s(&[], &[0]));
    assert_eq!(run("QLinearConv", ok, vec![], 1).unwrap()[0], vec![11.0; 4]);
    let y = run("QLinearConv", conv(x(), one()), vec![], 1).unwrap();
    assert_eq!(y[0], vec![0.0; 4]);
}

#[test]
fn recurrent_layers_check_shapes() {
    for op in ["RNN", "GRU", "LSTM"] {
        let g = match op {
            "RNN" => 1,
            "GRU" => 3,
            _ => 4,
        };
        // A 1-D sequence.
        refused(
            run(
                op,
                vec![
                    Some(zeros(&[2])),
                    Some(zeros(&[1, g, 1])),
                    Some(zeros(&[1, g, 1])),
                ],
                vec![],
                1,
            ),
            op,
        );
        // A 2-D recurrence weight (its axis 2 gave the hidden size).
        refused(
            run(
                op,
                vec![
                    Some(zeros(&[1, 1, 1])),
                    Some(zeros(&[1, g, 1])),
                    Some(zeros(&[1, g])),
                ],
                vec![],
                1,
            ),
            op,
        );
        // A hidden_size that overflows gates × hidden (and asked for huge zeros).
        refused(
            run(
                op,
                vec![
                    Some(zeros(&[1, 1, 1])),
                    Some(zeros(&[1, g, 1])),
                    Some(zeros(&[1, g, 1])),
                ],
                vec![ai("hidden_size", i64::MAX)],
                1,
            ),
            op,
        );
    }
}

#[test]
fn shape_ops_check_sizes() {
    let x = || Some(zeros(&[2, 2]));
    refused(
        run("Split", vec![x()], vec![ai("num_outputs", i64::MAX)], 1),
        "Split",
    );
    refused(
        run(
            "Split",
            vec![x(), Some(i(&[2], &[i64::MAX, i64::MAX]))],
            vec![],
            2,
        ),
        "Split",
    );
    refused(
        run("Tile", vec![x(), Some(i(&[2], &[i64::MAX, 1]))], vec![], 1),
        "Tile",
    );
    for op in ["DepthToSpace", "SpaceToDepth"] {
        refused(
            run(
                op,
                vec![Some(zeros(&[1, 4, 2, 2]))],
                vec![ai("blocksize", i64::MAX)],
                1,
            ),
            op,
        );
    }
    // Edge padding of an empty axis had no edge to copy.
    refused(
        run(
            "Pad",
            vec![Some(zeros(&[0, 2])), Some(i(&[4], &[1, 0, 0, 0]))],
            vec![astr("mode", "edge")],
            1,
        ),
        "Pad",
    );
    // i64::MIN pads negated with overflow; they crop everything.
    let y = run(
        "Pad",
        vec![x(), Some(i(&[4], &[i64::MIN, 0, 0, 0]))],
        vec![],
        1,
    )
    .unwrap();
    assert!(y[0].is_empty());
}

#[test]
fn host_ops_with_nan_and_empty_inputs() {
    // Unique over NaN: the sort panicked (not a total order); NaNs collapse and sort last, as
    // numpy's unique does.
    let y = run(
        "Unique",
        vec![Some(f(&[5], &[2.0, f32::NAN, 1.0, f32::NAN, 0.0]))],
        vec![],
        4,
    )
    .unwrap();
    assert_eq!(y[0].len(), 4);
    assert_eq!(&y[0][..3], &[0.0, 1.0, 2.0]);
    assert!(y[0][3].is_nan());
    assert_eq!(y[3], vec![1.0, 1.0, 1.0, 2.0]);
    assert_eq!(y[2], vec![2.0, 3.0, 1.0, 3.0, 0.0]);
    // NonMaxSuppression with NaN scores sorts them last.
    let boxes: Vec<f32> = (0..12).map(|k| (k / 4 * 10 + k % 4 * 2) as f32).collect();
    let y = run(
        "NonMaxSuppression",
        vec![
            Some(f(&[1, 3, 4], &boxes)),
            Some(f(&[1, 1, 3], &[f32::NAN, 0.5, f32::NAN])),
            Some(i(&[1], &[3])),
        ],
        vec![],
        1,
    )
    .unwrap();
    assert_eq!(&y[0][..3], &[0.0, 0.0, 1.0]);
    // The determinant of 0×0 matrices is 1 (chunks(0) panicked).
    let y = run("Det", vec![Some(zeros(&[2, 0, 0]))], vec![], 1).unwrap();
    assert_eq!(y[0], vec![1.0, 1.0]);
}

#[test]
fn signal_ops_bound_their_matrices() {
    refused(
        run(
            "DFT",
            vec![Some(zeros(&[1, 4, 1])), Some(i(&[], &[1 << 30]))],
            vec![],
            1,
        ),
        "DFT",
    );
    for (bins, len) in [(1e9f32, 64.0f32), (4.0, -1e12), (4.0, 1e12)] {
        refused(
            run(
                "MelWeightMatrix",
                vec![
                    Some(f(&[], &[bins])),
                    Some(f(&[], &[len])),
                    Some(f(&[], &[16000.0])),
                    Some(f(&[], &[0.0])),
                    Some(f(&[], &[8000.0])),
                ],
                vec![],
                1,
            ),
            "MelWeightMatrix",
        );
    }
    // Edges far outside the rows (a tiny sample rate) are visited only where rows exist.
    let y = run(
        "MelWeightMatrix",
        vec![
            Some(f(&[], &[2.0])),
            Some(f(&[], &[8.0])),
            Some(f(&[], &[1e-30])),
            Some(f(&[], &[0.0])),
            Some(f(&[], &[8000.0])),
        ],
        vec![],
        1,
    )
    .unwrap();
    assert_eq!(y[0].len(), 10);
    refused(
        run(
            "AffineGrid",
            vec![Some(zeros(&[6])), Some(i(&[4], &[1, 1, 2, 2]))],
            vec![],
            1,
        ),
        "AffineGrid",
    );
}

#[test]
fn control_flow_checks_its_bodies() {
    // A scalar scan input has no axis to scan.
    let body = GraphProto {
        name: "body".into(),
        node: vec![NodeProto {
            op_type: "Identity".into(),
            input: vec!["s".into()],
            output: vec!["o".into()],
            ..Default::default()
        }],
        input: vec![value("s")],
        output: vec![value("o")],
        ..Default::default()
    };
    refused(
        run(
            "Scan",
            vec![Some(f(&[], &[1.0]))],
            vec![ai("num_scan_inputs", 1), agraph("body", body)],
            1,
        ),
        "Scan",
    );
    // A body that returns fewer values than the scan carries.
    let empty = GraphProto {
        name: "body".into(),
        input: vec![value("c"), value("s")],
        ..Default::default()
    };
    refused(
        run(
            "Scan",
            vec![Some(f(&[], &[1.0])), Some(zeros(&[2]))],
            vec![ai("num_scan_inputs", 1), agraph("body", empty)],
            1,
        ),
        "Scan",
    );
    // A FlexAttention prob_mod graph without outputs.
    let none = GraphProto {
        name: "mod".into(),
        input: vec![value("p")],
        ..Default::default()
    };
    refused(
        run_in(
            "ai.onnx.preview",
            "FlexAttention",
            vec![
                Some(zeros(&[1, 1, 2, 2])),
                Some(zeros(&[1, 1, 2, 2])),
                Some(zeros(&[1, 1, 2, 2])),
            ],
            vec![agraph("prob_mod", none)],
            1,
        ),
        "FlexAttention",
    );
}

#[test]
fn or_on_floats_is_refused() {
    refused(
        run(
            "Or",
            vec![Some(f(&[1], &[1.0])), Some(f(&[1], &[0.0]))],
            vec![],
            1,
        ),
        "Or",
    );
}

#[test]
fn npy_with_a_non_ascii_dtype_is_an_error() {
    for descr in ["é4", "<é", "€", ""] {
        let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (1,), }}");
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header.as_bytes());
        bytes.extend([0u8; 4]);
        let e = picograd_onnx::npy::parse(&bytes, "x.npy").unwrap_err();
        assert!(
            e.to_string().contains("x.npy") && e.to_string().contains("dtype"),
            "{e}"
        );
    }
}
