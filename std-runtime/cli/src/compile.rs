//! Compiling an ONNX model for a device: the library side of `picograd compile`. The model's
//! forward pass is captured on zero-valued placeholder inputs (shapes from the model, or given
//! where an axis is symbolic), exported to freestanding C with `const` weights and the target's
//! own export options (fused multiply-add where its FPU has one; size mode's smaller unroll
//! budget with `-Os`), written as a bundle, and built for the target (run on seeded non-zero
//! values, or on given inputs) to measure flash (code, weights, library code it pulls in), RAM
//! and instructions — exact counts by picograd's QEMU plugin on emulated targets,
//! [`ICOUNT_RUNS`] calls against none. Before anything is built, the weights (flash) and the arena (RAM) are
//! checked against the selected [`Budget`] and the emulated board; with given inputs, the
//! device's outputs are compared with the desktop's ([`crate::check`]).
//!
//! With run-time dimensions (`--shape x=N,3,32,32 --max N=8`, see [`crate::free_dims`]) the
//! placeholders are symbolic, the model is captured at two values and must give one program,
//! and the exported `model_run` takes `N`; the measuring run is at the largest value, or at the
//! given inputs' value. Without `-i` inputs, an input no `--shape` names whose unknown axes are
//! ONNX `dim_param`s gets those axes as run-time dimensions of the same names
//! ([`crate::free_dims::from_dim_params`], default maximum 16), and the report says so.
//!
//! Invariant: the bundle's input and output names are the ONNX names made into C identifiers
//! ([`bundle_names`], by the exporter's one rule), in the model's order; [`CompileReport`] carries them so callers can feed the
//! bundle by name.

use std::fmt;
use std::path::PathBuf;

use picograd_core::export::{export, ExportNames};
use picograd_core::jit::Capture;
use picograd_core::{DType, Error, Result, Tensor};

use picograd_onnx::values::{checked_numel, held_in, onnx_type_name, tensor_from_le_bytes};
use picograd_onnx::{Model, ValueSpec};
use picograd_runtime::target::{
    build_and_run, kernel_opts, Budget, BuildOptions, DeviceSearch, DeviceSearchStats,
    KernelChoice, Memory, Need, RunReport, Target, Values,
};

use crate::check::{compare, CheckReport};
use crate::free_dims::{check_same_program, FreeDims, ShapeDim};

/// Calls of `model_run` the exact instruction count runs (against a run with none).
pub const ICOUNT_RUNS: u32 = 2;

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
    /// Shapes with run-time dimensions, by ONNX name (`x=N,3,32,32`): the bundle's
    /// `model_run` takes each named dimension at run time.
    pub free_shapes: Vec<(String, Vec<ShapeDim>)>,
    /// The largest value of each run-time dimension, by name (`--max N=8`); unnamed ones get
    /// [`crate::free_dims::DEFAULT_DIM_MAX`]. The smallest is 1.
    pub dim_max: Vec<(String, i64)>,
    /// How the measuring build is made (`opt` also picks the export's unroll budget). On an
    /// emulated target, instructions are counted exactly ([`BuildOptions::icount_runs`]; unset:
    /// [`ICOUNT_RUNS`]).
    pub build: BuildOptions,
    /// The part (one of the target's budgets) the model must fit; `None`: the target's default.
    pub budget: Option<String>,
    /// Values to run the built bundle on, one per model input in model order (their shapes win
    /// over `shapes`); empty: seeded non-zero values ([`seeded_values`]). With values, [`CompileReport::check`] compares the device's
    /// outputs with the desktop's on the same values.
    pub inputs: Vec<Tensor>,
    /// Search each kernel's opts on the target ([`DeviceSearch`]: candidates counted under
    /// QEMU; among those whose outputs are bit-identical, the fastest traded for smaller code
    /// within [`picograd_runtime::target::SIZE_MARGIN_PER_MILLE`] of the fewest instructions,
    /// kept and remembered);
    /// `None`: the hand-coded opts.
    pub search: Option<SearchOptions>,
}

/// How `compile --search` searches.
#[derive(Clone, Debug, Default)]
pub struct SearchOptions {
    /// Where choices are remembered; `None`: `device-search` beside the kernel cache.
    pub dir: Option<PathBuf>,
    /// Candidates per kernel; `None`: [`picograd_runtime::target::DEFAULT_CANDIDATES`].
    pub candidates: Option<usize>,
}

