//! Measured kernel search (`PICOGRAD_SEARCH`): for each new kernel AST, compile the candidates of
//! [`candidates`], run each on scratch buffers, keep the fastest, and remember the
//! choice in memory and in a file beside the kernel cache, so later processes reuse it without
//! searching. Its layout stage (`search/layout.rs`) chooses among the scheduler's layout
//! options of a reduce kernel the same way, timing each option's kernels with the opts chosen
//! here.
//!
//! Invariants: the user's buffers are never touched — candidates run only on scratch buffers
//! allocated and freed here. Results never depend on the search: every candidate is
//! order-preserving (see [`picograd_core::codegen::search_space`]), and on top of that a candidate whose output on the
//! scratch inputs differs in any bit from the first (hand-coded) candidate's is rejected. A
//! choice read from disk is used only after its magic, key and checksum verify and its opts
//! apply to the kernel; anything else is reported, ignored, searched again and rewritten.
//! Files are written to a temporary name and renamed, as the kernel cache does, and read under
//! the cache's trust rules ([`crate::private_fs`]): a private folder, and only the user's own
//! regular files that no one else may write — anything else is set aside, never read.
//!
//! ## Choice file
//!
//! `<dir>/<key as 32 lowercase hex digits>.choice`, five text lines:
//!
//! ```text
//! PGSEARCH1
//! key <the key, 32 hex digits>
//! opts <upcast:AXIS:AMOUNT or unroll:AXIS:AMOUNT, space separated; nothing for none>
//! micros <the chosen kernel's best time in microseconds>
//! check <FNV-1a-128 of the four lines above, newlines included, 32 hex digits>
//! ```
//!
//! The key hashes the AST's text, the optimizer settings, the buffers, and the device's identity
//! (compiler path, version, flags, target, thread split), so a choice measured under other
//! conditions is never reused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use picograd_core::ast::Ast;
use picograd_core::codegen::kernel::{Kernel, Opt};
use picograd_core::codegen::lower::lower_ast_with;
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::search_space::candidates;
use picograd_core::codegen::uops::{BufParam, LinearKernel};
use picograd_core::context::{debug, log};
use picograd_core::device::{Allocator, BufId, Device, Program};
use picograd_core::dtype::DType;
use picograd_core::{Error, Result};

use crate::cache::Fnv128;
use crate::private_fs;

mod layout;

/// The first line of every choice file.
const MAGIC: &str = "PGSEARCH1";
/// Largest choice file read: five short lines; anything larger is not one of ours.
const MAX_CHOICE_BYTES: u64 = 64 << 10;
/// At most this many candidates per kernel; the time bound usually stops earlier.
const MAX_CANDIDATES: usize = 48;
/// Timed runs per candidate (after one verifying run), fewer when it is clearly slower.
const REPS: usize = 3;
/// Kernels with less work than this (flops + bytes / 4) are not searched: their time is mostly
/// the call, so no choice of opts shows.
pub const MIN_SEARCH_WORK: u64 = 1 << 16;
/// A timing sample of a short kernel repeats it until the sample is at least this long.
const MIN_SAMPLE_NS: u64 = 200_000;
/// Rounds of alternate timing that confirm a candidate beats the hand-coded one.
const CONFIRM_ROUNDS: usize = 5;
/// Another candidate replaces the hand-coded one only when it is faster by this fraction, so
/// timing noise alone does not change (and cache) the choice.
const MIN_GAIN: f64 = 0.05;

/// Counters of a [`Search`]'s work, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Kernels searched (candidates compiled and timed).
    pub searches: u64,
    /// Choices read from an intact file, without searching.
    pub disk_hits: u64,
    /// Choices answered from this search's memory.
    pub memory_hits: u64,
    /// Choice files found corrupt or foreign, ignored, and rebuilt.
    pub corrupt_rebuilt: u64,
    /// Candidates timed, over all searches.
    pub timed: u64,
    /// Kernels whose layouts were measured (every option compiled and timed).
    pub layout_searches: u64,
    /// Layout choices read from an intact file, without measuring.
    pub layout_disk_hits: u64,
}

