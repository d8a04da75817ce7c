//! Running an exported bundle with an integer output `y` on the host and on Cortex-M4 (under
//! QEMU, where the DSP intrinsics run) and comparing `y` with the expected values.
//!
//! Invariant: a failure names the target it happened on.

#![allow(dead_code)]

use std::path::Path;

use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};

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