/// What the device search did during a compile.
#[derive(Clone, Debug)]
pub struct SearchReport {
    /// Its counters (rounds built and run under QEMU, choices read from the cache, ...).
    pub stats: DeviceSearchStats,
    /// The choice for each kernel.
    pub choices: Vec<KernelChoice>,
}

impl CompileOptions {
    /// Options for `target`, writing to `out`: the model's own shapes, the default build, the
    /// target's default budget, zero inputs.
    pub fn new(target: &str, out: impl Into<PathBuf>) -> CompileOptions {
        CompileOptions {
            target: target.to_string(),
            target_dir: None,
            out: out.into(),
            shapes: Vec::new(),
            free_shapes: Vec::new(),
            dim_max: Vec::new(),
            build: BuildOptions::default(),
            budget: None,
            inputs: Vec::new(),
            search: None,
        }
    }
}

/// What compiling gave: the bundle's names and sizes, and the measuring run.
#[derive(Clone, Debug)]
pub struct CompileReport {
    /// `(input, dimension)` for each run-time dimension taken from the model's `dim_param`
    /// because no `--shape` named the input.
    pub from_model: Vec<(String, String)>,
    /// The target's name.
    pub target: String,
    /// Where the bundle was written.
    pub out: PathBuf,
    /// C names of the inputs, in model order, with their shapes (at the measuring run's
    /// dimensions).
    pub inputs: Vec<(String, Vec<usize>)>,
    /// The run-time dimensions `model_run` takes (empty for a fixed-shape bundle), with the
    /// value the measuring run used.
    pub dims: Vec<(picograd_core::export::Dim, i64)>,
    /// C names of the outputs, in model order.
    pub outputs: Vec<String>,
    /// Kernels in the exported model.
    pub kernels: usize,
    /// The static arena's size in bytes.
    pub arena_bytes: usize,
    /// Bytes of constant weights.
    pub weight_bytes: usize,
    /// The build and run (on seeded values, or on the given inputs).
    pub run: RunReport,
    /// The part the model was checked against (`None` on the host).
    pub budget: Option<Budget>,
    /// The device's outputs against the desktop's, when inputs were given.
    pub check: Option<CheckReport>,
    /// What the device search did, with `--search`.
    pub search: Option<SearchReport>,
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
        if !self.dims.is_empty() {
            let bounds: Vec<String> = self
                .dims
                .iter()
                .map(|(d, _)| format!("{} in [{}, {}]", d.name, d.min, d.max))
                .collect();
            let at: Vec<String> = self
                .dims
                .iter()
                .map(|(d, v)| format!("{}={v}", d.name))
                .collect();
            writeln!(
                f,
                "dimensions:   {}, taken by model_run at run time; measured at {}",
                bounds.join(", "),
                at.join(", ")
            )?;
            for (input, dim) in &self.from_model {
                writeln!(
                    f,
                    "              {dim}: the model's dim_param of input {input}, free because                      no --shape names {input} (--max {dim}=M bounds it, --shape {input}=...                      fixes or renames it)"
                )?;
            }
        }
        writeln!(
            f,
            "flash:        {} bytes (model text {} + data {}): code {} + weights {} (arrays {}); \
             library code it calls {} bytes{}",
            self.flash(),
            r.model_text,
            r.model_data,
            r.code_flash(),
            r.weights_flash,
            self.weight_bytes,
            r.library_flash(),
            library_list(&r.library_functions)
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
        let how = if r.function_instructions.is_empty() {
            "one run of model_run"
        } else {
            "per inference, exact: QEMU plugin"
        };
        write!(f, "instructions: {ins} ({how})")?;
        for (name, n) in &r.function_instructions {
            write!(f, "\n  {name:<28} {n:>12}")?;
        }
        if let Some(b) = &self.budget {
            let pct = |n: u64, of: u64| 100.0 * n as f64 / of.max(1) as f64;
            let ram = self.arena_bytes as u64 + r.stack_bytes.unwrap_or(0);
            write!(
                f,
                "\nbudget:       {} — flash {:.1}% of {} B, RAM {:.1}% of {} B",
                b.name,
                pct(self.flash(), b.flash),
                b.flash,
                pct(ram, b.ram),
                b.ram
            )?;
        }
        if let Some(c) = &self.check {
            write!(f, "\n{c}")?;
        }
        if let Some(s) = &self.search {
            write_search(f, s)?;
        }
        Ok(())
    }
}

