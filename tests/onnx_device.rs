//! ONNX → device, end to end: a Python helper (`scripts/onnx-device-model.py`, run in the `.venv`
//! that `scripts/python-env.sh` makes) builds a small CNN classifier with `onnx.helper`, saves
//! test inputs and onnxruntime's outputs; this test compiles the model for Cortex-M4 with the
//! library behind `picograd compile` (`picograd_cli::compile`), runs the bundle under QEMU on each input and checks the
//! prediction (argmax) and every probability (1e-4 relative) against onnxruntime.
//!
//! Without `.venv` the test prints why and returns (it is skipped, not passed silently; under
//! `CI=true` it fails);
//! `scripts/test.sh` makes the environment first, so CI runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};
use picograd_cli::{compile, CompileOptions};
use picograd_onnx::{npy, Model};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's python, or `None` (with the reason printed) when there is none.
fn python() -> Option<PathBuf> {
    let py = repo().join(".venv/bin/python");
    if py.is_file() {
        Some(py)
    } else {
        let why = format!(
            "onnx_device: no {} (run scripts/python-env.sh to make it)",
            py.display()
        );
        // CI makes the environment before the tests: missing there is a failure, not a skip.
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("{why}");
        }
        eprintln!("SKIPPED {why}");
        None
    }
}

/// Runs the helper into a fresh folder and returns it.
fn make_model(py: &Path) -> PathBuf {
    let dir = picograd::runtime::private_fs::private_temp_dir("picograd-onnx-device-")
        .unwrap()
        .keep();
    let out = Command::new(py)
        .arg(repo().join("scripts/onnx-device-model.py"))
        .arg(&dir)
        .output()
        .expect("run the python helper");
    assert!(
        out.status.success(),
        "onnx-device-model.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn floats(path: &Path) -> Vec<f32> {
    let t = npy::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    t.to_f64_vec().unwrap().iter().map(|&v| v as f32).collect()
}

fn argmax(v: &[f32]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

fn check_case(k: usize, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "case {k}: output length");
    assert_eq!(argmax(got), argmax(want), "case {k}: prediction differs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-4 * w.abs().max(1e-3);
        assert!(
            (g - w).abs() <= tol,
            "case {k}: probability {i} is {g} on cortex-m4, onnxruntime says {w}"
        );
    }
}

#[test]
fn onnx_cnn_on_cortex_m4_matches_onnxruntime() {
    let Some(py) = python() else { return };
    picograd::init();
    let dir = make_model(&py);
    let model = Model::load(&dir.join("cnn.onnx")).unwrap();
    let opts = CompileOptions {
        ..CompileOptions::new("cortex-m4", dir.join("bundle"))
    };
    let report = compile(&model, &opts).unwrap();
    println!("{report}");
    assert!(report.flash() > 0 && report.arena_bytes > 0);
    assert!(report.run.instructions.is_some_and(|n| n > 0));
    let target = Target::by_name("cortex-m4").unwrap();
    let (input, output) = (&report.inputs[0].0, &report.outputs[0]);
    for k in 0.. {
        let x = dir.join(format!("input_{k}.npy"));
        if !x.is_file() {
            assert!(k >= 3, "only {k} cases were written");
            break;
        }
        let feed = [(input.as_str(), Values::f32(&floats(&x)))];
        let r = build_and_run(&target, &opts.out, &feed, &BuildOptions::default()).unwrap();
        let got = r.output(output).and_then(Values::to_f32).expect("output");
        check_case(k, &got, &floats(&dir.join(format!("expected_{k}.npy"))));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