#[derive(Default)]
struct Counters {
    searches: AtomicU64,
    disk_hits: AtomicU64,
    memory_hits: AtomicU64,
    corrupt_rebuilt: AtomicU64,
    timed: AtomicU64,
    layout_searches: AtomicU64,
    layout_disk_hits: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What a search remembers a choice by in memory: the AST and the optimizer settings.
type Memo = (Ast, OptConfig);

/// A measured search with a time bound per kernel and a directory of remembered choices; one
/// search serves one device.
pub struct Search {
    budget: Duration,
    dir: Option<PathBuf>,
    /// Whether `dir` may be used (checked once, on first use), or why not.
    dir_verdict: OnceLock<std::result::Result<(), String>>,
    /// Smaller kernels keep the hand-coded opts unsearched.
    min_work: u64,
    /// Choices by AST and settings (one search serves one device, so its identity is fixed);
    /// `None` where the hand-coded opts are used (too small, or the search failed). Looked up
    /// before the disk key is even computed, as realizing asks on every lowering.
    chosen: Mutex<HashMap<Memo, Option<Vec<Opt>>>>,
    /// Layout choices by key (`layout.rs`); `None` where the rules' choice stands.
    layouts: Mutex<HashMap<u128, Option<usize>>>,
    /// Held while searching, so two searches never time their kernels against each other.
    busy: Mutex<()>,
    counters: Counters,
}

/// What one search found.
struct Found {
    opts: Vec<Opt>,
    best_ns: u64,
    hand_ns: u64,
    timed: usize,
    candidates: usize,
}

impl Search {
    /// A search spending about `budget` per new kernel (it stops starting candidates after
    /// that; one already running finishes), remembering choices in [`default_dir`].
    pub fn new(budget: Duration) -> Search {
        Search {
            budget,
            dir: default_dir(),
            dir_verdict: OnceLock::new(),
            min_work: MIN_SEARCH_WORK,
            chosen: Mutex::new(HashMap::new()),
            layouts: Mutex::new(HashMap::new()),
            busy: Mutex::new(()),
            counters: Counters::default(),
        }
    }

    /// The search `PICOGRAD_SEARCH` asks for, or `None` when it is off.
    pub fn from_env() -> Option<Search> {
        crate::tuning::search_budget().map(Search::new)
    }

    /// The same search keeping its choice files in `dir` (created on first write).
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Search {
        self.dir = Some(dir.into());
        self.dir_verdict = OnceLock::new();
        self
    }

    /// The same search, searching kernels with at least `work` (flops + bytes / 4) instead of
    /// [`MIN_SEARCH_WORK`].
    pub fn with_min_work(mut self, work: u64) -> Search {
        self.min_work = work;
        self
    }

    /// The time bound per kernel.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Where choice files live (`None`: nowhere, choices last for this process only).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The path of the choice file for `key`, when the choice folder exists (or can be made)
    /// private — checked once per search, the refusal said once on stderr (choices then last for
    /// this process only).
    fn path(&self, key: u128) -> Option<PathBuf> {
        self.file(key, "choice")
    }

    /// [`Search::path`] with the file extension `ext`.
    fn file(&self, key: u128, ext: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let verdict = self.dir_verdict.get_or_init(|| {
            private_fs::ensure_private_dir(dir).map_err(|why| {
                let why = format!(
                    "not using the search's choice folder {}: {why}",
                    dir.display()
                );
                eprintln!("picograd: {why}; choices last for this process only");
                why
            })
        });
        verdict
            .is_ok()
            .then(|| dir.join(format!("{key:032x}.{ext}")))
    }

    /// Why this search does not use its choice folder; `None` when it does or has not needed it.
    pub fn dir_refusal(&self) -> Option<&str> {
        self.dir_verdict.get()?.as_ref().err().map(String::as_str)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> SearchStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SearchStats {
            searches: get(&c.searches),
            disk_hits: get(&c.disk_hits),
            memory_hits: get(&c.memory_hits),
            corrupt_rebuilt: get(&c.corrupt_rebuilt),
            timed: get(&c.timed),
            layout_searches: get(&c.layout_searches),
            layout_disk_hits: get(&c.layout_disk_hits),
        }
    }

