//! The `picograd` command line (the binary of crate `picograd-cli`; `compile` calls
//! [`picograd_cli::compile()`]): `run` an ONNX model on `.npy` inputs, `compile` it for a device
//! target, `inspect` it. Exit codes: 0 success, 1 the model or its inputs were bad (or a run,
//! export or device build failed), 2 usage errors (clap, or a dynamic input shape `compile` was
//! not given), 3 the model uses operators picograd does not support, 4 the feature is not
//! available in this build.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use picograd_core::{Error, Result};
use picograd_onnx::{npy, ops, values::onnx_type_name, Model};
use picograd_runtime::target::BuildOptions;

/// picograd: run, compile and inspect ONNX models.
#[derive(Parser)]
#[command(name = "picograd", version, about)]
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
    },
    /// Compile a model to standalone C for a device target and measure it there.
    ///
    /// Captures the forward pass on zero-valued inputs, exports it as freestanding C99
    /// (`model.h`, `model.c`, `model_weights.c` with `const` weights, `model.json`) into OUT, then
    /// builds it once for the target with its cross compiler, runs it (natively or under QEMU)
    /// on zeros and reports flash (text + data of the model's objects), RAM (static arena +
    /// measured stack) and the instructions one `model_run` executes.
    #[command(verbatim_doc_comment)]
    Compile {
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
        /// for every such input.
        #[arg(long = "shape", value_name = "NAME=DIMS")]
        shapes: Vec<String>,
    },
    /// Show a model's inputs, outputs, operators, parameter count and picograd's support.
    Inspect {
        /// The ONNX model file.
        model: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            model,
            inputs,
            out,
            interp,
        } => run(&model, &inputs, &out, interp),
        Command::Compile {
            model,
            target,
            target_dir,
            out,
            shapes,
        } => compile(&model, &target, target_dir, &out, &shapes),
        Command::Inspect { model } => inspect(&model),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
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

fn run(path: &Path, inputs: &[PathBuf], out: &Path, interp: bool) -> Result<()> {
    if !interp {
        picograd_runtime::install();
    }
    let model = load(path)?;
    model.check_supported()?;
    let tensors = inputs
        .iter()
        .map(|p| npy::read(p))
        .collect::<Result<Vec<_>>>()?;
    let t = Instant::now();
    let outs = model.run(&tensors)?;
    let refs: Vec<&picograd_core::Tensor> = outs.iter().collect();
    eprintln!("computing {} output(s)...", outs.len());
    picograd_core::Tensor::realize_all(&refs)?;
    eprintln!("ran in {:.2?}", t.elapsed());
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

/// Exports a model for a device, builds it once and prints what it costs there.
fn compile(
    path: &Path,
    target: &str,
    target_dir: Option<PathBuf>,
    out: &Path,
    shapes: &[String],
) -> Result<()> {
    let shapes = shapes
        .iter()
        .map(|s| picograd_cli::compile::parse_shape_arg(s))
        .collect::<Result<Vec<_>>>()?;
    picograd_runtime::install();
    let model = load(path)?;
    let opts = picograd_cli::CompileOptions {
        target: target.to_string(),
        target_dir,
        out: out.to_path_buf(),
        shapes,
        build: BuildOptions::default(),
    };
    let t = Instant::now();
    let report = picograd_cli::compile(&model, &opts)?;
    eprintln!("compiled and measured in {:.2?}", t.elapsed());
    println!("{report}");
    Ok(())
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
