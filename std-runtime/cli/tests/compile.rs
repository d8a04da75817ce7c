//! `picograd_cli::compile` tests: a tiny CNN whose batch axis is a `dim_param` compiles with
//! that axis free at run time (an unnamed dynamic axis is refused until its shape is given), and
//! with its shape given is exported, built and run on the host target (the biases alone reach the output
//! on zero inputs); a model whose outputs carry the legacy torch exporter's names (`191`, `7`,
//! `/fc/Gemm:0`) compiles and its bundle gives onnxruntime's values; with given inputs the device
//! run is compared with the desktop, and a run on other inputs is caught disagreeing.

#[path = "../../onnx/tests/common/mod.rs"]
mod common;
#[path = "../../onnx/tests/pymodels/mod.rs"]
mod pymodels;

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
    use picograd_cli::compile::{bundle_names, parse_shape_arg, seeded_values};
    use picograd_cli::{compile, CompileOptions};
    let model = Model::from_bytes(&tiny_cnn_dynamic().encode_to_vec(), "tiny").unwrap();
    let out = picograd_runtime::private_fs::private_temp_dir("picograd-onnx-compile-")
        .unwrap()
        .keep();
    let mut opts = CompileOptions {
        ..CompileOptions::new("host", out.clone())
    };
    // Without --shape the model's `batch` axis is free at run time, to the default maximum.
    let report = compile(&model, &opts).unwrap();
    assert_eq!(
        report.from_model,
        vec![("x".to_string(), "batch".to_string())]
    );
    assert_eq!((report.dims[0].0.min, report.dims[0].0.max), (1, 16));
    let h = std::fs::read_to_string(out.join("model.h")).unwrap();
    assert!(
        h.contains("int model_run(int32_t batch, const float *x, float *y);"),
        "{h}"
    );
    let text = report.to_string();
    assert!(
        text.contains("batch in [1, 16]") && text.contains("dim_param"),
        "{text}"
    );
    // An unknown axis with no name still needs --shape.
    let mut unnamed = tiny_cnn_dynamic();
    let t = unnamed.graph.as_mut().unwrap().input[0]
        .r#type
        .as_mut()
        .unwrap();
    let s = t.tensor_type.as_mut().unwrap().shape.as_mut().unwrap();
    s.dim[0].dim_param = None;
    let unnamed = Model::from_bytes(&unnamed.encode_to_vec(), "tiny").unwrap();
    let err = compile(&unnamed, &opts).expect_err("an unnamed dynamic axis refused");
    assert!(err.to_string().contains("--shape x="), "{err}");
    assert!(parse_shape_arg("x=1,0").is_err() && parse_shape_arg("=1").is_err());
    opts.shapes = vec![parse_shape_arg("x=1,1,4,4").unwrap()];
    let report = compile(&model, &opts).unwrap();
    assert_eq!(report.inputs, vec![("x".to_string(), vec![1, 1, 4, 4])]);
    assert!(out.join("model.c").is_file() && report.kernels > 0);
    // The measuring run feeds seeded non-zero values: the desktop on the same values agrees.
    let zeros = picograd_core::Tensor::from_slice(&[0f32; 16], &[1, 1, 4, 4]);
    let fed = seeded_values(&["x".to_string()], std::slice::from_ref(&zeros));
    // The desktop reference itself, on zeros, against the worked example.
    let at_zero = model.run(&[zeros]).unwrap()[0].to_vec::<f32>().unwrap();
    for (g, w) in at_zero.iter().zip(reference_at_zero()) {
        assert!((f64::from(*g) - w).abs() < 1e-5, "{at_zero:?}");
    }
    let xs = fed[0].1.to_f32().unwrap();
    assert!(xs.iter().all(|v| *v != 0.0 && v.abs() <= 1.0), "{xs:?}");
    let x = picograd_core::Tensor::from_slice(&xs, &[1, 1, 4, 4]);
    let want = model.run(&[x]).unwrap()[0].to_vec::<f32>().unwrap();
    let y = report.run.output("y").unwrap().to_f32().unwrap();
    for (g, w) in y.iter().zip(&want) {
        assert!((g - w).abs() < 1e-5, "{y:?} vs {want:?}");
    }
    let names = bundle_names(&model, "model");
    assert_eq!(names.inputs, ["x"]);
    let _ = std::fs::remove_dir_all(&out);
}

