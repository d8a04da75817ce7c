//! Run-time dimensions for `picograd compile`: `--shape x=N,3,32,32 --max N=8` makes `N` a
//! [`Variable`] in `[1, 8]`, the input placeholders symbolic over it, and the exported
//! `model_run` take `N` at run time. A dimension without `--max` gets [`DEFAULT_DIM_MAX`].
//!
//! Invariant: a bundle is exported over a variable only when the captured kernels do not depend
//! on its value: the model is captured at two values and the two captures must be the same
//! symbolic program (same kernels, same buffers). An operator that computes with the bound value
//! (a shape, a count, a constant) makes them differ, and compiling is then an error naming the
//! dimension, never a bundle that is right at one value only.

use picograd_core::device::Buffer;
use picograd_core::jit::Capture;
use picograd_core::lazy::LazyBuffer;
use picograd_core::shape::Sint;
use picograd_core::symbolic::{Node, Variable};
use picograd_core::{Error, Result, Tensor};

use picograd_onnx::values::{held_in, onnx_type_name};
use picograd_onnx::ValueSpec;

/// The largest value of a run-time dimension given no `--max`.
pub const DEFAULT_DIM_MAX: i64 = 16;

/// One dimension of a `--shape`: a size, or the name of a run-time dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeDim {
    /// A fixed size.
    Size(usize),
    /// A run-time dimension (a C identifier).
    Free(String),
}

/// Parses `name=N,3,32,32` (sizes and dimension names).
pub fn parse_free_shape_arg(arg: &str) -> Result<(String, Vec<ShapeDim>)> {
    let bad = || {
        Error::shape(
            "compile",
            format!("--shape {arg:?}: expected NAME=D0,D1,... with positive sizes or names"),
        )
    };
    let (name, dims) = arg.rsplit_once('=').ok_or_else(bad)?;
    let dims = dims
        .split(',')
        .map(|d| {
            let d = d.trim();
            match d.parse::<usize>() {
                Ok(0) => None,
                Ok(n) => Some(ShapeDim::Size(n)),
                Err(_) => Variable::new(d, 0, 1)
                    .ok()
                    .map(|_| ShapeDim::Free(d.to_string())),
            }
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    if name.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), dims))
}

/// Parses `N=8` (the largest value of run-time dimension `N`).
pub fn parse_max_arg(arg: &str) -> Result<(String, i64)> {
    let bad = || {
        Error::shape(
            "compile",
            format!("--max {arg:?}: expected NAME=MAX with MAX a positive integer"),
        )
    };
    let (name, v) = arg.split_once('=').ok_or_else(bad)?;
    let v = v
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(bad)?;
    Ok((name.trim().to_string(), v))
}

/// Run-time shapes for the inputs no `--shape` names whose unknown axes all carry an ONNX
/// `dim_param` spelled as a C identifier (`x[batch,1,8,8]` becomes `x=batch,1,8,8`): compiled
/// without `--shape`, such an axis is free with [`DEFAULT_DIM_MAX`] (or its `--max`). An input
/// with an unnamed unknown axis, or a `dim_param` that cannot be a C parameter, is left out (it
/// still needs a `--shape`).
pub fn from_dim_params(specs: &[ValueSpec], named: &[&str]) -> Vec<(String, Vec<ShapeDim>)> {
    specs
        .iter()
        .filter(|spec| !named.contains(&spec.name.as_str()))
        .filter_map(|spec| {
            let dims = spec.shape.as_ref()?;
            if dims.iter().all(Option::is_some) {
                return None;
            }
            let free = dims
                .iter()
                .enumerate()
                .map(
                    |(i, d)| match (d, spec.dim_params.get(i).cloned().flatten()) {
                        (Some(v), _) => usize::try_from(*v).ok().map(ShapeDim::Size),
                        (None, Some(p)) => Variable::new(&p, 0, 1).ok().map(|_| ShapeDim::Free(p)),
                        (None, None) => None,
                    },
                )
                .collect::<Option<Vec<_>>>()?;
            Some((spec.name.clone(), free))
        })
        .collect()
}

