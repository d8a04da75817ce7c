//! The quant module's rules on worked examples: observers, activation and weight parameters,
//! int32 biases, BatchNorm folding, and ReLU/ReLU6 folded into the clamp.

use picograd_core::quant::{
    fold_batchnorm, quantize_bias, quantize_weights_per_channel, Activation, Observer, QParams,
};

#[test]
fn min_max_observer_ignores_non_finite_values() {
    let mut o = Observer::min_max();
    assert_eq!(o.range(), None);
    o.observe(&[3.0, -1.0, f32::NAN]);
    o.observe(&[2.0, 5.0, f32::INFINITY]);
    assert_eq!(o.range(), Some((-1.0, 5.0)));
}

#[test]
fn percentile_observer_drops_the_outlier() {
    // 0, 1, ..., 999 and one outlier at 1e6: 1,001 values, nearest rank 99.9% is index 999.
    let mut o = Observer::percentile(99.9);
    let xs: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    o.observe(&xs);
    o.observe(&[1e6]);
    assert_eq!(o.range(), Some((1.0, 999.0)));
    let mut m = Observer::min_max();
    m.observe(&xs);
    m.observe(&[1e6]);
    assert_eq!(m.range(), Some((0.0, 1e6)));
}

#[test]
fn activation_params_are_asymmetric_and_hold_zero() {
    // [-1, 3]: scale 4/255, zero point round(-128 + 63.75) = -64.
    let q = QParams::asymmetric(-1.0, 3.0);
    assert_eq!(q.scale, 4.0 / 255.0);
    assert_eq!(q.zero_point, -64);
    assert_eq!(q.quantize(0.0), -64);
    assert_eq!(q.quantize(3.0), 127);
    assert_eq!(q.quantize(-1.0), -128);
    assert_eq!(q.quantize(100.0), 127, "saturates");
    // A range above 0 is widened down to 0: zero point at the bottom.
    let q = QParams::asymmetric(0.5, 2.0);
    assert_eq!((q.scale, q.zero_point), (2.0 / 255.0, -128));
    // A constant-zero tensor still gets a usable scale.
    assert_eq!(QParams::asymmetric(0.0, 0.0).scale, 1.0);
}

#[test]
fn weights_are_symmetric_per_output_channel() {
    // Channel 0: max|w| = 63.5 → scale 0.5; -10.25 / 0.5 = -20.5 and 1.25 / 0.5 = 2.5 are ties
    // and go to the even neighbour. Channel 1 is all zero: scale 1.
    let w = [63.5, -10.25, 1.25, 0.0, 0.0, 0.0];
    let q = quantize_weights_per_channel(&w, 2).unwrap();
    assert_eq!(q.scales, vec![0.5, 1.0]);
    assert_eq!(q.values, vec![127, -20, 2, 0, 0, 0]);
    // Symmetric: the most negative weight is -127, never -128.
    let q = quantize_weights_per_channel(&[-2.0, 1.0], 1).unwrap();
    assert_eq!(q.values, vec![-127, 64]);
    let e = quantize_weights_per_channel(&w, 4).unwrap_err();
    assert!(format!("{e}").contains("6 values"), "{e}");
}

#[test]
fn biases_are_int32_at_the_input_times_weight_scale() {
    // Scale 0.5 · 0.25 = 0.125: 0.0625 → 0.5 → 0, 0.1875 → 1.5 → 2, -0.3125 → -2.5 → -2.
    let b = quantize_bias(&[0.0625, 0.1875, -0.3125], 0.5, &[0.25; 3]).unwrap();
    assert_eq!(b, vec![0, 2, -2]);
    assert_eq!(quantize_bias(&[0.3], 0.01, &[0.02]).unwrap(), vec![1500]);
    assert_eq!(
        quantize_bias(&[1e9], 1e-6, &[1e-6]).unwrap(),
        vec![i32::MAX],
        "saturates"
    );
    assert!(quantize_bias(&[1.0], 1.0, &[1.0, 1.0]).is_err());
}

#[test]
fn batchnorm_folds_into_the_conv() {
    // γ/σ = [4/2, 1/1]; b' = (b - μ)·k + β.
    let w = [1.0, 2.0, 3.0, 4.0];
    let (gamma, beta, mean, var) = ([4.0, 1.0], [0.5, -1.0], [1.0, 2.0], [3.0, 0.0]);
    let (wf, bf) = fold_batchnorm(&w, Some(&[1.0, 0.0]), &gamma, &beta, &mean, &var, 1.0).unwrap();
    assert_eq!(wf, vec![2.0, 4.0, 3.0, 4.0]);
    assert_eq!(bf, vec![0.5, -3.0]);
    // Same function: a 1x1 conv on x = [0.7, -1.3] then BatchNorm, against the folded conv.
    let x = [0.7f32, -1.3];
    for c in 0..2 {
        let y = w[2 * c] * x[0] + w[2 * c + 1] * x[1] + [1.0, 0.0][c];
        let bn = (y - mean[c]) / (var[c] + 1.0f32).sqrt() * gamma[c] + beta[c];
        let folded = wf[2 * c] * x[0] + wf[2 * c + 1] * x[1] + bf[c];
        assert!((bn - folded).abs() < 1e-5, "channel {c}: {bn} vs {folded}");
    }
    assert!(fold_batchnorm(&w, None, &gamma, &beta, &mean, &[1.0], 1e-5).is_err());
}

#[test]
fn relu_and_relu6_fold_into_the_range_and_clamp() {
    assert_eq!(Activation::Relu.range(-3.0, 5.0), (0.0, 5.0));
    assert_eq!(Activation::Relu6.range(-3.0, 10.0), (0.0, 6.0));
    assert_eq!(Activation::None.range(-3.0, 5.0), (-3.0, 5.0));
    // A ReLU output quantized on its folded range: zero point -128, the clamp is the full range.
    let q = QParams::asymmetric(0.0, 5.0);
    assert_eq!(Activation::Relu.clamp(q), (-128, 127));
    // A range wider than ReLU6's: the clamp stops at 6's code, 6 / (8/255) = 191.25 → 63.
    let q = QParams::asymmetric(-2.0, 8.0);
    let zp = q.zero_point;
    assert_eq!(Activation::Relu6.clamp(q), (zp, q.code(6.0)));
    assert_eq!(QParams::asymmetric(0.0, 8.0).code(6.0), 63);
    assert_eq!(Activation::None.clamp(q), (-128, 127));
}
