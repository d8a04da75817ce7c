//! The real-model bench's picograd side: a long-lived process that a Python driver
//! (`scripts/bench_models.py`) keeps alive and commands over stdin/stdout, so that picograd's and
//! onnxruntime's timings can be interleaved pair by pair in one run. It times models the way a
//! user gets them: `picograd_onnx::Model::load`, then either `Model::run` on every call (which
//! replays its own per-signature capture after the first call) or the model's lazy graph
//! (`Model::graph`) wrapped in a hand-written `Jit` (captured once, replayed) — a `Jit` around
//! `run` would capture nothing, since `run` returns realized outputs; every call reads its outputs back
//! (`to_vec`), as a user does. The thread count is the process's `PICOGRAD_THREADS`.
//!
//! Protocol, one command per line, one answer line each (`ok ...` or `err <message>`):
//! - `load MODEL.onnx INPUT.npy`: loads the model and its input, runs it once plainly and once
//!   under a new `Jit` (the capture); answers `ok <first run s> <capture s> <kernels>`.
//! - `jit N` / `run N`: N warm calls replayed / run plainly; answers `ok <seconds per call>`.
//! - `quit`: exits.
//!
//! Invariant: stdout carries only answers (diagnostics go to stderr), so the driver never blocks.
//!
//! Run: `scripts/bench.sh models` (not meant to be run by hand).

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use picograd::jit::Jit;
use picograd::{Result, Tensor};
use picograd_onnx::{npy, Model};

type ModelFn = Box<dyn FnMut(&[Tensor]) -> Result<Vec<Tensor>>>;

/// The loaded model, its input, and the JIT around its `run`.
struct Loaded {
    model: Arc<Model>,
    input: Vec<Tensor>,
    jit: Jit<ModelFn>,
}

/// Reads every output back to the host, as a user does with a result.
fn read_back(outs: &[Tensor]) -> Result<()> {
    for t in outs {
        t.to_vec::<f32>()?;
    }
    Ok(())
}

fn load(model: &str, input: &str) -> Result<(Loaded, String)> {
    let model = Arc::new(Model::load(Path::new(model))?);
    let input = vec![npy::read(Path::new(input))?];
    let t = Instant::now();
    read_back(&model.run(&input)?)?;
    let first = t.elapsed().as_secs_f64();
    let m = model.clone();
    let jit: Jit<ModelFn> = Jit::new(Box::new(move |io: &[Tensor]| m.graph(io)));
    let t = Instant::now();
    read_back(&jit.call(&input)?)?;
    let capture = t.elapsed().as_secs_f64();
    let kernels = jit.capture().map_or(0, |c| c.steps().len());
    let answer = format!("{first} {capture} {kernels}");
    Ok((Loaded { model, input, jit }, answer))
}

/// Seconds per call over `n` calls of `f`.
fn per_call(n: u32, mut f: impl FnMut() -> Result<()>) -> Result<String> {
    let t = Instant::now();
    for _ in 0..n {
        f()?;
    }
    Ok(format!(
        "{}",
        t.elapsed().as_secs_f64() / f64::from(n.max(1))
    ))
}

/// The loaded model, or an error saying to load one first.
fn need(l: &Option<Loaded>) -> Result<&Loaded> {
    l.as_ref()
        .ok_or_else(|| picograd::Error::Unsupported("no model loaded: send `load` first".into()))
}

fn answer(loaded: &mut Option<Loaded>, line: &str) -> Result<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let count = |w: Option<&&str>| w.and_then(|s| s.parse::<u32>().ok()).unwrap_or(1);
    match words.as_slice() {
        ["load", model, input] => {
            let (l, a) = load(model, input)?;
            *loaded = Some(l);
            Ok(a)
        }
        ["jit", rest @ ..] => {
            let l = need(loaded)?;
            per_call(count(rest.first()), || read_back(&l.jit.call(&l.input)?))
        }
        ["run", rest @ ..] => {
            let l = need(loaded)?;
            per_call(count(rest.first()), || read_back(&l.model.run(&l.input)?))
        }
        _ => Err(picograd::Error::Unsupported(format!(
            "unknown command '{line}' (load MODEL INPUT | jit N | run N | quit)"
        ))),
    }
}

fn main() {
    picograd::init();
    let mut loaded = None;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "quit" {
            break;
        }
        let reply = match answer(&mut loaded, line.trim()) {
            Ok(a) => format!("ok {a}"),
            Err(e) => format!("err {}", e.to_string().replace('\n', " ")),
        };
        let mut out = stdout.lock();
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}
