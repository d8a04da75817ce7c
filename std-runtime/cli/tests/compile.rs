//! `picograd_cli::compile` tests: a tiny CNN with a dynamic batch axis is refused until its shape
//! is given, then exported, built and run on the host target (the biases alone reach the output
//! on zero inputs); ONNX names become distinct C identifiers.

#[path = "../../onnx/tests/common/mod.rs"]
mod common;

use common::tiny_cnn;
use picograd_onnx::proto::{Dimension, ModelProto};
use picograd_onnx::Model;
use prost::Message;

/// The tiny CNN with a symbolic batch axis on its input.
fn tiny_cnn_dynamic() -> ModelProto {
    let mut m = tiny_cnn();
    let g = m.graph.as_mut().unwrap();
    let t = g.input[0].r#type.as_mut().unwrap();
    let s = t.tensor_type.as_mut().unwrap().shape.as_mut().unwrap();
    s.dim[0] = Dimension {
        dim_value: None,
        dim_param: Some("batch".into()),
    };
    m
}

#[test]
fn compile_needs_shapes_for_dynamic_inputs_and_runs_on_host() {
    use picograd_cli::compile::{c_names, parse_shape_arg};
    use picograd_cli::{compile, CompileOptions};
    let model = Model::from_bytes(&tiny_cnn_dynamic().encode_to_vec(), "tiny").unwrap();
    let out = std::env::temp_dir().join(format!("picograd-onnx-compile-{}", std::process::id()));
    let mut opts = CompileOptions {
        target: "host".into(),
        out: out.clone(),
        shapes: Vec::new(),
        ..CompileOptions::new("host", "")
    };
    let err = compile(&model, &opts).expect_err("dynamic input refused");
    assert!(err.to_string().contains("--shape x="), "{err}");
    assert!(parse_shape_arg("x=1,0").is_err() && parse_shape_arg("=1").is_err());
    opts.shapes = vec![parse_shape_arg("x=1,1,4,4").unwrap()];
    let report = compile(&model, &opts).unwrap();
    assert_eq!(report.inputs, vec![("x".to_string(), vec![1, 1, 4, 4])]);
    assert!(out.join("model.c").is_file() && report.kernels > 0);
    let y = report.run.output("y").unwrap().to_f32().unwrap();
    let want = reference_at_zero();
    for (g, w) in y.iter().zip(&want) {
        assert!((f64::from(*g) - w).abs() < 1e-5, "{y:?} vs {want:?}");
    }
    let names = c_names(model.inputs(), "in");
    assert_eq!(names, ["x"]);
    let _ = std::fs::remove_dir_all(&out);
}

/// The tiny CNN on an all-zero input: only the biases flow (ReLU of the conv bias).
fn reference_at_zero() -> Vec<f64> {
    let g = [0.1f64, 0.0];
    vec![g[0], g[1] + 0.5, g[0] + g[1] - 0.5]
}

#[test]
fn c_names_are_distinct_identifiers() {
    use picograd_cli::compile::c_names;
    use picograd_onnx::ValueSpec;
    let spec = |n: &str| ValueSpec {
        name: n.into(),
        elem_type: 1,
        shape: None,
    };
    let specs = [
        spec("input.1"),
        spec("input_1"),
        spec("0"),
        spec("model_x"),
        spec("int"),
    ];
    assert_eq!(
        c_names(&specs, "in"),
        ["input_1", "in1_input_1", "in_0", "in_model_x", "in_int"]
    );
}
