//! Models the tests build with the onnx helper API (and skl2onnx): runs
//! `scripts/onnx-test-models.py CASE DIR` in the `.venv` that `scripts/python-env.sh` makes and
//! reads back its inputs and onnxruntime's outputs. Shared by this crate's tests and
//! `picograd-cli`'s (included there by path).
//!
//! Without the environment a test fails when `CI=true` (the suite's scripts make it first) and
//! is skipped with a message otherwise.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use picograd_core::Tensor;
use picograd_onnx::npy;

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn missing(what: &str) -> Option<PathBuf> {
    let msg = format!("{what} (run scripts/python-env.sh to make the environment)");
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and {msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}

/// The venv's python, or `None` (the test is skipped) when there is none outside CI.
pub fn python() -> Option<PathBuf> {
    let py = repo().join(".venv/bin/python");
    if py.is_file() {
        Some(py)
    } else {
        missing(&format!("no {}", py.display()))
    }
}

/// Writes case `case` of the helper into a fresh folder and returns the folder, or `None` when
/// the environment (or a Python module the case needs) is missing outside CI.
pub fn make(case: &str) -> Option<PathBuf> {
    let py = python()?;
    let needs_sklearn = matches!(case, "logreg" | "logreg_binary" | "mlp" | "logreg_strings");
    if needs_sklearn {
        let ok = Command::new(&py)
            .args(["-c", "import skl2onnx, sklearn"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return missing("skl2onnx or scikit-learn is not installed in .venv");
        }
    }
    // A fresh folder under a random name: nothing another user could plant.
    let dir = tempfile::Builder::new()
        .prefix(&format!("picograd-pymodel-{case}-"))
        .tempdir()
        .expect("a temporary folder")
        .keep();
    let out = Command::new(&py)
        .arg(repo().join("scripts/onnx-test-models.py"))
        .arg(case)
        .arg(&dir)
        .output()
        .expect("run scripts/onnx-test-models.py");
    assert!(
        out.status.success(),
        "onnx-test-models.py {case} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir)
}

/// `DIR/NAME.npy` as a tensor.
pub fn npy(dir: &Path, name: &str) -> Tensor {
    let p = dir.join(format!("{name}.npy"));
    npy::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The case's inputs (`input_<k>.npy`, as many as there are).
pub fn inputs(dir: &Path) -> Vec<Tensor> {
    (0..)
        .map_while(|k| {
            dir.join(format!("input_{k}.npy"))
                .is_file()
                .then(|| npy(dir, &format!("input_{k}")))
        })
        .collect()
}

/// onnxruntime's outputs (`expected_<k>.npy`), as f64.
pub fn expected(dir: &Path) -> Vec<Vec<f64>> {
    (0..)
        .map_while(|k| {
            dir.join(format!("expected_{k}.npy"))
                .is_file()
                .then(|| npy(dir, &format!("expected_{k}")).to_f64_vec().unwrap())
        })
        .collect()
}

/// Asserts `got` is within `tol` (relative to max(|want|, 1)) of `want`, element by element.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "{what}[{i}]: picograd {g}, onnxruntime {w}"
        );
    }
}
