//! picograd's instruction counter against the reference one: the stand-in bundle
//! (`tests/bundles/dense_relu`) is built for the Cortex-M4 with exact counting
//! (`BuildOptions::icount_runs`), and the two programs it made (K calls of `model_run`, and none)
//! are run again under the reference plugin (`tests/reference/icnt.c`, a copy of the shared tool
//! the peer figures were counted with). Both plugins must give the same totals, and the
//! report's per-inference figure must be their difference over K — exact equality.
//!
//! Needs the host `cc`, `arm-none-eabi-gcc` and `qemu-system-arm`: without them the test says so
//! and passes, except under CI (`CI=true`), where it fails.

#[path = "../../core/tests/common/strict_cc.rs"]
mod strict_cc;

use std::path::{Path, PathBuf};
use std::process::Command;

use picograd_runtime::target::icount::{parse_log, per_inference};
use picograd_runtime::target::{build_and_run, BuildOptions, Target, Values};

const K: u32 = 3;

fn bundle_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/bundles/dense_relu")
}

/// Runs `elf` on the Cortex-M4 board under `plugin`; the plugin's total.
fn total_under(target: &Target, elf: &Path, plugin: &Path, log: &Path) -> u64 {
    let mut words: Vec<String> = target
        .words("run")
        .into_iter()
        .map(|w| w.replace("{elf}", &elf.display().to_string()))
        .collect();
    words.extend([
        "-plugin".into(),
        plugin.display().to_string(),
        "-d".into(),
        "plugin".into(),
        "-D".into(),
        log.display().to_string(),
    ]);
    let out = Command::new(&words[0]).args(&words[1..]).output().unwrap();
    assert!(out.status.success(), "{words:?}: {out:?}");
    let text = std::fs::read_to_string(log).unwrap();
    parse_log(&text, 0, log).unwrap().total
}

#[test]
fn own_counter_agrees_with_the_reference_exactly() {
    for tool in ["cc", "arm-none-eabi-gcc", "qemu-system-arm"] {
        if let Err(e) = Command::new(tool).arg("--version").output() {
            strict_cc::missing_tool(tool, &e.to_string());
            return;
        }
    }
    let target = Target::by_name("cortex-m4").unwrap();
    let opts = BuildOptions {
        icount_runs: Some(K),
        keep_build_dir: true,
        ..BuildOptions::default()
    };
    let x: Vec<f32> = (0..8).map(|j| (j as f32 - 3.5) * 0.3).collect();
    let r = build_and_run(&target, &bundle_dir(), &[("x", Values::f32(&x))], &opts)
        .unwrap_or_else(|e| panic!("exact count build: {e}"));
    let dir = r.build_dir.clone().expect("build folder kept");
    let reference = dir.join("libicnt-reference.so");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/icnt.c");
    let built = Command::new("cc")
        .args([
            "-O2",
            "-shared",
            "-fPIC",
            "-fvisibility=hidden",
            "-DAPI_VERSION=1",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&reference)
        .output()
        .unwrap();
    assert!(built.status.success(), "reference plugin: {built:?}");
    let own = dir.join("libicount.so");
    let mut totals = Vec::new();
    for runs in [0, K] {
        let elf = dir.join(format!("count-{runs}.elf"));
        let theirs = total_under(
            &target,
            &elf,
            &reference,
            &dir.join(format!("ref-{runs}.log")),
        );
        let ours = total_under(&target, &elf, &own, &dir.join(format!("own-{runs}.log")));
        assert_eq!(
            ours, theirs,
            "{runs} call(s): own {ours}, reference {theirs}"
        );
        totals.push(theirs);
    }
    let want = per_inference(totals[1], totals[0], K);
    assert_eq!(
        r.instructions,
        Some(want),
        "per inference, totals {totals:?}"
    );
    // model_run is one of the bundle's functions, counted inside its own address range; the
    // functions' counts cannot exceed the whole (which adds the harness's call loop).
    let in_functions: u64 = r.function_instructions.iter().map(|(_, n)| n).sum();
    assert!(
        r.function_instructions
            .iter()
            .any(|(n, c)| n == "model_run" && *c > 0),
        "{:?}",
        r.function_instructions
    );
    assert!(
        in_functions > 0 && in_functions <= want,
        "{in_functions} > {want}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
