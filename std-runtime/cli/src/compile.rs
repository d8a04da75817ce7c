//! Compiling an ONNX model for a device: the library side of `picograd compile`. The model's
//! forward pass is captured on zero-valued placeholder inputs (shapes from the model, or given
//! where an axis is symbolic), exported to freestanding C with `const` weights, written as a
//! bundle, and built once for the target (run on zeros) to measure flash, RAM and instructions.
//!
//! Invariant: the bundle's input and output names are the ONNX names made into C identifiers
//! ([`bundle_names`], by the exporter's one rule), in the model's order; [`CompileReport`] carries them so callers can feed the
//! bundle by name.

use std::fmt;
use std::path::PathBuf;

use picograd_core::export::{export, ExportNames, ExportOptions};
use picograd_core::jit::Capture;
use picograd_core::{DType, Error, Result, Tensor};

use picograd_onnx::values::{dtype_of, onnx_type_name, tensor_from_le_bytes};
use picograd_onnx::{Model, ValueSpec};
use picograd_runtime::target::{build_and_run, BuildOptions, RunReport, Target, Values};

/// What to compile for and where to put it.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Target name, one of the known targets (`cortex-m4`, `riscv32imac`, `host`, ...: see
    /// [`Target::names`]); never resolved as a path.
    pub target: String,
    /// A target description elsewhere, given as its folder (holding `target.txt`); used instead
    /// of `target` when set. Its commands are run as written: name only folders you trust.
    pub target_dir: Option<PathBuf>,
    /// Where the bundle is written.
    pub out: PathBuf,
    /// Shapes for inputs, by ONNX name; required for inputs with a symbolic axis.
    pub shapes: Vec<(String, Vec<usize>)>,
    /// How the measuring build is made.
    pub build: BuildOptions,
}

/// What compiling gave: the bundle's names and sizes, and the measuring run.
#[derive(Clone, Debug)]
pub struct CompileReport {
    /// The target's name.
    pub target: String,
    /// Where the bundle was written.
    pub out: PathBuf,
    /// C names of the inputs, in model order, with their shapes.
    pub inputs: Vec<(String, Vec<usize>)>,
    /// C names of the outputs, in model order.
    pub outputs: Vec<String>,
    /// Kernels in the exported model.
    pub kernels: usize,
    /// The static arena's size in bytes.
    pub arena_bytes: usize,
    /// Bytes of constant weights.
    pub weight_bytes: usize,
    /// The build and run on zero inputs.
    pub run: RunReport,
}

impl CompileReport {
    /// Flash the model's own objects take: their text + data.
    pub fn flash(&self) -> u64 {
        self.run.model_text + self.run.model_data
    }
}

impl fmt::Display for CompileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.run;
        writeln!(f, "target:       {}", self.target)?;
        writeln!(f, "bundle:       {}", self.out.display())?;
        writeln!(f, "kernels:      {}", self.kernels)?;
        writeln!(
            f,
            "flash:        {} bytes (model text {} + data {}; weights {})",
            self.flash(),
            r.model_text,
            r.model_data,
            self.weight_bytes
        )?;
        let stack = r.stack_bytes.map_or("?".into(), |s| s.to_string());
        writeln!(
            f,
            "RAM:          arena {} bytes + stack {stack} bytes (model bss {})",
            self.arena_bytes, r.model_bss
        )?;
        let ins = r
            .instructions
            .map_or("not counted".into(), |n| n.to_string());
        write!(f, "instructions: {ins} (one run of model_run)")
    }
}

/// Imports nothing: `model` is already loaded. Captures, exports, writes and measures it.
pub fn compile(model: &Model, opts: &CompileOptions) -> Result<CompileReport> {
    model.check_supported()?;
    let target = match &opts.target_dir {
        Some(dir) => Target::from_dir(dir)?,
        None => Target::by_name(&opts.target)?,
    };
    let shapes = input_shapes(model, &opts.shapes)?;
    let inputs = placeholders(model.inputs(), &shapes)?;
    let outputs = model.run(&inputs)?;
    let (ins, outs): (Vec<&Tensor>, Vec<&Tensor>) =
        (inputs.iter().collect(), outputs.iter().collect());
    let (capture, _) = Capture::record(&ins, &outs)?;
    let mut export_opts = ExportOptions::default();
    let names = bundle_names(model, &export_opts.prefix);
    export_opts.header_notes = zipmap_notes(model, &names.outputs);
    let bundle = export(&capture, &names, &export_opts)?;
    picograd_runtime::export::write_bundle(&bundle, &opts.out)?;
    let zeros = zero_values(&names.inputs, &inputs);
    let feed: Vec<(&str, Values)> = zeros.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    let run = build_and_run(&target, &opts.out, &feed, &opts.build)?;
    Ok(CompileReport {
        target: target.name.clone(),
        out: opts.out.clone(),
        inputs: names.inputs.into_iter().zip(shapes).collect(),
        outputs: names.outputs,
        kernels: capture.steps().len(),
        arena_bytes: bundle.arena_bytes,
        weight_bytes: bundle.weight_bytes,
        run,
    })
}

