//! Misuse reports: a panicking twin names the caller's line (`#[track_caller]` through the one
//! shared helper), and the losses refuse host-known labels outside the class range.

use std::panic::{self, Location};
use std::sync::Mutex;

use picograd_core::nn::{Linear, Module};
use picograd_core::{DType, Reduction, Tensor};

/// Where the last panic happened (file, line), as the panic hook saw it.
static LAST: Mutex<Option<(String, u32)>> = Mutex::new(None);

/// Runs `f`, which must panic, and returns the panic's location.
fn at(f: impl FnOnce()) -> (String, u32) {
    *LAST.lock().unwrap() = None;
    assert!(
        panic::catch_unwind(panic::AssertUnwindSafe(f)).is_err(),
        "expected a panic"
    );
    LAST.lock().unwrap().take().expect("the hook saw the panic")
}

#[test]
fn panics_name_the_callers_line() {
    panic::set_hook(Box::new(|info| {
        let loc = info.location().expect("a location");
        *LAST.lock().unwrap() = Some((loc.file().to_string(), loc.line()));
    }));
    let here = file!();
    let (a, b) = (
        Tensor::ones(&[2, 3], DType::F32),
        Tensor::ones(&[4, 5], DType::F32),
    );
    let c = Tensor::ones(&[2], DType::F32);
    let y = Tensor::from_slice(&[0i32, 7], &[2]);
    let m = Reduction::Mean;
    let lin = Linear::new(5, 2, true, 0);
    // Each case is one line, with `line!()` beside the misuse.
    let cases = [
        (line!(), at(|| drop(a.reshape(&[5])))),
        (line!(), at(|| drop(a.matmul(&b)))),
        (line!(), at(|| drop(&a + &c))),
        (line!(), at(|| drop(Tensor::from_slice(&[1.0f32], &[3])))),
        (line!(), at(|| drop(a.cross_entropy(&y, m, 0.0)))),
        (line!(), at(|| drop(lin.forward(&a)))),
    ];
    let _ = panic::take_hook();
    for (want_line, (file, line)) in cases {
        assert_eq!((file.as_str(), line), (here, want_line));
    }
    // The reference: the location a plain `#[track_caller]` function reports is its caller's.
    #[track_caller]
    fn caller() -> &'static Location<'static> {
        Location::caller()
    }
    assert_eq!(caller().file(), here);
}

/// The class-3 logits of the tests, and log-softmax of a row by hand.
fn logits() -> (Tensor, Vec<[f64; 3]>) {
    let rows = vec![[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]];
    let flat: Vec<f32> = rows.iter().flatten().map(|&v| v as f32).collect();
    (Tensor::from_slice(&flat, &[2, 3]), rows)
}

fn log_softmax(row: &[f64; 3]) -> [f64; 3] {
    let m = row.iter().cloned().fold(f64::MIN, f64::max);
    let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
    [row[0] - lse, row[1] - lse, row[2] - lse]
}

#[test]
fn losses_refuse_host_known_labels_out_of_range() {
    let (x, _) = logits();
    let bad = Tensor::from_slice(&[1i32, 3], &[2]);
    let neg = Tensor::from_slice(&[-2i64, 0], &[2]);
    let msgs = [
        x.try_cross_entropy(&bad, Reduction::Mean, 0.0)
            .err()
            .unwrap()
            .to_string(),
        x.try_sparse_categorical_crossentropy(&neg, -1, 0.0, Reduction::Mean)
            .err()
            .unwrap()
            .to_string(),
        x.try_nll_loss(&bad, None, None, Reduction::Mean)
            .err()
            .unwrap()
            .to_string(),
        picograd_core::nn::losses::cross_entropy(&x, &bad)
            .err()
            .unwrap()
            .to_string(),
    ];
    assert!(
        msgs[0].contains("cross_entropy") && msgs[0].contains("label 3"),
        "{}",
        msgs[0]
    );
    assert!(msgs[0].contains("3 classes"), "{}", msgs[0]);
    assert!(
        msgs[1].contains("label -2") && msgs[1].contains("3 classes"),
        "{}",
        msgs[1]
    );
    assert!(
        msgs[2].contains("nll_loss") && msgs[2].contains("label 3"),
        "{}",
        msgs[2]
    );
    assert!(msgs[3].contains("label 3"), "{}", msgs[3]);
    // A constant label is host-known too.
    let c = Tensor::full(&[2], 9.0, DType::I32);
    let e = x.try_cross_entropy(&c, Reduction::Mean, 0.0).err().unwrap();
    assert!(e.to_string().contains("label 9"), "{e}");
    // An ignored label may be out of range.
    let ign = Tensor::from_slice(&[1i64, 100], &[2]);
    assert!(x
        .try_nll_loss(&ign, None, Some(100), Reduction::Sum)
        .is_ok());
    assert!(x
        .try_sparse_categorical_crossentropy(&ign, 100, 0.0, Reduction::Sum)
        .is_ok());
}