    /// The opts to lower `ast` with on `dev` (whose identity for the key is `ident`): from
    /// memory, else from an intact choice file, else by searching (and writing the file).
    /// `None` (the hand-coded opts) when the device has no optimizer settings, the kernel is
    /// too small to search, or the search failed.
    pub fn choose(
        &self,
        dev: &dyn Device,
        ident: &str,
        ast: &Ast,
        bufs: &[BufParam],
    ) -> Option<Vec<Opt>> {
        let cfg = dev.opt_config()?;
        let memo = (ast.clone(), cfg);
        if let Some(c) = self.remembered(&memo) {
            return c;
        }
        let _busy = lock(&self.busy);
        // Another thread may have searched this kernel while we waited.
        if let Some(c) = self.remembered(&memo) {
            return c;
        }
        let key = choice_key(ident, &cfg, ast, bufs);
        let kernel = Kernel::new(ast).ok()?;
        let choice = if self.too_small(ast, bufs, &cfg) {
            None
        } else if let Some(opts) = self.read_choice(key, &kernel) {
            Some(opts)
        } else {
            self.search_and_save(dev, key, ast, &kernel, bufs, &cfg)
        };
        lock(&self.chosen).insert(memo, choice.clone());
        choice
    }

    /// Is the hand-coded kernel below the work worth searching?
    fn too_small(&self, ast: &Ast, bufs: &[BufParam], cfg: &OptConfig) -> bool {
        lower_ast_with(ast, bufs.to_vec(), Some(cfg), None, false)
            .is_ok_and(|lk| lk.cost.flops.saturating_add(lk.cost.bytes / 4) < self.min_work)
    }

    fn remembered(&self, memo: &Memo) -> Option<Option<Vec<Opt>>> {
        let c = lock(&self.chosen).get(memo).cloned()?;
        bump(&self.counters.memory_hits, 1);
        Some(c)
    }

    /// The choice in `key`'s file when it is intact and fits `kernel`; a corrupt or foreign
    /// file is reported and counted.
    fn read_choice(&self, key: u128, kernel: &Kernel) -> Option<Vec<Opt>> {
        let path = self.path(key)?;
        let opts = self.read_trusted(&path, "search choice", |bytes| {
            parse_choice(bytes, key).and_then(|opts| fits(kernel, opts))
        })?;
        bump(&self.counters.disk_hits, 1);
        log(2, &format!("search {}: cached {opts:?}", kernel.name()));
        Some(opts)
    }

    /// The file at `path` (a `what`, for messages) read under the cache's trust rules and
    /// checked by `parse`: `None` when it is missing; when it is not the user's own private
    /// regular file (set aside), or `parse` refuses it, `None` too, said on stderr and counted.
    fn read_trusted<T>(
        &self,
        path: &Path,
        what: &str,
        parse: impl FnOnce(&[u8]) -> std::result::Result<T, String>,
    ) -> Option<T> {
        let bytes = match private_fs::open_private_file(path, MAX_CHOICE_BYTES) {
            private_fs::Opened::Trusted(_, bytes) => bytes,
            private_fs::Opened::Missing => return None,
            private_fs::Opened::Odd(why) => {
                let aside = private_fs::set_aside(path);
                eprintln!(
                    "picograd: {what} {} is {why}; not read{}, searching again",
                    path.display(),
                    aside.map_or(String::new(), |p| format!(
                        " (set aside as {})",
                        p.display()
                    ))
                );
                bump(&self.counters.corrupt_rebuilt, 1);
                return None;
            }
        };
        match parse(&bytes) {
            Ok(v) => Some(v),
            Err(reason) => {
                eprintln!(
                    "picograd: {what} {} is corrupt ({reason}); searching again",
                    path.display()
                );
                bump(&self.counters.corrupt_rebuilt, 1);
                None
            }
        }
    }

