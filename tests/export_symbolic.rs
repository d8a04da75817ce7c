//! Exported C with a run-time dimension: a model captured over a batch `Variable` in [1, 8]
//! (matmul + bias + relu + matmul, and the column sums over the batch) exports once to C whose
//! `model_run(int32_t batch, ...)` takes the batch at run time. Host programs (gcc, clang) and
//! one Cortex-M4 firmware each run it at batch 1, 5 and 8 and at the out-of-range 0 and 9:
//! inside the bounds the outputs equal, bit for bit, the fixed-shape exports of the same model
//! at those sizes (host) and the host's gcc run (clang, and Cortex-M4: same C, same fused
//! multiply-adds), and are within 1e-5 of the desktop interpreter; outside them `model_run`
//! returns `MODEL_ERR_DIM` and writes nothing. The arena equals the liveness bound and the
//! fixed-shape export's arena at the maximum; each kernel is in `model.c` once, with 32-bit
//! indices. Inputs and outputs in the arena give `int model_run(int32_t batch)`.

#[path = "../core/tests/common/strict_cc.rs"]
mod strict_cc;

use std::path::PathBuf;
use std::sync::Arc;

use picograd::context::interp;
use picograd::device::Device;
use picograd::export::{export, Bundle, ExportNames, ExportOptions};
use picograd::jit::Capture;
use picograd::runtime::target::{
    build_and_run, build_and_run_feeds, BuildOptions, CompilerKind, RunReport, Target, Values,
};
use picograd::symbolic::{Node, Variable};
use picograd::Tensor;

const SIZES: [usize; 3] = [1, 5, 8];
/// `MODEL_ERR_DIM`.
const ERR_DIM: i64 = -1;

fn vals(n: usize, seed: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.37 + seed).sin() * 1.7).round() / 4.0 + 0.01 * seed)
        .collect()
}

struct Model {
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Model {
    fn new(dev: &Arc<dyn Device>) -> Model {
        let t = |n, shape: &[usize], seed| Tensor::try_from_slice_on(&vals(n, seed), shape, dev);
        Model {
            w1: t(6 * 12, &[6, 12], 1.0).unwrap(),
            b1: t(12, &[12], 2.0).unwrap(),
            w2: t(12 * 4, &[12, 4], 3.0).unwrap(),
        }
    }

    /// `(y, s)`: y = relu(x w1 + b1) w2 (batch × 4), s = the sum of y over the batch (4).
    fn forward(&self, x: &Tensor) -> (Tensor, Tensor) {
        let y = x.matmul(&self.w1).add(&self.b1).relu().matmul(&self.w2);
        let s = y.sum(&[0], false);
        (y, s)
    }
}

fn input(b: usize) -> Vec<f32> {
    vals(b * 6, b as f32)
}

fn names() -> ExportNames {
    ExportNames::new(&["x"], &["y", "s"])
}

fn write(bundle: &Bundle, tag: &str) -> PathBuf {
    let dir =
        picograd::runtime::private_fs::private_temp_dir(&format!("picograd-symexport-{tag}-"))
            .unwrap()
            .keep();
    picograd::runtime::export::write_bundle(bundle, &dir).unwrap();
    dir
}

/// The export of the model captured at batch `b` (`sym`: over the variable bound to `b`).
fn export_at(
    m: &Model,
    dev: &Arc<dyn Device>,
    b: usize,
    sym: bool,
    opts: &ExportOptions,
) -> Bundle {
    let x = if sym {
        let batch = Variable::new("batch", 1, 8).unwrap();
        let dims = [batch.bind(b as i64).unwrap(), Node::cst(6)];
        Tensor::try_from_slice_sym_on(&input(b), &dims, dev).unwrap()
    } else {
        Tensor::try_from_slice_on(&input(b), &[b, 6], dev).unwrap()
    };
    x.realize().unwrap();
    let (y, s) = m.forward(&x);
    let (cap, _) = Capture::record(&[&x], &[&y, &s]).unwrap();
    export(&cap, &names(), opts).unwrap()
}

fn feed(b: i64) -> Vec<(&'static str, Values)> {
    let n = usize::try_from(b).unwrap_or(0);
    vec![
        ("batch", Values::i32(&[b as i32])),
        ("x", Values::f32(&input(n))),
    ]
}

/// The feeds every program runs: the sizes, then the out-of-range 0 and 9.
fn feeds() -> Vec<Vec<(&'static str, Values)>> {
    let mut f: Vec<_> = SIZES.iter().map(|&b| feed(b as i64)).collect();
    f.push(feed(0));
    f.push(feed(9));
    f
}

/// `(status, y, s)` of each feed of a run, in order.
fn runs(r: &RunReport) -> Vec<(Option<i64>, Vec<f32>, Vec<f32>)> {
    let first = (r.status, r.output("y").cloned(), r.output("s").cloned());
    let later = r
        .feeds
        .iter()
        .map(|f| (f.status, f.output("y").cloned(), f.output("s").cloned()));
    std::iter::once(first)
        .chain(later)
        .map(|(st, y, s)| {
            (
                st,
                y.unwrap().to_f32().unwrap(),
                s.unwrap().to_f32().unwrap(),
            )
        })
        .collect()
}

fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            "{what}: {got:?} vs {want:?}"
        );
    }
}

