//! End-to-end export on the host: captures (an elementwise chain, a 2-layer MLP, a softmax, an
//! int model) recorded on the interpreter are exported, written to a temporary directory,
//! compiled with a small C harness under gcc and clang at -O2 and -Os, with freestanding math
//! and with libm (and once with the address/undefined sanitizers), run, and compared with the
//! interpreter's outputs (floats within 1e-5 relative / 1e-6 absolute, ints exactly). Two
//! numeric rules are checked exactly across paths: a long sum (split by length) is the same in
//! exported C as on the Clang device; out-of-range indices give the documented result lazily,
//! in JIT replays and in exported C, on the interpreter and the Clang device. Steps running
//! identical kernels call one exported function.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use picograd::device::Device;
use picograd::export::{export, Bundle, ExportNames, ExportOptions, Weights};
use picograd::jit::Capture;
use picograd::ops::{AluOp, ReduceOp};
use picograd::runtime::export::write_bundle;
use picograd::{DType, Tensor};

/// A model to export: inputs (name, tensor), outputs (name, tensor).
struct Model {
    name: &'static str,
    inputs: Vec<(&'static str, Tensor)>,
    outputs: Vec<(&'static str, Tensor)>,
}

fn dev() -> Arc<dyn Device> {
    picograd::context::interp()
}

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::try_from_slice_on(data, shape, &dev()).unwrap()
}

fn seq(n: usize, scale: f32, shift: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.618_034).fract() - 0.5) * scale + shift)
        .collect()
}

fn alu(a: &Tensor, op: AluOp, b: &Tensor) -> Tensor {
    a.try_alu(op, &[b]).unwrap()
}

fn un(a: &Tensor, op: AluOp) -> Tensor {
    a.try_alu(op, &[]).unwrap()
}

fn cont(a: &Tensor) -> Tensor {
    Tensor::from_lazy(a.lazy().contiguous())
}

/// `2 * a`, as a sum over an expanded axis: the scheduler must start a new kernel here.
fn dup_sum(a: &Tensor) -> Tensor {
    let n = a.shape()[0];
    a.try_reshape(&[n as isize, 1])
        .unwrap()
        .try_expand(&[n, 2])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[1]), false)
        .unwrap()
}

fn matmul(x: &Tensor, w: &Tensor) -> Tensor {
    let (n, k, m) = (x.shape()[0], x.shape()[1], w.shape()[1]);
    let xe = x
        .try_reshape(&[n as isize, k as isize, 1])
        .unwrap()
        .try_expand(&[n, k, m])
        .unwrap();
    let we = w
        .try_reshape(&[1, k as isize, m as isize])
        .unwrap()
        .try_expand(&[n, k, m])
        .unwrap();
    alu(&xe, AluOp::Mul, &we)
        .try_reduce(ReduceOp::Sum, Some(&[1]), false)
        .unwrap()
}

fn chain() -> Model {
    let x = t(&seq(64, 4.0, 0.0), &[64]);
    let w = t(&seq(64, 2.0, 1.0), &[64]);
    let a = dup_sum(&alu(&x, AluOp::Mul, &w));
    let b = dup_sum(&un(&alu(&a, AluOp::Add, &a.const_like(0.25)), AluOp::Sin));
    let c = dup_sum(&un(&alu(&b, AluOp::Mul, &b), AluOp::Exp2));
    let d = dup_sum(&un(&c, AluOp::Log2));
    let y = un(&alu(&d, AluOp::Add, &d.const_like(1.0)), AluOp::Sqrt);
    Model {
        name: "chain",
        inputs: vec![("x", x)],
        outputs: vec![("y", y)],
    }
}

fn mlp() -> Model {
    let x = t(&seq(4 * 8, 2.0, 0.1), &[4, 8]);
    let w1 = t(&seq(8 * 16, 1.0, 0.0), &[8, 16]);
    let b1 = t(&seq(16, 0.5, 0.05), &[16]);
    let w2 = t(&seq(16 * 3, 1.0, 0.0), &[16, 3]);
    let b2 = t(&seq(3, 0.5, 0.0), &[3]);
    let h = alu(&matmul(&x, &w1), AluOp::Add, &b1);
    let h = cont(&alu(&h, AluOp::Max, &h.const_like(0.0)));
    let y = alu(&matmul(&h, &w2), AluOp::Add, &b2);
    Model {
        name: "mlp",
        inputs: vec![("x", x)],
        outputs: vec![("logits", y)],
    }
}

