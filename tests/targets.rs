//! Device targets end to end: the hand-written stand-in bundle (`tests/bundles/dense_relu`, the
//! exporter's interface) is built for every target with gcc and clang at -O2 and -Os, run natively
//! or under QEMU, and its outputs compared with a Rust reference; instruction counts must be
//! reported and identical across runs; a broken bundle must fail with the compiler's message and
//! the target's name; and the Rust firmware example runs on the emulated Cortex-M4.
//!
//! Run with `--nocapture` to see each build's figures (instructions, flash, RAM, stack).

use std::path::{Path, PathBuf};

use picograd::runtime::target::{
    build_and_run, BuildOptions, CompilerKind, OptLevel, RunReport, Target, Values,
};

#[path = "common/par.rs"]
mod par;

fn bundle_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bundles/dense_relu")
}

fn input() -> Vec<f32> {
    (0..8)
        .map(|j| (((j * 13) % 7) as f32 - 3.0) * 0.3 + 0.01 * j as f32)
        .collect()
}

/// The stand-in model in f32, summing in the C code's order: h = relu(W1 x + b1), y = W2 h + b2.
fn reference(x: &[f32]) -> (Vec<f32>, i32) {
    let w1 = |i: usize, j: usize| (((7 * i + 3 * j) % 11) as f32 - 5.0) / 8.0;
    let b1 = |i: usize| ((i % 5) as f32 - 2.0) / 4.0;
    let w2 = |i: usize, j: usize| (((5 * i + 2 * j) % 9) as f32 - 4.0) / 16.0;
    let b2 = |i: usize| (i as f32 - 1.5) / 8.0;
    let h: Vec<f32> = (0..16)
        .map(|i| (0..8).fold(b1(i), |acc, j| acc + w1(i, j) * x[j]).max(0.0))
        .collect();
    let y: Vec<f32> = (0..4)
        .map(|i| (0..16).fold(b2(i), |acc, j| acc + w2(i, j) * h[j]))
        .collect();
    let best = (1..4).fold(0, |b, i| if y[i] > y[b] { i } else { b });
    (y, best as i32)
}

fn run(target: &Target, compiler: CompilerKind, opt: OptLevel) -> RunReport {
    let opts = BuildOptions {
        compiler,
        opt,
        ..BuildOptions::default()
    };
    let x = input();
    let r = build_and_run(target, &bundle_dir(), &[("x", Values::f32(&x))], &opts)
        .unwrap_or_else(|e| panic!("{} {compiler:?} {opt:?}: {e}", target.name));
    let (want_y, want_idx) = reference(&x);
    let y = r.output("y").and_then(Values::to_f32).expect("y is f32");
    for (got, want) in y.iter().zip(&want_y) {
        assert!(
            (got - want).abs() <= 1e-6 + 1e-5 * want.abs(),
            "{} {compiler:?} {opt:?}: y = {y:?}, want {want_y:?}",
            target.name
        );
    }
    assert_eq!(
        r.output("argmax").and_then(Values::to_i64),
        Some(vec![i64::from(want_idx)])
    );
    println!(
        "{:<13} {:<5} {:<2}: instructions {:>7}  flash {:>6} (model {:>4})  ram {:>5} (model {:>3})  stack {:>4}",
        target.name,
        format!("{compiler:?}"),
        format!("{opt:?}"),
        r.instructions.map_or("-".into(), |n| n.to_string()),
        r.flash(),
        r.model_text + r.model_data,
        r.ram(),
        r.model_data + r.model_bss,
        r.stack_bytes.map_or("-".into(), |n| n.to_string()),
    );
    r
}

