//! Free dimensions of an exported model: the symbolic variables (a batch size, a sequence
//! length) its kernels and its input and output shapes mention, which `PREFIX_run` takes as
//! `int32_t` arguments at run time.
//!
//! Invariants: every variable has one pair of bounds across the capture, `0 <= min < max <=
//! i32::MAX` (kernels take `int32_t` arguments); its name is a usable C identifier distinct from
//! the model's input and output names and from the kernels' own names (`data0`, `val3`, ...); and every buffer a symbolic kernel loads or stores is
//! reached only below the size the memory plan gives it, for every value of every variable in
//! its bounds. The plan sizes each buffer by the product of its dimensions' upper bounds, and an
//! access is checked by its index expression's upper bound over the variables' whole ranges, so
//! offsets computed at the maximum hold at every value (no monotonicity is assumed).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::names;
use super::ExportNames;
use crate::ast::AstOp;
use crate::error::{Error, Result};
use crate::jit::Capture;
use crate::shape::Sint;
use crate::symbolic::{is_internal_var, Node};

/// A dimension `PREFIX_run` takes at run time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dim {
    /// The variable's name: the C parameter of `PREFIX_run`.
    pub name: String,
    /// Smallest value accepted.
    pub min: i64,
    /// Largest value accepted: the memory plan holds for it.
    pub max: i64,
}

fn unsupported(what: String) -> Error {
    Error::Unsupported(format!("export: {what}"))
}

/// The free dimensions of the steps that run (`steps`, indices into the capture) and of the
/// inputs' and outputs' shapes, sorted by name; checked as the module documentation says.
pub fn free_dims(
    capture: &Capture,
    steps: &[usize],
    io_names: &ExportNames,
    prefix: &str,
) -> Result<Vec<Dim>> {
    let mut dims: Vec<Dim> = Vec::new();
    for &i in steps {
        let st = &capture.steps()[i];
        if let Some(k) = &st.kernel {
            // An internal variable (a load's offset) is a constant of its step, not a dimension.
            for (n, lo, hi) in k.vars.iter().filter(|(n, _, _)| !is_internal_var(n)) {
                add(&mut dims, n, *lo, *hi, &format!("kernel {}", k.name))?;
            }
        }
    }
    let shapes = capture.input_shapes().into_iter();
    for (shape, name) in shapes.zip(&io_names.inputs) {
        add_shape(&mut dims, shape, &format!("input `{name}`"))?;
    }
    let shapes = capture.output_shapes().into_iter();
    for (shape, name) in shapes.zip(&io_names.outputs) {
        add_shape(&mut dims, shape, &format!("output `{name}`"))?;
    }
    dims.sort_by(|a, b| a.name.cmp(&b.name));
    for d in &dims {
        check_dim(d, io_names, prefix)?;
    }
    if !dims.is_empty() {
        check_steps(capture, steps)?;
    }
    Ok(dims)
}

fn add_shape(dims: &mut Vec<Dim>, shape: &[Sint], what: &str) -> Result<()> {
    for d in shape {
        for v in d.unbind().vars() {
            let name = v.var_name().unwrap_or("");
            add(dims, name, v.vmin(), v.vmax(), what)?;
        }
    }
    Ok(())
}

fn add(dims: &mut Vec<Dim>, name: &str, min: i64, max: i64, what: &str) -> Result<()> {
    match dims.iter().find(|d| d.name == name) {
        Some(d) if (d.min, d.max) == (min, max) => Ok(()),
        Some(d) => Err(unsupported(format!(
            "variable {name} has bounds [{}, {}] in one place and [{min}, {max}] in {what}",
            d.min, d.max
        ))),
        None => {
            dims.push(Dim {
                name: name.to_string(),
                min,
                max,
            });
            Ok(())
        }
    }
}

fn check_dim(d: &Dim, io: &ExportNames, prefix: &str) -> Result<()> {
    if d.min < 0 || d.max > i64::from(i32::MAX) {
        return Err(unsupported(format!(
            "variable {} has bounds [{}, {}]; a run-time dimension is an int32_t in [0, {}]",
            d.name,
            d.min,
            d.max,
            i32::MAX
        )));
    }
    if !names::usable(&d.name, prefix) {
        return Err(unsupported(format!(
            "variable {} cannot be a parameter of {prefix}_run (a reserved word or spelling, \
             or it starts with the prefix); name the Variable otherwise",
            d.name
        )));
    }
    if kernel_local(&d.name) {
        return Err(unsupported(format!(
            "variable {} has the name of a kernel's own parameter or local (dataN, valN, \
             accN, vecN, ridxN, core_id, core_count); name the Variable otherwise",
            d.name
        )));
    }
    let taken = io.inputs.iter().chain(&io.outputs);
    if let Some(n) = taken.into_iter().find(|n| n.eq_ignore_ascii_case(&d.name)) {
        return Err(unsupported(format!(
            "variable {} has the name of the model's input or output `{n}`",
            d.name
        )));
    }
    Ok(())
}

/// Is `name` spelled like a name the C renderer gives a kernel's parameters and locals?
fn kernel_local(name: &str) -> bool {
    let numbered = ["data", "val", "acc", "vec", "ridx"].iter().any(|p| {
        name.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    numbered || name == "core_id" || name == "core_count"
}

/// Every symbolic access of every running step stays below its buffer's planned size for all
/// values in bounds; copies over symbolic buffers are refused (their length would be the
/// maximum, past a caller's array).
fn check_steps(capture: &Capture, steps: &[usize]) -> Result<()> {
    for &i in steps {
        let st = &capture.steps()[i];
        let Some(ast) = &st.ast else {
            return Err(unsupported(format!(
                "step {i} is a device copy; a model with run-time dimensions is exported only \
                 from kernels (capture it on one device)"
            )));
        };
        for n in ast.nodes() {
            // A load is gated by its validity (padding reads nothing), so it needs only its
            // valid positions' indices; a store writes every position it indexes.
            let (buf, need) = match n.op() {
                AstOp::Load { buf, st: t } => (*buf, t.valid_size()),
                AstOp::Store { buf, st: t } => (*buf, t.real_size()),
                _ => continue,
            };
            let Some(&slot) = st.slots.get(buf) else {
                return Err(Error::internal(format!(
                    "export: step {i} reads buffer {buf} of {}",
                    st.slots.len()
                )));
            };
            let have = capture.slots()[slot].len();
            if need < 0 || need as u64 > have as u64 {
                return Err(unsupported(format!(
                    "step {i} reaches element {} of slot {slot}, which holds {have} at the \
                     largest dimensions: its size is not bounded by the maximum",
                    need - 1
                )));
            }
        }
    }
    Ok(())
}

/// The element count of `shape` (unbound) as a node.
pub fn numel(shape: &[Sint]) -> Node {
    shape
        .iter()
        .fold(Node::cst(1), |acc, d| acc.mul_node(&d.unbind()))
}

/// `node` as C for a function-like macro body: each variable in parentheses, so an argument
/// that is an expression keeps its meaning.
pub fn macro_body(node: &Node) -> String {
    let c = node.render_c();
    let vars: Vec<String> = node
        .vars()
        .iter()
        .filter_map(|v| v.var_name().map(String::from))
        .collect();
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if vars.iter().any(|v| v == word) {
            out.push_str(&format!("({word})"));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for ch in c.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            word.push(ch);
        } else {
            flush(&mut word, &mut out);
            out.push(ch);
        }
    }
    flush(&mut word, &mut out);
    out
}
