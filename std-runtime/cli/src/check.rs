//! Comparing a device run with the desktop: each output of the built bundle against the same
//! output computed by picograd on the desktop from the same inputs (`picograd compile --input
//! x.npy --check`).
//!
//! Tolerance: an element agrees when `|device - desktop| <= ATOL + RTOL * |desktop|`
//! ([`ATOL`] = [`RTOL`] = 1e-4; both NaN agrees, so does the same infinity). The device may round
//! differently from the desktop (fused multiply-adds, its own exp/log/sin within a few ulp), so
//! bit equality is not asked for; integer outputs must match exactly.

use std::fmt;

use picograd_core::tensor::bytes_to_f64;
use picograd_core::{Error, Result, Tensor};
use picograd_runtime::target::{RunReport, Values};

/// Absolute tolerance of the comparison.
pub const ATOL: f64 = 1e-4;
/// Relative tolerance of the comparison.
pub const RTOL: f64 = 1e-4;

/// One output's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputCheck {
    /// The output's C name.
    pub name: String,
    /// The largest `|device - desktop|` over its elements (0 for none; infinite when only one
    /// side is NaN or the infinities differ).
    pub max_abs_diff: f64,
    /// Elements outside the tolerance.
    pub mismatches: usize,
    /// Elements compared.
    pub len: usize,
}

/// Every output's comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    /// One entry per output, in model order.
    pub outputs: Vec<OutputCheck>,
}

impl CheckReport {
    /// True when every element of every output is within the tolerance.
    pub fn passed(&self) -> bool {
        self.outputs.iter().all(|o| o.mismatches == 0)
    }

    /// The largest difference over all outputs.
    pub fn max_abs_diff(&self) -> f64 {
        self.outputs
            .iter()
            .map(|o| o.max_abs_diff)
            .fold(0.0, f64::max)
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed() { "agree" } else { "DISAGREE" };
        write!(
            f,
            "check:        device and desktop {verdict} (tolerance {ATOL:e} + {RTOL:e}·|desktop|)"
        )?;
        for o in &self.outputs {
            write!(
                f,
                "\n  {}: max abs diff {:.3e}, {} of {} element(s) outside the tolerance",
                o.name, o.max_abs_diff, o.mismatches, o.len
            )?;
        }
        Ok(())
    }
}

/// Compares the device's outputs (`run`, by C name) with the desktop's (`desktop`, same order
/// as `names`).
pub fn compare(names: &[String], desktop: &[Tensor], run: &RunReport) -> Result<CheckReport> {
    let outputs = names
        .iter()
        .zip(desktop)
        .map(|(name, want)| {
            let got = run.output(name).ok_or_else(|| {
                Error::Device(format!("the device run printed no output `{name}`"))
            })?;
            let want = bytes_to_f64(&want.to_bytes()?, want.dtype());
            let got = values_f64(got);
            if got.len() != want.len() {
                return Err(Error::Device(format!(
                    "output `{name}`: the device gave {} element(s), the desktop {}",
                    got.len(),
                    want.len()
                )));
            }
            Ok(compare_one(name, &got, &want))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(CheckReport { outputs })
}

/// One output's elements against the reference.
pub fn compare_one(name: &str, got: &[f64], want: &[f64]) -> OutputCheck {
    let mut max_abs_diff = 0.0f64;
    let mut mismatches = 0;
    for (&g, &w) in got.iter().zip(want) {
        let same = g == w || (g.is_nan() && w.is_nan());
        let d = if same { 0.0 } else { (g - w).abs() };
        let d = if d.is_nan() { f64::INFINITY } else { d };
        max_abs_diff = max_abs_diff.max(d);
        // A NaN tolerance (the desktop gave NaN, the device did not) mismatches too.
        let tol = ATOL + RTOL * w.abs();
        if d != 0.0 && (tol.is_nan() || d > tol) {
            mismatches += 1;
        }
    }
    OutputCheck {
        name: name.to_string(),
        max_abs_diff,
        mismatches,
        len: got.len(),
    }
}

/// A device buffer as f64 values.
fn values_f64(v: &Values) -> Vec<f64> {
    let bytes: Vec<u8> = v
        .bits
        .iter()
        .flat_map(|b| b.to_le_bytes()[..v.dtype.itemsize()].to_vec())
        .collect();
    bytes_to_f64(&bytes, v.dtype)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_and_max_abs_diff() {
        let want = [1.0, -2.0, 1000.0, f64::NAN, f64::INFINITY];
        // Within 1e-4 + 1e-4·|w|: 1e-4 at 1.0 is fine, 0.1 at 1000 is not (limit 0.1001 — just in).
        let got = [1.0 + 1e-4, -2.0, 1000.1, f64::NAN, f64::INFINITY];
        let c = compare_one("y", &got, &want);
        assert_eq!((c.mismatches, c.len), (0, 5));
        assert!((c.max_abs_diff - 0.1).abs() < 1e-9, "{c:?}");
        let got = [1.0 + 3e-4, -2.0, 1000.2, 0.0, f64::INFINITY];
        let c = compare_one("y", &got, &want);
        assert_eq!(c.mismatches, 3, "{c:?}");
        assert_eq!(c.max_abs_diff, f64::INFINITY);
        let r = CheckReport { outputs: vec![c] };
        assert!(!r.passed() && r.to_string().contains("DISAGREE"));
    }
}
