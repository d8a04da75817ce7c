//! Exported models on every device target: each model is captured on the desktop, exported to C
//! (freestanding math, weights as `const` arrays; fused multiply-adds for the targets with FMA:
//! Cortex-M4F, RV32IMAFC), built for host, Cortex-M4, Cortex-M3, RV32IMAC
//! and RV32IMAFC with gcc and clang at -O2 and -Os, run natively or under QEMU, and compared with
//! the desktop run: ≤ 1e-5 relative (1e-6 absolute floor) per float output, the same argmax, and
//! exact integers. The host build also runs under ASan/UBSan. On the FMA targets the model
//! objects must hold the instruction (`vfma.f32`, `fmadd.s`) and the program no libm `fmaf`.

use std::path::PathBuf;

use picograd::export::{export, ExportNames, ExportOptions};
use picograd::jit::Capture;
use picograd::runtime::target::{
    build_and_run, BuildOptions, CompilerKind, OptLevel, Target, Values,
};
use picograd::tensor::{ConvOpts, PoolOpts};
use picograd::{DType, Tensor};

#[path = "common/par.rs"]
mod par;

/// A model: its input (shape and values) and how it computes its output.
struct Model {
    name: &'static str,
    shape: Vec<usize>,
    dtype: DType,
    forward: Box<dyn Fn(&Tensor) -> Tensor>,
}

fn realized(t: Tensor) -> Tensor {
    t.realize().unwrap();
    t
}

fn weights(shape: &[usize], seed: u64, scale: f64) -> Tensor {
    realized(Tensor::randn(shape, seed).mul(scale))
}

fn models() -> Vec<Model> {
    let (w1, b1, w2) = (
        weights(&[16, 32], 1, 0.3),
        weights(&[32], 2, 0.1),
        weights(&[32, 10], 3, 0.3),
    );
    let (cw, cb, lw) = (
        weights(&[4, 1, 3, 3], 4, 0.4),
        weights(&[4], 5, 0.1),
        weights(&[64, 10], 6, 0.2),
    );
    let iw = realized(Tensor::from_slice(&[3i32, -2, 5, 7, -1, 4, 2, -6], &[8]));
    vec![
        Model {
            name: "chain",
            shape: vec![64],
            dtype: DType::F32,
            forward: Box::new(|x| x.mul(2.0).add(1.0).relu().mul(x.sigmoid())),
        },
        Model {
            name: "mlp",
            shape: vec![2, 16],
            dtype: DType::F32,
            forward: Box::new(move |x| x.matmul(&w1).add(&b1).relu().matmul(&w2)),
        },
        Model {
            name: "cnn",
            shape: vec![1, 1, 8, 8],
            dtype: DType::F32,
            forward: Box::new(move |x| {
                let c = x
                    .conv2d(&cw, Some(&cb), &ConvOpts::default().padding(1))
                    .relu();
                c.max_pool2d(&PoolOpts::new(&[2, 2]))
                    .flatten(1, -1)
                    .matmul(&lw)
            }),
        },
        Model {
            name: "softmax",
            shape: vec![3, 10],
            dtype: DType::F32,
            forward: Box::new(|x| x.softmax(-1)),
        },
        Model {
            name: "int",
            shape: vec![8],
            dtype: DType::I32,
            forward: Box::new(move |x| x.mul(&iw).add(7).maximum(0)),
        },
    ]
}

fn input(m: &Model) -> Values {
    let n: usize = m.shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i * 29 % 17) as f32 - 8.0) * 0.25)
        .collect();
    match m.dtype {
        DType::I32 => Values::i32(&v.iter().map(|&f| (f * 4.0) as i32).collect::<Vec<_>>()),
        _ => Values::f32(&v),
    }
}

fn tensor_of(v: &Values, shape: &[usize]) -> Tensor {
    match v.dtype {
        DType::I32 => Tensor::from_slice(
            &v.to_i64()
                .unwrap()
                .iter()
                .map(|&x| x as i32)
                .collect::<Vec<_>>(),
            shape,
        ),
        _ => Tensor::from_slice(&v.to_f32().unwrap(), shape),
    }
}

