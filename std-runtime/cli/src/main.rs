//! The `picograd` command line (the binary of crate `picograd-cli`; `compile` calls
//! [`picograd_cli::compile()`]): `run` an ONNX model on `.npy` inputs, `compile` it for a device
//! target, `inspect` it. Exit codes: 0 success, 1 the model or its inputs were bad (or a run,
//! export or device build failed, the model does not fit the target's budget, or `--check`
//! found the device disagreeing with the desktop), 2 usage errors (clap, an unknown target or
//! budget, a bad `--shape`, or a dynamic input shape not given), 3 the model uses operators
//! picograd does not support, 4 the feature is not available in this build.
//!
//! Long stages (compiling kernels, cross-building, running under QEMU) show a spinner on stderr
//! when it is a terminal, and one plain line each with `PICOGRAD_DEBUG=1` or more.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use picograd_core::{Error, Result};
use picograd_onnx::quantize::Calibrator;
use picograd_onnx::{npy, ops, values::onnx_type_name, Model};
use picograd_runtime::install::DeviceKind;
use picograd_runtime::target::{BuildOptions, CompilerKind, OptLevel, Target};

/// The command line (`about` is this crate's description).
#[derive(Parser)]
#[command(
    name = "picograd",
    version,
    about,
    after_help = "Environment: PICOGRAD_DEBUG (0-5; 1 also prints each long stage), \
                  PICOGRAD_DEVICE (CLANG or INTERP), PICOGRAD_CACHE, PICOGRAD_CC."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a model on numpy `.npy` inputs and write each output as `.npy`.
    Run {
        /// The ONNX model file.
        model: PathBuf,
        /// One `.npy` file per model input, in the model's input order.
        #[arg(long = "input", short = 'i')]
        inputs: Vec<PathBuf>,
        /// Directory for the outputs (`<output name>.npy`); defaults to the current directory.
        #[arg(long, short = 'o', default_value = ".")]
        out: PathBuf,
        /// Run kernels in the interpreter instead of compiling them with clang.
        #[arg(long)]
        interp: bool,
        /// The shape of an input with a symbolic axis, `NAME=D0,D1,...` (repeatable). Without
        /// `--input` files the model runs on zeros of these shapes (and of the model's static
        /// ones); with them, each given shape must be the file's.
        #[arg(long = "shape", value_name = "NAME=DIMS")]
        shapes: Vec<String>,
        /// The largest size of the input axes named NAME by a `dim_param` (repeatable; default
        /// 64). Those axes are symbolic: sizes 1 to N share one set of compiled kernels.
        #[arg(long = "max", value_name = "NAME=N")]
        max: Vec<String>,
        /// Quantize the float model before use: `int8` (the only scheme) rewrites its Conv
        /// (with a following BatchNormalization and Relu/Clip(0,6) folded in) and Gemm layers
        /// into int8 operators; needs `--calibrate`.
        #[arg(long, value_name = "SCHEME", requires = "calibrate")]
        quantize: Option<String>,
        /// With `--quantize`: a float32 `.npy` of calibration inputs, `[N, ...]` with `...` the
        /// model input's shape without its batch axis; activation ranges are observed on them.
        #[arg(long, value_name = "FILE.npy", requires = "quantize")]
        calibrate: Option<PathBuf>,
        /// With `--quantize`: take activation ranges at this percentile (e.g. 99.99) and its
        /// mirror instead of min/max.
        #[arg(long, value_name = "P", requires = "quantize")]
        percentile: Option<f32>,
        /// Warm timing: after one warm-up run (which compiles the kernels), run N more times in
        /// this process and print the minimum and median time per run.
        #[arg(long, value_name = "N")]
        bench: Option<u32>,
    },
    /// Compile a model to standalone C for a device target and measure it there.
    ///
    /// Captures the forward pass on zero-valued inputs, exports it as freestanding C99
    /// (`model.h`, `model.c`, `model_weights.c` with `const` weights, `model.json`) into OUT with
    /// the target's own export options (fused multiply-add where its FPU has one), then builds it
    /// for the target with its cross compiler, runs it (natively or under QEMU) on seeded
    /// non-zero values (or the `--input` files) and reports flash (the model's code, its weights,
    /// and library code it calls), RAM (static arena + stack high-water mark from the stack
    /// pointer at the call) and the instructions one `model_run` executes — on emulated targets
    /// exactly, counted by picograd's QEMU plugin (2 calls minus none), in all and per function.
    #[command(verbatim_doc_comment)]
    Compile(CompileArgs),
    /// Show a model's inputs, outputs, operators, parameter count and picograd's support.
    Inspect {
        /// The ONNX model file.
        model: PathBuf,
    },
}