/// The run-time dimensions of a compile: their variables, and each input's shape over them.
pub struct FreeDims {
    /// One variable per name, bounds `[1, max]`, in order of first mention.
    pub vars: Vec<Variable>,
    shapes: Vec<(String, Vec<ShapeDim>)>,
}

impl FreeDims {
    /// Variables for the names in `shapes`, bounded by `max` (by name; [`DEFAULT_DIM_MAX`]
    /// where not given). A `--max` naming no dimension is an error.
    pub fn new(shapes: &[(String, Vec<ShapeDim>)], max: &[(String, i64)]) -> Result<FreeDims> {
        let mut names: Vec<&str> = Vec::new();
        for d in shapes.iter().flat_map(|s| &s.1) {
            if let ShapeDim::Free(n) = d {
                if !names.contains(&n.as_str()) {
                    names.push(n);
                }
            }
        }
        if let Some((n, _)) = max.iter().find(|(n, _)| !names.contains(&n.as_str())) {
            return Err(Error::shape(
                "compile",
                format!("--max {n}=...: no --shape names a dimension {n}"),
            ));
        }
        let vars = names
            .iter()
            .map(|&n| {
                let hi = max
                    .iter()
                    .find(|m| m.0 == n)
                    .map_or(DEFAULT_DIM_MAX, |m| m.1);
                if hi < 2 {
                    // [1, 1] is one value: a fixed size, not a run-time dimension.
                    return Err(Error::shape(
                        "compile",
                        format!(
                            "--max {n}={hi}: a run-time dimension needs a maximum above 1; \
                             give the size itself in --shape"
                        ),
                    ));
                }
                Variable::new(n, 1, hi)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(FreeDims {
            vars,
            shapes: shapes.to_vec(),
        })
    }

    /// Is there no run-time dimension?
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The free shape given for input `name`.
    pub fn shape_of(&self, name: &str) -> Option<&[ShapeDim]> {
        self.shapes
            .iter()
            .find(|s| s.0 == name)
            .map(|s| s.1.as_slice())
    }

    /// `(input, concrete shape)` of every free input with each dimension at `values`.
    pub fn concrete(&self, values: &[i64]) -> Vec<(String, Vec<usize>)> {
        self.shapes
            .iter()
            .map(|(n, dims)| {
                let shape = dims
                    .iter()
                    .map(|d| match d {
                        ShapeDim::Size(s) => *s,
                        ShapeDim::Free(f) => self.value_of(f, values) as usize,
                    })
                    .collect();
                (n.clone(), shape)
            })
            .collect()
    }

    fn value_of(&self, name: &str, values: &[i64]) -> i64 {
        let at = self.vars.iter().position(|v| v.name() == name);
        at.and_then(|i| values.get(i).copied()).unwrap_or(1)
    }

    /// Each dimension's value in the concrete `shapes` of the model's inputs (given input
    /// values); one name must have one value, inside its bounds.
    pub fn values_in(&self, specs: &[ValueSpec], shapes: &[Vec<usize>]) -> Result<Vec<i64>> {
        let mut out: Vec<Option<i64>> = vec![None; self.vars.len()];
        for (spec, shape) in specs.iter().zip(shapes) {
            let Some(dims) = self.shape_of(&spec.name) else {
                continue;
            };
            let mismatch = || {
                Error::shape(
                    "compile",
                    format!(
                        "input '{}' is given as {shape:?}, which does not fit --shape {}",
                        spec.name,
                        describe(dims)
                    ),
                )
            };
            if dims.len() != shape.len() {
                return Err(mismatch());
            }
            for (d, &s) in dims.iter().zip(shape) {
                match d {
                    ShapeDim::Size(n) if *n != s => return Err(mismatch()),
                    ShapeDim::Size(_) => {}
                    ShapeDim::Free(f) => {
                        let i = self.vars.iter().position(|v| v.name() == f).unwrap_or(0);
                        let v = self.vars[i].bind(s as i64)?.bound_value().unwrap_or(0);
                        if out[i].is_some_and(|o| o != v) {
                            return Err(mismatch());
                        }
                        out[i] = Some(v);
                    }
                }
            }
        }
        Ok(out
            .iter()
            .zip(&self.vars)
            .map(|(v, var)| v.unwrap_or(var.bounds().1))
            .collect())
    }

    /// Zero-valued, realized placeholders for the model's inputs: over the variables bound to
    /// `values` for the free inputs (their buffers hold the largest size), `fixed` shapes for
    /// the others.
    pub fn placeholders(
        &self,
        specs: &[ValueSpec],
        fixed: &[Vec<usize>],
        values: &[i64],
    ) -> Result<Vec<Tensor>> {
        specs
            .iter()
            .zip(fixed)
            .map(|(spec, shape)| {
                let dtype = held_in(spec.elem_type).ok_or_else(|| {
                    Error::Unsupported(format!(
                        "input '{}': element type {} has no picograd dtype",
                        spec.name,
                        onnx_type_name(spec.elem_type)
                    ))
                })?;
                let dims: Vec<Sint> = match self.shape_of(&spec.name) {
                    Some(free) => free
                        .iter()
                        .map(|d| match d {
                            ShapeDim::Size(s) => Ok(Node::cst(*s as i64)),
                            ShapeDim::Free(f) => {
                                let i = self.vars.iter().position(|v| v.name() == f);
                                let i = i.unwrap_or(0);
                                self.vars[i].bind(values[i])
                            }
                        })
                        .collect::<Result<_>>()?,
                    None => shape.iter().map(|&s| Node::cst(s as i64)).collect(),
                };
                let largest = dims
                    .iter()
                    .try_fold(1usize, |a, d| a.checked_mul(d.vmax() as usize))
                    .ok_or_else(|| {
                        Error::overflow(format!("input '{}': too many elements", spec.name))
                    })?;
                let buf = Buffer::new(picograd_core::context::default_device(), dtype, largest)?;
                let t = Tensor::from_lazy(LazyBuffer::from_buffer(buf, &dims));
                t.realize()?;
                Ok(t)
            })
            .collect()
    }
}

/// `N,3,32,32`.
fn describe(dims: &[ShapeDim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            ShapeDim::Size(s) => s.to_string(),
            ShapeDim::Free(f) => f.clone(),
        })
        .collect();
    parts.join(",")
}

/// Checks that two captures of one model at different values of its dimensions are one
/// symbolic program: the same steps, buffers and (unbound) kernels. `names` lists the
/// dimensions for the error.
pub fn check_same_program(a: &Capture, b: &Capture, names: &str) -> Result<()> {
    let differ = |what: String| {
        Err(Error::Unsupported(format!(
            "compile: the model's kernels depend on the value of {names} ({what}): an operator \
             computes with the size itself (a shape, a count or a constant), so one C program \
             cannot serve every value; give a fixed --shape instead"
        )))
    };
    if a.steps().len() != b.steps().len() {
        return differ(format!(
            "{} kernels at one value, {} at another",
            a.steps().len(),
            b.steps().len()
        ));
    }
    if a.slots().len() != b.slots().len() {
        return differ("a different number of buffers".into());
    }
    for (i, (x, y)) in a.steps().iter().zip(b.steps()).enumerate() {
        let text = |s: &picograd_core::jit::CapturedStep| s.ast.as_ref().map(|t| t.to_string());
        if x.slots != y.slots || text(x) != text(y) {
            let name = x
                .kernel
                .as_ref()
                .map_or("copy".to_string(), |k| k.name.clone());
            return differ(format!("kernel {i} ({name}) differs"));
        }
    }
    for (i, (x, y)) in a.slots().iter().zip(b.slots()).enumerate() {
        if x.len() != y.len() || x.dtype() != y.dtype() {
            return differ(format!("buffer {i} differs"));
        }
    }
    Ok(())
}