/// Exports the model with `opts` to a fresh directory named after `tag` (distinct per test:
/// tests run in parallel); returns it with the desktop's output.
fn export_model(m: &Model, x: &Values, opts: &ExportOptions, tag: &str) -> (PathBuf, Vec<f64>) {
    let xt = tensor_of(x, &m.shape);
    xt.realize().unwrap();
    let y = (m.forward)(&xt);
    let (cap, outs) = Capture::record(&[&xt], &[&y]).unwrap();
    let bundle = export(&cap, &ExportNames::new(&["x"], &["y"]), opts).unwrap();
    assert_eq!(
        bundle.arena_bytes, bundle.lower_bound_bytes,
        "{}: arena above the liveness bound",
        m.name
    );
    check_fused(m, &bundle, opts.fused_mulacc);
    // A private folder under a random name (nothing another user could plant); the callers
    // remove it.
    let dir = picograd::runtime::private_fs::private_temp_dir(&format!(
        "picograd-device-{}-{tag}-",
        m.name
    ))
    .unwrap()
    .keep();
    picograd::runtime::export::write_bundle(&bundle, &dir).unwrap();
    (dir, outs[0].to_f64_vec().unwrap())
}

/// A bundle for an FMA target renders the f32 multiply-accumulates of its matmuls and convs as
/// `__builtin_fmaf` (one instruction there); any other bundle has no fused multiply-add at all.
fn check_fused(m: &Model, bundle: &picograd::export::Bundle, fused: bool) {
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    let has_mulacc = matches!(m.name, "mlp" | "cnn");
    assert_eq!(
        c.contains("__builtin_fmaf("),
        fused && has_mulacc,
        "{}: fused = {fused}",
        m.name
    );
    assert!(!c.contains("__builtin_fma("), "{}: no f64 fma", m.name);
}

/// What a run is checked against: the model's name and element type, the desktop's output.
#[derive(Clone, Copy)]
struct Expect<'a> {
    name: &'static str,
    dtype: DType,
    want: &'a [f64],
}

fn compare(m: Expect, what: &str, got: &Values) {
    let want = m.want;
    let got: Vec<f64> = match got.dtype {
        DType::I32 => got.to_i64().unwrap().iter().map(|&v| v as f64).collect(),
        _ => got
            .to_f32()
            .unwrap()
            .iter()
            .map(|&v| f64::from(v))
            .collect(),
    };
    assert_eq!(got.len(), want.len(), "{} {what}: output length", m.name);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if m.dtype == DType::I32 {
            g == w
        } else {
            (g - w).abs() <= 1e-6 + 1e-5 * w.abs()
        };
        assert!(ok, "{} {what}: output {i} is {g}, desktop says {w}", m.name);
    }
    let argmax = |v: &[f64]| (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b });
    assert_eq!(
        argmax(&got),
        argmax(want),
        "{} {what}: argmax differs",
        m.name
    );
}

/// The device targets every model runs on.
const TARGETS: [&str; 5] = [
    "host",
    "cortex-m4",
    "cortex-m3",
    "riscv32imac",
    "riscv32imafc",
];

/// One model's exports: its input, the plain and the fused bundle, the desktop's output.
struct Exported {
    name: &'static str,
    dtype: DType,
    x: Values,
    plain_dir: PathBuf,
    fma_dir: PathBuf,
    want: Vec<f64>,
}