/// The arguments of `picograd compile`.
#[derive(clap::Args)]
struct CompileArgs {
    /// The ONNX model file.
    model: PathBuf,
    /// The device target, by name: one of the known targets (`cortex-m4`, `cortex-m3`,
    /// `riscv32imac`, `riscv32imafc`, `host`; `$PICOGRAD_TARGETS` lists others). A name is
    /// never read as a path.
    #[arg(long, default_value = "host")]
    target: String,
    /// A target description elsewhere: the folder holding its `target.txt` (instead of
    /// `--target`). Its commands are run as written, so name only folders you trust.
    #[arg(long, value_name = "DIR", conflicts_with = "target")]
    target_dir: Option<PathBuf>,
    /// The directory to write the bundle to.
    #[arg(long)]
    out: PathBuf,
    /// The shape of an input with a symbolic axis, `NAME=D0,D1,...` (repeatable); required
    /// for every such input. A dimension given as a name (`x=N,3,32,32`) stays free: the
    /// exported `model_run` takes it at run time, in [1, --max].
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    shapes: Vec<String>,
    /// The largest value of a run-time dimension named in `--shape`, `NAME=MAX` (repeatable;
    /// default 16): the static arena is sized for it.
    #[arg(long = "max", value_name = "NAME=MAX")]
    max: Vec<String>,
    /// The part whose flash and RAM the model must fit, checked before anything is built
    /// (one of the target's `budget.NAME` lines; default: the target's default part —
    /// cortex-m4: nrf52840 (1 MiB flash, 256 KiB RAM), cortex-m3: lpc1768, riscv32imac:
    /// gd32vf103cb, riscv32imafc: ch32v307; the host has none).
    #[arg(long, value_name = "NAME")]
    budget: Option<String>,
    /// One `.npy` file per model input, in the model's input order: the measuring run uses
    /// them (instead of zeros) and the report compares its outputs with the desktop's.
    #[arg(long = "input", short = 'i')]
    inputs: Vec<PathBuf>,
    /// With `--input`: fail (exit 1) unless every output of the device run is within
    /// 1e-4 + 1e-4·|desktop| of the desktop run; the largest difference is reported.
    #[arg(long, requires = "inputs")]
    check: bool,
    /// What the build optimizes for: `speed` (`-O2`, the target's own unroll budget) or
    /// `size` (`-Os`, and kernels unrolled at most 8 times with at most 4 accumulators).
    #[arg(long, value_enum, default_value_t = OptArg::Speed)]
    opt: OptArg,
    /// The C compiler of the measuring build: `gcc` (the target's `cc`) or `clang` (its
    /// `clang_cflags`).
    #[arg(long, value_enum, default_value_t = CompilerArg::Gcc)]
    compiler: CompilerArg,
    /// One more flag for every compile of the measuring build (repeatable), e.g.
    /// `--cflag=-fno-inline` to count each kernel in its own function.
    #[arg(long = "cflag", value_name = "FLAG", allow_hyphen_values = true)]
    cflags: Vec<String>,
    /// Quantize the float model before use: `int8` (the only scheme) rewrites its Conv
    /// (with a following BatchNormalization and Relu/Clip(0,6) folded in) and Gemm layers
    /// into int8 operators; needs `--calibrate`.
    #[arg(long, value_name = "SCHEME", requires = "calibrate")]
    quantize: Option<String>,
    /// With `--quantize`: a float32 `.npy` of calibration inputs, `[N, ...]` with `...` the
    /// model input's shape without its batch axis; activation ranges are observed on them.
    #[arg(long, value_name = "FILE.npy", requires = "quantize")]
    calibrate: Option<PathBuf>,
    /// With `--quantize`: take activation ranges at this percentile (e.g. 99.99) and its
    /// mirror instead of min/max.
    #[arg(long, value_name = "P", requires = "quantize")]
    percentile: Option<f32>,
    /// Search each kernel's register tile and unrolling on the target: candidates from the
    /// strategy table built with this build's compiler and flags, counted exactly under QEMU,
    /// among those whose outputs are bit-identical to the unoptimized model's the fastest kept,
    /// then traded for smaller code while the searched kernels stay within 2.5% of their
    /// fewest instructions (code costs flash); choices are remembered per kernel, target,
    /// compiler and flags (a second search of the same model runs nothing). Emulated targets
    /// only.
    #[arg(long)]
    search: bool,
    /// With `--search`: candidates tried per kernel (the hand-coded one among them; default
    /// 12). One firmware image is built and counted per candidate rank, for all kernels at once.
    #[arg(long, value_name = "N", requires = "search")]
    search_candidates: Option<usize>,
}

