//! `--quantize int8 --calibrate inputs.npy`: a float ONNX model quantized by picograd's own
//! calibration (`picograd_onnx::quantize`) before `compile` or `run` uses it. This file only
//! reads the calibration file into samples and checks it against the model's input.
//!
//! Invariant: a calibration file is float32 of shape `[N, ...]` where `...` is the model
//! input's shape without its batch axis (each of the N rows is one sample of batch 1), or
//! exactly the input's shape with N on its batch axis; anything else is an error naming the
//! file, its shape and dtype, and the shape expected.

use std::path::Path;

use picograd_core::{DType, Error, Result, Tensor};
use picograd_onnx::npy;
use picograd_onnx::quantize::{quantize_int8, Calibrator, QuantReport};
use picograd_onnx::{Model, ValueSpec};

/// The model at `path` with its Conv/Gemm layers in int8, calibrated on `calibrate`.
pub fn quantized_model(
    path: &Path,
    calibrate: &Path,
    how: Calibrator,
) -> Result<(Model, QuantReport)> {
    let float = Model::load(path)?;
    let samples = calibration_samples(&float, calibrate)?;
    let proto = picograd_onnx::model::read_proto(path)?;
    let what = path.display().to_string();
    let (q, report) = quantize_int8(&proto, &samples, how, &what)?;
    Ok((Model::from_proto(q, &what)?, report))
}

/// The samples of a calibration `.npy` for `model` (one input), one tensor each.
pub fn calibration_samples(model: &Model, file: &Path) -> Result<Vec<Vec<Tensor>>> {
    let [spec] = model.inputs() else {
        return Err(Error::Unsupported(format!(
            "--calibrate: the model has {} inputs; calibration reads one .npy for a \
             one-input model",
            model.inputs().len()
        )));
    };
    let t = npy::read(file)?;
    let rest = expected_row(spec);
    let shape = t.shape().to_vec();
    let fits = shape.len() == rest.len() + 1
        && shape[1..]
            .iter()
            .zip(&rest)
            .all(|(d, want)| want.is_none_or(|w| w == *d as i64));
    if t.dtype() != DType::F32 || !fits || shape[0] == 0 {
        let want: Vec<String> = rest
            .iter()
            .map(|d| d.map_or("?".into(), |v| v.to_string()))
            .collect();
        return Err(Error::shape(
            "calibrate",
            format!(
                "{}: holds {} {shape:?}; input '{}' ({}) needs float32 [N, {}] with N >= 1",
                file.display(),
                t.dtype(),
                spec.name,
                spec.describe(),
                want.join(", ")
            ),
        ));
    }
    // Each row is one sample; it gets back the batch axis of 1 the input's shape starts with.
    let strip = matches!(spec.shape.as_deref(), Some([f, ..]) if f.is_none_or(|d| d == 1));
    let mut dims = if strip { vec![1usize] } else { Vec::new() };
    dims.extend(&shape[1..]);
    let per: usize = shape[1..].iter().product();
    let all = t.to_vec::<f32>()?;
    all.chunks(per.max(1))
        .map(|c| Ok(vec![Tensor::try_from_slice(c, &dims)?]))
        .collect()
}

/// The shape one calibration row has: the input's shape without a leading batch axis of 1 or
/// `?` (a shape whose first axis is larger is taken whole).
fn expected_row(spec: &ValueSpec) -> Vec<Option<i64>> {
    match spec.shape.as_deref() {
        Some([first, rest @ ..]) if first.is_none_or(|d| d == 1) => rest.to_vec(),
        Some(all) => all.to_vec(),
        None => Vec::new(),
    }
}