    fn search_and_save(
        &self,
        dev: &dyn Device,
        key: u128,
        ast: &Ast,
        kernel: &Kernel,
        bufs: &[BufParam],
        cfg: &OptConfig,
    ) -> Option<Vec<Opt>> {
        let start = Instant::now();
        let found = match measure(dev, ast, kernel, bufs, cfg, self.budget) {
            Ok(f) => f,
            Err(e) => {
                log(1, &format!("search {}: failed ({e})", kernel.name()));
                return None;
            }
        };
        bump(&self.counters.searches, 1);
        bump(&self.counters.timed, found.timed as u64);
        if debug() >= 1 {
            log(1, &describe(kernel, &found, start.elapsed()));
        }
        if let Some(path) = self.path(key) {
            if let Err(e) = write_choice(&path, key, &found) {
                log(1, &format!("search: cannot save the choice: {e}"));
            }
        }
        Some(found.opts)
    }
}

/// `$PICOGRAD_CACHE/search` (or the same beside the kernel cache's other defaults): the
/// `search` directory next to [`crate::cache::default_dir`]'s `kernels`.
pub fn default_dir() -> Option<PathBuf> {
    crate::cache::default_dir().map(|d| d.with_file_name("search"))
}

fn describe(kernel: &Kernel, f: &Found, took: Duration) -> String {
    format!(
        "search {}: chose {:?} {:.1} us (hand-coded {:.1} us), {} of {} candidates timed in {} ms",
        kernel.name(),
        f.opts,
        f.best_ns as f64 / 1e3,
        f.hand_ns as f64 / 1e3,
        f.timed,
        f.candidates,
        took.as_millis()
    )
}

/// The stable key of a kernel's choice.
fn choice_key(ident: &str, cfg: &OptConfig, ast: &Ast, bufs: &[BufParam]) -> u128 {
    let mut h = Fnv128::new();
    h.field(b"picograd search choice v1");
    h.field(ast.to_string().as_bytes());
    h.field(format!("{cfg:?}").as_bytes());
    for b in bufs {
        h.field(format!("{} {} {}", b.dtype, b.size, b.writable).as_bytes());
    }
    h.field(ident.as_bytes());
    h.finish()
}

// ---- the choice file ----
// (The device search's choice files, `target/search.rs`, share these three.)

pub(crate) fn checksum(body: &str) -> u128 {
    let mut h = Fnv128::new();
    h.write(body.as_bytes());
    h.finish()
}

pub(crate) fn opt_text(o: &Opt) -> String {
    match o {
        Opt::Upcast { axis, amount } => format!("upcast:{axis}:{amount}"),
        Opt::Unroll { axis, amount } => format!("unroll:{axis}:{amount}"),
        Opt::Vectorize { axis, amount } => format!("vectorize:{axis}:{amount}"),
        Opt::LoopedUpcast {
            axis,
            amount,
            lanes,
        } => format!("looped:{axis}:{amount}:{lanes}"),
        Opt::ReduceBlock { axis, amount } => format!("block:{axis}:{amount}"),
        Opt::StageWeights => String::from("stage:0:0"),
    }
}

pub(crate) fn parse_opt(s: &str) -> std::result::Result<Opt, String> {
    let bad = || format!("`{s}` is not an opt");
    let mut parts = s.split(':');
    let (kind, axis, amount) = (parts.next(), parts.next(), parts.next());
    let num = |p: Option<&str>| p.and_then(|v| v.parse::<usize>().ok()).ok_or_else(bad);
    let (axis, amount) = (num(axis)?, num(amount)?);
    match (kind, parts.next()) {
        (Some("upcast"), None) => Ok(Opt::Upcast { axis, amount }),
        (Some("unroll"), None) => Ok(Opt::Unroll { axis, amount }),
        (Some("vectorize"), None) => Ok(Opt::Vectorize { axis, amount }),
        (Some("block"), None) => Ok(Opt::ReduceBlock { axis, amount }),
        (Some("stage"), None) if axis == 0 && amount == 0 => Ok(Opt::StageWeights),
        (Some("looped"), Some(lanes)) if parts.next().is_none() => Ok(Opt::LoopedUpcast {
            axis,
            amount,
            lanes: num(Some(lanes))?,
        }),
        _ => Err(bad()),
    }
}

fn choice_text(key: u128, f: &Found) -> String {
    let opts: Vec<String> = f.opts.iter().map(opt_text).collect();
    file_text(MAGIC, key, &format!("opts {}", opts.join(" ")), f.best_ns)
}

/// A five-line choice file: `magic`, the key, the `choice` line, the time, and the checksum of
/// the four lines before it.
fn file_text(magic: &str, key: u128, choice: &str, best_ns: u64) -> String {
    let body = format!(
        "{magic}\nkey {key:032x}\n{choice}\nmicros {:.3}\n",
        best_ns as f64 / 1e3
    );
    format!("{body}check {:032x}\n", checksum(&body))
}

/// The choice line (newline removed) of a five-line file's bytes written by [`file_text`] with
/// `magic` for `key`; the reason when it is not intact.
fn choice_line<'a>(
    bytes: &'a [u8],
    magic: &str,
    key: u128,
) -> std::result::Result<&'a str, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let [head, key_line, choice, micros, check] = lines[..] else {
        return Err(format!("{} lines, not 5", lines.len()));
    };
    if head != format!("{magic}\n") {
        return Err(format!("no {magic} header (foreign or truncated)"));
    }
    let body = [head, key_line, choice, micros].concat();
    if check != format!("check {:032x}\n", checksum(&body)) {
        return Err("checksum mismatch (contents changed since it was written)".into());
    }
    if key_line != format!("key {key:032x}\n") {
        return Err("it carries another kernel's key".into());
    }
    if !micros.starts_with("micros ") {
        return Err("no micros line".into());
    }
    Ok(choice.trim_end_matches('\n'))
}