/// `compile --opt`: what the device build optimizes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OptArg {
    /// `-O2` and the target's own unroll budget.
    Speed,
    /// `-Os` and a smaller unroll budget.
    Size,
}

/// `compile --compiler`: which C compiler builds the bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum CompilerArg {
    /// The target's `cc`.
    Gcc,
    /// clang with the target's `clang_cflags`.
    Clang,
}

/// Why a command failed: a usage error (exit 2) or the library's error (exit by kind).
enum Failure {
    /// The arguments do not make sense: exit 2.
    Usage(String),
    /// The work failed.
    Lib(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Lib(e)
    }
}

type CliResult = std::result::Result<(), Failure>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            model,
            inputs,
            out,
            interp,
            shapes,
            max,
            bench,
            quantize,
            calibrate,
            percentile,
        } => Quant::parse(quantize, calibrate, percentile).and_then(|q| {
            let dims = RunDims { shapes, max };
            run(&model, &inputs, &out, interp, &dims, bench, &q)
        }),
        Command::Compile(args) => compile(args),
        Command::Inspect { model } => inspect(&model).map_err(Failure::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("picograd: usage error: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Lib(e)) => {
            eprintln!("picograd: error: {e}");
            ExitCode::from(match e {
                Error::Unsupported(m) if m.starts_with("compile:") => 4,
                Error::Shape { op: "compile", .. } => 2,
                Error::Unsupported(_) => 3,
                _ => 1,
            })
        }
    }
}

/// `--shape` arguments, parsed; a bad one is a usage error.
fn parse_shapes(shapes: &[String]) -> std::result::Result<Vec<(String, Vec<usize>)>, Failure> {
    shapes
        .iter()
        .map(|s| {
            picograd_cli::compile::parse_shape_arg(s).map_err(|e| Failure::Usage(e.to_string()))
        })
        .collect()
}

/// `--quantize`/`--calibrate`/`--percentile`, checked.
struct Quant(Option<(PathBuf, Calibrator)>);

