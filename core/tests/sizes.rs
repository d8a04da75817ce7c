//! Sizes are checked at the door (the robustness issue's reproducers, rebuilt): shapes whose
//! element count or byte size cannot exist are refused with an error naming the shape; shapes
//! that wrapped before (a product past 2^64, a 0 beside huge dimensions, a pad past i64) no
//! longer reach a kernel; odd arguments (a repeated axis, dilation 0, an infinite range, a step
//! of i64::MIN) are errors or right, never a panic or a wrong answer.

use picograd_core::{DType, Error, Tensor};

fn shape_err(r: Result<Tensor, Error>, op: &str) -> String {
    match r {
        Err(e @ Error::Shape { .. }) => {
            assert!(e.to_string().starts_with(op), "{e}");
            e.to_string()
        }
        Err(other) => panic!("{op}: not a shape error: {other}"),
        Ok(t) => panic!("{op}: accepted, shape {:?}", t.shape()),
    }
}

#[test]
fn shapes_that_cannot_exist_are_refused() {
    let e = shape_err(
        Tensor::try_from_slice::<f32>(&[], &[1 << 32, 1 << 32]),
        "from_slice",
    );
    assert!(
        e.contains("[4294967296, 4294967296]") && e.contains("too large"),
        "{e}"
    );
    shape_err(
        Tensor::try_from_slice::<f32>(&[], &[0, 1 << 62]),
        "from_slice",
    );
    shape_err(
        Tensor::try_full(&[1 << 40, 1 << 40], 1.0, DType::U8),
        "full",
    );
    shape_err(Tensor::try_zeros(&[usize::MAX], DType::Bool), "full");
    shape_err(Tensor::try_randn(&[1 << 62], 0), "randn");
    shape_err(
        Tensor::try_uniform(&[1 << 31, 1 << 31], 0.0, 1.0, 0),
        "uniform",
    );
    shape_err(Tensor::try_eye(1 << 32, DType::F32), "eye");
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    shape_err(x.try_broadcast_to(&[1 << 40, 1 << 40, 3]), "broadcast_to");
    // A reshape whose element count wraps.
    let empty = Tensor::from_slice::<f32>(&[], &[0]);
    shape_err(empty.try_reshape(&[1 << 32, 1 << 32, 0]), "reshape");
    shape_err(empty.try_reshape(&[-1, 1 << 32, 1 << 32]), "reshape");
    // A pad past i64 (it gave shape [0, 3]).
    let e = shape_err(x.try_pad(&[(1 << 62, 1 << 62)]), "pad");
    assert!(e.contains("axis 0"), "{e}");
}

#[test]
fn ranges_and_arguments_are_checked() {
    for (start, stop, step) in [
        (0.0, f64::INFINITY, 1.0),
        (0.0, 10.0, 0.0),
        (f64::NAN, 1.0, 1.0),
        (0.0, 1e300, 1e-300),
    ] {
        shape_err(Tensor::try_arange(start, stop, step, DType::F32), "arange");
    }
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    for axes in [&[1isize, 1][..], &[1, -1], &[0, 1, 0]] {
        let e = m.try_sum(axes, false).unwrap_err();
        assert!(
            matches!(e, Error::Axis { .. }) && e.to_string().contains("twice"),
            "{e}"
        );
    }
    let img = Tensor::ones(&[1, 1, 4, 4], DType::F32);
    let w = Tensor::ones(&[1, 1, 2, 2], DType::F32);
    let opts = picograd_core::tensor::ConvOpts::default().dilation(&[0]);
    let e = img.try_conv2d(&w, None, &opts).unwrap_err();
    assert!(e.to_string().contains("dilation [0] has a 0"), "{e}");
    // A step of i64::MIN is a valid slice: the last element only (Python's x[::-(2**63)]).
    let v = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]);
    let s = v.try_slice(&[(i64::MAX, i64::MIN, i64::MIN)]).unwrap();
    assert_eq!(s.to_vec::<i32>().unwrap(), [4]);
    let s = v.try_slice(&[(0, i64::MAX, i64::MAX)]).unwrap();
    assert_eq!(s.to_vec::<i32>().unwrap(), [1]);
}

/// `try_from_le_bytes` takes exactly a shape's bytes and gives what `try_from_slice` gives for
/// the same values; too few or too many bytes, an impossible shape or a bool byte other than 0
/// and 1 are errors naming the op.
#[test]
fn little_endian_bytes_fill_their_shape_exactly() {
    let vals = [1.5f32, -0.0, f32::NAN, 3.25e-7, -2.0, 7.0];
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let t = Tensor::try_from_le_bytes(&bytes, &[2, 3], DType::F32).unwrap();
    let want = Tensor::try_from_slice(&vals, &[2, 3]).unwrap();
    let b = |t: &Tensor| -> Vec<u32> {
        t.to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    assert_eq!(t.shape(), vec![2, 3]);
    assert_eq!(b(&t), b(&want));
    let i16s: Vec<u8> = [-3i16, 300].iter().flat_map(|v| v.to_le_bytes()).collect();
    let t = Tensor::try_from_le_bytes(&i16s, &[2], DType::I16).unwrap();
    assert_eq!(t.to_vec::<i16>().unwrap(), vec![-3, 300]);
    assert!(shape_err(
        Tensor::try_from_le_bytes(&bytes[..20], &[2, 3], DType::F32),
        "from_le_bytes"
    )
    .contains("20 bytes"));
    assert!(shape_err(
        Tensor::try_from_le_bytes(&[0; 28], &[2, 3], DType::F32),
        "from_le_bytes"
    )
    .contains("28 bytes"));
    shape_err(
        Tensor::try_from_le_bytes(&[0, 2], &[2], DType::Bool),
        "from_le_bytes",
    );
    let ok = Tensor::try_from_le_bytes(&[0, 1], &[2], DType::Bool).unwrap();
    assert_eq!(ok.to_vec::<bool>().unwrap(), vec![false, true]);
    shape_err(
        Tensor::try_from_le_bytes(&[], &[usize::MAX, 2], DType::F32),
        "from_le_bytes",
    );
}