/// A batch-1 MLP 4-8-8-1 (matrix-vector products): on a small core each layer keeps all its
/// outputs in registers until its reduce is done, so a layer may write over its input.
fn mv_mlp() -> Model {
    let x = t(&seq(4, 2.0, 0.1), &[1, 4]);
    let w1 = t(&seq(4 * 8, 1.0, 0.0), &[4, 8]);
    let b1 = t(&seq(8, 0.5, 0.05), &[8]);
    let w2 = t(&seq(8 * 8, 1.0, 0.2), &[8, 8]);
    let b2 = t(&seq(8, 0.5, 0.0), &[8]);
    let w3 = t(&seq(8, 1.0, 0.3), &[8, 1]);
    let relu = |h: Tensor| alu(&h, AluOp::Max, &h.const_like(0.0));
    let h1 = relu(alu(&matmul(&x, &w1), AluOp::Add, &b1));
    let h2 = relu(alu(&matmul(&h1, &w2), AluOp::Add, &b2));
    Model {
        name: "mv_mlp",
        inputs: vec![("x", x)],
        outputs: vec![("y", matmul(&h2, &w3))],
    }
}

fn softmax() -> Model {
    let x = t(&seq(3 * 10, 6.0, 0.0), &[3, 10]);
    let m = x.try_reduce(ReduceOp::Max, Some(&[1]), true).unwrap();
    let z = alu(
        &alu(&x, AluOp::Sub, &m),
        AluOp::Mul,
        &x.const_like(std::f64::consts::LOG2_E),
    );
    let e = un(&z, AluOp::Exp2);
    let s = e.try_reduce(ReduceOp::Sum, Some(&[1]), true).unwrap();
    let y = alu(&e, AluOp::Div, &s);
    Model {
        name: "softmax",
        inputs: vec![("x", x)],
        outputs: vec![("probs", y), ("maxes", cont(&m))],
    }
}

fn int_model() -> Model {
    let xs: Vec<i32> = (0..24).map(|i| i * 37 - 300).collect();
    let ws: Vec<i32> = (0..24).map(|i| 5 - i).collect();
    let x = Tensor::try_from_slice_on(&xs, &[24], &dev()).unwrap();
    let w = Tensor::try_from_slice_on(&ws, &[24], &dev()).unwrap();
    let a = dup_sum(&alu(&x, AluOp::Mul, &x.const_like(3.0)));
    let b = dup_sum(&alu(&a, AluOp::Add, &w));
    let c = alu(&b, AluOp::Mod, &b.const_like(7.0));
    Model {
        name: "int",
        inputs: vec![("x", x)],
        outputs: vec![("y", c)],
    }
}

fn capture(m: &Model) -> (Capture, Vec<Tensor>) {
    let ins: Vec<&Tensor> = m.inputs.iter().map(|i| &i.1).collect();
    let outs: Vec<&Tensor> = m.outputs.iter().map(|o| &o.1).collect();
    Capture::record(&ins, &outs).unwrap()
}

fn names(m: &Model) -> ExportNames {
    let i: Vec<&str> = m.inputs.iter().map(|i| i.0).collect();
    let o: Vec<&str> = m.outputs.iter().map(|o| o.0).collect();
    ExportNames::new(&i, &o)
}

fn c_array(t: &Tensor) -> String {
    if t.dtype() == DType::I32 {
        let v: Vec<String> = t
            .to_vec::<i32>()
            .unwrap()
            .iter()
            .map(|x| x.to_string())
            .collect();
        return v.join(", ");
    }
    let v: Vec<String> = t
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|x| format!("{x:?}f"))
        .collect();
    v.join(", ")
}