#[test]
fn exported_models_agree_on_every_target() {
    picograd::init();
    let fma_opts = Target::by_name("cortex-m4").unwrap().export_options();
    assert!(fma_opts.fused_mulacc, "cortex-m4 has vfma.f32");
    // Every model is exported on this thread first; the builds and runs are separate processes,
    // run side by side (tests/common/par.rs).
    let exported: Vec<Exported> = models()
        .iter()
        .map(|m| {
            let x = input(m);
            // One bundle per kind of FPU: fused multiply-adds where the target has them.
            let (plain_dir, want) = export_model(m, &x, &ExportOptions::default(), "plain");
            let (fma_dir, fma_want) = export_model(m, &x, &fma_opts, "fma");
            assert_eq!(want, fma_want, "{}: the desktop output is one", m.name);
            Exported {
                name: m.name,
                dtype: m.dtype,
                x,
                plain_dir,
                fma_dir,
                want,
            }
        })
        .collect();
    // (model, target, Some((compiler, opt))) for every target × compiler × opt level, and
    // (model, "host", None) for the host under ASan/UBSan.
    let mut jobs = Vec::new();
    for e in &exported {
        for name in TARGETS {
            for compiler in [CompilerKind::Gcc, CompilerKind::Clang] {
                for opt in [OptLevel::O2, OptLevel::Os] {
                    jobs.push((e, name, Some((compiler, opt))));
                }
            }
        }
        jobs.push((e, "host", None));
    }
    par::par_map(&jobs, |&(e, name, build)| {
        let target = Target::by_name(name).unwrap();
        let dir = if target.fused_mulacc {
            &e.fma_dir
        } else {
            &e.plain_dir
        };
        let (opts, what) = match build {
            Some((compiler, opt)) => (
                BuildOptions {
                    compiler,
                    opt,
                    ..BuildOptions::default()
                },
                format!("{name} {compiler:?} {opt:?}"),
            ),
            None => (
                BuildOptions {
                    sanitize: true,
                    ..BuildOptions::default()
                },
                "host asan+ubsan".to_string(),
            ),
        };
        let r = build_and_run(&target, dir, &[("x", e.x.clone())], &opts)
            .unwrap_or_else(|err| panic!("{} {what}: {err}", e.name));
        let expect = Expect {
            name: e.name,
            dtype: e.dtype,
            want: &e.want,
        };
        compare(expect, &what, r.output("y").expect("output y"));
    });
    for e in &exported {
        let _ = std::fs::remove_dir_all(&e.plain_dir);
        let _ = std::fs::remove_dir_all(&e.fma_dir);
    }
}

/// The disassembly of a kept build's model objects (`1.o`, ...; `0.o` is the harness) and
/// whether the linked program has libm's `fmaf`, with the target's binutils
/// (`arm-none-eabi-size` → `arm-none-eabi-objdump`, `arm-none-eabi-nm`).
fn disassemble(target: &Target, build: &std::path::Path) -> (String, bool) {
    let tool = |t: &str| target.get("size").unwrap().replace("size", t);
    let run = |cmd: String, arg: &str, file: &std::path::Path| {
        let out = std::process::Command::new(&cmd)
            .arg(arg)
            .arg(file)
            .output()
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert!(out.status.success(), "{cmd} {}", file.display());
        String::from_utf8(out.stdout).unwrap()
    };
    let symbols = run(tool("nm"), "-A", &build.join("prog.elf"));
    let has_fmaf = symbols
        .lines()
        .any(|l| l.split_whitespace().last() == Some("fmaf"));
    let model_objects = (1..).map(|i| build.join(format!("{i}.o")));
    let asm = model_objects
        .take_while(|o| o.is_file())
        .map(|o| run(tool("objdump"), "-d", &o))
        .collect();
    (asm, has_fmaf)
}

