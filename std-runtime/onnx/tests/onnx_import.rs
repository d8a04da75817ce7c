//! ONNX importer tests: a small CNN built in Rust from the prost messages runs and matches a
//! hand computation; malformed, truncated and hostile files give errors naming what and where;
//! mutated bytes of a real model never panic (bounded proptest); `.npy` round-trips and
//! rejects bad headers.

mod common;

use common::tiny_cnn;
use picograd_core::{DType, Tensor};
use picograd_onnx::{npy, Model};
use proptest::prelude::*;
use prost::Message;

fn input() -> Tensor {
    let v: Vec<f32> = (0..16).map(|i| i as f32 / 8.0 - 1.0).collect();
    Tensor::from_slice(&v, &[1, 1, 4, 4])
}

/// The CNN computed by hand, in f64.
fn reference() -> Vec<f64> {
    let x: Vec<f64> = (0..16).map(|i| i as f64 / 8.0 - 1.0).collect();
    let w: Vec<f64> = (0..18).map(|i| (i as f64 - 9.0) / 10.0).collect();
    let b = [0.1, -0.2];
    let mut g = [0.0; 2];
    for m in 0..2 {
        for oy in 0..4i64 {
            for ox in 0..4i64 {
                let mut s = b[m];
                for ky in 0..3i64 {
                    for kx in 0..3i64 {
                        let (iy, ix) = (oy + ky - 1, ox + kx - 1);
                        if (0..4).contains(&iy) && (0..4).contains(&ix) {
                            s += x[(iy * 4 + ix) as usize] * w[m * 9 + (ky * 3 + kx) as usize];
                        }
                    }
                }
                g[m] += s.max(0.0) / 16.0;
            }
        }
    }
    vec![g[0], g[1] + 0.5, g[0] + g[1] - 0.5]
}

#[test]
fn tiny_cnn_matches_hand_computation() {
    let bytes = tiny_cnn().encode_to_vec();
    let m = Model::from_bytes(&bytes, "tiny.onnx").unwrap();
    assert_eq!(m.parameter_count(), 18 + 2 + 6 + 3);
    let y = m.run(&[input()]).unwrap().remove(0);
    assert_eq!(y.shape(), vec![1, 3]);
    let got = y.to_f64_vec().unwrap();
    for (a, b) in got.iter().zip(reference()) {
        assert!((a - b).abs() < 1e-5, "{got:?} vs {:?}", reference());
    }
}

#[test]
fn unsupported_ops_are_listed_together() {
    let mut p = tiny_cnn();
    let g = p.graph.as_mut().unwrap();
    g.node[1].op_type = "FancyRelu".into();
    g.node[2].op_type = "NoSuchOp".into();
    let m = Model::from_proto(p, "bad.onnx").unwrap();
    let e = m.run(&[input()]).unwrap_err().to_string();
    assert!(
        e.contains("FancyRelu (node 'relu')") && e.contains("NoSuchOp (node 'gap')"),
        "{e}"
    );
}

#[test]
fn structural_errors_name_the_node() {
    let mut p = tiny_cnn();
    p.graph.as_mut().unwrap().node[1].input[0] = "nowhere".into();
    let e = Model::from_proto(p, "m").err().unwrap().to_string();
    assert!(e.contains("'relu'") && e.contains("nowhere"), "{e}");

    let mut p = tiny_cnn();
    p.graph.as_mut().unwrap().node[0].input[0] = "f".into();
    let e = Model::from_proto(p, "m").err().unwrap().to_string();
    assert!(e.contains("cycle"), "{e}");
}

#[test]
fn hostile_tensors_are_refused_without_allocating() {
    let mut p = tiny_cnn();
    p.graph.as_mut().unwrap().initializer[0].dims = vec![1 << 40, 1 << 40];
    let e = Model::from_proto(p, "m").err().unwrap().to_string();
    assert!(e.contains("overflow") || e.contains("more than"), "{e}");

    let mut p = tiny_cnn();
    p.graph.as_mut().unwrap().initializer[0].dims = vec![2, 1, 3, 4];
    let e = Model::from_proto(p, "m").err().unwrap().to_string();
    assert!(e.contains("initializer 'w'"), "{e}");

    let mut p = tiny_cnn();
    p.graph.as_mut().unwrap().initializer[0].data_type = 8;
    assert!(Model::from_proto(p, "m").is_err());
}

#[test]
fn truncated_and_garbage_files_are_errors() {
    let bytes = tiny_cnn().encode_to_vec();
    for cut in [1, 7, bytes.len() / 2, bytes.len() - 1] {
        let r = Model::from_bytes(&bytes[..cut], "cut.onnx");
        if let Err(e) = r {
            assert!(e.to_string().contains("cut.onnx"));
        }
    }
    assert!(Model::from_bytes(b"\xff\xff\xff\xff\xff\xff", "junk").is_err());
    assert!(Model::load(std::path::Path::new("/nonexistent/model.onnx")).is_err());
}

#[test]
fn wrong_input_shape_is_an_error() {
    let m = Model::from_bytes(&tiny_cnn().encode_to_vec(), "m").unwrap();
    let e = m
        .run(&[Tensor::zeros(&[1, 1, 5, 4], DType::F32)])
        .unwrap_err()
        .to_string();
    assert!(e.contains("input 'x'"), "{e}");
}

#[test]
fn npy_round_trip_and_bad_headers() {
    let t = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 4.0, 5.0, 6.0], &[2, 3]);
    let bytes = npy::to_bytes(&t).unwrap();
    let back = npy::parse(&bytes, "t.npy").unwrap();
    assert_eq!(back.shape(), vec![2, 3]);
    assert_eq!(back.to_vec::<f32>().unwrap(), t.to_vec::<f32>().unwrap());
    assert!(npy::parse(&bytes[..bytes.len() - 1], "t.npy").is_err());
    assert!(npy::parse(b"\x93NUMPY\x01\x00\xff\xff", "t.npy").is_err());
    assert!(npy::parse(b"not numpy at all", "t.npy").is_err());
    let huge = b"\x93NUMPY\x01\x00\x46\x00{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999), }    \n";
    assert!(npy::parse(huge, "t.npy").is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Mutated bytes of a real model load and run, or fail with an error: never a panic.
    #[test]
    fn mutated_models_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        let mut bytes = tiny_cnn().encode_to_vec();
        for (i, b) in edits {
            let k = i.index(bytes.len());
            bytes[k] = b;
        }
        if let Ok(m) = Model::from_bytes(&bytes, "mutated.onnx") {
            if let Ok(outs) = m.run(&[input()]) {
                for o in outs {
                    if o.numel() <= 1 << 20 {
                        let _ = o.to_f64_vec();
                    }
                }
            }
        }
    }
}