/// A `main.c` that feeds the model's inputs and prints every output element (`%a` / `%ld`).
fn harness(m: &Model, opts: &ExportOptions) -> String {
    let p = &opts.prefix;
    let up = p.to_uppercase();
    let mut c = format!("#include <stdio.h>\n#include <stdint.h>\n#include \"{p}.h\"\n");
    let ctype = |t: &Tensor| {
        if t.dtype() == DType::I32 {
            "int32_t"
        } else {
            "float"
        }
    };
    for (n, t) in &m.inputs {
        let u = n.to_uppercase();
        c += &format!(
            "static const {} in_{n}[{up}_INPUT_{u}_SIZE] = {{{}}};\n",
            ctype(t),
            c_array(t)
        );
    }
    if !opts.io_in_arena {
        for (n, t) in &m.outputs {
            let u = n.to_uppercase();
            c += &format!("static {} out_{n}[{up}_OUTPUT_{u}_SIZE];\n", ctype(t));
        }
    }
    c += "int main(int argc, char **argv) {\n  unsigned i;\n  (void)argc; (void)argv;\n";
    if opts.weights == Weights::Blob {
        c += &format!(
            "  {{\n    static uint8_t blob[{up}_WEIGHTS_BLOB_BYTES + 1];\n    FILE *f = fopen(argv[1], \"rb\");\n    size_t n = f ? fread(blob, 1, sizeof blob, f) : 0;\n    if (f) fclose(f);\n    if ({p}_load_weights(blob, (uint32_t)n) != 0) return 2;\n  }}\n"
        );
    }
    c += &run_call(m, opts);
    for (n, t) in &m.outputs {
        let src = if opts.io_in_arena {
            format!("{p}_output_{n}()")
        } else {
            format!("out_{n}")
        };
        let fmt = if t.dtype() == DType::I32 {
            "\"%ld\\n\", (long)"
        } else {
            "\"%a\\n\", (double)"
        };
        c += &format!(
            "  for (i = 0; i < {up}_OUTPUT_{}_SIZE; i++) printf({fmt}{src}[i]);\n",
            n.to_uppercase()
        );
    }
    c + "  return 0;\n}\n"
}

fn run_call(m: &Model, opts: &ExportOptions) -> String {
    let p = &opts.prefix;
    if opts.io_in_arena {
        let mut c = String::new();
        for (n, _) in &m.inputs {
            c += &format!(
                "  for (i = 0; i < sizeof in_{n} / sizeof in_{n}[0]; i++) {p}_input_{n}()[i] = in_{n}[i];\n"
            );
        }
        return c + &format!("  {p}_run();\n");
    }
    let args: Vec<String> = m
        .inputs
        .iter()
        .map(|i| format!("in_{}", i.0))
        .chain(m.outputs.iter().map(|o| format!("out_{}", o.0)))
        .collect();
    format!("  {p}_run({});\n", args.join(", "))
}

fn parse_hex_float(s: &str) -> f64 {
    let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let v = match s {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let s = s.strip_prefix("0x").expect("hex float");
            let (mant, exp) = s.split_once('p').expect("exponent");
            let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
            let digits = format!("{int}{frac}");
            let m = u64::from_str_radix(&digits, 16).unwrap() as f64;
            m * 2f64.powi(exp.parse::<i32>().unwrap() - 4 * frac.len() as i32)
        }
    };
    if neg {
        -v
    } else {
        v
    }
}

fn expected(outs: &[Tensor]) -> Vec<f64> {
    outs.iter().flat_map(|t| t.to_f64_vec().unwrap()).collect()
}

fn compilers() -> Vec<&'static str> {
    let found: Vec<&str> = ["gcc", "clang"]
        .into_iter()
        .filter(|c| Command::new(c).arg("--version").output().is_ok())
        .collect();
    // CI has both (scripts/install-deps.sh): there, a missing one is a failure, not a skip.
    if std::env::var_os("CI").is_some_and(|v| v == "true") {
        assert_eq!(
            found.len(),
            2,
            "CI must have gcc and clang; found only {found:?}"
        );
    }
    found
}

/// A fresh private folder under a random name (nothing another user could plant), removed when
/// the returned guard drops.
fn tmp_dir(tag: &str) -> tempfile::TempDir {
    picograd::runtime::private_fs::private_temp_dir(&format!("pg-export-{tag}-")).unwrap()
}

