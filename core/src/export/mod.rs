//! Ahead-of-time export: a [`Capture`] becomes standalone C99 — `model.h` (the documented API),
//! `model.c` (kernels, the static memory plan, `model_run`), the weights (`model_weights.c` as
//! `const` arrays, or `weights.bin` plus a loader) and a JSON manifest. The core produces bytes;
//! the std runtime writes them to disk (`picograd_runtime::export::write_bundle`).
//!
//! ```
//! use picograd_core::export::{export, ExportNames, ExportOptions};
//! use picograd_core::{context::interp, jit::Capture, ops::AluOp, Tensor};
//! let dev = interp();
//! let x = Tensor::try_from_slice_on(&[1.0f32, 2.0], &[2], &dev).unwrap();
//! let w = Tensor::try_from_slice_on(&[0.5f32, 4.0], &[2], &dev).unwrap();
//! let y = x.try_alu(AluOp::Mul, &[&w]).unwrap();
//! let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
//! let b = export(&cap, &ExportNames::new(&["x"], &["y"]), &ExportOptions::default()).unwrap();
//! let names: Vec<&str> = b.files.iter().map(|f| f.0.as_str()).collect();
//! assert_eq!(names, ["model.h", "model.c", "model_weights.c", "model.json"]);
//! ```
//!
//! A capture over bound [`Variable`](crate::symbolic::Variable)s (a batch size, a sequence
//! length) exports with run-time dimensions ([`dims`]): `int PREFIX_run(int32_t N, ...)` takes
//! each variable first and returns `PREFIX_OK`, or `PREFIX_ERR_DIM` without touching memory
//! when one is outside its bounds; the memory plan is made at the largest values and holds for
//! every value in bounds. A fixed-shape capture keeps `void PREFIX_run(...)`, byte for byte.
//!
//! Invariants: the same capture and options give byte-identical files; the generated C has no
//! `malloc`, no stdio, no libm in freestanding mode, weights are `const` (flash) or typed RAM
//! arrays filled by the loader, every buffer is a typed, 16-byte aligned array (never bytes
//! cast to `float *`), and every kernel is `static` with a unique name.

pub mod dims;
mod emit;
mod json;
pub mod names;
pub mod place;
pub mod plan;
mod weights;

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::jit::Capture;

pub use dims::Dim;
pub use plan::MemoryPlan;

/// Names of the exported model's inputs and outputs (C identifiers), in capture order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportNames {
    /// One per captured input.
    pub inputs: Vec<String>,
    /// One per captured output.
    pub outputs: Vec<String>,
}

impl ExportNames {
    /// Names from string slices.
    pub fn new(inputs: &[&str], outputs: &[&str]) -> ExportNames {
        ExportNames {
            inputs: inputs.iter().map(|s| String::from(*s)).collect(),
            outputs: outputs.iter().map(|s| String::from(*s)).collect(),
        }
    }
}

/// How the weights are shipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weights {
    /// `model_weights.c`: each weight a `const` array (it stays in flash).
    #[default]
    ConstArrays,
    /// `weights.bin` and `int model_load_weights(const uint8_t *blob, uint32_t len)`, which
    /// copies it into RAM arrays (for targets that load weights at run time).
    Blob,
}