/// The opts of a choice file's bytes, checked against `key`; the reason when it is not intact.
fn parse_choice(bytes: &[u8], key: u128) -> std::result::Result<Vec<Opt>, String> {
    let opts = choice_line(bytes, MAGIC, key)?
        .strip_prefix("opts ")
        .ok_or("no opts line")?;
    opts.split_whitespace().map(parse_opt).collect()
}

/// `opts` when they all apply to `kernel` in order.
fn fits(kernel: &Kernel, opts: Vec<Opt>) -> std::result::Result<Vec<Opt>, String> {
    let mut k = kernel.clone();
    for o in &opts {
        k.apply_opt(*o)
            .map_err(|e| format!("its opts do not fit the kernel: {e}"))?;
    }
    Ok(opts)
}

/// Writes the file atomically (a unique temporary name in the same private folder, then a
/// rename; see [`private_fs::write_atomic`]).
fn write_choice(path: &Path, key: u128, f: &Found) -> Result<()> {
    private_fs::write_atomic(path, choice_text(key, f).as_bytes(), 0o600).map_err(|e| Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    })
}

// ---- measuring ----

/// Scratch buffers for one kernel, output first, each with the bytes it starts from; freed on
/// drop.
struct Scratch<'a> {
    alloc: &'a dyn Allocator,
    ids: Vec<BufId>,
    init: Vec<Vec<u8>>,
}

impl<'a> Scratch<'a> {
    fn new(alloc: &'a dyn Allocator, bufs: &[BufParam]) -> Result<Scratch<'a>> {
        let mut s = Scratch {
            alloc,
            ids: Vec::new(),
            init: Vec::new(),
        };
        for b in bufs {
            let bytes = pattern(b.dtype, b.size);
            s.ids.push(alloc.alloc(bytes.len().max(1))?);
            s.init.push(bytes);
        }
        Ok(s)
    }

    /// Restores every buffer's starting bytes (in-place kernels change their inputs).
    fn reset(&self) -> Result<()> {
        self.ids
            .iter()
            .zip(&self.init)
            .try_for_each(|(id, bytes)| self.alloc.copy_in(*id, bytes))
    }

    fn output(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.init[0].len()];
        self.alloc.copy_out(self.ids[0], &mut out)?;
        Ok(out)
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        self.ids.iter().for_each(|id| self.alloc.free(*id));
    }
}

