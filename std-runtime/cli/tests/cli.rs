//! The `picograd` binary as a user meets it: `--help` shows the CLI's description, unknown
//! targets and budgets are usage errors (exit 2), a model too big for the selected part fails
//! before anything is built naming flash/RAM needed and available, `compile --input --check`
//! compares the device with the desktop, `run --shape`/`--bench`/`--max` work, and invalid
//! `PICOGRAD_DEBUG`/`PICOGRAD_DEVICE` values are warned about once.

#[path = "../../onnx/tests/common/mod.rs"]
mod common;
use common::value;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use picograd_onnx::proto::*;
use prost::Message;

fn picograd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_picograd"));
    cmd.args(args).env_remove("PICOGRAD_DEBUG");
    cmd.env_remove("PICOGRAD_DEVICE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh folder for one test.
fn scratch(tag: &str) -> PathBuf {
    picograd_runtime::private_fs::private_temp_dir(&format!("picograd-cli-{tag}-"))
        .unwrap()
        .keep()
}

fn write_model(dir: &Path, name: &str, m: &ModelProto) -> String {
    let p = dir.join(name);
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p.display().to_string()
}

fn model(nodes: Vec<NodeProto>, inits: Vec<TensorProto>, x: &[i64], y: &[i64]) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            name: "g".into(),
            node: nodes,
            initializer: inits,
            input: vec![value("x", x)],
            output: vec![value("y", y)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

fn zeros(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: 1,
        float_data: vec![0.01; n as usize],
        ..Default::default()
    }
}

/// `y = x · W`, W 1024 × 512 f32: 2 MiB of weights.
fn big_weights() -> ModelProto {
    let mm = node("MatMul", &["x", "w"], "y", vec![]);
    model(
        vec![mm],
        vec![zeros("w", &[1024, 512])],
        &[1, 1024],
        &[1, 512],
    )
}

/// Conv(8 filters) → Conv(1 filter) on a 100 × 100 image: 8 × 100 × 100 f32 (312.5 KiB) live
/// between the convolutions, tiny weights.
fn big_arena() -> ModelProto {
    let pads = AttributeProto {
        name: "pads".into(),
        r#type: attr_type::INTS,
        ints: vec![1, 1, 1, 1],
        ..Default::default()
    };
    let nodes = vec![
        node("Conv", &["x", "w1"], "h", vec![pads.clone()]),
        node("Relu", &["h"], "r", vec![]),
        node("Conv", &["r", "w2"], "y", vec![pads]),
    ];
    let inits = vec![zeros("w1", &[8, 1, 3, 3]), zeros("w2", &[1, 8, 3, 3])];
    model(nodes, inits, &[1, 1, 100, 100], &[1, 1, 100, 100])
}

#[test]
fn help_shows_the_cli_description_and_the_default_budget() {
    let o = picograd(&["--help"], &[]);
    assert!(o.status.success());
    let help = text(&o.stdout);
    assert!(help.contains(env!("CARGO_PKG_DESCRIPTION")), "{help}");
    assert!(help.contains("PICOGRAD_DEBUG"), "{help}");
    let o = picograd(&["compile", "--help"], &[]);
    let help = text(&o.stdout);
    assert!(
        help.contains("--budget") && help.contains("nrf52840"),
        "{help}"
    );
    assert!(help.contains("--check"), "{help}");
}

#[test]
fn unknown_target_or_budget_is_a_usage_error() {
    let dir = scratch("usage");
    let m = write_model(&dir, "tiny.onnx", &common::tiny_cnn());
    let out = dir.join("out").display().to_string();
    let o = picograd(
        &["compile", &m, "--target", "no-such-board", "--out", &out],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("no-such-board") && text(&o.stderr).contains("cortex-m4"));
    let args = [
        "compile",
        &m,
        "--target",
        "cortex-m4",
        "--budget",
        "esp32",
        "--out",
        &out,
    ];
    let o = picograd(&args, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("esp32") && err.contains("nrf52840"), "{err}");
    let o = picograd(&["compile", &m, "--out", &out, "--check"], &[]);
    assert_eq!(o.status.code(), Some(2), "--check without --input");
    let o = picograd(&["run", &m, "--shape", "x=1,oops"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn too_big_for_the_part_fails_before_building() {
    let dir = scratch("budget");
    let out = dir.join("out");
    let outs = out.display().to_string();
    // Flash: 2 MiB of weights against nRF52840's 1 MiB (the cortex-m4 default).
    let m = write_model(&dir, "big_w.onnx", &big_weights());
    let o = picograd(
        &["compile", &m, "--target", "cortex-m4", "--out", &outs],
        &[],
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let want = "flash needs 2097152 B (2 MiB) but the part has 1048576 B (1 MiB) \
                (1048576 B (1 MiB) over)";
    assert!(err.contains("nrf52840") && err.contains(want), "{err}");
    assert!(!out.join("model.c").exists(), "nothing is written or built");
    // RAM: 8 × 100 × 100 × 4 = 320000 B live between the convolutions, against the 128 KiB of
    // STM32F411RE (fits its 512 KiB flash).
    let m = write_model(&dir, "big_a.onnx", &big_arena());
    let args = [
        "compile",
        &m,
        "--target",
        "cortex-m4",
        "--budget",
        "stm32f411re",
    ];
    let o = picograd(&[&args[..], &["--out", &outs]].concat(), &[]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("stm32f411re") && err.contains("RAM needs"),
        "{err}"
    );
    assert!(err.contains("but the part has 131072 B (128 KiB)"), "{err}");
    assert!(!err.contains("flash needs"), "flash fits: {err}");
    // Arena bytes are at least the live intermediate.
    let needed: u64 = err
        .split("RAM needs ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("a byte count");
    assert!(needed >= 320_000, "{err}");
    // The same weights fit the emulated board's 4 MiB: the build proceeds.
    let args = [
        "compile",
        &m,
        "--target",
        "cortex-m4",
        "--budget",
        "mps2-an386",
    ];
    let o = picograd(&[&args[..], &["--out", &outs]].concat(), &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report = text(&o.stdout);
    assert!(report.contains("budget:       mps2-an386"), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_that_fits_proceeds_and_check_compares_with_the_desktop() {
    let dir = scratch("check");
    let m = write_model(&dir, "tiny.onnx", &common::tiny_cnn());
    let vals: Vec<f32> = (0..16).map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0).collect();
    let x = picograd_core::Tensor::from_slice(&vals, &[1, 1, 4, 4]);
    let xf = dir.join("x.npy");
    picograd_onnx::npy::write(&xf, &x).unwrap();
    let (xs, out) = (
        xf.display().to_string(),
        dir.join("out").display().to_string(),
    );
    let args = [
        "compile",
        &m,
        "--target",
        "cortex-m4",
        "--out",
        &out,
        "--input",
        &xs,
    ];
    let o = picograd(&[&args[..], &["--check"]].concat(), &[]);
    let report = text(&o.stdout);
    assert!(o.status.success(), "{}\n{report}", text(&o.stderr));
    assert!(report.contains("budget:       nrf52840"), "{report}");
    assert!(report.contains("device and desktop agree"), "{report}");
    let diff: f64 = report
        .split("max abs diff ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|n| n.parse().ok())
        .expect("a max abs diff");
    assert!(diff <= 1e-4, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CLI exports with the target's own options: on the Cortex-M4F (an FPU with fused
/// multiply-add) the kernels' multiply-accumulates are written fused; `--opt size` builds at
/// `-Os` and still agrees with the desktop under QEMU; both count instructions exactly.
#[test]
fn compile_uses_the_targets_fma_and_size_mode_runs_correct() {
    let dir = scratch("opt");
    let m = write_model(&dir, "tiny.onnx", &common::tiny_cnn());
    let vals: Vec<f32> = (0..16).map(|i| ((i * 5) % 13) as f32 / 6.0 - 1.0).collect();
    let x = picograd_core::Tensor::from_slice(&vals, &[1, 1, 4, 4]);
    let xf = dir.join("x.npy");
    picograd_onnx::npy::write(&xf, &x).unwrap();
    let xs = xf.display().to_string();
    let mut code = Vec::new();
    for (opt, sub) in [("speed", "fast"), ("size", "small")] {
        let out = dir.join(sub).display().to_string();
        let args = [
            "compile",
            &m,
            "--target",
            "cortex-m4",
            "--out",
            &out,
            "--opt",
            opt,
            "--input",
            &xs,
            "--check",
        ];
        let o = picograd(&args, &[]);
        let report = text(&o.stdout);
        assert!(o.status.success(), "{opt}: {}\n{report}", text(&o.stderr));
        assert!(
            report.contains("device and desktop agree"),
            "{opt}: {report}"
        );
        assert!(
            report.contains("(per inference, exact: QEMU plugin)"),
            "{opt}: {report}"
        );
        let c = std::fs::read_to_string(dir.join(sub).join("model.c")).unwrap();
        assert!(
            c.contains("__builtin_fmaf("),
            "{opt}: no fused multiply-add in\n{c}"
        );
        let bytes: u64 = report
            .split("): code ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{opt}: no code size in {report}"));
        code.push(bytes);
    }
    // Size mode (-Os, a smaller unroll budget) makes the model's code no bigger.
    assert!(code[1] <= code[0], "code bytes speed/size: {code:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_takes_shapes_and_benches_warm() {
    let dir = scratch("run");
    let m = write_model(&dir, "tiny.onnx", &common::tiny_cnn());
    let out = dir.join("out").display().to_string();
    let args = [
        "run",
        &m,
        "--shape",
        "x=1,1,4,4",
        "--bench",
        "5",
        "-o",
        &out,
    ];
    let o = picograd(&args, &[]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        stdout.contains("bench: 5 run(s) after a warm-up: min "),
        "{stdout}"
    );
    assert!(stdout.contains("median"), "{stdout}");
    // On zeros only the biases flow: relu(conv bias) pooled, then the Gemm.
    let y = picograd_onnx::npy::read(&dir.join("out").join("y.npy")).unwrap();
    let y = y.to_vec::<f32>().unwrap();
    let want = [0.1f32, 0.5, -0.4];
    for (g, w) in y.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{y:?} vs {want:?}");
    }
    let o = picograd(&["run", &m, "--shape", "nope=1,2"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// x[batch, 3] → Relu, `batch` a `dim_param`.
fn batch_relu() -> ModelProto {
    let mut m = model(
        vec![node("Relu", &["x"], "y", vec![])],
        vec![],
        &[1, 3],
        &[1, 3],
    );
    let g = m.graph.as_mut().unwrap();
    for v in g.input.iter_mut().chain(g.output.iter_mut()) {
        let t = v.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        t.shape.as_mut().unwrap().dim[0] = Dimension {
            dim_value: None,
            dim_param: Some("batch".into()),
        };
    }
    m
}

/// `run --max batch=N` bounds the symbolic `batch` axis: within it the output is right (and
/// written at the input's size), above it an error names the maximum, an unknown name is a
/// usage error.
#[test]
fn run_max_bounds_a_dim_param_axis() {
    let dir = scratch("run-max");
    let m = write_model(&dir, "relu.onnx", &batch_relu());
    let xs: Vec<f32> = (0..15).map(|i| i as f32 - 7.0).collect();
    let x = dir.join("x.npy");
    picograd_onnx::npy::write(&x, &picograd_core::Tensor::from_slice(&xs, &[5, 3])).unwrap();
    let (x, out) = (
        x.display().to_string(),
        dir.join("out").display().to_string(),
    );
    let o = picograd(&["run", &m, "-i", &x, "--max", "batch=8", "-o", &out], &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let y = picograd_onnx::npy::read(&dir.join("out").join("y.npy")).unwrap();
    assert_eq!(y.shape(), vec![5, 3]);
    let want: Vec<f32> = xs.iter().map(|v| v.max(0.0)).collect();
    assert_eq!(y.to_vec::<f32>().unwrap(), want);
    let o = picograd(&["run", &m, "-i", &x, "--max", "batch=4"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("maximum 4"), "{}", text(&o.stderr));
    let o = picograd(&["run", &m, "-i", &x, "--max", "seq=4"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_environment_values_are_warned_about_once() {
    let dir = scratch("env");
    let m = write_model(&dir, "tiny.onnx", &common::tiny_cnn());
    let out = dir.join("out").display().to_string();
    let env = [("PICOGRAD_DEBUG", "loud"), ("PICOGRAD_DEVICE", "GPU")];
    let o = picograd(&["run", &m, "-o", &out, "--bench", "2"], &env);
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let debug = "warning: PICOGRAD_DEBUG=\"loud\" is not a debug level; valid values: 0 (quiet)";
    let device = "warning: PICOGRAD_DEVICE=\"GPU\" is not a device; valid values: CLANG, INTERP";
    assert_eq!(err.matches(debug).count(), 1, "{err}");
    assert_eq!(err.matches(device).count(), 1, "{err}");
    // A valid debug level prints the stages as plain lines.
    let o = picograd(&["run", &m, "-o", &out], &[("PICOGRAD_DEBUG", "1")]);
    let err = text(&o.stderr);
    assert!(
        err.contains("picograd: compiling kernels and running: done in"),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");
    assert!(
        err.contains("*** CLANG"),
        "the runtime's default device: {err}"
    );
    // `--interp` wins over the runtime's default (which installs itself on first use).
    let o = picograd(
        &["run", &m, "-o", &out, "--interp"],
        &[("PICOGRAD_DEBUG", "1")],
    );
    let err = text(&o.stderr);
    assert!(
        err.contains("*** INTERP") && !err.contains("*** CLANG"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `compile --shape x=N,6 --max N=4`: `model_run` takes `N` (the header says so and the report
/// names it), the host run at the input file's batch (2) agrees with the desktop; a `--max`
/// that is not `NAME=MAX` is a usage error (exit 2).
#[test]
fn compile_takes_a_run_time_dimension() {
    let dir = scratch("free");
    let mut m = model(
        vec![node("MatMul", &["x", "w"], "y", vec![])],
        vec![zeros("w", &[6, 3])],
        &[1, 6],
        &[1, 3],
    );
    let g = m.graph.as_mut().unwrap();
    for v in [&mut g.input[0], &mut g.output[0]] {
        let t = v.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        let d = &mut t.shape.as_mut().unwrap().dim[0];
        (d.dim_value, d.dim_param) = (None, Some("batch".into()));
    }
    let m = write_model(&dir, "mm.onnx", &m);
    let vals: Vec<f32> = (0..12).map(|i| i as f32 / 4.0 - 1.0).collect();
    let xf = dir.join("x.npy");
    let x = picograd_core::Tensor::from_slice(&vals, &[2, 6]);
    picograd_onnx::npy::write(&xf, &x).unwrap();
    let (xs, out) = (xf.display().to_string(), dir.join("out"));
    let outs = out.display().to_string();
    let args = [
        "compile", &m, "--out", &outs, "--shape", "x=N,6", "--input", &xs,
    ];
    let o = picograd(&[&args[..], &["--max", "N=4", "--check"]].concat(), &[]);
    let report = text(&o.stdout);
    assert!(o.status.success(), "{}\n{report}", text(&o.stderr));
    assert!(report.contains("N in [1, 4], taken by model_run at run time; measured at N=2"));
    assert!(report.contains("device and desktop agree"), "{report}");
    let h = std::fs::read_to_string(out.join("model.h")).unwrap();
    assert!(
        h.contains("int model_run(int32_t N, const float *x, float *y);"),
        "{h}"
    );
    let o = picograd(&[&args[..], &["--max", "N"]].concat(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