fn c_text(b: &Bundle, name: &str) -> String {
    String::from_utf8(b.file(name).unwrap().to_vec()).unwrap()
}

#[test]
fn runtime_batch_export_matches_fixed_shapes_on_host_and_cortex_m4() {
    let dev = interp();
    let m = Model::new(&dev);
    let opts = Target::by_name("cortex-m4").unwrap().export_options();
    assert!(opts.fused_mulacc);
    // Captured at 3: any value in the bounds gives the same symbolic program.
    let sym = export_at(&m, &dev, 3, true, &opts);
    assert_eq!(sym.dims.len(), 1);
    assert_eq!((sym.dims[0].min, sym.dims[0].max), (1, 8));
    let fixed8 = export_at(&m, &dev, 8, false, &opts);
    assert_eq!(
        sym.arena_bytes, sym.lower_bound_bytes,
        "arena above the bound"
    );
    assert_eq!(
        sym.arena_bytes, fixed8.arena_bytes,
        "arena differs from batch 8's"
    );
    let h = c_text(&sym, "model.h");
    assert!(
        h.contains("int model_run(int32_t batch, const float *x, float *y, float *s);"),
        "{h}"
    );
    assert!(
        h.contains("#define MODEL_DIM_BATCH_MAX 8") && h.contains("#define MODEL_ERR_DIM (-1)")
    );
    assert!(
        h.contains("#define MODEL_INPUT_X_SIZE(batch) ((batch)*6)"),
        "{h}"
    );
    assert!(h.contains("#define MODEL_INPUT_X_MAX_SIZE 48"), "{h}");
    assert!(sym
        .manifest_json
        .contains(r#"{"name": "batch", "min": 1, "max": 8}"#));
    // One compiled kernel per step, whatever the batch; 32-bit indices.
    let c = c_text(&sym, "model.c");
    let defs = c.matches("\nstatic void model_k").count();
    assert_eq!(defs, sym.plan.steps.len(), "{c}");
    assert_eq!(
        defs,
        c_text(&fixed8, "model.c")
            .matches("\nstatic void model_k")
            .count()
    );
    assert!(!c.contains("int64_t"), "64-bit indices: {c}");
    let sym_dir = write(&sym, "sym");

    // Desktop reference at each size (interpreter, unfused: within 1e-5).
    let desktop: Vec<(Vec<f32>, Vec<f32>)> = SIZES
        .iter()
        .map(|&b| {
            let x = Tensor::try_from_slice_on(&input(b), &[b, 6], &dev).unwrap();
            let (y, s) = m.forward(&x);
            (y.to_vec::<f32>().unwrap(), s.to_vec::<f32>().unwrap())
        })
        .collect();

    let host = Target::by_name("host").unwrap();
    let all = feeds();
    let refs: Vec<&[(&str, Values)]> = all.iter().map(Vec::as_slice).collect();
    let build = BuildOptions::default();
    let on_host = runs(&build_and_run_feeds(&host, &sym_dir, &refs, &build).unwrap());
    for (i, &b) in SIZES.iter().enumerate() {
        let (status, y, s) = &on_host[i];
        assert_eq!(*status, Some(0), "batch {b}");
        close(y, &desktop[i].0, &format!("y at batch {b}"));
        close(s, &desktop[i].1, &format!("s at batch {b}"));
        let fixed = export_at(&m, &dev, b, false, &opts);
        let dir = write(&fixed, &format!("fixed{b}"));
        let x = [("x", Values::f32(&input(b)))];
        let r = build_and_run(&host, &dir, &x, &build).unwrap();
        assert_eq!(r.status, None, "a fixed-shape model_run returns nothing");
        assert_eq!(
            Some(y),
            r.output("y").and_then(Values::to_f32).as_ref(),
            "y at {b}"
        );
        assert_eq!(
            Some(s),
            r.output("s").and_then(Values::to_f32).as_ref(),
            "s at {b}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    for (status, y, s) in &on_host[SIZES.len()..] {
        assert_eq!(*status, Some(ERR_DIM));
        assert_eq!((y.len(), s.len()), (32, 4), "the whole arrays are printed");
        assert!(
            y.iter().chain(s).all(|v| v.to_bits() == 0),
            "written after an error"
        );
    }

    // clang on the host: the same bits.
    let clang = BuildOptions {
        compiler: CompilerKind::Clang,
        ..BuildOptions::default()
    };
    let with_clang = runs(&build_and_run_feeds(&host, &sym_dir, &refs, &clang).unwrap());
    assert_eq!(with_clang, on_host, "clang differs from gcc on the host");

    // One Cortex-M4 firmware runs every feed: the host's bits.
    let m4 = Target::by_name("cortex-m4").unwrap();
    let on_m4 = runs(&build_and_run_feeds(&m4, &sym_dir, &refs, &build).unwrap());
    assert_eq!(on_m4, on_host, "Cortex-M4 differs from the host");
    let _ = std::fs::remove_dir_all(&sym_dir);

    // Inputs and outputs in the arena: `int model_run(int32_t batch)`, the host's bits at 5.
    let arena_opts = ExportOptions {
        io_in_arena: true,
        ..opts
    };
    let in_arena = export_at(&m, &dev, 3, true, &arena_opts);
    let h = c_text(&in_arena, "model.h");
    assert!(h.contains("int model_run(int32_t batch);"), "{h}");
    if let Some(y) = run_in_arena(&in_arena, 5) {
        assert_eq!(y, on_host[1].1, "in-arena run at batch 5");
    }
}

/// Builds `bundle` (I/O in the arena) with a `main` that writes batch `b`'s input, runs it,
/// checks batch 9 is refused, and prints `y`'s bits; `None` when cc is absent (outside CI).
fn run_in_arena(bundle: &Bundle, b: usize) -> Option<Vec<f32>> {
    let dir = write(bundle, "arena");
    let xs: Vec<String> = input(b)
        .iter()
        .map(|v| format!("{}u", v.to_bits()))
        .collect();
    let main = format!(
        "#include <stdio.h>\n#include <string.h>\n#include \"model.h\"\n\
         static const uint32_t xs[] = {{{}}};\n\
         int main(void) {{\n  int i;\n  memcpy(model_input_x(), xs, sizeof(xs));\n\
         if (model_run(9) != MODEL_ERR_DIM) return 3;\n\
         if (model_run({b}) != MODEL_OK) return 4;\n\
         for (i = 0; i < MODEL_OUTPUT_Y_SIZE({b}); i++) {{\n    uint32_t u;\n\
         memcpy(&u, &model_output_y()[i], 4);\n    printf(\"%lu\\n\", (unsigned long)u);\n  }}\n\
         return 0;\n}}\n",
        xs.join(", ")
    );
    std::fs::write(dir.join("main.c"), main).unwrap();
    let exe = dir.join("prog");
    let srcs = [dir.join("model.c"), dir.join("model_weights.c")];
    let extra: Vec<&str> = srcs
        .iter()
        .map(|p| p.to_str().unwrap())
        .chain(["-lm"])
        .collect();
    strict_cc::compile_strict("cc", &dir.join("main.c"), &exe, &extra)?;
    let out = std::process::Command::new(&exe).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let y = String::from_utf8(out.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(
        y.lines()
            .map(|l| f32::from_bits(l.parse().unwrap()))
            .collect(),
    )
}

/// A variable must not take the name of an input or output (`model_run`'s parameters) or of a
/// kernel's parameter: an error naming it.
#[test]
fn badly_named_dimensions_are_errors() {
    let dev = interp();
    let m = Model::new(&dev);
    let v = Variable::new("x", 1, 8).unwrap();
    let dims = [v.bind(2).unwrap(), Node::cst(6)];
    let x = Tensor::try_from_slice_sym_on(&input(2), &dims, &dev).unwrap();
    x.realize().unwrap();
    let (y, s) = m.forward(&x);
    let cap = Capture::record(&[&x], &[&y, &s]).unwrap().0;
    let e = export(&cap, &names(), &ExportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("variable x has the name"), "{e}");
    // Nor that of a kernel's parameter: `int32_t data1` beside `const float *data1`.
    let v = Variable::new("data1", 1, 8).unwrap();
    let dims = [v.bind(2).unwrap(), Node::cst(6)];
    let x = Tensor::try_from_slice_sym_on(&input(2), &dims, &dev).unwrap();
    x.realize().unwrap();
    let (y, s) = m.forward(&x);
    let cap = Capture::record(&[&x], &[&y, &s]).unwrap().0;
    let e = export(&cap, &names(), &ExportOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("variable data1 has the name of a kernel"),
        "{e}"
    );
}
