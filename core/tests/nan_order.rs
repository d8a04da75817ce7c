//! NaN and empty lines in the ordering ops, as numpy defines them (the worked examples are
//! numpy's outputs): `argmax`/`argmin` give the first NaN's index when a line holds one, `sort`
//! and `topk` put NaN above every number (last ascending, first descending, NaNs in their
//! original order) without losing or duplicating a value, and an empty axis is an error.

use picograd_core::{Error, Tensor};

fn t(v: &[f32]) -> Tensor {
    Tensor::from_slice(v, &[v.len()])
}

/// Bit patterns, so NaNs compare equal to NaNs.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter()
        .map(|x| {
            if x.is_nan() {
                f32::NAN.to_bits()
            } else {
                x.to_bits()
            }
        })
        .collect()
}

#[test]
fn argmax_and_argmin_find_the_first_nan() {
    let nan = f32::NAN;
    // np.argmax([1, nan, 3, nan]) == 1; np.argmin(...) == 1
    let x = t(&[1.0, nan, 3.0, nan]);
    assert_eq!(x.argmax(None, false).item::<i32>().unwrap(), 1);
    assert_eq!(x.argmin(None, false).item::<i32>().unwrap(), 1);
    // Rows without NaN are unchanged; ties still resolve to the first index.
    let m = Tensor::from_slice(&[2.0f32, 5.0, 5.0, nan, 0.0, -1.0, 7.0, nan], &[2, 4]);
    assert_eq!(m.argmax(Some(1), false).to_vec::<i32>().unwrap(), [3, 3]);
    let m = Tensor::from_slice(&[2.0f32, 5.0, 5.0, 1.0, 0.0, -1.0, 7.0, nan], &[2, 4]);
    assert_eq!(m.argmax(Some(1), false).to_vec::<i32>().unwrap(), [1, 3]);
    assert_eq!(m.argmin(Some(1), false).to_vec::<i32>().unwrap(), [3, 3]);
    // All NaN: the first.
    assert_eq!(t(&[nan, nan]).argmax(None, false).item::<i32>().unwrap(), 0);
}

#[test]
fn argmax_of_an_empty_axis_is_an_error() {
    let e = Tensor::from_slice::<f32>(&[], &[0])
        .try_argmax(None, false)
        .unwrap_err();
    assert!(matches!(e, Error::Shape { op: "argmax", .. }), "{e}");
    let e = Tensor::zeros(&[3, 0], picograd_core::DType::F32)
        .try_argmin(Some(1), false)
        .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
}

#[test]
fn sort_orders_nan_above_every_number() {
    let nan = f32::NAN;
    let x = t(&[2.0, nan, 1.0, nan, 0.0]);
    // np.sort -> [0, 1, 2, nan, nan]; np.argsort(kind="stable") -> [4, 2, 0, 1, 3]
    let (v, i) = x.sort(-1, false);
    assert_eq!(
        bits(&v.to_vec::<f32>().unwrap()),
        bits(&[0.0, 1.0, 2.0, nan, nan])
    );
    assert_eq!(i.to_vec::<i32>().unwrap(), [4, 2, 0, 1, 3]);
    // Descending (torch.sort(descending=True, stable=True)): NaNs first, in original order.
    let (v, i) = x.sort(-1, true);
    assert_eq!(
        bits(&v.to_vec::<f32>().unwrap()),
        bits(&[nan, nan, 2.0, 1.0, 0.0])
    );
    assert_eq!(i.to_vec::<i32>().unwrap(), [1, 3, 0, 2, 4]);
    // topk follows the same order.
    let (v, i) = x.topk(3, -1, true);
    assert_eq!(bits(&v.to_vec::<f32>().unwrap()), bits(&[nan, nan, 2.0]));
    assert_eq!(i.to_vec::<i32>().unwrap(), [1, 3, 0]);
    let (v, _) = x.topk(2, -1, false);
    assert_eq!(v.to_vec::<f32>().unwrap(), [0.0, 1.0]);
}