/// Compiles the bundle in `dir` with `main.c`, runs it, and returns the printed numbers.
fn build_and_run(dir: &Path, bundle: &Bundle, cc: &str, flags: &[&str], blob: bool) -> Vec<f64> {
    let exe = dir.join(format!(
        "prog-{cc}-{}",
        flags.join("").replace(['-', '='], "")
    ));
    let mut cmd = Command::new(cc);
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(dir.join("main.c"));
    for (name, _) in &bundle.files {
        if name.ends_with(".c") {
            cmd.arg(dir.join(name));
        }
    }
    if !bundle.manifest_json.contains("\"freestanding_math\": true") {
        cmd.arg("-lm");
    }
    let out = cmd.output().expect("run the C compiler");
    assert!(
        out.status.success(),
        "{cc} {flags:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut run = Command::new(&exe);
    if blob {
        run.arg(dir.join("weights.bin"));
    }
    let out = run.output().unwrap();
    assert!(
        out.status.success(),
        "{exe:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .map(|l| {
            if l.contains('x') || l.contains("inf") || l.contains("nan") {
                parse_hex_float(l)
            } else {
                l.parse::<f64>().unwrap()
            }
        })
        .collect()
}

fn compare(tag: &str, got: &[f64], want: &[f64], exact: bool) {
    assert_eq!(got.len(), want.len(), "{tag}: number of outputs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = if exact {
            0.0
        } else {
            (1e-5 * w.abs()).max(1e-6)
        };
        assert!(
            (g - w).abs() <= tol,
            "{tag}: element {i}: C gave {g}, interpreter {w}"
        );
    }
}

/// Exports `m` with `opts` and checks every compiler / flag / sanitizer build against the
/// interpreter.
fn check(make: fn() -> Model, opts: &ExportOptions, sanitize: bool) -> Bundle {
    let m = &make();
    let (cap, outs) = capture(m);
    let want = expected(&outs);
    let bundle = export(&cap, &names(m), opts).unwrap();
    let again = export(&cap, &names(m), opts).unwrap();
    assert_eq!(
        bundle.files, again.files,
        "{}: export is deterministic",
        m.name
    );
    let tag = format!(
        "{}-{}{}{}",
        m.name,
        opts.freestanding_math as u8,
        opts.io_in_arena as u8,
        (opts.weights == Weights::Blob) as u8
    );
    let tmp = tmp_dir(&tag);
    let dir = tmp.path().to_path_buf();
    write_bundle(&bundle, &dir).unwrap();
    std::fs::write(dir.join("main.c"), harness(m, opts)).unwrap();
    let exact = m.outputs.iter().all(|o| o.1.dtype() == DType::I32);
    let blob = opts.weights == Weights::Blob;
    for cc in compilers() {
        for opt in ["-O2", "-Os"] {
            let got = build_and_run(&dir, &bundle, cc, &[opt], blob);
            compare(&format!("{tag} {cc} {opt}"), &got, &want, exact);
        }
    }
    if sanitize {
        let flags = [
            "-O1",
            "-g",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
        ];
        let got = build_and_run(&dir, &bundle, "gcc", &flags, blob);
        compare(&format!("{tag} sanitizers"), &got, &want, exact);
    }
    bundle
}

fn all_option_sets() -> Vec<ExportOptions> {
    let base = ExportOptions::default();
    vec![
        base.clone(),
        ExportOptions {
            freestanding_math: false,
            ..base.clone()
        },
        ExportOptions {
            io_in_arena: true,
            ..base.clone()
        },
        ExportOptions {
            weights: Weights::Blob,
            prefix: "net".into(),
            ..base
        },
    ]
}

#[test]
fn exported_models_match_the_interpreter() {
    for make in [chain, mlp, softmax, int_model] {
        let name = make().name;
        for (i, opts) in all_option_sets().iter().enumerate() {
            let b = check(make, opts, i == 0);
            eprintln!(
                "{} (io_in_arena={}): arena {} bytes, lower bound {} bytes, weights {} bytes",
                name, opts.io_in_arena, b.arena_bytes, b.lower_bound_bytes, b.weight_bytes
            );
            assert!(b.arena_bytes >= b.lower_bound_bytes);
        }
    }
}