/// The device search's lines of the report.
fn write_search(f: &mut fmt::Formatter<'_>, s: &SearchReport) -> fmt::Result {
    let st = &s.stats;
    write!(
        f,
        "\nsearch:       {} kernel(s) searched in {} QEMU-counted build(s) ({} rejected), {} \
         from the cache",
        st.searched, st.rounds, st.rejected_rounds, st.cached
    )?;
    for c in &s.choices {
        let n = |v: Option<u64>| v.map_or("?".into(), |n| n.to_string());
        let how = if c.cached {
            "cached".to_string()
        } else {
            format!(
                "{} (hand-coded {})",
                n(c.instructions),
                n(c.hand_instructions)
            )
        };
        write!(f, "\n  {:<28} {:?} {how}", c.name, c.opts)?;
    }
    Ok(())
}

/// ` (name size, ...)` for the report, or nothing.
fn library_list(functions: &[(String, u64)]) -> String {
    if functions.is_empty() {
        return String::new();
    }
    let list: Vec<String> = functions.iter().map(|(n, s)| format!("{n} {s}")).collect();
    format!(" ({})", list.join(", "))
}

/// Imports nothing: `model` is already loaded. Captures, exports, checks the budget, writes and
/// measures it (and compares it with the desktop when inputs are given).
pub fn compile(model: &Model, opts: &CompileOptions) -> Result<CompileReport> {
    model.check_supported()?;
    let target = match &opts.target_dir {
        Some(dir) => Target::from_dir(dir)?,
        None => Target::by_name(&opts.target)?,
    };
    let budget = target.budget(opts.budget.as_deref())?.cloned();
    // Without -i inputs, an input axis the model names (`dim_param`) and no --shape fixes is
    // free at run time, bounded by the default maximum or its --max.
    let auto = match opts.inputs.is_empty() {
        true => {
            let fixed = opts.shapes.iter().map(|(n, _)| n.as_str());
            let named: Vec<&str> = fixed
                .chain(opts.free_shapes.iter().map(|(n, _)| n.as_str()))
                .collect();
            crate::free_dims::from_dim_params(model.inputs(), &named)
        }
        false => Vec::new(),
    };
    let mut free_shapes = opts.free_shapes.clone();
    free_shapes.extend(auto.iter().cloned());
    let free = FreeDims::new(&free_shapes, &opts.dim_max)?;
    let largest: Vec<i64> = free.vars.iter().map(|v| v.bounds().1).collect();
    let shapes = if opts.inputs.is_empty() {
        let mut given = opts.shapes.clone();
        given.extend(free.concrete(&largest));
        input_shapes(model, &given)?
    } else {
        given_shapes(model, &opts.inputs)?
    };
    let values = free.values_in(model.inputs(), &shapes)?;
    let (inputs, capture) = capture_at(model, &free, &shapes, &values)?;
    if !free.is_empty() {
        // Another value must give the same program (no kernel computes with the value).
        let other: Vec<i64> = free
            .vars
            .iter()
            .zip(&values)
            .map(|(v, &x)| {
                if x == v.bounds().0 {
                    v.bounds().1
                } else {
                    v.bounds().0
                }
            })
            .collect();
        let (_, again) = capture_at(model, &free, &shapes, &other)?;
        let names: Vec<&str> = free.vars.iter().map(|v| v.name()).collect();
        check_same_program(&capture, &again, &names.join(", "))?;
    }
    // The target's own export options (fused multiply-add where its FPU has one), with the
    // smaller unroll budget of size mode when the build is `-Os`.
    let mut export_opts = target.export_options_for(opts.build.opt);
    let names = bundle_names(model, &export_opts.prefix);
    export_opts.header_notes = zipmap_notes(model, &names.outputs);
    let mut feed = if opts.inputs.is_empty() {
        seeded_values(&names.inputs, &inputs)
    } else {
        given_values(&names.inputs, &inputs, &opts.inputs)?
    };
    for (v, &x) in free.vars.iter().zip(&values) {
        feed.push((v.name().to_string(), Values::i32(&[x as i32])));
    }
    let feed: Vec<(&str, Values)> = feed.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
    let search = match &opts.search {
        Some(so) => {
            let mut s = DeviceSearch::new();
            if let Some(d) = &so.dir {
                s = s.with_dir(d);
            }
            if let Some(n) = so.candidates {
                s = s.with_candidates(n);
            }
            let choices = stage("searching kernels on the target", || {
                s.search(&target, &capture, &names, &export_opts, &opts.build, &feed)
            })?;
            export_opts.kernel_opts = kernel_opts(&choices);
            Some(SearchReport {
                stats: s.stats(),
                choices,
            })
        }
        None => None,
    };
    let bundle = stage("exporting C", || export(&capture, &names, &export_opts))?;
    let need = Need {
        flash: bundle.weight_bytes as u64,
        ram: bundle.arena_bytes as u64,
    };
    let before = "before building, the weights and the static arena alone";
    check_memory(&target, budget.as_ref(), need, before)?;
    picograd_runtime::export::write_bundle(&bundle, &opts.out)?;
    let progress = crate::progress::BuildProgress::default();
    let mut build = opts.build.clone();
    if build.on_stage.is_none() {
        build.on_stage = Some(progress.hook());
    }
    build.icount_runs = match target.is_host() {
        true => None,
        false => build.icount_runs.or(Some(ICOUNT_RUNS)),
    };
    let run = build_and_run(&target, &opts.out, &feed, &build);
    progress.finish(run.is_ok());
    let run = run?;
    if run.status.is_some_and(|s| s != 0) {
        return Err(Error::Device(format!(
            "target {}: model_run returned status {:?}",
            target.name, run.status
        )));
    }
    let measured = Need {
        flash: run.model_text + run.model_data,
        ram: bundle.arena_bytes as u64 + run.stack_bytes.unwrap_or(0),
    };
    let after = "as built, the model's text + data and its arena + stack";
    check_memory(&target, budget.as_ref(), measured, after)?;
    let check = if opts.inputs.is_empty() {
        None
    } else {
        let desktop = stage("running on the desktop", || {
            let outs = model.run(&opts.inputs)?;
            Tensor::realize_all(&outs.iter().collect::<Vec<_>>())?;
            Ok(outs)
        })?;
        Some(compare(&names.outputs, &desktop, &run)?)
    };
    let from_model = auto
        .iter()
        .flat_map(|(input, dims)| {
            dims.iter().filter_map(move |d| match d {
                ShapeDim::Free(n) => Some((input.clone(), n.clone())),
                ShapeDim::Size(_) => None,
            })
        })
        .collect();
    Ok(CompileReport {
        from_model,
        target: target.name.clone(),
        out: opts.out.clone(),
        inputs: names.inputs.into_iter().zip(shapes).collect(),
        dims: bundle.dims.iter().cloned().zip(values).collect(),
        outputs: names.outputs,
        kernels: capture.steps().len(),
        arena_bytes: bundle.arena_bytes,
        weight_bytes: bundle.weight_bytes,
        run,
        budget,
        check,
        search,
    })
}

