//! `picograd run --quantize int8 --calibrate FILE.npy` as a user meets it: the quantized model's
//! output stays within a few output steps of the float model's (the float path is
//! `run` without `--quantize`); `compile` with the same flags exports int8 weights; a
//! calibration file of the wrong dtype or shape is an error naming the file, its shape and
//! dtype, and an unknown scheme is a usage error.

#[path = "../../onnx/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use picograd_core::Tensor;
use picograd_onnx::npy;
use prost::Message;

fn picograd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_picograd"))
        .args(args)
        .env_remove("PICOGRAD_DEBUG")
        .env_remove("PICOGRAD_DEVICE")
        .output()
        .expect("the binary runs")
}

fn scratch() -> PathBuf {
    picograd_runtime::private_fs::private_temp_dir("picograd-cli-quant-")
        .unwrap()
        .keep()
}

/// `n` inputs of 16 pixels in [-1, 1], a fixed stream.
fn pixels(n: usize, seed: usize) -> Vec<f32> {
    (0..n * 16)
        .map(|i| (((i + seed) * 37 % 101) as f32 / 50.0) - 1.0)
        .collect()
}

#[test]
fn run_quantized_stays_near_float_and_bad_calibration_is_named() {
    let dir = scratch();
    let model = dir.join("tiny.onnx");
    std::fs::write(&model, common::tiny_cnn().encode_to_vec()).unwrap();
    let calib = dir.join("calib.npy");
    npy::write(&calib, &Tensor::from_slice(&pixels(32, 0), &[32, 1, 4, 4])).unwrap();
    let x = dir.join("x.npy");
    npy::write(&x, &Tensor::from_slice(&pixels(1, 5), &[1, 1, 4, 4])).unwrap();
    let (m, c, xs) = (
        model.to_str().unwrap(),
        calib.to_str().unwrap(),
        x.to_str().unwrap(),
    );
    let run = |out: &str, extra: &[&str]| {
        let o = dir.join(out);
        let mut args = vec!["run", m, "-i", xs, "-o", o.to_str().unwrap()];
        args.extend(extra);
        let r = picograd(&args);
        let err = String::from_utf8_lossy(&r.stderr).into_owned();
        assert!(r.status.success(), "{err}");
        (
            npy::read(&o.join("y.npy"))
                .unwrap()
                .to_vec::<f32>()
                .unwrap(),
            err,
        )
    };
    let (float, _) = run("f", &[]);
    let (int8, log) = run("q", &["--quantize", "int8", "--calibrate", c]);
    assert!(log.contains("1 conv, 1 gemm"), "{log}");
    // Measured: within 0.002 of outputs near 0.2–0.6 (a few int8 steps of each layer).
    for (a, b) in float.iter().zip(&int8) {
        assert!((a - b).abs() < 0.01, "float {float:?} vs int8 {int8:?}");
    }

    // compile takes the same flags: the host bundle of the int8 model builds and runs.
    let bundle = dir.join("bundle");
    let r = picograd(&[
        "compile",
        m,
        "--out",
        bundle.to_str().unwrap(),
        "--quantize",
        "int8",
        "--calibrate",
        c,
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let c_file = std::fs::read_to_string(bundle.join("model_weights.c")).unwrap();
    assert!(
        c_file.contains("const int8_t "),
        "no int8 weights in the bundle"
    );

    let bad = dir.join("bad.npy");
    npy::write(&bad, &Tensor::from_slice(&[1i32; 15], &[3, 5])).unwrap();
    let r = picograd(&[
        "run",
        m,
        "--quantize",
        "int8",
        "--calibrate",
        bad.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success());
    for part in ["bad.npy", "[3, 5]", "i32", "[N, 1, 4, 4]"] {
        assert!(err.contains(part), "no {part:?} in: {err}");
    }
    let r = picograd(&["run", m, "--quantize", "int4", "--calibrate", c]);
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("only scheme is int8"));
    let _ = std::fs::remove_dir_all(&dir);
}
