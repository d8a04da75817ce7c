//! Running an exported bundle with an integer output `y` on the host and on Cortex-M4 (under
//! QEMU, where the DSP intrinsics run) and comparing `y` with the expected values.
//!
//! Invariant: a failure names the target it happened on.

#![allow(dead_code)]

use std::path::Path;

use picograd::codegen::opt::OptConfig;
use picograd::export::{export, Bundle, ExportNames, ExportOptions};
use picograd::jit::Capture;
use picograd::runtime::export::write_bundle;
use picograd::runtime::private_fs::private_temp_dir;
use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};
use picograd::Tensor;

/// Builds and runs the bundle in `dir` on the host and on Cortex-M4 with the inputs `feed`; its
/// output `y` must equal `want` on both.
pub fn check_host_and_cortex_m4(dir: &Path, feed: &[(&str, Values)], want: &[i32]) {
    for name in ["host", "cortex-m4"] {
        let t = Target::by_name(name).unwrap();
        let r = build_and_run(&t, dir, feed, &BuildOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got: Vec<i32> = r.output("y").expect("output y").to_i64().unwrap()[..]
            .iter()
            .map(|&v| v as i32)
            .collect();
        assert_eq!(got, want, "exported C on {name}");
    }
}

/// Records `y`, computed from the input `x` (it must already hold `want`: the interpreter's
/// result), and exports it with Cortex-M4's own export options.
pub fn export_for_cortex_m4(x: &Tensor, y: &Tensor, want: &[i32]) -> Bundle {
    let (cap, _) = Capture::record(&[x], &[y]).unwrap();
    assert_eq!(y.to_vec::<i32>().unwrap(), want, "interpreter");
    let target = Target::by_name("cortex-m4").unwrap();
    export(
        &cap,
        &ExportNames::new(&["x"], &["y"]),
        &target.export_options(),
    )
    .unwrap()
}

/// Writes `bundle` into a private folder under a random name (nothing another user could
/// plant; removed afterwards) and checks it with [`check_host_and_cortex_m4`].
pub fn check_bundle(bundle: &Bundle, feed: &[(&str, Values)], want: &[i32]) {
    let tmp = private_temp_dir("picograd-int-bundle-").unwrap();
    let dir = tmp.path().join("bundle");
    write_bundle(bundle, &dir).unwrap();
    check_host_and_cortex_m4(&dir, feed, want);
}

/// Cortex-M4's kernel configuration with the dual multiply-accumulate on.
pub fn m4_dual_mac() -> OptConfig {
    OptConfig {
        dual_mac: true,
        ..Target::by_name("cortex-m4").unwrap().opt
    }
}

/// `cap` (input `x`, output `y`) exported with Cortex-M4's export options, its kernels
/// optimized for `cfg`: the bundle and its `model.c`.
pub fn export_for_cortex_m4_with(cap: &Capture, cfg: OptConfig) -> (Bundle, String) {
    let opts = ExportOptions {
        opt: Some(cfg),
        ..Target::by_name("cortex-m4").unwrap().export_options()
    };
    let bundle = export(cap, &ExportNames::new(&["x"], &["y"]), &opts).unwrap();
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    (bundle, c)
}