/// The model's placeholders (symbolic over `free`'s variables bound to `values`) and the
/// capture of its forward pass on them.
fn capture_at(
    model: &Model,
    free: &FreeDims,
    shapes: &[Vec<usize>],
    values: &[i64],
) -> Result<(Vec<Tensor>, Capture)> {
    let inputs = match free.is_empty() {
        true => placeholders(model.inputs(), shapes)?,
        false => free.placeholders(model.inputs(), shapes, values)?,
    };
    let outputs = stage("building the graph", || model.graph(&inputs))?;
    let (ins, outs): (Vec<&Tensor>, Vec<&Tensor>) =
        (inputs.iter().collect(), outputs.iter().collect());
    let (capture, _) = stage("compiling kernels", || Capture::record(&ins, &outs))?;
    Ok((inputs, capture))
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

/// Runs one stage of the work with a progress line (see [`crate::progress`]).
fn stage<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let s = crate::progress::Stage::start(what);
    let r = f();
    s.finish(r.is_ok());
    r
}

/// Checks `need` against the selected part and against the board the build runs on (a model
/// that fits the part may still not fit the emulated board, or the other way round).
fn check_memory(target: &Target, budget: Option<&Budget>, need: Need, what: &str) -> Result<()> {
    if let Some(b) = budget {
        b.check(need, what)?;
    }
    let board = |m: Memory| m.size;
    if board(target.flash) > 0 && board(target.ram) > 0 {
        let emulated = Budget {
            name: format!("{} (the board the build runs on)", target.name),
            flash: target.flash.size,
            ram: target.ram.size,
            description: target.get("description").unwrap_or("").to_string(),
        };
        emulated.check(need, what)?;
    }
    Ok(())
}

