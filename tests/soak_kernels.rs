//! The kernel soak (`examples/soak.rs`, part b) at CI size: 300 distinct kernels compiled 20 per
//! `realize_all` (so `compile_many` batches them into shared libraries) with the realizer's
//! program cache cut to 32, and the kernel libraries actually mapped into the process counted
//! from `/proc/self/maps` after every batch: never more than the cache holds programs (plus
//! slack), and not growing once evictions begin. `tests/resources.rs` checks the one-kernel
//! compile path through `Compiler::live_libraries`; this checks the batched path and the
//! mappings themselves.
//!
//! Its own test binary: the program cache and the mappings are process-wide.

#[path = "../examples/common/digits.rs"]
#[allow(dead_code)]
mod digits;
#[path = "../examples/common/procstat.rs"]
mod procstat;
#[path = "../examples/common/soak.rs"]
#[allow(dead_code)]
mod soak;
#[allow(dead_code)]
#[path = "../examples/common/train.rs"]
mod train;

#[test]
fn batched_distinct_kernels_keep_mapped_libraries_bounded() {
    picograd::init();
    const CAPACITY: usize = 32;
    picograd::realize::set_cache_capacity(CAPACITY);
    // Every value is checked against the host inside `distinct_kernels`.
    let samples = soak::distinct_kernels(300, 20, 1).unwrap();
    let peak = soak::check_mappings(&samples, CAPACITY, CAPACITY + 4)
        .unwrap_or_else(|e| panic!("{e}; samples: {samples:?}"));
    // The kernels really were compiled and loaded (a run without a C compiler maps none).
    assert!(
        peak > 0,
        "no kernel library was ever mapped: no C compiler for the Clang device? {samples:?}"
    );
    // What the runtime counts as loaded is what the process maps.
    for s in &samples {
        assert_eq!(
            s.mapped as u64, s.live,
            "mapped vs live libraries: {samples:?}"
        );
    }
}