impl Quant {
    fn parse(
        scheme: Option<String>,
        calibrate: Option<PathBuf>,
        percentile: Option<f32>,
    ) -> std::result::Result<Quant, Failure> {
        let how = match percentile {
            None => Calibrator::MinMax,
            Some(p) if p > 50.0 && p <= 100.0 => Calibrator::Percentile(p),
            Some(p) => {
                return Err(Failure::Usage(format!(
                    "--percentile {p}: expected a value in (50, 100]"
                )))
            }
        };
        match (scheme.as_deref(), calibrate) {
            (None, _) => Ok(Quant(None)),
            (Some("int8"), Some(c)) => Ok(Quant(Some((c, how)))),
            (Some("int8"), None) => Err(Failure::Usage("--quantize int8 needs --calibrate".into())),
            (Some(s), _) => Err(Failure::Usage(format!(
                "--quantize {s}: the only scheme is int8"
            ))),
        }
    }
}

/// The model at `path`, quantized when `q` says so.
fn load_as(path: &Path, q: &Quant) -> Result<Model> {
    let Some((calib, how)) = &q.0 else {
        return load(path);
    };
    let t = Instant::now();
    let (m, r) = picograd_cli::quantize::quantized_model(path, calib, *how)?;
    eprintln!(
        "quantized {} to int8 on {} in {:.2?}: {} conv, {} gemm, {} BatchNorm and {} \
         activation(s) folded",
        path.display(),
        calib.display(),
        t.elapsed(),
        r.convs,
        r.gemms,
        r.batchnorms,
        r.activations
    );
    Ok(m)
}

fn load(path: &Path) -> Result<Model> {
    let t = Instant::now();
    let m = Model::load(path)?;
    eprintln!(
        "loaded {} ({} nodes, opset {}) in {:.2?}",
        path.display(),
        m.nodes().count(),
        m.opset(),
        t.elapsed()
    );
    Ok(m)
}

/// `run`'s `--shape` and `--max` arguments, unparsed.
struct RunDims {
    shapes: Vec<String>,
    max: Vec<String>,
}

/// `--max NAME=N` arguments, parsed; a bad one is a usage error.
fn parse_max(args: &[String]) -> std::result::Result<Vec<(String, i64)>, Failure> {
    args.iter()
        .map(|a| {
            let bad = || Failure::Usage(format!("--max {a}: expected NAME=N with N >= 1"));
            let (name, n) = a.split_once('=').ok_or_else(bad)?;
            let n: i64 = n.trim().parse().map_err(|_| bad())?;
            match (name.trim().is_empty(), n >= 1) {
                (false, true) => Ok((name.trim().to_string(), n)),
                _ => Err(bad()),
            }
        })
        .collect()
}

fn run(
    path: &Path,
    inputs: &[PathBuf],
    out: &Path,
    interp: bool,
    dims: &RunDims,
    bench: Option<u32>,
    q: &Quant,
) -> CliResult {
    let shapes = parse_shapes(&dims.shapes)?;
    let max = parse_max(&dims.max)?;
    // The runtime installs itself on first use anyway; `--interp` chooses the interpreter over
    // it (and over PICOGRAD_DEVICE).
    picograd_runtime::install();
    if interp {
        picograd_runtime::install::set_default_device(DeviceKind::Interp)?;
    }
    let mut model = load_as(path, q)?;
    for (name, n) in max {
        // A name no input axis has is a usage error, like a bad --shape.
        model = model
            .with_max_dim(&name, n)
            .map_err(|e| Failure::Usage(format!("--max {name}={n}: {e}")))?;
    }
    model.check_supported()?;
    let tensors = if inputs.is_empty() {
        picograd_cli::compile::zero_inputs(&model, &shapes)?
    } else {
        read_inputs(&model, inputs, &shapes)?
    };
    let t = Instant::now();
    let outs = run_once(&model, &tensors)?;
    eprintln!("ran in {:.2?}", t.elapsed());
    if let Some(n) = bench {
        bench_runs(&model, &tensors, n)?;
    }
    std::fs::create_dir_all(out).map_err(|e| Error::Io {
        path: out.display().to_string(),
        detail: e.to_string(),
    })?;
    for (spec, t) in model.outputs().iter().zip(&outs) {
        let file = out.join(format!("{}.npy", sanitize(&spec.name)));
        npy::write(&file, t)?;
        println!(
            "{}: {:?} {} -> {}",
            spec.name,
            t.shape(),
            t.dtype(),
            file.display()
        );
        if let Some(labels) = model.zipmap_labels(&spec.name) {
            // ZipMap's maps are written as the probability matrix; the labels of its columns
            // go to a side file.
            let side = out.join(format!("{}.labels.npy", sanitize(&spec.name)));
            let n = labels.len();
            npy::write(
                &side,
                &picograd_core::Tensor::try_from_slice(&labels, &[n])?,
            )?;
            println!(
                "{}: ZipMap maps written as probabilities, one column per class; class labels -> {}",
                spec.name,
                side.display()
            );
        }
    }
    Ok(())
}

