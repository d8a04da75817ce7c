//! Range observers over calibration activations: min/max, or a percentile that ignores the rare
//! outliers min/max would stretch the scale for.
//!
//! Invariant: a range is only reported after at least one finite value was seen; non-finite
//! values are ignored (they carry no range).

use alloc::vec::Vec;

/// Collects the values one tensor takes over the calibration inputs.
#[derive(Clone, Debug)]
pub enum Observer {
    /// The smallest and largest value seen.
    MinMax {
        /// Smallest value seen.
        lo: f32,
        /// Largest value seen.
        hi: f32,
        /// Whether any finite value was seen.
        seen: bool,
    },
    /// The `pct` and `100 − pct` percentiles (e.g. 99.99) of every value seen; keeps the values.
    Percentile {
        /// The upper percentile, in (50, 100].
        pct: f32,
        /// Every finite value seen.
        values: Vec<f32>,
    },
}

impl Observer {
    /// A min/max observer.
    pub fn min_max() -> Observer {
        Observer::MinMax {
            lo: 0.0,
            hi: 0.0,
            seen: false,
        }
    }

    /// A percentile observer; `pct` in (50, 100].
    pub fn percentile(pct: f32) -> Observer {
        Observer::Percentile {
            pct,
            values: Vec::new(),
        }
    }

    /// Adds one batch of values.
    pub fn observe(&mut self, xs: &[f32]) {
        let finite = xs.iter().copied().filter(|v| v.is_finite());
        match self {
            Observer::MinMax { lo, hi, seen } => {
                for v in finite {
                    if !*seen {
                        (*lo, *hi, *seen) = (v, v, true);
                    }
                    *lo = lo.min(v);
                    *hi = hi.max(v);
                }
            }
            Observer::Percentile { values, .. } => values.extend(finite),
        }
    }

    /// The observed (lo, hi), or `None` before any finite value.
    pub fn range(&self) -> Option<(f32, f32)> {
        match self {
            Observer::MinMax { lo, hi, seen } => seen.then_some((*lo, *hi)),
            Observer::Percentile { pct, values } => {
                if values.is_empty() {
                    return None;
                }
                let mut v = values.clone();
                v.sort_unstable_by(f32::total_cmp);
                // Nearest rank: the value below which pct% of the values lie.
                let last = (v.len() - 1) as f32;
                let frac = (pct.clamp(50.0, 100.0) / 100.0) * last;
                let hi = libm::roundf(frac) as usize;
                let lo = libm::roundf(last - frac) as usize;
                Some((v[lo], v[hi]))
            }
        }
    }
}