#[test]
fn chain_shaped_mlp_plan_meets_the_bound() {
    for io_in_arena in [false, true] {
        let m = mlp();
        let (cap, _) = capture(&m);
        let opts = ExportOptions {
            io_in_arena,
            ..ExportOptions::default()
        };
        let b = export(&cap, &names(&m), &opts).unwrap();
        eprintln!(
            "mlp io_in_arena={io_in_arena}: arena {} lower bound {}",
            b.arena_bytes, b.lower_bound_bytes
        );
        assert_eq!(b.arena_bytes, b.lower_bound_bytes);
    }
}

#[test]
fn layer_reading_all_its_input_first_writes_over_it() {
    // Small-core kernels (the default options) keep a matrix-vector layer's 8 outputs in
    // registers until the reduce ends, so its output takes its dying input's bytes: one 8-float
    // buffer. Unoptimized kernels loop over outputs, reading the input inside that loop after
    // earlier stores, so the two buffers stay apart.
    let b = check(mv_mlp, &ExportOptions::default(), true);
    assert!(
        b.plan.steps.iter().any(|s| s.in_place.is_some()),
        "{:?}",
        b.plan.steps
    );
    assert_eq!((b.arena_bytes, b.lower_bound_bytes), (32, 32));
    let plain = ExportOptions {
        opt: None,
        ..ExportOptions::default()
    };
    let b = check(mv_mlp, &plain, false);
    assert!(b.plan.steps.iter().all(|s| s.in_place.is_none()));
    assert_eq!(b.arena_bytes, 64);
}

#[test]
fn model_files_have_no_heap_no_stdio_and_const_weights() {
    for make in [chain, mlp, softmax, int_model] {
        let m = make();
        let (cap, _) = capture(&m);
        let b = export(&cap, &names(&m), &ExportOptions::default()).unwrap();
        for f in ["model.c", "model_weights.c", "model.h"] {
            let text = String::from_utf8(b.file(f).unwrap().to_vec()).unwrap();
            for bad in ["malloc", "stdio", "printf", "<math.h>", "free("] {
                assert!(!text.contains(bad), "{}: {f} contains {bad}", m.name);
            }
        }
        let w = String::from_utf8(b.file("model_weights.c").unwrap().to_vec()).unwrap();
        for line in w
            .lines()
            .filter(|l| l.contains("model_w") && l.contains('['))
        {
            assert!(
                line.starts_with("extern const ") || line.starts_with("const "),
                "{line}"
            );
            assert!(
                line.starts_with("extern") || line.contains("aligned(16)"),
                "{line}"
            );
        }
        let c = String::from_utf8(b.file("model.c").unwrap().to_vec()).unwrap();
        let kernels: Vec<&str> = c
            .lines()
            .filter(|l| l.starts_with("static void model_k"))
            .collect();
        let mut names: Vec<&str> = kernels
            .iter()
            .map(|l| l.split('(').next().unwrap())
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), kernels.len(), "kernel names are unique");
        assert!(b.manifest_json.contains("\"lower_bound_bytes\""));
    }
}

/// `y[i] = sum_j (x[i] + w[j])` over 70,001 values of `j`: longer than the split threshold, so
/// summed in blocks (README, "Sizes, NaN and long-running processes").
fn long_sum() -> Model {
    let len = 70_001;
    let x = t(&seq(3, 2.0, 0.5), &[3, 1]);
    let w = t(&seq(len, 1.0, 0.25), &[1, len]);
    let p = alu(
        &x.try_expand(&[3, len]).unwrap(),
        AluOp::Add,
        &w.try_expand(&[3, len]).unwrap(),
    );
    let y = p.try_reduce(ReduceOp::Sum, Some(&[1]), false).unwrap();
    Model {
        name: "long_sum",
        inputs: vec![("x", x)],
        outputs: vec![("y", y)],
    }
}

