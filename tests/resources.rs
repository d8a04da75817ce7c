//! A long-running process stays bounded: the realizer keeps a bounded number of compiled
//! programs (least recently used first out), and a kernel library is unloaded when no program
//! uses it any more, so meeting ever new kernels does not pile up mapped libraries. (The disk
//! cache's bound is `std-runtime/tests/cache.rs`'s `cache_folder_stays_within_its_limit`.)
//!
//! Its own test binary: the capacity and the library count are process-wide.

use picograd::runtime::Compiler;
use picograd::Tensor;

#[test]
fn distinct_kernels_do_not_pile_up_libraries() {
    picograd::init();
    const CAPACITY: usize = 8;
    picograd::realize::set_cache_capacity(CAPACITY);
    let x: Vec<f32> = vec![0.25, -1.0, 2.0];
    let mut most = 0;
    for i in 0..48 {
        // A different constant each time: a distinct kernel, compiled and loaded.
        let c = 0.5 + i as f64;
        let t = Tensor::from_slice(&x, &[3]);
        let got = t.mul(c).add(1.0).to_vec::<f32>().unwrap();
        let want: Vec<f32> = x.iter().map(|v| v * c as f32 + 1.0).collect();
        assert_eq!(got, want, "kernel {i}");
        assert!(picograd::realize::cached_programs() <= CAPACITY);
        most = most.max(Compiler::live_libraries());
    }
    // Every library still loaded is held by a cached program (one per kernel here).
    assert!(
        most <= CAPACITY as u64 + 1,
        "{most} libraries were loaded at once with {CAPACITY} programs cached"
    );
    // Forgetting every program unloads every library.
    picograd::realize::set_cache_capacity(1);
    assert!(Compiler::live_libraries() <= 1);
}