/// `n` varied, ordinary values of `dtype` (mixed signs and fractions; no NaN, infinities or
/// subnormals, which would time unlike real data), as bytes.
fn pattern(dtype: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.itemsize());
    for i in 0..n {
        let k = (i * 37 % 23) as i64 - 11;
        let v = k as f64 * 0.37;
        match dtype {
            DType::Bool => out.push(u8::from(k > 0)),
            DType::I8 | DType::U8 => out.push(k as u8),
            DType::I16 | DType::U16 => out.extend((k as i16).to_le_bytes()),
            DType::I32 | DType::U32 => out.extend((k as i32).to_le_bytes()),
            DType::I64 | DType::U64 => out.extend(k.to_le_bytes()),
            DType::F16 => out.extend(half::f16::from_f64(v).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(v).to_le_bytes()),
            DType::F32 => out.extend((v as f32).to_le_bytes()),
            DType::F64 => out.extend(v.to_le_bytes()),
        }
    }
    out
}

/// Lowers and compiles `opts` for `ast` exactly as realizing with them would.
fn build(
    dev: &dyn Device,
    ast: &Ast,
    bufs: &[BufParam],
    cfg: &OptConfig,
    opts: &[Opt],
) -> Result<(LinearKernel, Arc<dyn Program>)> {
    let lk = lower_ast_with(
        ast,
        bufs.to_vec(),
        Some(cfg),
        Some(opts),
        dev.fused_mulacc(),
    )?;
    let prog = dev.compile(&lk)?;
    Ok((lk, prog))
}

/// Compiles a batch of candidates side by side (the compiler runs as separate processes).
fn build_batch(
    dev: &dyn Device,
    ast: &Ast,
    bufs: &[BufParam],
    cfg: &OptConfig,
    batch: &[Vec<Opt>],
) -> Vec<Result<(LinearKernel, Arc<dyn Program>)>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = batch
            .iter()
            .map(|opts| s.spawn(move || build(dev, ast, bufs, cfg, opts)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Device("a search compile panicked".into())))
            })
            .collect()
    })
}

/// The best of up to [`REPS`] timing samples in nanoseconds per run, given the verifying
/// run's time `first`. A sample of a short kernel repeats it for at least [`MIN_SAMPLE_NS`].
/// Stops early once the candidate is twice the best time so far (`beat`) or the deadline has
/// passed.
fn time_runs(
    prog: &dyn Program,
    ids: &[BufId],
    vars: &[i64],
    first: u64,
    beat: Option<u64>,
    deadline: Instant,
) -> Result<u64> {
    let slower = |t: u64| beat.is_some_and(|b| t > 2 * b);
    if slower(first) {
        return Ok(first);
    }
    let inner = (MIN_SAMPLE_NS / first.max(1)).clamp(1, 1000);
    let mut best = if inner == 1 { first } else { u64::MAX };
    for _ in 0..REPS {
        best = best.min(sample(prog, ids, vars, inner)?);
        if slower(best) || Instant::now() >= deadline {
            break;
        }
    }
    Ok(best)
}

/// Running state of one search: the reference output, and the hand-coded and best candidates
/// so far with their programs.
#[derive(Default)]
struct Tally {
    reference: Option<Vec<u8>>,
    hand: Option<(u64, Arc<dyn Program>)>,
    best: Option<(u64, usize, Arc<dyn Program>)>,
    timed: usize,
}

impl Tally {
    /// Records candidate `i`'s time, unless its output differs from the reference.
    fn record(
        &mut self,
        i: usize,
        prog: &Arc<dyn Program>,
        out: Vec<u8>,
        ns: impl FnOnce(Option<u64>) -> Result<u64>,
    ) -> Result<()> {
        match &self.reference {
            None => self.reference = Some(out),
            Some(r) if *r != out => {
                log(
                    1,
                    &format!("search: candidate {i} changed the results; rejected"),
                );
                return Ok(());
            }
            Some(_) => {}
        }
        let ns = ns(self.best.as_ref().map(|b| b.0))?;
        if i == 0 {
            self.hand = Some((ns, prog.clone()));
        }
        if self.best.as_ref().is_none_or(|b| ns < b.0) {
            self.best = Some((ns, i, prog.clone()));
        }
        self.timed += 1;
        Ok(())
    }

