//! Dynamic input dimensions: an input axis declared with a `dim_param` (`batch`, `seq`) becomes
//! a symbolic dimension in [`Model::run`](crate::Model::run) — a
//! [`Variable`](picograd_core::symbolic::Variable) named after the parameter, with bounds
//! `[1, max]`, bound to the size the caller gave — so one capture and one compiled set of kernels
//! serve every size in range. `max` is [`DEFAULT_MAX_DIM`] unless set per name
//! ([`DimBounds::set_max`], `Model::with_max_dim`, `picograd run --max batch=N`).
//!
//! Invariants: every axis of one name is one variable (two inputs giving it different sizes is
//! an error naming both); a size above a maximum the caller set is an error naming the input,
//! the axis and how to raise the maximum, never a clamp; a size above the default maximum (no
//! maximum set) keeps that axis concrete — the caller asked for nothing, so the run still
//! works, with a capture of its own; an axis whose `dim_param` is not a usable variable
//! name (not a C identifier, or `idx…`), a size-0 axis, and an axis without a `dim_param` stay
//! concrete.

use std::collections::BTreeMap;

use picograd_core::symbolic::Node as Sint;
use picograd_core::symbolic::Variable;
use picograd_core::{Error, Result, Tensor};

use crate::model::ValueSpec;

/// The largest size of a `dim_param` axis when none is set: one capture serves sizes 1 to 64.
/// Larger sizes run with that axis concrete (a capture of their own) unless a maximum is set
/// for the name; intermediate buffers are allocated for the maximum.
pub const DEFAULT_MAX_DIM: i64 = 64;

/// The maximum of each `dim_param` name that has one set; others take [`DEFAULT_MAX_DIM`].
#[derive(Clone, Debug, Default)]
pub struct DimBounds {
    max: BTreeMap<String, i64>,
}

impl DimBounds {
    /// Sets the maximum of `name` (at least 1).
    pub fn set_max(&mut self, name: &str, max: i64) -> Result<()> {
        if max < 1 {
            return Err(Error::shape(
                "onnx",
                format!("the maximum of dimension '{name}' must be at least 1, got {max}"),
            ));
        }
        self.max.insert(name.to_string(), max);
        Ok(())
    }

    /// The bounds of `name`: `[1, max]`.
    pub fn bounds(&self, name: &str) -> (i64, i64) {
        (1, self.max.get(name).copied().unwrap_or(DEFAULT_MAX_DIM))
    }

    /// Whether the caller set `name`'s maximum (otherwise it is [`DEFAULT_MAX_DIM`]).
    pub fn is_set(&self, name: &str) -> bool {
        self.max.contains_key(name)
    }

    /// The names given a maximum.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.max.keys().map(String::as_str)
    }

    /// The variable of `name`, or `None` when the name cannot be one (see the module doc) or
    /// the maximum leaves no range (`max` 1: the axis is simply 1).
    fn variable(&self, name: &str) -> Option<Variable> {
        let (lo, hi) = self.bounds(name);
        Variable::new(name, lo, hi).ok()
    }
}

/// `inputs` with every `dim_param` axis (of `specs`, in the same order) made symbolic and bound
/// to its size; `None` when no axis is (the inputs are used as given).
pub fn symbolic_inputs(
    specs: &[ValueSpec],
    bounds: &DimBounds,
    inputs: &[Tensor],
) -> Result<Option<Vec<Tensor>>> {
    let mut seen: BTreeMap<String, (i64, String)> = BTreeMap::new();
    let mut any = false;
    let mut out = Vec::with_capacity(inputs.len());
    for (spec, t) in specs.iter().zip(inputs) {
        let dims = sym_dims(spec, bounds, t, &mut seen)?;
        match dims {
            Some(d) => {
                any = true;
                out.push(t.try_bind_shape(&d)?);
            }
            None => out.push(t.clone()),
        }
    }
    Ok(any.then_some(out))
}

/// One input's shape with its `dim_param` axes symbolic (`None`: no axis is, or the input is
/// already symbolic or of another rank than declared, which `check_input` reports).
fn sym_dims(
    spec: &ValueSpec,
    bounds: &DimBounds,
    t: &Tensor,
    seen: &mut BTreeMap<String, (i64, String)>,
) -> Result<Option<Vec<Sint>>> {
    if t.is_symbolic() || spec.dim_params.len() != t.ndim() {
        return Ok(None);
    }
    let shape = t.shape();
    let mut dims: Vec<Sint> = shape.iter().map(|&d| Sint::cst(d as i64)).collect();
    let mut any = false;
    for (axis, (param, &size)) in spec.dim_params.iter().zip(&shape).enumerate() {
        let Some(name) = param else { continue };
        let Some(var) = bounds.variable(name) else {
            continue;
        };
        let size = size as i64;
        let at = format!("input '{}' axis {axis}", spec.name);
        if let Some((v, other)) = seen.get(name) {
            if *v != size {
                return Err(Error::shape(
                    "onnx",
                    format!("dimension '{name}' is {v} at {other} but {size} at {at}"),
                ));
            }
        }
        seen.insert(name.clone(), (size, at.clone()));
        if size == 0 {
            continue;
        }
        let (_, max) = bounds.bounds(name);
        if size > max && !bounds.is_set(name) {
            continue;
        }
        if size > max {
            return Err(Error::shape(
                "onnx",
                format!(
                    "{at} ('{name}') is {size}, above its maximum {max}: raise it with \
                     Model::with_max_dim(\"{name}\", N) or `picograd run --max {name}=N`"
                ),
            ));
        }
        dims[axis] = var.bind(size)?;
        any = true;
    }
    Ok(any.then_some(dims))
}
