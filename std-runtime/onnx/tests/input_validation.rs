//! Inputs are validated as onnxruntime validates them: the element type must be the declared
//! one (an f64 array is not run through an f32 model, int32 token ids are not taken for int64
//! ones), fixed axes must have their declared size and symbolic axes take any; Gather indices
//! given as a model input are checked against the gathered axis before anything is computed.
//! The model: `y = Gather(emb[10,4], ids[n]) + x[n,4]`, checked against a plain reference.
//! Indices known on the host — initializers and `Constant` nodes too — are checked the same way
//! for Gather, GatherElements, ScatterElements, GatherND and ScatterND (negative ones wrapped
//! first, as ONNX says); OneHot defines out-of-range indices (a row of `off_value`).

use picograd_core::Tensor;
use picograd_onnx::proto::*;
use picograd_onnx::Model;

const EMB_ROWS: usize = 10;

fn emb() -> Vec<f32> {
    (0..EMB_ROWS * 4).map(|i| i as f32 * 0.25 - 3.0).collect()
}

fn value(name: &str, elem_type: i32, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            dim_value: *d,
            dim_param: d.is_none().then(|| "n".to_string()),
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

fn model() -> Model {
    let node = |op: &str, name: &str, i: &[&str], o: &str| NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: i.iter().map(|s| s.to_string()).collect(),
        output: vec![o.into()],
        ..Default::default()
    };
    let proto = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![
                node("Gather", "lookup", &["emb", "ids"], "rows"),
                node("Add", "plus", &["rows", "x"], "y"),
            ],
            initializer: vec![TensorProto {
                name: "emb".into(),
                dims: vec![EMB_ROWS as i64, 4],
                data_type: 1,
                float_data: emb(),
                ..Default::default()
            }],
            input: vec![value("ids", 7, &[None]), value("x", 1, &[None, Some(4)])],
            output: vec![value("y", 1, &[None, Some(4)])],
            ..Default::default()
        }),
        ..Default::default()
    };
    Model::from_proto(proto, "gather.onnx").unwrap()
}

fn x(n: usize) -> Tensor {
    let v: Vec<f32> = (0..n * 4).map(|i| i as f32 * 0.5).collect();
    Tensor::from_slice(&v, &[n, 4])
}