/// The `.npy` inputs; each `--shape` given must be its file's.
fn read_inputs(
    model: &Model,
    files: &[PathBuf],
    shapes: &[(String, Vec<usize>)],
) -> std::result::Result<Vec<picograd_core::Tensor>, Failure> {
    let tensors = files
        .iter()
        .map(|p| npy::read(p))
        .collect::<Result<Vec<_>>>()?;
    for (name, dims) in shapes {
        let at = model.inputs().iter().position(|s| &s.name == name);
        let Some(i) = at else {
            return Err(Failure::Usage(format!(
                "--shape names '{name}', which is not an input of the model"
            )));
        };
        if let Some(t) = tensors.get(i) {
            if &t.shape() != dims {
                return Err(Failure::Usage(format!(
                    "--shape {name}={dims:?}, but {} holds {:?}",
                    files[i].display(),
                    t.shape()
                )));
            }
        }
    }
    Ok(tensors)
}

/// Runs the model once and realizes its outputs, showing the stage.
fn run_once(model: &Model, inputs: &[picograd_core::Tensor]) -> Result<Vec<picograd_core::Tensor>> {
    let stage = picograd_cli::progress::Stage::start("compiling kernels and running");
    let r = model.run(inputs).and_then(|outs| {
        let refs: Vec<&picograd_core::Tensor> = outs.iter().collect();
        picograd_core::Tensor::realize_all(&refs)?;
        Ok(outs)
    });
    stage.finish(r.is_ok());
    r
}

/// Warm timing: `n` more runs after the first, min and median per run on stdout.
fn bench_runs(model: &Model, inputs: &[picograd_core::Tensor], n: u32) -> CliResult {
    if n == 0 {
        return Err(Failure::Usage("--bench needs at least 1 run".into()));
    }
    let bar = indicatif::ProgressBar::new(u64::from(n));
    let mut times = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let t = Instant::now();
        let outs = model.run(inputs)?;
        let refs: Vec<&picograd_core::Tensor> = outs.iter().collect();
        picograd_core::Tensor::realize_all(&refs)?;
        times.push(t.elapsed());
        bar.inc(1);
    }
    bar.finish_and_clear();
    times.sort();
    println!(
        "bench: {n} run(s) after a warm-up: min {:.3?}, median {:.3?} per run",
        times[0],
        times[times.len() / 2]
    );
    Ok(())
}

/// A value name made safe as a file name.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Which target `compile` builds for: `--target NAME` (with `--target-dir DIR` instead when
/// given).
struct TargetArg<'a> {
    name: &'a str,
    dir: Option<PathBuf>,
}

/// The measuring build `--opt` and `--compiler` ask for.
fn build_options(opt: OptArg, compiler: CompilerArg) -> BuildOptions {
    BuildOptions {
        opt: match opt {
            OptArg::Speed => OptLevel::O2,
            OptArg::Size => OptLevel::Os,
        },
        compiler: match compiler {
            CompilerArg::Gcc => CompilerKind::Gcc,
            CompilerArg::Clang => CompilerKind::Clang,
        },
        ..BuildOptions::default()
    }
}