/// The split order is part of the graph, so exported C sums a long reduction exactly as the
/// interpreter and the Clang device do: the same bits, not just close.
#[test]
fn exported_long_sum_equals_the_clang_device_bit_for_bit() {
    let m = long_sum();
    let (cap, outs) = capture(&m);
    let want = expected(&outs);
    picograd::init();
    let clang: Arc<dyn Device> =
        picograd::runtime::clang().expect("no C compiler: the Clang device cannot run");
    let x = m.inputs[0].1.to_device(&clang);
    let w = Tensor::try_from_slice_on(&seq(70_001, 1.0, 0.25), &[1, 70_001], &clang).unwrap();
    let y = alu(
        &x.try_expand(&[3, 70_001]).unwrap(),
        AluOp::Add,
        &w.try_expand(&[3, 70_001]).unwrap(),
    )
    .try_reduce(ReduceOp::Sum, Some(&[1]), false)
    .unwrap();
    let on_clang = y.to_f64_vec().unwrap();
    compare("long_sum: Clang device", &on_clang, &want, true);
    let opts = ExportOptions::default();
    let bundle = export(&cap, &names(&m), &opts).unwrap();
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    let kernels = c
        .lines()
        .filter(|l| l.starts_with("static void model_k"))
        .count();
    assert_eq!(
        kernels, 3,
        "block sums, leftover sum, sum of block sums:\n{c}"
    );
    let tmp = tmp_dir("long_sum");
    let dir = tmp.path().to_path_buf();
    write_bundle(&bundle, &dir).unwrap();
    std::fs::write(dir.join("main.c"), harness(&m, &opts)).unwrap();
    for cc in compilers() {
        let got = build_and_run(&dir, &bundle, cc, &["-O2"], false);
        compare(&format!("long_sum {cc} -O2"), &got, &on_clang, true);
    }
}

// ---- out-of-range indices: one documented result on every path ----

/// Indices along axis 1 (length 4) of a `[3, 4]` input: 5, -1 and 4 are out of range.
const BAD_IDX: [i32; 6] = [0, 5, -1, 2, 3, 4];
/// In range: what a capture is recorded with (a host-known index out of range is an error).
const GOOD_IDX: [i32; 6] = [0, 1, 2, 3, 1, 0];

fn idx_data() -> Vec<f32> {
    (1..=12).map(|v| v as f32).collect()
}

/// `gather(1, idx)`, `one_hot(idx, 4)` and `scatter(1, idx, -data[:, :2])` of `data` `[3, 4]`.
fn index_ops(data: &Tensor, idx: &Tensor) -> picograd::Result<Vec<Tensor>> {
    let src = data.try_shrink(&[(0, 3), (0, 2)])?.try_mul(-1.0)?;
    Ok(vec![
        data.try_gather(1, idx)?,
        idx.try_one_hot(4)?,
        data.try_scatter(1, idx, &src)?,
    ])
}

/// The documented rule on the host: an index outside `0..4` gathers 0, makes an all-zero
/// one-hot row and writes nothing (in-range writes: the last one wins).
fn index_reference(idx: &[i32]) -> Vec<Vec<f64>> {
    let data = idx_data();
    let inside = |i: i32| (0..4).contains(&i);
    let mut gather = Vec::new();
    let mut hot = Vec::new();
    let mut scat: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
    for r in 0..3 {
        for k in 0..2 {
            let i = idx[r * 2 + k];
            gather.push(if inside(i) {
                f64::from(data[r * 4 + i as usize])
            } else {
                0.0
            });
            hot.extend((0..4).map(|c| f64::from(u8::from(i == c))));
            if inside(i) {
                scat[r * 4 + i as usize] = -f64::from(data[r * 4 + k]);
            }
        }
    }
    vec![gather, hot, scat]
}

fn flat(outs: &[Tensor]) -> Vec<Vec<f64>> {
    outs.iter().map(|t| t.to_f64_vec().unwrap()).collect()
}