/// Export options (a target description supplies these).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// Prefix of every file name and C symbol (`model` → `model.h`, `model_run`).
    pub prefix: String,
    /// Inputs and outputs live in the arena (reached through `model_input_NAME()` /
    /// `model_output_NAME()`; `model_run(void)`), instead of caller memory passed to
    /// `model_run`.
    pub io_in_arena: bool,
    /// How weights are shipped.
    pub weights: Weights,
    /// Render exp2/log2/sin/sqrt/fmod (f32) with picograd's own code: no libm needed.
    pub freestanding_math: bool,
    /// How kernels are shaped for the device (register tiles, unrolling); `None` lowers them
    /// unoptimized. Kernels are always lowered again for export, never taken as the desktop
    /// optimized them. Default: [`OptConfig::small_device`](crate::codegen::opt::OptConfig).
    pub opt: Option<crate::codegen::opt::OptConfig>,
    /// The target has a single-precision fused multiply-add instruction (Cortex-M4F `vfma.f32`,
    /// RV32F `fmadd.s`): f32 multiply-accumulates are rendered `__builtin_fmaf`, rounded once,
    /// as the desktop does on an FMA host. f64 ones stay unfused (a single-precision FPU would
    /// call libm's `fma`). Off by default: without the instruction the builtin is a slow
    /// software `fmaf` call (and needs libm).
    pub fused_mulacc: bool,
    /// Paragraphs added to `PREFIX.h`'s documentation comment: what the caller wants a reader
    /// of the header to know about its inputs and outputs (e.g. that an output stands for an
    /// ONNX ZipMap's maps). Empty by default.
    pub header_notes: Vec<String>,
    /// Opts chosen for particular kernels (a device search's result, see picograd-runtime's
    /// `target::DeviceSearch`), by the text of the kernel's AST as export lowers it; a kernel
    /// not listed gets the hand-coded opts of `opt`. Chosen opts must fit their kernel (an error
    /// otherwise). Empty by default.
    pub kernel_opts: Vec<(String, Vec<crate::codegen::kernel::Opt>)>,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            prefix: String::from("model"),
            io_in_arena: false,
            weights: Weights::ConstArrays,
            freestanding_math: true,
            opt: Some(crate::codegen::opt::OptConfig::small_device()),
            fused_mulacc: false,
            header_notes: Vec::new(),
            kernel_opts: Vec::new(),
        }
    }
}

/// The exported files, in memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bundle {
    /// `(file name, contents)`: `PREFIX.h`, `PREFIX.c`, `PREFIX_weights.c` or `weights.bin`,
    /// `PREFIX.json`.
    pub files: Vec<(String, Vec<u8>)>,
    /// The manifest (also one of the files).
    pub manifest_json: String,
    /// The memory plan.
    pub plan: MemoryPlan,
    /// Total arena bytes (static RAM for intermediates, and I/O when it lives there).
    pub arena_bytes: usize,
    /// The lower bound: the largest total of simultaneously live arena bytes.
    pub lower_bound_bytes: usize,
    /// Bytes of weights.
    pub weight_bytes: usize,
    /// The dimensions `PREFIX_run` takes at run time (variables of the capture), by name; empty
    /// for a fixed-shape model. With any, `PREFIX_run` returns a status (see `PREFIX.h`).
    pub dims: Vec<Dim>,
}

impl Bundle {
    /// The contents of file `name`, if the bundle has it.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|f| f.0 == name)
            .map(|f| f.1.as_slice())
    }
}

/// Exports a capture as C files.
pub fn export(capture: &Capture, names: &ExportNames, opts: &ExportOptions) -> Result<Bundle> {
    // Device kernels keep two roundings per multiply-accumulate unless the options say the
    // target has a single-precision FMA instruction.
    let chosen = |ast: &crate::ast::Ast| {
        let text = alloc::format!("{ast}");
        let found = opts.kernel_opts.iter().find(|(k, _)| *k == text);
        found.map(|(_, o)| o.clone())
    };
    let mut capture = capture.relowered_with(opts.opt.as_ref(), opts.fused_mulacc, &chosen)?;
    capture.unfuse_f64();
    let capture = &capture;
    check_names(capture, names, opts)?;
    let plan = plan::plan(capture, opts.io_in_arena)?;
    let running: Vec<usize> = plan.steps.iter().map(|s| s.step).collect();
    let dims = dims::free_dims(capture, &running, names, &opts.prefix)?;
    emit::emit(capture, names, opts, plan, dims)
}

fn bad_name(what: String) -> Error {
    Error::Unsupported(alloc::format!("export: {what}"))
}

fn check_names(capture: &Capture, names: &ExportNames, opts: &ExportOptions) -> Result<()> {
    let (ni, no) = (capture.input_slots().len(), capture.output_slots().len());
    if names.inputs.len() != ni || names.outputs.len() != no {
        return Err(bad_name(alloc::format!(
            "the capture has {ni} inputs and {no} outputs but {} and {} names were given",
            names.inputs.len(),
            names.outputs.len()
        )));
    }
    names::check(names, &opts.prefix).map_err(bad_name)
}