fn run_err(m: &Model, ids: Tensor, x: Tensor) -> String {
    match m.run(&[ids, x]) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn matching_inputs_run_with_any_symbolic_size() {
    let m = model();
    let e = emb();
    for ids in [vec![3i64, 0, 9, -1], vec![5]] {
        let n = ids.len();
        let y = m
            .run(&[Tensor::from_slice(&ids, &[n]), x(n)])
            .unwrap()
            .remove(0);
        assert_eq!(y.dtype(), picograd_core::DType::F32);
        let got = y.to_f64_vec().unwrap();
        for (r, &id) in ids.iter().enumerate() {
            let row = id.rem_euclid(EMB_ROWS as i64) as usize;
            for c in 0..4 {
                let want = f64::from(e[row * 4 + c] + (r * 4 + c) as f32 * 0.5);
                assert!((got[r * 4 + c] - want).abs() < 1e-6, "{got:?}");
            }
        }
    }
}

#[test]
fn wrong_element_types_are_refused() {
    let m = model();
    let ids = Tensor::from_slice(&[1i64, 2], &[2]);
    let x64 = Tensor::from_slice(&[0.0f64; 8], &[2, 4]);
    let e = run_err(&m, ids.clone(), x64);
    assert!(
        e.contains("input 'x'") && e.contains("FLOAT[?,4]") && e.contains("DOUBLE[2,4]"),
        "{e}"
    );
    let e = run_err(&m, Tensor::from_slice(&[1i32, 2], &[2]), x(2));
    assert!(
        e.contains("input 'ids'") && e.contains("INT64[?]") && e.contains("INT32[2]"),
        "{e}"
    );
    let e = run_err(&m, Tensor::from_slice(&[1.0f32, 2.0], &[2]), x(2));
    assert!(e.contains("element type") && e.contains("FLOAT[2]"), "{e}");
}

#[test]
fn wrong_shapes_are_refused() {
    let m = model();
    let ids = Tensor::from_slice(&[1i64, 2], &[2]);
    let e = run_err(&m, ids.clone(), Tensor::from_slice(&[0.0f32; 10], &[2, 5]));
    assert!(
        e.contains("input 'x'") && e.contains("shape") && e.contains("FLOAT[2,5]"),
        "{e}"
    );
    let e = run_err(&m, Tensor::from_slice(&[1i64, 2], &[1, 2]), x(2));
    assert!(e.contains("input 'ids'") && e.contains("INT64[1,2]"), "{e}");
}

#[test]
fn out_of_range_gather_indices_are_refused_before_computing() {
    let m = model();
    let e = run_err(&m, Tensor::from_slice(&[0i64, 10, 2], &[3]), x(3));
    assert!(
        e.contains("input 'ids'")
            && e.contains("index 10")
            && e.contains("element 1")
            && e.contains("size 10")
            && e.contains("lookup"),
        "{e}"
    );
    let e = run_err(&m, Tensor::from_slice(&[-11i64], &[1]), x(1));
    assert!(e.contains("index -11") && e.contains("-10 to 9"), "{e}");
}

// ---- indices known on the host: initializers and Constant nodes ----

fn ints(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 7,
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

fn floats(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: (0..n).map(|i| i as f32).collect(),
        ..Default::default()
    }
}

/// A model of one node `op` (named `probe`, attributes `attrs`) over initializers `inits`;
/// when `constant` is given, the input named like it comes from a `Constant` node instead.
fn one_node(
    op: &str,
    attrs: Vec<AttributeProto>,
    inputs: &[&str],
    inits: Vec<TensorProto>,
    constant: Option<TensorProto>,
) -> Model {
    let mut nodes = Vec::new();
    if let Some(c) = constant {
        nodes.push(NodeProto {
            op_type: "Constant".into(),
            name: "const".into(),
            output: vec![c.name.clone()],
            attribute: vec![AttributeProto {
                name: "value".into(),
                r#type: 4,
                t: Some(c),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    nodes.push(NodeProto {
        op_type: op.into(),
        name: "probe".into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec!["y".into()],
        attribute: attrs,
        ..Default::default()
    });
    let proto = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: inits,
            output: vec![value("y", 1, &[])],
            ..Default::default()
        }),
        ..Default::default()
    };
    Model::from_proto(proto, "probe.onnx").unwrap()
}

fn axis(v: i64) -> Vec<AttributeProto> {
    vec![AttributeProto {
        name: "axis".into(),
        r#type: 2,
        i: v,
        ..Default::default()
    }]
}

fn refused(m: &Model) -> String {
    match m.run(&[]) {
        Ok(y) => panic!("accepted: {:?}", y[0].to_f64_vec()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn out_of_range_constant_indices_are_errors_naming_node_value_and_range() {
    // Gather with an initializer: row 12 of 10.
    let m = one_node(
        "Gather",
        Vec::new(),
        &["emb", "ids"],
        vec![floats("emb", &[10, 4]), ints("ids", &[3], &[0, 12, -1])],
        None,
    );
    let e = refused(&m);
    for want in [
        "index 12",
        "element 1",
        "size 10",
        "-10 to 9",
        "'probe'",
        "Gather",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    // GatherElements with a Constant node: -5 on an axis of 4 (ONNX allows -4 to 3).
    let m = one_node(
        "GatherElements",
        axis(1),
        &["x", "ids"],
        vec![floats("x", &[2, 4])],
        Some(ints("ids", &[2, 1], &[3, -5])),
    );
    let e = refused(&m);
    for want in [
        "index -5",
        "element 1",
        "-4 to 3",
        "'probe'",
        "GatherElements",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    // ScatterElements: index 2 on an axis of 2.
    let m = one_node(
        "ScatterElements",
        axis(0),
        &["x", "ids", "u"],
        vec![floats("x", &[2, 3]), floats("u", &[1, 3])],
        Some(ints("ids", &[1, 3], &[0, 2, 1])),
    );
    let e = refused(&m);
    for want in [
        "index 2",
        "element 1",
        "-2 to 1",
        "'probe'",
        "ScatterElements",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    // GatherND and ScatterND: the tuple (1, 7) into [2, 3].
    let m = one_node(
        "GatherND",
        Vec::new(),
        &["x", "ids"],
        vec![floats("x", &[2, 3]), ints("ids", &[1, 2], &[1, 7])],
        None,
    );
    let e = refused(&m);
    for want in [
        "GatherND",
        "index 7",
        "axis 1 of size 3",
        "-3 to 2",
        "'probe'",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    let m = one_node(
        "ScatterND",
        Vec::new(),
        &["x", "ids", "u"],
        vec![floats("x", &[2, 3]), floats("u", &[1])],
        Some(ints("ids", &[1, 2], &[-3, 0])),
    );
    let e = refused(&m);
    for want in [
        "ScatterND",
        "index -3",
        "axis 0 of size 2",
        "-2 to 1",
        "'probe'",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn in_range_negative_constant_indices_wrap_and_one_hot_defines_out_of_range() {
    // Gather rows -1 and 0 of [[0, 1], [2, 3], [4, 5]]: rows 2 and 0.
    let m = one_node(
        "Gather",
        Vec::new(),
        &["x", "ids"],
        vec![floats("x", &[3, 2]), ints("ids", &[2], &[-1, 0])],
        None,
    );
    let y = m.run(&[]).unwrap().remove(0).to_f64_vec().unwrap();
    assert_eq!(y, vec![4.0, 5.0, 0.0, 1.0]);
    // OneHot: ONNX defines an index outside [-depth, depth) as a row of off values.
    let vals = TensorProto {
        name: "v".into(),
        dims: vec![2],
        data_type: 1,
        float_data: vec![-1.0, 9.0],
        ..Default::default()
    };
    let depth = TensorProto {
        name: "d".into(),
        dims: vec![],
        data_type: 7,
        int64_data: vec![3],
        ..Default::default()
    };
    let m = one_node(
        "OneHot",
        Vec::new(),
        &["ids", "d", "v"],
        vec![ints("ids", &[3], &[1, 3, -1]), depth, vals],
        None,
    );
    let y = m.run(&[]).unwrap().remove(0).to_f64_vec().unwrap();
    assert_eq!(y, vec![-1.0, 9.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 9.0]);
}
