//! The eager soak (`examples/soak.rs`, part a) at CI size: 300 eager Adam steps of the digits
//! MLP on the default device, resident memory sampled every 10 steps, and after 100 warm-up steps
//! it may not rise more than 4 MiB (the leak this guards against, about 60–233 KB a step, would
//! add 12–46 MB over the 200 steps). Complements `core/tests/eager_memory.rs`, which counts live
//! graph nodes: this counts everything the process holds (buffers, caches, allocator).
//!
//! Its own test binary: resident memory is process-wide.

#[path = "../examples/common/digits.rs"]
mod digits;
#[allow(dead_code)]
#[path = "../examples/common/procstat.rs"]
mod procstat;
#[allow(dead_code)]
#[path = "../examples/common/soak.rs"]
mod soak;
#[allow(dead_code)]
#[path = "../examples/common/train.rs"]
mod train;

#[test]
fn eager_adam_memory_is_flat_after_warm_up() {
    picograd::init();
    let data = digits::load().unwrap();
    let (train_set, _) = digits::split(&data);
    let samples = soak::eager_training(&train_set, 300, 10).unwrap();
    assert_eq!(samples.last().map(|s| s.step), Some(300));
    if let Err(e) = soak::check_eager(&samples, 100, 4 << 20) {
        panic!("{e}; samples: {samples:?}");
    }
}
