//! The forms today's exporters write, compiled with `picograd_cli::compile` and checked against
//! onnxruntime: GRU and LSTM layers in every direction (forward, reverse, bidirectional) built
//! with the onnx helper API, exported, built for the host target (one under QEMU for
//! Cortex-M4) and run on the helper's input. The initial states are graph inputs, as torch
//! exports them: each direction's first step reads its slice of the two-direction state
//! through the same view a later step uses on a one-direction buffer — the lowering cache,
//! keyed by the AST alone, once handed the later step the first one's kernel, sized for the
//! other buffer, and export refused it.

#[path = "../../onnx/tests/pymodels/mod.rs"]
mod pymodels;

use std::path::Path;

use picograd_cli::{compile, CompileOptions, CompileReport};
use picograd_onnx::Model;
use picograd_runtime::target::{build_and_run, BuildOptions, Target, Values};

/// Compiles `dir/model.onnx` for `target`, runs the bundle on the helper's inputs and compares
/// every output with onnxruntime's.
fn compile_and_compare(dir: &Path, target: &str, tol: f64) -> CompileReport {
    let model = Model::load(&dir.join("model.onnx")).unwrap();
    let opts = CompileOptions {
        target: target.into(),
        out: dir.join(format!("bundle-{target}")),
        shapes: Vec::new(),
        build: Default::default(),
    };
    let report = compile(&model, &opts).unwrap_or_else(|e| panic!("compile: {e}"));
    let inputs = pymodels::inputs(dir);
    let feed: Vec<(&str, Values)> = report
        .inputs
        .iter()
        .zip(&inputs)
        .map(|((name, _), t)| {
            let v: Vec<f32> = t.to_f64_vec().unwrap().iter().map(|&v| v as f32).collect();
            (name.as_str(), Values::f32(&v))
        })
        .collect();
    let t = Target::by_name(target).unwrap();
    let run = build_and_run(&t, &opts.out, &feed, &BuildOptions::default())
        .unwrap_or_else(|e| panic!("build and run on {target}: {e}"));
    let expected = pymodels::expected(dir);
    assert_eq!(report.outputs.len(), expected.len());
    for (name, want) in report.outputs.iter().zip(&expected) {
        let got: Vec<f64> = run
            .output(name)
            .unwrap()
            .to_f32()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        pymodels::assert_close(&format!("{target} {name}"), &got, want, tol);
    }
    report
}

fn rnn_case(case: &str, target: &str) {
    let Some(dir) = pymodels::make(case) else {
        return;
    };
    compile_and_compare(&dir, target, 1e-5);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gru_forward_exports() {
    rnn_case("gru_forward", "host");
}

#[test]
fn gru_reverse_exports() {
    rnn_case("gru_reverse", "host");
}

#[test]
fn gru_bidirectional_exports() {
    rnn_case("gru_bidirectional", "host");
}

#[test]
fn lstm_forward_exports() {
    rnn_case("lstm_forward", "host");
}

#[test]
fn lstm_reverse_exports() {
    rnn_case("lstm_reverse", "host");
}

#[test]
fn lstm_bidirectional_exports() {
    rnn_case("lstm_bidirectional", "host");
}

#[test]
fn lstm_bidirectional_on_cortex_m4() {
    rnn_case("lstm_bidirectional", "cortex-m4");
}
