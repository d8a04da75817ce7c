//! Float comparison for tests whose reference sums in another order: each value within 1e-5
//! relative (absolute below 1).

/// Panics naming `what` when a value of `got` is not close to the one of `want`.
pub fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (a, b) in got.iter().zip(want) {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{what}: {got:?} vs {want:?}"
        );
    }
}