/// The tiny CNN on an all-zero input: only the biases flow (ReLU of the conv bias).
fn reference_at_zero() -> Vec<f64> {
    let g = [0.1f64, 0.0];
    vec![g[0], g[1] + 0.5, g[0] + g[1] - 0.5]
}

/// Legacy exporter names: the outputs `191`, `7` and `/fc/Gemm:0` become `out_191`, `out_7` and
/// `_fc_Gemm_0` everywhere (prototype, size macros, harness); the host build of the bundle, fed
/// the helper's input, gives onnxruntime's outputs.
#[test]
fn numeric_output_names_compile_and_match_onnxruntime() {
    use picograd_cli::{compile, CompileOptions};
    use picograd_runtime::target::{build_and_run, BuildOptions, Target, Values};
    let Some(dir) = pymodels::make("numeric_outputs") else {
        return;
    };
    let model = Model::load(&dir.join("model.onnx")).unwrap();
    let opts = CompileOptions {
        ..CompileOptions::new("host", dir.join("bundle"))
    };
    let report = compile(&model, &opts).unwrap_or_else(|e| panic!("compile: {e}"));
    assert_eq!(report.outputs, ["out_191", "out_7", "_fc_Gemm_0"]);
    let header = std::fs::read_to_string(opts.out.join("model.h")).unwrap();
    assert!(
        header.contains("#define MODEL_OUTPUT_OUT_191_SIZE 6"),
        "{header}"
    );
    let x: Vec<f32> = pymodels::npy(&dir, "input_0")
        .to_f64_vec()
        .unwrap()
        .iter()
        .map(|&v| v as f32)
        .collect();
    let target = Target::by_name("host").unwrap();
    let run = build_and_run(
        &target,
        &opts.out,
        &[("x", Values::f32(&x))],
        &BuildOptions::default(),
    )
    .unwrap();
    for (name, want) in report.outputs.iter().zip(pymodels::expected(&dir)) {
        let got: Vec<f64> = run
            .output(name)
            .unwrap()
            .to_f32()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        pymodels::assert_close(name, &got, &want, 1e-5);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_compares_device_and_desktop_and_catches_a_difference() {
    use picograd_cli::check::compare;
    use picograd_cli::{compile, CompileOptions};
    use picograd_core::Tensor;
    use picograd_runtime::target::{build_and_run, BuildOptions, Target, Values};
    let model = Model::from_bytes(&common::tiny_cnn().encode_to_vec(), "tiny").unwrap();
    let out = picograd_runtime::private_fs::private_temp_dir("picograd-cli-check-")
        .unwrap()
        .keep();
    let xs: Vec<f32> = (0..16).map(|i| (i as f32 - 7.5) / 4.0).collect();
    let opts = CompileOptions {
        inputs: vec![Tensor::from_slice(&xs, &[1, 1, 4, 4])],
        ..CompileOptions::new("host", &out)
    };
    let report = compile(&model, &opts).unwrap();
    let check = report.check.as_ref().expect("inputs given: a check");
    assert!(check.passed(), "{check}");
    assert!(check.max_abs_diff() <= 1e-5, "{check}");
    // The device run on other inputs must be caught disagreeing with the desktop on these, by
    // exactly the largest difference between the two device runs.
    let other: Vec<f32> = xs.iter().map(|v| v * 2.0 + 1.0).collect();
    let feed = [("x", Values::f32(&other))];
    let host = Target::by_name("host").unwrap();
    let run2 = build_and_run(&host, &out, &feed, &BuildOptions::default()).unwrap();
    let desktop = model.run(&opts.inputs).unwrap();
    let bad = compare(&report.outputs, &desktop, &run2).unwrap();
    assert!(!bad.passed(), "{bad}");
    let a = report.run.output("y").unwrap().to_f32().unwrap();
    let b = run2.output("y").unwrap().to_f32().unwrap();
    let want = a
        .iter()
        .zip(&b)
        .map(|(p, q)| f64::from((p - q).abs()))
        .fold(0.0, f64::max);
    assert!((bad.max_abs_diff() - want).abs() <= 1e-5, "{bad} vs {want}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `x[batch, 6]` → MatMul(6×5) → Add → Relu → MatMul(5×3): an MLP with a dynamic batch axis.
fn mlp_dynamic() -> ModelProto {
    use picograd_onnx::proto::{GraphProto, NodeProto, OperatorSetIdProto};
    let node = |op: &str, ins: &[&str], out: &str| NodeProto {
        op_type: op.into(),
        name: out.into(),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    };
    let w =
        |n: usize, s: f32| (0..n).map(move |i| ((i as f32 * 0.7 + s).sin() * 4.0).round() / 8.0);
    let mut x = common::value("x", &[1, 6]);
    let mut y = common::value("y", &[1, 3]);
    for v in [&mut x, &mut y] {
        let t = v.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        t.shape.as_mut().unwrap().dim[0] = Dimension {
            dim_value: None,
            dim_param: Some("batch".into()),
        };
    }
    let graph = GraphProto {
        name: "mlp".into(),
        node: vec![
            node("MatMul", &["x", "w1"], "h"),
            node("Add", &["h", "b1"], "hb"),
            node("Relu", &["hb"], "r"),
            node("MatMul", &["r", "w2"], "y"),
        ],
        initializer: vec![
            common::weight("w1", &[6, 5], &w(30, 1.0).collect::<Vec<_>>()),
            common::weight("b1", &[5], &w(5, 2.0).collect::<Vec<_>>()),
            common::weight("w2", &[5, 3], &w(15, 3.0).collect::<Vec<_>>()),
        ],
        input: vec![x],
        output: vec![y],
        ..Default::default()
    };
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    }
}

/// `--shape x=N,6 --max N=4`: the bundle's `model_run` takes `N`; run on the host at the
/// given inputs' batch (3), it agrees with the desktop, and the report names the dimension.
/// A `--max` naming no dimension is an error.
#[test]
fn compile_with_a_run_time_batch() {
    use picograd_cli::free_dims::{parse_free_shape_arg, parse_max_arg};
    use picograd_cli::{compile, CompileOptions};
    let model = Model::from_bytes(&mlp_dynamic().encode_to_vec(), "mlp").unwrap();
    let out = picograd_runtime::private_fs::private_temp_dir("picograd-compile-free-")
        .unwrap()
        .keep();
    let xs: Vec<f32> = (0..18).map(|i| (i as f32 * 0.31).cos()).collect();
    let mut opts = CompileOptions {
        free_shapes: vec![parse_free_shape_arg("x=N,6").unwrap()],
        dim_max: vec![parse_max_arg("N=4").unwrap()],
        inputs: vec![picograd_core::Tensor::from_slice(&xs, &[3, 6])],
        ..CompileOptions::new("host", out.clone())
    };
    let report = compile(&model, &opts).unwrap();
    let h = std::fs::read_to_string(out.join("model.h")).unwrap();
    assert!(
        h.contains("int model_run(int32_t N, const float *x, float *y);"),
        "{h}"
    );
    assert!(h.contains("#define MODEL_DIM_N_MAX 4"), "{h}");
    let check = report.check.as_ref().unwrap();
    assert!(check.passed(), "{check}");
    assert_eq!(report.run.output("y").unwrap().len(), 9);
    assert_eq!(report.inputs, vec![("x".to_string(), vec![3, 6])]);
    assert_eq!((report.dims[0].0.max, report.dims[0].1), (4, 3));
    assert!(report
        .to_string()
        .contains("N in [1, 4], taken by model_run at run time; measured at N=3"));
    opts.dim_max = vec![parse_max_arg("M=4").unwrap()];
    let e = compile(&model, &opts).unwrap_err();
    assert!(
        e.to_string().contains("--max M=...: no --shape names"),
        "{e}"
    );
    opts.dim_max = vec![parse_max_arg("N=1").unwrap()];
    let e = compile(&model, &opts).unwrap_err();
    assert!(e.to_string().contains("needs a maximum above 1"), "{e}");
    assert!(parse_free_shape_arg("x=N,0").is_err() && parse_max_arg("N=0").is_err());
    let _ = std::fs::remove_dir_all(&out);
}

/// Two captures at different values of a dimension must be one program: a function that
/// computes with the bound value itself (here `x * rows`) captures a different constant at each
/// value, which `check_same_program` refuses, naming the dimension; a symbolic one passes.
#[test]
fn a_program_that_bakes_the_value_is_refused() {
    use picograd_cli::free_dims::check_same_program;
    use picograd_core::jit::Capture;
    use picograd_core::symbolic::{Node, Variable};
    use picograd_core::Tensor;
    let dev = picograd_core::context::interp();
    let n = Variable::new("N", 1, 8).unwrap();
    let capture = |rows: i64, bake: bool| {
        let dims = [n.bind(rows).unwrap(), Node::cst(2)];
        let data = vec![1.5f32; rows as usize * 2];
        let x = Tensor::try_from_slice_sym_on(&data, &dims, &dev).unwrap();
        x.realize().unwrap();
        let y = match bake {
            true => x.mul(x.shape()[0] as f32),
            false => x.mul(2.0).sum(&[0], false),
        };
        Capture::record(&[&x], &[&y]).unwrap().0
    };
    check_same_program(&capture(2, false), &capture(5, false), "N").unwrap();
    let e = check_same_program(&capture(2, true), &capture(5, true), "N").unwrap_err();
    assert!(e.to_string().contains("depend on the value of N"), "{e}");
}

/// `(status, outputs)` of each feed of a run, in order.
fn feed_runs(r: &picograd_runtime::target::RunReport) -> Vec<(Option<i64>, Vec<Vec<f32>>)> {
    let all = |o: &[(String, picograd_runtime::target::Values)]| -> Vec<Vec<f32>> {
        o.iter().map(|(_, v)| v.to_f32().unwrap()).collect()
    };
    std::iter::once((r.status, all(&r.outputs)))
        .chain(r.feeds.iter().map(|f| (f.status, all(&f.outputs))))
        .collect()
}

/// The issue's example at a small size: `picograd compile cnn.onnx --shape x=N,1,8,8 --max N=8`
/// of a CNN (Conv, Relu, MaxPool, AveragePool, Flatten, Gemm, GlobalAveragePool, Reshape) writes
/// one `model_run(int32_t N, ...)` whose kernels each appear once in `model.c`; on the host at
/// N = 1, 5 and 8 its outputs equal, bit for bit, the fixed-shape exports (`--shape x=B,1,8,8`)
/// at those sizes and are within 1e-5 of the desktop; N = 0 and 9 return `MODEL_ERR_DIM`; the
/// arena is the liveness bound and the fixed-shape arena at N = 8. The Cortex-M4 export (fused
/// multiply-adds) run once under QEMU over every feed is within 1e-5 of the host's.
#[test]
fn compile_a_cnn_with_a_run_time_batch() {
    use picograd_cli::compile::parse_shape_arg;
    use picograd_cli::free_dims::{parse_free_shape_arg, parse_max_arg};
    use picograd_cli::{compile, CompileOptions};
    use picograd_runtime::target::{
        build_and_run, build_and_run_feeds, BuildOptions, Target, Values,
    };
    let model = Model::from_bytes(&common::batch_cnn().encode_to_vec(), "cnn").unwrap();
    let tmp = |tag: &str| {
        picograd_runtime::private_fs::private_temp_dir(&format!("picograd-cnn-{tag}-"))
            .unwrap()
            .keep()
    };
    let out = tmp("free");
    let opts = CompileOptions {
        free_shapes: vec![parse_free_shape_arg("x=N,1,8,8").unwrap()],
        dim_max: vec![parse_max_arg("N=8").unwrap()],
        ..CompileOptions::new("host", out.clone())
    };
    let report = compile(&model, &opts).unwrap();
    assert_eq!((report.dims[0].0.min, report.dims[0].0.max), (1, 8));
    let h = std::fs::read_to_string(out.join("model.h")).unwrap();
    assert!(
        h.contains("int model_run(int32_t N, const float *x, float *y, float *g, float *q);"),
        "{h}"
    );
    let c = std::fs::read_to_string(out.join("model.c")).unwrap();
    // Each kernel is defined once (one symbolic kernel for every N): as many as the
    // fixed-shape export at any one size has.
    let defs = |c: &str| -> Vec<String> {
        let mut d: Vec<String> = c
            .split("\nstatic void ")
            .skip(1)
            .filter_map(|s| s.split('(').next().map(String::from))
            .collect();
        d.sort();
        d
    };
    let sym_defs = defs(&c);
    assert!(sym_defs.len() >= 4, "{sym_defs:?}");
    let mut unique = sym_defs.clone();
    unique.dedup();
    assert_eq!(unique, sym_defs, "a kernel defined twice");
    let manifest = std::fs::read_to_string(out.join("model.json")).unwrap();
    let bound = format!("\"lower_bound_bytes\": {}", report.arena_bytes);
    assert!(
        manifest.contains(&bound),
        "arena above the liveness bound: {manifest}"
    );

    let input = |b: usize| common::ramp(b * 64, 0.2, b as f32 * 0.05);
    let feed = |b: i64| {
        let n = usize::try_from(b).unwrap_or(0);
        vec![
            ("N", Values::i32(&[b as i32])),
            ("x", Values::f32(&input(n))),
        ]
    };
    let sizes = [1usize, 5, 8];
    let mut all: Vec<_> = sizes.iter().map(|&b| feed(b as i64)).collect();
    all.extend([feed(0), feed(9)]);
    let refs: Vec<&[(&str, Values)]> = all.iter().map(Vec::as_slice).collect();
    let host = Target::by_name("host").unwrap();
    let build = BuildOptions::default();
    let on_host = feed_runs(&build_and_run_feeds(&host, &out, &refs, &build).unwrap());
    for (i, &b) in sizes.iter().enumerate() {
        let (status, outs) = &on_host[i];
        assert_eq!(*status, Some(0), "N = {b}");
        let x = picograd_core::Tensor::from_slice(&input(b), &[b, 1, 8, 8]);
        let desktop = model.run(&[x]).unwrap();
        for (k, (got, want)) in outs.iter().zip(&desktop).enumerate() {
            let want = want.to_vec::<f32>().unwrap();
            assert_eq!(got.len(), want.len(), "output {k} at N = {b}");
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "output {k} at N = {b}"
                );
            }
        }
        let fixed_dir = tmp(&format!("fixed{b}"));
        let fixed_opts = CompileOptions {
            shapes: vec![parse_shape_arg(&format!("x={b},1,8,8")).unwrap()],
            ..CompileOptions::new("host", fixed_dir.clone())
        };
        let fixed = compile(&model, &fixed_opts).unwrap();
        if b == 8 {
            assert_eq!(
                report.arena_bytes, fixed.arena_bytes,
                "arena at the maximum"
            );
        }
        let fixed_c = std::fs::read_to_string(fixed_dir.join("model.c")).unwrap();
        assert_eq!(defs(&fixed_c).len(), sym_defs.len(), "kernels at N = {b}");
        let r = build_and_run(&host, &fixed_dir, &[("x", Values::f32(&input(b)))], &build);
        let fixed_outs = feed_runs(&r.unwrap());
        assert_eq!(
            fixed_outs[0].0, None,
            "a fixed-shape model_run returns nothing"
        );
        assert_eq!(
            &fixed_outs[0].1, outs,
            "run-time N = {b} against the fixed export"
        );
        let _ = std::fs::remove_dir_all(&fixed_dir);
    }
    for (status, outs) in &on_host[sizes.len()..] {
        assert_eq!(*status, Some(-1), "MODEL_ERR_DIM");
        assert!(
            outs.iter().flatten().all(|v| v.to_bits() == 0),
            "written after an error"
        );
    }
    let m4 = Target::by_name("cortex-m4").unwrap();
    let m4_opts = CompileOptions {
        target: "cortex-m4".into(),
        out: tmp("m4"),
        ..opts.clone()
    };
    let m4_report = compile(&model, &m4_opts).unwrap();
    assert_eq!(m4_report.kernels, report.kernels);
    eprintln!("Cortex-M4, run-time N (measured at N=8):\n{m4_report}");
    let on_m4 = feed_runs(&build_and_run_feeds(&m4, &m4_opts.out, &refs, &build).unwrap());
    // The Cortex-M4 export fuses multiply-adds where the host's does not: within 1e-5.
    for ((s4, o4), (sh, oh)) in on_m4.iter().zip(&on_host) {
        assert_eq!(s4, sh);
        for (a, b) in o4.iter().flatten().zip(oh.iter().flatten()) {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "Cortex-M4 {a} vs host {b}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&m4_opts.out);
    let _ = std::fs::remove_dir_all(&out);
}
