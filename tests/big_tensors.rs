//! Tensors of 2^31 elements and more are indexed with 64-bit arithmetic (the robustness issue's
//! reproducers, rebuilt): a loop of 2^31 steps, and index expressions whose terms or divisors
//! pass `i32::MAX`, must not wrap. They use u8 and broadcast constants, so nothing large is ever
//! allocated. They run on the Clang device (the interpreter runs the same UOps, whose index type
//! the linearizer chooses for both, but would take minutes over 2^31 steps).

use picograd::{DType, Tensor};

#[test]
fn a_sum_over_two_to_the_31_elements_counts_them_all() {
    picograd::init();
    let n = 1usize << 31;
    let ones = Tensor::full(&[n + 3], 1.0, DType::U8).cast(DType::I64);
    assert_eq!(
        ones.sum(&[0], false).to_vec::<i64>().unwrap(),
        [n as i64 + 3]
    );
}

#[test]
fn the_corners_of_a_huge_identity_are_right() {
    picograd::init();
    let n = 1i64 << 31;
    // 2^62 elements, never materialized: each read below is one small kernel.
    let e = Tensor::eye(n as usize, DType::U8);
    let first = e.slice(&[(0, 2, 1), (0, 2, 1)]).to_vec::<u8>().unwrap();
    assert_eq!(first, [1, 0, 0, 1]);
    let last = e
        .slice(&[(n - 2, n, 1), (n - 3, n, 1)])
        .to_vec::<u8>()
        .unwrap();
    assert_eq!(last, [0, 1, 0, 0, 0, 1]);
}