/// The C identifiers of the model's inputs and outputs in a bundle whose symbols start with
/// `prefix`: [`ExportNames::sanitized`] over the ONNX names, the one rule every part of the
/// bundle (C symbols, size macros, manifest, the measuring harness) follows.
pub fn bundle_names(model: &Model, prefix: &str) -> ExportNames {
    let names = |specs: &[ValueSpec]| specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    ExportNames::sanitized(&names(model.inputs()), &names(model.outputs()), prefix)
}

/// What `model.h` says about outputs made by an ONNX ZipMap (scikit-learn's sequence of
/// `{label: probability}` maps, which C has no form for): the bundle's output is the
/// probability tensor, one row per sample, one column per class label in the listed order.
pub fn zipmap_notes(model: &Model, c_outputs: &[String]) -> Vec<String> {
    model
        .outputs()
        .iter()
        .zip(c_outputs)
        .filter_map(|(spec, c)| {
            let labels = model.zipmap_labels(&spec.name)?;
            let list: Vec<String> = labels.iter().map(i64::to_string).collect();
            Some(format!(
                "Output `{c}` is the ONNX model's ZipMap output '{}' (a sequence of {{label: \
                 probability}} maps) exported as its probability tensor: one row per sample, \
                 one float per class, the columns holding the class labels {} in that order.",
                spec.name,
                list.join(", ")
            ))
        })
        .collect()
}

/// Parses `name=1,3,32,32`.
pub fn parse_shape_arg(arg: &str) -> Result<(String, Vec<usize>)> {
    let bad = || {
        Error::shape(
            "compile",
            format!("--shape {arg:?}: expected NAME=D0,D1,... with positive dims"),
        )
    };
    let (name, dims) = arg.rsplit_once('=').ok_or_else(bad)?;
    let dims = dims
        .split(',')
        .map(|d| d.trim().parse::<usize>().ok().filter(|&d| d > 0))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(bad)?;
    if name.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), dims))
}

/// Each input's concrete shape: given ones win; otherwise the model's, which must be static.
pub fn input_shapes(model: &Model, given: &[(String, Vec<usize>)]) -> Result<Vec<Vec<usize>>> {
    for (name, _) in given {
        if !model.inputs().iter().any(|s| &s.name == name) {
            return Err(Error::shape(
                "compile",
                format!("--shape names '{name}', which is not an input of the model"),
            ));
        }
    }
    model
        .inputs()
        .iter()
        .map(|spec| match given.iter().find(|(n, _)| *n == spec.name) {
            Some((_, dims)) => Ok(dims.clone()),
            None => static_shape(spec),
        })
        .collect()
}

fn static_shape(spec: &ValueSpec) -> Result<Vec<usize>> {
    let dims = spec.shape.as_ref().and_then(|s| {
        s.iter()
            .map(|d| d.map(|v| v as usize))
            .collect::<Option<Vec<_>>>()
    });
    dims.ok_or_else(|| {
        Error::shape(
            "compile",
            format!(
                "input '{}' is {} (a dynamic shape): give it with --shape {}=D0,D1,...",
                spec.name,
                spec.describe(),
                spec.name
            ),
        )
    })
}

/// Zero-valued, realized input tensors of the model's element types.
fn placeholders(specs: &[ValueSpec], shapes: &[Vec<usize>]) -> Result<Vec<Tensor>> {
    specs
        .iter()
        .zip(shapes)
        .map(|(spec, shape)| {
            let dtype = dtype_of(spec.elem_type).ok_or_else(|| {
                Error::Unsupported(format!(
                    "input '{}': element type {} has no picograd dtype",
                    spec.name,
                    onnx_type_name(spec.elem_type)
                ))
            })?;
            let n: usize = shape.iter().product();
            let t = tensor_from_le_bytes(&vec![0u8; n * dtype.itemsize()], shape, dtype)?;
            t.realize()?;
            Ok(t)
        })
        .collect()
}

fn zero_values(names: &[String], inputs: &[Tensor]) -> Vec<(String, Values)> {
    names
        .iter()
        .zip(inputs)
        .map(|(n, t)| {
            let dtype: DType = t.dtype();
            let bits = vec![0u64; t.numel()];
            (n.clone(), Values { dtype, bits })
        })
        .collect()
}
