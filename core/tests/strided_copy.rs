//! Movement kernels as strided copies (`codegen::strided_copy`): for kernels built from movement
//! ops on odd shapes, `StridedCopy::run` writes exactly the bytes of the same kernel run by the
//! interpreter (the reference: it runs the kernel's UOps), and kernels that are not a single
//! strided view of one load are refused.

use picograd_core::codegen::strided_copy::StridedCopy;
use picograd_core::schedule::{schedule, ScheduleItem};
use picograd_core::{DType, Tensor};
use proptest::prelude::*;

/// The kernel that materializes `t` (a movement of a realized tensor); `None` when `t` is the
/// realized buffer as it is (a movement that changes nothing needs no kernel).
fn try_item(t: &Tensor) -> Option<ScheduleItem> {
    let items = schedule(&[t.lazy().contiguous()]).expect("schedules");
    let kernels: Vec<ScheduleItem> = items.into_iter().filter(|i| !i.is_copy).collect();
    assert!(
        kernels.len() <= 1,
        "one kernel for a movement of a realized tensor"
    );
    kernels.into_iter().next()
}

fn item(t: &Tensor) -> ScheduleItem {
    try_item(t).expect("a kernel")
}

fn bytes(t: &Tensor) -> Vec<u8> {
    t.realize().expect("realizes");
    t.lazy().base().realized().unwrap().to_bytes().unwrap()
}

/// `y` (a movement of the realized `x`) through [`StridedCopy`], checked byte for byte against
/// the interpreter running the same kernel; `false` when the kernel is not a strided copy.
fn check(x: &Tensor, y: &Tensor) -> bool {
    let Some(it) = try_item(y) else {
        // No kernel: `y` is `x`'s buffer as it is.
        assert_eq!(bytes(&y.contiguous()), bytes(x));
        return true;
    };
    let Some(copy) = StridedCopy::from_ast(&it.ast) else {
        return false;
    };
    let src = bytes(x);
    assert!(copy.src_len().unwrap() * copy.itemsize() <= src.len());
    let want = bytes(&y.contiguous());
    let mut got = vec![0xa5u8; want.len()];
    copy.run(&src, &mut got).unwrap();
    assert_eq!(got, want, "{copy:?}");
    true
}

fn iota(n: usize) -> Vec<f32> {
    // Distinct, non-zero values (a zero would hide a missed padding), negative ones included.
    (0..n).map(|i| i as f32 * 0.75 - 11.5).collect()
}

#[test]
fn permute_and_pad_of_an_odd_block() {
    let x = Tensor::from_slice(&iota(3 * 5 * 7), &[3, 5, 7]);
    let y = x.permute(&[2, 0, 1]).pad(&[(1, 2), (0, 1), (2, 0)]);
    assert!(check(&x, &y), "a permute and pad is one strided view");
}

#[test]
fn panels_like_the_layout_pass_makes() {
    // A weight of 12 rows × 10 columns in panels of 8 rows (lanes innermost), the shape of the
    // conv weight copies; then in panels of 4 rows with a fourth panel of zeros.
    let w = Tensor::from_slice(&iota(16 * 10), &[16, 10]);
    let y = w.reshape(&[2, 2, 4, 10]).permute(&[0, 3, 1, 2]);
    assert!(check(&w, &y));
    let w = Tensor::from_slice(&iota(12 * 10), &[12, 10]);
    let y = w
        .pad(&[(0, 4), (0, 0)])
        .reshape(&[4, 4, 10])
        .permute(&[0, 2, 1]);
    assert!(check(&w, &y));
}

#[test]
fn flips_shrinks_and_expands() {
    let x = Tensor::from_slice(&iota(4 * 6), &[4, 6]);
    assert!(check(&x, &x.flip(&[0, 1]).shrink(&[(1, 3), (0, 5)])));
    let col = Tensor::from_slice(&iota(5), &[5, 1]);
    assert!(check(&col, &col.expand(&[5, 3]).pad(&[(1, 0), (0, 2)])));
    // A padding that leaves no source element: all zeros, nothing read.
    assert!(check(
        &x,
        &x.shrink(&[(0, 0), (0, 6)]).pad(&[(2, 1), (0, 0)])
    ));
}

#[test]
fn other_dtypes_move_their_bits() {
    let n = 5 * 3;
    let i8s: Vec<i8> = (0..n)
        .map(|i| (i as i8).wrapping_mul(17).wrapping_sub(100))
        .collect();
    let x = Tensor::from_slice(&i8s, &[5, 3]);
    assert!(check(&x, &x.permute(&[1, 0]).pad(&[(1, 1), (0, 2)])));
    let i64s: Vec<i64> = (0..n).map(|i| (i as i64 - 7) << 40).collect();
    let x = Tensor::from_slice(&i64s, &[5, 3]);
    assert!(check(&x, &x.flip(&[1]).pad(&[(0, 1), (2, 0)])));
    let f64s: Vec<f64> = (0..n).map(|i| i as f64 / 3.0 - 2.0).collect();
    let x = Tensor::from_slice(&f64s, &[3, 5]);
    assert!(check(&x, &x.permute(&[1, 0])));
    let bools: Vec<bool> = (0..n).map(|i| i % 3 == 1).collect();
    let x = Tensor::from_slice(&bools, &[3, 5]);
    assert!(check(&x, &x.pad(&[(1, 0), (0, 1)])));
}

