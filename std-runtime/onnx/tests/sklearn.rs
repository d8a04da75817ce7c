//! scikit-learn models as skl2onnx writes them with its default options (integer class labels,
//! a ZipMap output), and the `ai.onnx.ml` operators they use, against onnxruntime:
//! LogisticRegression (LinearClassifier, Normalizer, ZipMap, Cast) and MLPClassifier (MatMul,
//! Softmax, ArgMax, ArrayFeatureExtractor, ZipMap) give its labels and probabilities;
//! LinearRegressor, Scaler and Normalizer (L1, L2, MAX) its values; string class labels are
//! refused with an error naming what avoids them.

mod pymodels;

use picograd_onnx::Model;

fn check_case(case: &str) {
    let Some(dir) = pymodels::make(case) else {
        return;
    };
    let model = Model::load(&dir.join("model.onnx")).unwrap();
    let outs = model
        .run(&pymodels::inputs(&dir))
        .unwrap_or_else(|e| panic!("{case}: {e}"));
    let want = pymodels::expected(&dir);
    assert_eq!(outs.len(), want.len());
    for ((spec, t), w) in model.outputs().iter().zip(&outs).zip(&want) {
        let got = t.to_f64_vec().unwrap();
        pymodels::assert_close(&format!("{case} {}", spec.name), &got, w, 1e-5);
    }
    if dir.join("classes.npy").is_file() {
        let classes = pymodels::npy(&dir, "classes").to_f64_vec().unwrap();
        let labels = model.zipmap_labels("output_probability").unwrap();
        let labels: Vec<f64> = labels.iter().map(|&l| l as f64).collect();
        assert_eq!(labels, classes, "{case}: ZipMap labels");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logistic_regression_matches_onnxruntime() {
    check_case("logreg");
}

#[test]
fn binary_logistic_regression_matches_onnxruntime() {
    check_case("logreg_binary");
}

#[test]
fn binary_linear_classifier_matches_onnxruntime() {
    check_case("linear_classifier_binary");
}

#[test]
fn mlp_classifier_matches_onnxruntime() {
    check_case("mlp");
}

#[test]
fn linear_regressor_matches_onnxruntime() {
    check_case("linear_regressor");
}

#[test]
fn scaler_and_normalizers_match_onnxruntime() {
    check_case("scaler_normalizer");
}

#[test]
fn string_class_labels_name_the_way_out() {
    let Some(dir) = pymodels::make("logreg_strings") else {
        return;
    };
    let model = Model::load(&dir.join("model.onnx")).unwrap();
    let x = picograd_core::Tensor::from_slice(&[0.0f32; 5], &[1, 5]);
    let err = model.run(&[x]).err().unwrap().to_string();
    assert!(
        err.contains("string class labels")
            && err.contains("integer class labels")
            && err.contains("'zipmap': False")
            && err.contains("LinearClassifier"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
