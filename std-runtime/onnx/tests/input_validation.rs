//! Inputs are validated as onnxruntime validates them: the element type must be the declared
//! one (an f64 array is not run through an f32 model, int32 token ids are not taken for int64
//! ones), fixed axes must have their declared size and symbolic axes take any; Gather indices
//! given as a model input are checked against the gathered axis before anything is computed.
//! The model: `y = Gather(emb[10,4], ids[n]) + x[n,4]`, checked against a plain reference.

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