/// Every compiler × opt level on one target; on devices the counts are present and repeatable.
fn check_target(name: &str) {
    let t = Target::by_name(name).unwrap();
    let builds = [
        (CompilerKind::Gcc, OptLevel::O2),
        (CompilerKind::Gcc, OptLevel::Os),
        (CompilerKind::Clang, OptLevel::O2),
        (CompilerKind::Clang, OptLevel::Os),
    ];
    // The builds are separate processes (compilers, QEMU): side by side (tests/common/par.rs),
    // with gcc -O2 built and run a second time for the repeatability check.
    let mut jobs = builds.to_vec();
    jobs.push((CompilerKind::Gcc, OptLevel::O2));
    let reports = par::par_map(&jobs, |&(compiler, opt)| run(&t, compiler, opt));
    for (&(compiler, opt), r) in builds.iter().zip(&reports) {
        // The figure is model_run's own stack, from the stack pointer at the call. On
        // RV32IMAFC the stand-in's model_run is a leaf that keeps everything in temporary
        // registers (no `addi sp` in its code, gcc and clang, -O2 and -Os): 0 bytes is right.
        let leaf = name == "riscv32imafc";
        assert!(
            r.stack_bytes
                .is_some_and(|s| (s > 0 || leaf) && s < 4096 && s % 4 == 0),
            "{name} {compiler:?} {opt:?}: {:?}",
            r.stack_bytes
        );
        assert!(r.text > 0 && r.model_text > 0);
        if t.is_host() {
            continue;
        }
        let n = r.instructions.expect("devices count instructions");
        assert!(n > 100, "{name}: {n} instructions");
        if compiler == CompilerKind::Gcc && opt == OptLevel::O2 {
            let again = &reports[builds.len()];
            assert_eq!(
                again.instructions,
                Some(n),
                "{name}: counts differ between runs"
            );
            assert_eq!(again.outputs, r.outputs);
        }
    }
}

#[test]
fn host() {
    check_target("host");
}

#[test]
fn cortex_m4() {
    check_target("cortex-m4");
}

#[test]
fn cortex_m3() {
    check_target("cortex-m3");
}

#[test]
fn riscv32imac() {
    check_target("riscv32imac");
}

#[test]
fn riscv32imafc() {
    check_target("riscv32imafc");
}

#[test]
fn host_sanitized_build_runs_clean() {
    let t = Target::by_name("host").unwrap();
    let opts = BuildOptions {
        sanitize: true,
        ..BuildOptions::default()
    };
    let x = input();
    let r = build_and_run(&t, &bundle_dir(), &[("x", Values::f32(&x))], &opts).unwrap();
    assert_eq!(
        r.output("y").and_then(Values::to_f32),
        Some(reference(&x).0)
    );
    assert_eq!(r.stack_bytes, None);
    let m4 = Target::by_name("cortex-m4").unwrap();
    assert!(build_and_run(&m4, &bundle_dir(), &[("x", Values::f32(&x))], &opts).is_err());
}

#[test]
fn broken_bundle_reports_compiler_output_and_target() {
    let dir = picograd::runtime::private_fs::private_temp_dir("picograd-broken-bundle-")
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["model.h", "model.c", "model_weights.c"] {
        std::fs::copy(bundle_dir().join(f), dir.join(f)).unwrap();
    }
    let mut src = std::fs::read_to_string(dir.join("model.c")).unwrap();
    src.push_str("\nint broken_here(void) { return 1 }\n");
    std::fs::write(dir.join("model.c"), src).unwrap();
    let t = Target::by_name("cortex-m4").unwrap();
    let x = Values::f32(&input());
    let e = build_and_run(&t, &dir, &[("x", x.clone())], &BuildOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("cortex-m4"), "{msg}");
    assert!(msg.contains("arm-none-eabi-gcc"), "{msg}");
    assert!(msg.contains("model.c") && msg.contains("error:"), "{msg}");
    // Wrong inputs are errors before anything is built.
    let wrong = build_and_run(
        &t,
        &dir,
        &[("x", Values::f32(&[1.0]))],
        &BuildOptions::default(),
    );
    assert!(wrong.unwrap_err().to_string().contains("input `x`"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The firmware's build is this binary's longest job (a release build with LTO of the no_std
/// crate graph, mostly on one core). libtest starts tests in name order, so the name puts it
/// beside the bundle tests (after `cortex_m4`) instead of last, where it would run alone.
#[test]
fn cortex_m4_runs_the_rust_firmware_example() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("targets/cortex-m4/firmware/run.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed\nstdout:\n{stdout}\nstderr:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("firmware ok"), "{stdout}");
}
