//! ONNX external data (`model.onnx` + `model.onnx.data`, torch ≥ 2.9's default): a model saved
//! by `onnx.save_model(..., save_as_external_data=True, all_tensors_to_one_file=True)` runs and
//! gives onnxruntime's outputs; without its data file it still loads for inspection
//! ([`Model::load_without_weights`]) and a full load names the tensor and the file; byte ranges
//! past the file's end and locations leaving the model's folder (absolute, `..`, a symbolic
//! link) are refused with errors naming the tensor, the file and the byte.

mod pymodels;

use std::path::{Path, PathBuf};

use picograd_onnx::proto::*;
use picograd_onnx::Model;
use prost::Message;

#[test]
fn external_data_model_matches_onnxruntime() {
    let Some(dir) = pymodels::make("external_data") else {
        return;
    };
    assert!(dir.join("model.onnx.data").is_file());
    let model = Model::load(&dir.join("model.onnx")).unwrap_or_else(|e| panic!("load: {e}"));
    assert_eq!(model.weight_count(), 4);
    let outs = model.run(&pymodels::inputs(&dir)).unwrap();
    let got = outs[0].to_f64_vec().unwrap();
    pymodels::assert_close("probs", &got, &pymodels::expected(&dir)[0], 1e-5);

    // Without the data file: inspection still works, a full load says what is missing.
    std::fs::remove_file(dir.join("model.onnx.data")).unwrap();
    let bare = Model::load_without_weights(&dir.join("model.onnx")).unwrap();
    assert_eq!(bare.parameter_count(), 6 * 16 + 16 + 16 * 3 + 3);
    assert_eq!(bare.weight_count(), 4);
    let err = bare.run(&pymodels::inputs(&dir)).unwrap_err().to_string();
    assert!(err.contains("without its weights"), "{err}");
    let err = Model::load(&dir.join("model.onnx"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("model.onnx.data") && err.contains("initializer 'fc1."),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh folder holding `w.bin` (64 bytes: 16 f32 values 0..16).
fn folder(tag: &str) -> PathBuf {
    // A fresh folder under a random name: nothing another user could plant.
    let dir = tempfile::Builder::new()
        .prefix(&format!("picograd-ext-{tag}-"))
        .tempdir()
        .unwrap()
        .keep();
    let bytes: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    std::fs::write(dir.join("w.bin"), bytes).unwrap();
    dir
}

/// `y = x + w` with `w[4]` stored externally under `keys`, saved as `dir/model.onnx`.
fn model_in(dir: &Path, keys: &[(&str, &str)]) -> PathBuf {
    let w = TensorProto {
        name: "w".into(),
        dims: vec![4],
        data_type: 1,
        data_location: 1,
        external_data: keys
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    };
    let value = |name: &str| ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto {
                    dim: vec![Dimension {
                        dim_value: Some(4),
                        dim_param: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
    };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                op_type: "Add".into(),
                input: vec!["x".into(), "w".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            initializer: vec![w],
            input: vec![value("x")],
            output: vec![value("y")],
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn load_err(dir: &Path, keys: &[(&str, &str)]) -> String {
    match Model::load(&model_in(dir, keys)) {
        Ok(_) => panic!("{keys:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn byte_ranges_are_checked_against_the_file() {
    let dir = folder("range");
    let ok = Model::load(&model_in(
        &dir,
        &[("location", "w.bin"), ("offset", "16"), ("length", "16")],
    ))
    .unwrap();
    assert_eq!(
        ok.weights()["w"].to_f64_vec().unwrap(),
        [4.0, 5.0, 6.0, 7.0]
    );
    let e = load_err(&dir, &[("location", "w.bin"), ("offset", "56")]);
    assert!(
        e.contains("w.bin") && e.contains("initializer 'w'") && e.contains("56"),
        "{e}"
    );
    assert!(e.contains("past the end of the 64-byte file"), "{e}");
    let e = load_err(
        &dir,
        &[("location", "w.bin"), ("offset", "18446744073709551615")],
    );
    assert!(e.contains("past the end"), "{e}");
    let e = load_err(&dir, &[("location", "w.bin"), ("length", "12")]);
    assert!(e.contains("need 16"), "{e}");
    let e = load_err(&dir, &[("location", "w.bin"), ("offset", "-1")]);
    assert!(e.contains("not a byte count"), "{e}");
    let e = load_err(&dir, &[("offset", "0")]);
    assert!(e.contains("no 'location'"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn locations_outside_the_folder_are_refused() {
    let dir = folder("escape");
    let inner = dir.join("model");
    std::fs::create_dir_all(&inner).unwrap();
    // `w.bin` sits one level up: reachable by `..`, an absolute path or a link, never read.
    let outside = dir.join("w.bin");
    let e = load_err(&inner, &[("location", "../w.bin")]);
    assert!(e.contains("'..'") && e.contains("initializer 'w'"), "{e}");
    let e = load_err(&inner, &[("location", &outside.display().to_string())]);
    assert!(e.contains("is absolute"), "{e}");
    std::os::unix::fs::symlink(&outside, inner.join("link.bin")).unwrap();
    let e = load_err(&inner, &[("location", "link.bin")]);
    assert!(e.contains("leads outside the folder"), "{e}");
    let e = load_err(&inner, &[("location", "missing.bin")]);
    assert!(
        e.contains("missing.bin") && e.contains("initializer 'w'"),
        "{e}"
    );
    // A link that stays inside the folder is fine.
    std::fs::copy(&outside, inner.join("real.bin")).unwrap();
    std::os::unix::fs::symlink(inner.join("real.bin"), inner.join("alias.bin")).unwrap();
    assert!(Model::load(&model_in(&inner, &[("location", "./alias.bin")])).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}