    /// The winner as (time, candidate index, hand-coded time): the fastest, when it still beats
    /// the hand-coded candidate by [`MIN_GAIN`] once both are timed again alternately.
    fn winner(
        &self,
        ids: &[BufId],
        vars: &[i64],
        limit: Duration,
    ) -> Result<Option<(u64, usize, u64)>> {
        let Some((best_ns, i, best)) = &self.best else {
            return Ok(None);
        };
        let Some((hand_ns, hand)) = self.hand.as_ref().filter(|_| *i != 0) else {
            return Ok(Some((
                *best_ns,
                *i,
                self.hand.as_ref().map_or(*best_ns, |h| h.0),
            )));
        };
        let inner = (MIN_SAMPLE_NS / (*hand_ns).max(1)).clamp(1, 1000);
        let (h, b) = confirm(&**hand, &**best, ids, vars, inner, limit)?;
        Ok(Some(if (b as f64) * (1.0 + MIN_GAIN) < h as f64 {
            (b, *i, h)
        } else {
            (h, 0, h)
        }))
    }
}

/// One timing sample: `inner` runs, in nanoseconds per run.
fn sample(prog: &dyn Program, ids: &[BufId], vars: &[i64], inner: u64) -> Result<u64> {
    let t = Instant::now();
    for _ in 0..inner {
        prog.run(ids, vars)?;
    }
    Ok((t.elapsed().as_nanos() as u64 / inner).max(1))
}

/// Times two programs alternately — at least one round, at most [`CONFIRM_ROUNDS`], within
/// `limit` — so one lucky sample under load cannot decide; the best time of each.
fn confirm(
    a: &dyn Program,
    b: &dyn Program,
    ids: &[BufId],
    vars: &[i64],
    inner: u64,
    limit: Duration,
) -> Result<(u64, u64)> {
    let start = Instant::now();
    let (mut ta, mut tb) = (u64::MAX, u64::MAX);
    for _ in 0..CONFIRM_ROUNDS {
        ta = ta.min(sample(a, ids, vars, inner)?);
        tb = tb.min(sample(b, ids, vars, inner)?);
        if start.elapsed() >= limit {
            break;
        }
    }
    Ok((ta, tb))
}