#[test]
fn kernels_that_are_not_one_strided_load_are_refused() {
    let x = Tensor::from_slice(&iota(4 * 6), &[4, 6]);
    let doubled = x
        .permute(&[1, 0])
        .mul(Tensor::from_slice(&[2.0f32], &[1, 1]).expand(&[6, 4]));
    assert!(
        StridedCopy::from_ast(&item(&doubled).ast).is_none(),
        "arithmetic"
    );
    let cast = x.permute(&[1, 0]).cast(DType::I32);
    assert!(StridedCopy::from_ast(&item(&cast).ast).is_none(), "a cast");
    let halves = x.cast(DType::F16);
    halves.realize().unwrap();
    let h = halves.permute(&[1, 0]);
    assert!(
        StridedCopy::from_ast(&item(&h).ast).is_none(),
        "f16 goes through f32"
    );
    // A reshape of a padded view no single view expresses: two views.
    let two = x.pad(&[(0, 0), (1, 1)]).reshape(&[8, 4]);
    let st_views = {
        let it = item(&two);
        let picograd_core::ast::AstOp::Load { st, .. } = it.ast.src()[0].op() else {
            panic!("a load")
        };
        st.simplify().views().len()
    };
    assert_eq!(st_views, 2, "the test needs a two-view load");
    assert!(
        StridedCopy::from_ast(&item(&two).ast).is_none(),
        "two views"
    );
}

/// A random chain of movement ops.
#[derive(Clone, Debug)]
enum Move {
    Permute(u64),
    Pad(u64),
    Shrink(u64),
    Flip(u64),
    Split(u64),
}

fn apply(t: &Tensor, m: &Move) -> Tensor {
    let shape = t.shape().to_vec();
    let rank = shape.len();
    match *m {
        Move::Permute(seed) => {
            let mut order: Vec<usize> = (0..rank).collect();
            order.rotate_left(seed as usize % rank);
            if rank > 1 && seed % 2 == 1 {
                order.swap(0, rank - 1);
            }
            t.permute(&order)
        }
        Move::Pad(seed) => {
            let arg: Vec<(usize, usize)> = (0..rank)
                .map(|i| {
                    (
                        (seed >> (2 * i)) as usize % 3,
                        (seed >> (2 * i + 7)) as usize % 2,
                    )
                })
                .collect();
            t.pad(&arg)
        }
        Move::Shrink(seed) => {
            let arg: Vec<(usize, usize)> = shape
                .iter()
                .enumerate()
                .map(|(i, &d)| {
                    let lo = (seed >> (3 * i)) as usize % d.max(1);
                    let hi = d - (seed >> (3 * i + 11)) as usize % (d - lo).max(1);
                    (lo.min(hi), hi)
                })
                .collect();
            t.shrink(&arg)
        }
        Move::Flip(seed) => t.flip(&[(seed as usize % rank) as isize]),
        Move::Split(seed) => {
            // Split a dimension with a factor, or add a size-1 axis and expand it.
            let i = seed as usize % rank;
            let d = shape[i];
            let mut new: Vec<isize> = shape.iter().map(|&x| x as isize).collect();
            if d % 2 == 0 && d > 2 {
                new[i] = 2;
                new.insert(i + 1, (d / 2) as isize);
                t.reshape(&new)
            } else {
                new.insert(i, 1);
                let mut e: Vec<usize> = new.iter().map(|&x| x as usize).collect();
                e[i] = 3;
                t.reshape(&new).expand(&e)
            }
        }
    }
}

fn moves() -> impl Strategy<Value = Move> {
    prop_oneof![
        any::<u64>().prop_map(Move::Permute),
        any::<u64>().prop_map(Move::Pad),
        any::<u64>().prop_map(Move::Shrink),
        any::<u64>().prop_map(Move::Flip),
        any::<u64>().prop_map(Move::Split),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Any chain of movement ops on an odd-sized block: when the kernel is a strided copy, its
    /// bytes are the interpreter's.
    #[test]
    fn movement_chains_copy_like_the_interpreter(
        dims in proptest::collection::vec(1usize..6, 1..4),
        chain in proptest::collection::vec(moves(), 1..5),
    ) {
        let n: usize = dims.iter().product();
        let x = Tensor::from_slice(&iota(n), &dims);
        let y = chain.iter().fold(x.clone(), |t, m| apply(&t, m));
        // Chains without a split are always one view.
        let single = chain.iter().all(|m| !matches!(m, Move::Split(_)));
        let copied = check(&x, &y);
        prop_assert!(copied || !single, "a permute/pad/shrink/flip chain is one view");
    }
}