/// Exports a model for a device, builds it once and prints what it costs there.
fn compile(args: CompileArgs) -> CliResult {
    let CompileArgs {
        model: path,
        target: name,
        target_dir,
        out,
        shapes,
        max,
        budget,
        inputs,
        check,
        opt,
        compiler,
        cflags,
        quantize,
        calibrate,
        percentile,
        search,
        search_candidates,
    } = args;
    let q = Quant::parse(quantize, calibrate, percentile)?;
    let target = TargetArg {
        name: &name,
        dir: target_dir,
    };
    let budget = budget.as_deref();
    let build = BuildOptions {
        extra_flags: cflags,
        ..build_options(opt, compiler)
    };
    let (fixed, free): (Vec<String>, Vec<String>) = shapes
        .into_iter()
        .partition(|s| picograd_cli::compile::parse_shape_arg(s).is_ok());
    let shapes = parse_shapes(&fixed)?;
    let usage = |e: Error| Failure::Usage(e.to_string());
    let free_shapes = free
        .iter()
        .map(|s| picograd_cli::free_dims::parse_free_shape_arg(s).map_err(usage))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let dim_max = max
        .iter()
        .map(|s| picograd_cli::free_dims::parse_max_arg(s).map_err(usage))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // Target and budget are arguments: an unknown one is a usage error, found before any work.
    let t = match &target.dir {
        Some(dir) => Target::from_dir(dir),
        None => Target::by_name(target.name),
    }
    .map_err(|e| Failure::Usage(e.to_string()))?;
    t.budget(budget)
        .map_err(|e| Failure::Usage(e.to_string()))?;
    picograd_runtime::install();
    let model = load_as(&path, &q)?;
    let inputs = inputs
        .iter()
        .map(|p| npy::read(p))
        .collect::<Result<Vec<_>>>()?;
    let opts = picograd_cli::CompileOptions {
        target_dir: target.dir,
        shapes,
        free_shapes,
        dim_max,
        budget: budget.map(str::to_string),
        inputs,
        build,
        search: search.then_some(picograd_cli::compile::SearchOptions {
            dir: None,
            candidates: search_candidates,
        }),
        ..picograd_cli::CompileOptions::new(target.name, &out)
    };
    let t = Instant::now();
    let report = picograd_cli::compile(&model, &opts)?;
    eprintln!("compiled and measured in {:.2?}", t.elapsed());
    println!("{report}");
    match &report.check {
        Some(c) if check && !c.passed() => Err(Failure::Lib(Error::Device(format!(
            "--check: the device disagrees with the desktop (max abs diff {:.3e})",
            c.max_abs_diff()
        )))),
        _ => Ok(()),
    }
}

fn inspect(path: &Path) -> Result<()> {
    // Reads no weights: works even when an external data file is missing.
    let model = Model::load_without_weights(path)?;
    println!("model: {}", path.display());
    println!("producer: {}  opsets: {:?}", model.producer, model.opsets);
    for v in model.inputs() {
        println!("input  {}: {}", v.name, v.describe());
    }
    for v in model.outputs() {
        println!("output {}: {}", v.name, v.describe());
    }
    println!(
        "parameters: {} in {} weight tensors",
        model.parameter_count(),
        model.weight_count()
    );
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for n in model.nodes() {
        *counts.entry(n.op_type.clone()).or_default() += 1;
    }
    println!("operators:");
    for (op, c) in &counts {
        let s = match ops::family(op) {
            Some(f) => format!("supported ({f})"),
            None => "NOT SUPPORTED".to_string(),
        };
        println!("  {op:<28} x{c:<5} {s}");
    }
    let bad = model.unsupported();
    if bad.is_empty() {
        println!("picograd supports every operator in this model");
    } else {
        println!("{} node(s) use unsupported operators", bad.len());
    }
    let _ = onnx_type_name;
    Ok(())
}