#[test]
fn out_of_range_indices_give_the_documented_result_on_every_path() {
    picograd::init();
    let want = index_reference(&BAD_IDX);
    // The rule is not vacuous: the out-of-range positions differ from a clamped reading.
    assert_eq!(want[0], vec![1.0, 0.0, 0.0, 7.0, 12.0, 0.0]);
    let clang: Arc<dyn Device> =
        picograd::runtime::clang().expect("no C compiler: the Clang device cannot run");
    let minus_one: Vec<i32> = BAD_IDX.iter().map(|i| i - 1).collect();
    for d in [dev(), clang.clone()] {
        let data = Tensor::try_from_slice_on(&idx_data(), &[3, 4], &d).unwrap();
        // Lazy: the index is computed in the graph, so nothing reads it back.
        let lazy = Tensor::try_from_slice_on(&minus_one, &[3, 2], &d)
            .unwrap()
            .try_add(1i32)
            .unwrap();
        let got = flat(&index_ops(&data, &lazy).unwrap());
        assert_eq!(got, want, "lazy on {}", d.name());
        // JIT: captured with in-range indices, replayed with out-of-range ones.
        let f = picograd::jit::Jit::new(|x: &[Tensor]| index_ops(&data, &x[0]));
        let good = Tensor::try_from_slice_on(&GOOD_IDX, &[3, 2], &d).unwrap();
        assert_eq!(flat(&f.call(&[good]).unwrap()), index_reference(&GOOD_IDX));
        let bad = Tensor::try_from_slice_on(&BAD_IDX, &[3, 2], &d).unwrap();
        assert_eq!(flat(&f.call(&[bad]).unwrap()), want, "JIT on {}", d.name());
        assert_eq!(f.replays(), 1);
    }
    // Exported C, captured with in-range indices, fed out-of-range ones by its harness.
    let data = t(&idx_data(), &[3, 4]);
    let good = Tensor::try_from_slice_on(&GOOD_IDX, &[3, 2], &dev()).unwrap();
    let outs = index_ops(&data, &good).unwrap();
    let names_out = ["gathered", "hot", "scattered"];
    let recorded = Model {
        name: "index_rule",
        inputs: vec![("idx", good)],
        outputs: names_out.iter().copied().zip(outs).collect(),
    };
    let (cap, _) = capture(&recorded);
    let opts = ExportOptions::default();
    let bundle = export(&cap, &names(&recorded), &opts).unwrap();
    let fed = Model {
        inputs: vec![(
            "idx",
            Tensor::try_from_slice_on(&BAD_IDX, &[3, 2], &dev()).unwrap(),
        )],
        ..recorded
    };
    let tmp = tmp_dir("index_rule");
    let dir = tmp.path().to_path_buf();
    write_bundle(&bundle, &dir).unwrap();
    std::fs::write(dir.join("main.c"), harness(&fed, &opts)).unwrap();
    let want_flat: Vec<f64> = want.concat();
    for cc in compilers() {
        let got = build_and_run(&dir, &bundle, cc, &["-O2"], false);
        compare(&format!("index_rule {cc}"), &got, &want_flat, true);
    }
}

/// Two outputs computed by the same two kernels (a product, then a sum over an expanded axis)
/// on different buffers.
fn twins() -> Model {
    let x1 = t(&seq(64, 4.0, 0.0), &[64]);
    let x2 = t(&seq(64, 3.0, 0.5), &[64]);
    let w = t(&seq(64, 2.0, 1.0), &[64]);
    let y1 = dup_sum(&alu(&x1, AluOp::Mul, &w));
    let y2 = dup_sum(&alu(&x2, AluOp::Mul, &w));
    Model {
        name: "twins",
        inputs: vec![("x1", x1), ("x2", x2)],
        outputs: vec![("y1", y1), ("y2", y2)],
    }
}

#[test]
fn identical_kernels_are_one_exported_function() {
    let opts = ExportOptions::default();
    let bundle = check(twins, &opts, false);
    let (_, c) = bundle
        .files
        .iter()
        .find(|(n, _)| n == "model.c")
        .expect("model.c");
    let c = String::from_utf8_lossy(c);
    let defs = c
        .lines()
        .filter(|l| l.starts_with("static ") && l.contains(" model_k") && l.ends_with('{'))
        .count();
    let calls = c.lines().filter(|l| l.starts_with("  model_k")).count();
    // Each output runs the product kernel then the sum kernel: two functions, each called twice.
    assert_eq!(
        (defs, calls),
        (2, 4),
        "shared functions, each called twice:\n{c}"
    );
}