#[test]
fn fused_targets_use_the_fma_instruction_without_libm() {
    picograd::init();
    let m = models().into_iter().find(|m| m.name == "mlp").unwrap();
    let x = input(&m);
    let targets = [
        ("cortex-m4", Some("vfma.f32")),
        ("riscv32imafc", Some("fmadd.s")),
        ("cortex-m3", None),
        ("riscv32imac", None),
    ];
    // Exported on this thread; built, run and disassembled side by side (tests/common/par.rs).
    let exported: Vec<(PathBuf, Vec<f64>)> = targets
        .iter()
        .map(|&(name, _)| {
            let target = Target::by_name(name).unwrap();
            export_model(&m, &x, &target.export_options(), name)
        })
        .collect();
    let mut jobs = Vec::new();
    for (&(name, insn), (dir, want)) in targets.iter().zip(&exported) {
        for compiler in [CompilerKind::Gcc, CompilerKind::Clang] {
            jobs.push((name, insn, dir, want, compiler));
        }
    }
    // The closure takes the model's name and type, not the model (its forward is not Sync).
    let (model, dtype) = (m.name, m.dtype);
    par::par_map(&jobs, |&(name, insn, dir, want, compiler)| {
        let target = Target::by_name(name).unwrap();
        let opts = BuildOptions {
            compiler,
            keep_build_dir: true,
            ..BuildOptions::default()
        };
        let what = format!("{name} {compiler:?}");
        let r = build_and_run(&target, dir, &[("x", x.clone())], &opts)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let expect = Expect {
            name: model,
            dtype,
            want,
        };
        compare(expect, &what, r.output("y").expect("output y"));
        let build = r.build_dir.clone().expect("the kept build folder");
        let (asm, has_fmaf) = disassemble(&target, &build);
        let _ = std::fs::remove_dir_all(&build);
        assert!(!has_fmaf, "{what}: links a software fmaf");
        if let Some(insn) = insn {
            assert!(asm.contains(insn), "{what}: no {insn} in the program");
        }
    });
    for (dir, _) in &exported {
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[path = "../examples/common/digits.rs"]
mod digits;
#[allow(dead_code)]
#[path = "../examples/common/train.rs"]
mod train;

#[test]
fn trained_digits_classifier_agrees_on_cortex_m4() {
    use picograd::nn::Module;
    picograd::init();
    let data = digits::load().unwrap();
    let (train_set, test_set) = digits::split(&data);
    let mlp = train::Mlp::new(&train_set, 1).unwrap();
    let plan = train::Plan {
        epochs: 3,
        adam: picograd::nn::optim::AdamConfig::adam(0.01),
    };
    train::train(&mlp, &train_set, &plan).unwrap();

    let x = Tensor::from_slice(&test_set.images, &[test_set.len(), 64]);
    x.realize().unwrap();
    let logits = picograd::no_grad(|| mlp.forward(&x));
    let (cap, outs) = Capture::record(&[&x], &[&logits]).unwrap();
    let host = outs[0].to_vec::<f32>().unwrap();
    let target = Target::by_name("cortex-m4").unwrap();
    let bundle = export(
        &cap,
        &ExportNames::new(&["image"], &["logits"]),
        &target.export_options(),
    )
    .unwrap();
    let tmp = picograd::runtime::private_fs::private_temp_dir("picograd-digits-").unwrap();
    let dir = tmp.path().to_path_buf();
    picograd::runtime::export::write_bundle(&bundle, &dir).unwrap();
    let r = build_and_run(
        &target,
        &dir,
        &[("image", Values::f32(&test_set.images))],
        &BuildOptions::default(),
    )
    .unwrap();
    let device = r.output("logits").and_then(Values::to_f32).unwrap();
    let argmax = |v: &[f32]| -> Vec<usize> {
        v.chunks(10)
            .map(|r| (0..10).fold(0, |b, i| if r[i] > r[b] { i } else { b }))
            .collect()
    };
    let (h, d) = (argmax(&host), argmax(&device));
    assert_eq!(h, d, "device and desktop predictions differ");
    let right = h
        .iter()
        .zip(&test_set.labels)
        .filter(|(p, &y)| **p == usize::from(y))
        .count();
    assert!(
        right * 100 >= 85 * test_set.len(),
        "only {right}/360 right after 3 epochs"
    );
    for (a, b) in host.iter().zip(&device) {
        assert!((a - b).abs() <= 1e-6 + 1e-5 * b.abs(), "logit {a} vs {b}");
    }
}
