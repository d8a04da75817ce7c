//! `picograd compile`'s zero-valued placeholder inputs (issue 16, item 5): a model declaring an
//! input of `FLOAT[2^40]` aborted allocating it and one declaring `[i64::MAX, 4, 5]` overflowed
//! the element count; both are now errors naming the input, from `compile` itself and from
//! `zero_inputs` (behind `picograd run --shape`), before anything is allocated.

#[path = "../../onnx/tests/common/mod.rs"]
mod common;

use picograd_cli::compile::zero_inputs;
use picograd_cli::{compile, CompileOptions};
use picograd_onnx::proto::{Dimension, ModelProto};
use picograd_onnx::Model;
use prost::Message;

/// The tiny CNN with its input declared as `FLOAT[dims]`.
fn with_input_dims(dims: &[i64]) -> Model {
    let mut m: ModelProto = common::tiny_cnn();
    let g = m.graph.as_mut().unwrap();
    let t = g.input[0].r#type.as_mut().unwrap();
    let s = t.tensor_type.as_mut().unwrap().shape.as_mut().unwrap();
    s.dim = dims
        .iter()
        .map(|&d| Dimension {
            dim_value: Some(d),
            dim_param: None,
        })
        .collect();
    Model::from_bytes(&m.encode_to_vec(), "huge.onnx").unwrap()
}

#[test]
fn huge_declared_inputs_are_refused_not_allocated() {
    for dims in [
        vec![1i64 << 40],
        vec![i64::MAX, 4, 5],
        vec![1 << 20, 1 << 20],
    ] {
        let model = with_input_dims(&dims);
        let e = zero_inputs(&model, &[]).expect_err("a huge placeholder");
        let m = e.to_string();
        assert!(m.contains("input 'x'") && m.contains("elements"), "{m}");
        let out = picograd_runtime::private_fs::private_temp_dir("picograd-huge-")
            .unwrap()
            .keep();
        let e = compile(&model, &CompileOptions::new("host", out.clone())).expect_err("refused");
        assert!(e.to_string().contains("input 'x'"), "{e}");
        let _ = std::fs::remove_dir_all(out);
    }
}