#[test]
fn in_range_and_lazy_labels_give_the_reference_loss() {
    let (x, rows) = logits();
    let lp: Vec<[f64; 3]> = rows.iter().map(log_softmax).collect();
    let y = Tensor::from_slice(&[2i32, 0], &[2]);
    let got = x
        .cross_entropy(&y, Reduction::Sum, 0.0)
        .item::<f32>()
        .unwrap();
    let want = -(lp[0][2] + lp[1][0]);
    assert!((f64::from(got) - want).abs() < 1e-5, "{got} vs {want}");
    // Labels still to be computed are not checked (documented): label 5 matches no class, so
    // its row adds nothing to the sum.
    let lazy = Tensor::from_slice(&[2i32, 4], &[2])
        .add(1i32)
        .sub(1i32)
        .add(Tensor::from_slice(&[0i32, 1], &[2]));
    let got = x
        .cross_entropy(&lazy, Reduction::Sum, 0.0)
        .item::<f32>()
        .unwrap();
    assert!((f64::from(got) + lp[0][2]).abs() < 1e-5, "{got}");
}

/// Indices known on the host (a realized buffer, a constant) outside `0..n` are errors naming
/// the op, the value, its element and the range; negative ones do not wrap. A lazy index is
/// not read back: it follows the documented rule (0, an all-zero row, a dropped write), which
/// `tests/export_host.rs` checks on every device, in JIT replays and in exported C.
#[test]
fn gather_scatter_one_hot_refuse_host_known_indices_out_of_range() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let err = |r: picograd_core::Result<Tensor>| match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let idx = Tensor::from_slice(&[0i32, 2, 3, 1], &[2, 2]);
    let e = err(x.try_gather(1, &idx));
    for want in [
        "gather",
        "index 3",
        "element 2",
        "axis 1 of size 3",
        "0 to 2",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
    let neg = Tensor::from_slice(&[0i64, -1], &[1, 2]);
    let e = err(x.try_gather(1, &neg));
    assert!(e.contains("index -1") && e.contains("element 1"), "{e}");
    let src = Tensor::from_slice(&[9.0f32, 8.0, 7.0, 6.0], &[2, 2]);
    let e = err(x.try_scatter(1, &idx, &src));
    assert!(e.contains("scatter") && e.contains("index 3"), "{e}");
    let e = err(x.try_scatter_value(1, &neg, 1.0, None));
    assert!(e.contains("scatter") && e.contains("index -1"), "{e}");
    let e = err(Tensor::from_slice(&[1i32, 5], &[2]).try_one_hot(4));
    for want in ["one_hot", "index 5", "element 1", "4 classes", "0 to 3"] {
        assert!(e.contains(want), "{want}: {e}");
    }
    let c = Tensor::full(&[2, 2], 7.0, DType::I32);
    assert!(err(x.try_gather(1, &c)).contains("index 7"));
    // In range: accepted. A lazy out-of-range index is not an error (documented result: 0).
    assert!(x
        .try_gather(1, &Tensor::from_slice(&[2i32, 0], &[1, 2]))
        .is_ok());
    let lazy = idx.try_add(0i32).unwrap().try_mul(1i32).unwrap();
    let g = x.try_gather(1, &lazy).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(g, vec![1.0, 3.0, 0.0, 5.0]);
}
