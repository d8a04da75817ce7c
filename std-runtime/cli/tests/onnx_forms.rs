//! The forms today's exporters write, compiled with `picograd_cli::compile` and checked against
//! onnxruntime: GRU and LSTM layers in every direction (forward, reverse, bidirectional) built
//! with the onnx helper API, exported, built for the host target (one under QEMU for
//! Cortex-M4) and run on the helper's input; scikit-learn LogisticRegression and MLPClassifier
//! as skl2onnx writes them (ZipMap output) compiled for the host; the `picograd` binary's `run`
//! writing ZipMap probabilities with a labels side file, and `inspect` reading no weights; a
//! 2-layer LSTM's `model.c` defining as many kernel functions at 24 steps as at 12. The initial states are graph inputs, as torch
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
fn compile_and_compare(
    dir: &Path,
    target: &str,
    shapes: Vec<(String, Vec<usize>)>,
    tol: f64,
) -> CompileReport {
    let model = Model::load(&dir.join("model.onnx")).unwrap();
    let opts = CompileOptions {
        shapes,
        ..CompileOptions::new(target, dir.join(format!("bundle-{target}")))
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
        let v = run.output(name).unwrap();
        let got: Vec<f64> = match (v.to_f32(), v.to_i64()) {
            (Some(f), _) => f.iter().map(|&x| f64::from(x)).collect(),
            (None, Some(i)) => i.iter().map(|&x| x as f64).collect(),
            (None, None) => panic!("{name}: unexpected output type {}", v.dtype),
        };
        pymodels::assert_close(&format!("{target} {name}"), &got, want, tol);
    }
    report
}

fn rnn_case(case: &str, target: &str) {
    let Some(dir) = pymodels::make(case) else {
        return;
    };
    compile_and_compare(&dir, target, Vec::new(), 1e-5);
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

/// (kernel functions `model.c` defines, kernel calls `model_run` makes).
fn kernel_functions(model_c: &str) -> (usize, usize) {
    let lines = || model_c.lines();
    let defs = lines()
        .filter(|l| l.starts_with("static ") && l.contains(" model_k") && l.ends_with('{'))
        .count();
    let calls = lines().filter(|l| l.starts_with("  model_k")).count();
    (defs, calls)
}

/// Identical kernels are written once: a 2-layer LSTM exported at 24 steps defines the same
/// kernel functions as at 12 (each step calls the shared function with its own offsets), makes
/// more calls, and both bundles equal onnxruntime on the host.
#[test]
fn lstm_steps_share_exported_functions() {
    let mut counts = Vec::new();
    for steps in [12, 24] {
        let Some(dir) = pymodels::make(&format!("lstm2_forward_{steps}")) else {
            return;
        };
        compile_and_compare(&dir, "host", Vec::new(), 1e-4);
        let c = std::fs::read_to_string(dir.join("bundle-host/model.c")).unwrap();
        let (defs, calls) = kernel_functions(&c);
        eprintln!("lstm2_forward_{steps}: model.c defines {defs} kernel functions, {calls} calls");
        counts.push((defs, calls));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let [(d12, c12), (d24, c24)] = counts[..] else {
        panic!("two cases ran: {counts:?}");
    };
    assert!(
        d12 > 0 && c24 > c12 + 12,
        "calls must grow with the steps: {counts:?}"
    );
    assert!(
        d12 < c12,
        "steps must share functions at 12 steps: {counts:?}"
    );
    assert_eq!(d12, d24, "kernel functions grew with the steps: {counts:?}");
}

fn sklearn_compiles(case: &str) {
    let Some(dir) = pymodels::make(case) else {
        return;
    };
    let rows = pymodels::npy(&dir, "input_0").shape();
    let report = compile_and_compare(&dir, "host", vec![("X".into(), rows)], 1e-5);
    assert_eq!(report.outputs, ["output_label", "output_probability"]);
    let header = std::fs::read_to_string(dir.join("bundle-host/model.h")).unwrap();
    let flat = header.replace("\n * ", " ");
    assert!(
        flat.contains("Output `output_probability` is the ONNX model's ZipMap output")
            && flat.contains("class labels 0, 1, 2 in that order"),
        "{header}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logistic_regression_compiles_for_host() {
    sklearn_compiles("logreg");
}

#[test]
fn mlp_classifier_compiles_for_host() {
    sklearn_compiles("mlp");
}

/// `picograd run` writes a ZipMap output as its probability matrix plus
/// `<output>.labels.npy`; both agree with onnxruntime's maps.
#[test]
fn run_writes_zipmap_probabilities_and_labels() {
    let Some(dir) = pymodels::make("mlp") else {
        return;
    };
    let out = dir.join("out");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_picograd"))
        .arg("run")
        .arg(dir.join("model.onnx"))
        .arg("-i")
        .arg(dir.join("input_0.npy"))
        .arg("--out")
        .arg(&out)
        .arg("--interp")
        .status()
        .unwrap();
    assert!(status.success());
    let probs = pymodels::npy(&out, "output_probability");
    assert_eq!(probs.shape(), [7, 3]);
    pymodels::assert_close(
        "probabilities",
        &probs.to_f64_vec().unwrap(),
        &pymodels::expected(&dir)[1],
        1e-5,
    );
    let labels = pymodels::npy(&out, "output_probability.labels");
    assert_eq!(
        labels.to_f64_vec().unwrap(),
        pymodels::npy(&dir, "classes").to_f64_vec().unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `picograd inspect` reads no weights: it works on a torch-style model whose external data
/// file is missing, while `run` names the missing file.
#[test]
fn inspect_reads_no_weights() {
    let Some(dir) = pymodels::make("external_data") else {
        return;
    };
    std::fs::remove_file(dir.join("model.onnx.data")).unwrap();
    let bin = env!("CARGO_BIN_EXE_picograd");
    let inspect = std::process::Command::new(bin)
        .arg("inspect")
        .arg(dir.join("model.onnx"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(inspect.status.success(), "{text}");
    assert!(
        text.contains("parameters: 163 in 4 weight tensors"),
        "{text}"
    );
    let run = std::process::Command::new(bin)
        .arg("run")
        .arg(dir.join("model.onnx"))
        .arg("-i")
        .arg(dir.join("input_0.npy"))
        .arg("--out")
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{err}");
    assert!(err.contains("model.onnx.data"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