/// The shapes of given input values, which must be one per model input, of its element type.
fn given_shapes(model: &Model, given: &[Tensor]) -> Result<Vec<Vec<usize>>> {
    let specs = model.inputs();
    if given.len() != specs.len() {
        return Err(Error::shape(
            "compile",
            format!(
                "{} input value(s) given, the model has {} input(s) ({})",
                given.len(),
                specs.len(),
                specs
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    specs
        .iter()
        .zip(given)
        .map(|(spec, t)| match held_in(spec.elem_type) {
            Some(d) if d == t.dtype() => Ok(t.shape()),
            _ => Err(Error::dtype(
                "compile",
                format!(
                    "input '{}' is {} but the value given is {}",
                    spec.name,
                    onnx_type_name(spec.elem_type),
                    t.dtype()
                ),
            )),
        })
        .collect()
}

/// Given input values as bit patterns for the bundle.
fn given_values(
    names: &[String],
    placeholders: &[Tensor],
    given: &[Tensor],
) -> Result<Vec<(String, Values)>> {
    names
        .iter()
        .zip(placeholders.iter().zip(given))
        .map(|(n, (p, t))| {
            let dtype = p.dtype();
            let bytes = t.to_bytes()?;
            let bits = bytes
                .chunks_exact(dtype.itemsize())
                .map(|c| {
                    let mut b = [0u8; 8];
                    b[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(b)
                })
                .collect();
            Ok((n.clone(), Values { dtype, bits }))
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

/// Zero-valued, realized inputs for every model input: the model's static shapes, or the given
/// ones (required where an axis is symbolic).
pub fn zero_inputs(model: &Model, given: &[(String, Vec<usize>)]) -> Result<Vec<Tensor>> {
    placeholders(model.inputs(), &input_shapes(model, given)?)
}

/// Zero-valued, realized input tensors of the model's element types.
fn placeholders(specs: &[ValueSpec], shapes: &[Vec<usize>]) -> Result<Vec<Tensor>> {
    specs
        .iter()
        .zip(shapes)
        .map(|(spec, shape)| {
            let dtype = held_in(spec.elem_type).ok_or_else(|| {
                Error::Unsupported(format!(
                    "input '{}': element type {} has no picograd dtype",
                    spec.name,
                    onnx_type_name(spec.elem_type)
                ))
            })?;
            // Checked before anything is allocated: a declared `FLOAT[2^40]` or
            // `[i64::MAX, 4, 5]` is an error naming the input, not an abort or an overflow.
            let dims: Vec<i64> = shape
                .iter()
                .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
                .collect();
            let what = format!("input '{}'", spec.name);
            let bytes = checked_numel(&what, &dims)? * dtype.itemsize();
            let mut zeros = Vec::new();
            zeros.try_reserve_exact(bytes).map_err(|_| {
                Error::overflow(format!("{what}: cannot allocate {bytes} bytes of zeros"))
            })?;
            zeros.resize(bytes, 0u8);
            let t = tensor_from_le_bytes(&zeros, shape, dtype)?;
            t.realize()?;
            Ok(t)
        })
        .collect()
}

/// The measuring run's inputs when none are given: float inputs hold seeded values in
/// [-1, 1) (non-zero, so data-dependent paths such as ReLU's run as on real data, and the same
/// on every run), integer and boolean inputs zeros (always a valid index).
pub fn seeded_values(names: &[String], inputs: &[Tensor]) -> Vec<(String, Values)> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        // xorshift64*: a fixed sequence, no dependency.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        let u = (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f64 / (1u64 << 24) as f64;
        2.0 * u - 1.0
    };
    names
        .iter()
        .zip(inputs)
        .map(|(n, t)| {
            let dtype: DType = t.dtype();
            let bits = (0..t.numel())
                .map(|_| match dtype {
                    DType::F32 => u64::from((next() as f32).to_bits()),
                    DType::F64 => next().to_bits(),
                    _ => 0,
                })
                .collect();
            (n.clone(), Values { dtype, bits })
        })
        .collect()
}