/// Times the candidates of `kernel` in order, batch by batch, until the budget is spent (the
/// first batch always runs), and returns the fastest.
fn measure(
    dev: &dyn Device,
    ast: &Ast,
    kernel: &Kernel,
    bufs: &[BufParam],
    cfg: &OptConfig,
    budget: Duration,
) -> Result<Found> {
    let deadline = Instant::now() + budget;
    let cands = candidates(kernel, cfg, MAX_CANDIDATES);
    let scratch = Scratch::new(dev.allocator(), bufs)?;
    let width = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4));
    let mut tally = Tally::default();
    let mut vars = Vec::new();
    'batches: for (b, batch) in cands.chunks(width).enumerate() {
        if b > 0 && Instant::now() >= deadline {
            break;
        }
        let built = build_batch(dev, ast, bufs, cfg, batch);
        for (j, built) in built.into_iter().enumerate() {
            let i = b * width + j;
            let (lk, prog) = match built {
                Ok(x) => x,
                Err(e) => {
                    log(2, &format!("search: candidate {:?} failed: {e}", cands[i]));
                    continue;
                }
            };
            vars = lk.vars.iter().map(|(_, _, hi)| *hi).collect();
            scratch.reset()?;
            let t = Instant::now();
            prog.run(&scratch.ids, &vars)?;
            let first = t.elapsed().as_nanos().max(1) as u64;
            tally.record(i, &prog, scratch.output()?, |beat| {
                time_runs(&*prog, &scratch.ids, &vars, first, beat, deadline)
            })?;
            if Instant::now() >= deadline {
                break 'batches;
            }
        }
    }
    let (best_ns, i, hand_ns) = tally
        .winner(&scratch.ids, &vars, budget / 4)?
        .ok_or_else(|| Error::Device(format!("search {}: no candidate ran", kernel.name())))?;
    Ok(Found {
        opts: cands[i].clone(),
        best_ns,
        hand_ns,
        timed: tally.timed,
        candidates: cands.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(opts: Vec<Opt>) -> Found {
        Found {
            opts,
            best_ns: 12_345,
            hand_ns: 20_000,
            timed: 3,
            candidates: 9,
        }
    }

    fn sample() -> (u128, String, Vec<Opt>) {
        let opts = vec![
            Opt::Vectorize { axis: 1, amount: 8 },
            Opt::Upcast {
                axis: 1,
                amount: 16,
            },
            Opt::LoopedUpcast {
                axis: 2,
                amount: 16,
                lanes: 8,
            },
            Opt::Unroll { axis: 0, amount: 4 },
        ];
        let key = 0x0123_4567_89ab_cdef_0011_2233_4455_6677;
        (key, choice_text(key, &found(opts.clone())), opts)
    }

    #[test]
    fn a_choice_file_reads_back() {
        let (key, text, opts) = sample();
        assert_eq!(parse_choice(text.as_bytes(), key), Ok(opts));
        let none = choice_text(key, &found(Vec::new()));
        assert_eq!(parse_choice(none.as_bytes(), key), Ok(Vec::new()));
    }

    #[test]
    fn every_byte_flip_and_truncation_is_caught() {
        let (key, text, _) = sample();
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            for bit in [0x01, 0x20] {
                let mut bad = bytes.to_vec();
                bad[i] ^= bit;
                assert!(parse_choice(&bad, key).is_err(), "flip {bit:#x} at {i}");
            }
        }
        for n in 0..bytes.len() {
            assert!(parse_choice(&bytes[..n], key).is_err(), "cut to {n}");
        }
    }

    #[test]
    fn another_kernels_file_is_refused() {
        let (key, text, _) = sample();
        let e = parse_choice(text.as_bytes(), key ^ 1).unwrap_err();
        assert!(e.contains("another kernel's key"), "{e}");
    }

    #[test]
    fn opts_that_do_not_fit_are_refused() {
        let ast = {
            use picograd_core::ast::AstOp;
            use picograd_core::ops::AluOp;
            use picograd_core::shape::ShapeTracker;
            let st = ShapeTracker::from_shape(&[picograd_core::shape::Sint::cst(12)]);
            let load = Ast::new(
                AstOp::Load {
                    buf: 1,
                    st: st.clone(),
                },
                DType::F32,
                vec![],
            );
            let neg = Ast::new(AstOp::Alu(AluOp::Neg), DType::F32, vec![load]);
            Ast::new(AstOp::Store { buf: 0, st }, DType::F32, vec![neg])
        };
        let k = Kernel::new(&ast).unwrap();
        let ok = vec![Opt::Upcast { axis: 0, amount: 4 }];
        assert_eq!(fits(&k, ok.clone()), Ok(ok));
        let e = fits(&k, vec![Opt::Upcast { axis: 0, amount: 5 }]).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
        let e = fits(&k, vec![Opt::Unroll { axis: 0, amount: 2 }]).unwrap_err();
        assert!(e.contains("do not fit"), "{e}");
    }

    #[test]
    fn scratch_patterns_are_sized_and_ordinary() {
        for dtype in picograd_core::dtype::ALL_DTYPES {
            assert_eq!(pattern(dtype, 37).len(), 37 * dtype.itemsize(), "{dtype}");
        }
        let f = pattern(DType::F32, 100);
        for c in f.chunks(4) {
            let v = f32::from_le_bytes(c.try_into().unwrap());
            assert!(v.is_finite() && (v == 0.0 || v.abs() > 1e-3), "{v}");
        }
    }
}
