//! The device search (`picograd compile --search`): for each kernel of an export, candidate
//! opt lists from the host search's space ([`picograd_core::codegen::search_space::candidates`],
//! the strategy table's), built for the target with the build's own compiler and flags and
//! counted exactly under QEMU by the range counter ([`super::icount`]); among the candidates
//! whose model outputs are bit-identical to the unoptimized model's, the one with the smallest
//! code (its symbols' bytes) is kept while the kernels searched together stay within
//! [`SIZE_MARGIN_PER_MILLE`] of their fewest instructions, and remembered per kernel, target, compiler and flags in a choice file.
//!
//! Rounds keep QEMU launches few: round 0 builds the whole model with every searched kernel
//! unoptimized (the reference outputs), round `r ≥ 1` with every kernel's candidate `r - 1`
//! (the hand-coded choice is candidate 0), so one firmware image per round counts every kernel's
//! candidate at once, each kernel in its own symbol's range. A round whose outputs differ in any
//! bit from the reference, or that does not build or run, is rejected for all its kernels (the
//! check is on the model's outputs, on the build's seeded inputs, not on each kernel's own
//! output: a kernel difference the rest of the model hides would pass). Kernels are kept out of line in search builds
//! (`-fno-inline-functions`, and gcc's `-fno-inline-functions-called-once`,
//! `-fno-inline-small-functions` and `-fno-ipa-icf`) so each has its own range.
//!
//! Invariants: results never depend on the search beyond the candidates' own guarantee (every
//! candidate is order-preserving) and the bit check above; with no accepted candidate, or a
//! kernel the counter could not see, the hand-coded opts stay. Choice files live in a private
//! folder and are read under the kernel cache's trust rules ([`crate::private_fs`]); one that is
//! odd, corrupt, foreign or no longer fits its kernel is reported, searched again and rewritten.
//!
//! ## Choice file
//!
//! `<dir>/<key as 32 hex digits>.choice`, five text lines: `PGDEVSEARCH1`, `key <key>`,
//! `opts <upcast:AXIS:AMOUNT | unroll:AXIS:AMOUNT ...>`, `instructions <count, or none>`, and
//! `check <FNV-1a-128 of the four lines above, newlines included>`. The key hashes the kernel's
//! AST as exported, its buffers, the optimizer settings, FMA, the target's name and description
//! file, the compiler kind, its `--version` line, the optimisation level, the extra flags and
//! the selection rule's size margin.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use picograd_core::codegen::kernel::{Kernel, Opt};
use picograd_core::codegen::search_space::candidates;
use picograd_core::export::{export, ExportNames, ExportOptions};
use picograd_core::jit::Capture;
use picograd_core::{Error, Result};

use super::build::{build_and_run, BuildOptions, CompilerKind, OptLevel, RunReport};
use super::bundle::Values;
use super::Target;
use crate::cache::Fnv128;
use crate::private_fs;
use crate::search::{checksum, opt_text, parse_opt};

/// The first line of every device choice file.
const MAGIC: &str = "PGDEVSEARCH1";
/// Largest choice file read.
const MAX_CHOICE_BYTES: u64 = 64 << 10;
/// Candidates per kernel by default (the hand-coded one among them): KWS-sized models search
/// within minutes on two cores.
pub const DEFAULT_CANDIDATES: usize = 12;
/// How many thousandths of instructions the kernels searched together may give up, against all
/// of them at their fastest candidate, for smaller code ([`smallest_within_margin`]).
pub const SIZE_MARGIN_PER_MILLE: u64 = 25;
/// Rounds built and run side by side.
const PARALLEL_ROUNDS: usize = 2;

/// Counters of a [`DeviceSearch`]'s work, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceSearchStats {
    /// Kernels whose choice was searched (counted under QEMU).
    pub searched: u64,
    /// Kernels whose choice was read from an intact choice file.
    pub cached: u64,
    /// Choice files found odd or corrupt, ignored and rewritten.
    pub corrupt_rebuilt: u64,
    /// Firmware images built and run (each one `build_and_run` with exact counting).
    pub rounds: u64,
    /// Rounds rejected: their outputs differed from the unoptimized model's, or they did not
    /// build or run.
    pub rejected_rounds: u64,
}

/// What the search chose for one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelChoice {
    /// The kernel's name in the source capture (e.g. `r_64_10`).
    pub name: String,
    /// The text of the kernel's AST as export lowers it (what [`ExportOptions::kernel_opts`]
    /// is keyed by).
    pub ast: String,
    /// The chosen opts.
    pub opts: Vec<Opt>,
    /// Its instructions per inference in the search build (`None`: from the cache without a
    /// count, or not seen by the counter).
    pub instructions: Option<u64>,
    /// The hand-coded opts' count in the same build, when searched now.
    pub hand_instructions: Option<u64>,
    /// Read from a choice file (no QEMU run).
    pub cached: bool,
}

/// A device search remembering its choices in a folder.
pub struct DeviceSearch {
    dir: Option<PathBuf>,
    candidates: usize,
    dir_verdict: OnceLock<std::result::Result<(), String>>,
    counters: [AtomicU64; 5],
}

impl Default for DeviceSearch {
    fn default() -> Self {
        DeviceSearch::new()
    }
}

/// One kernel of the export, as the search sees it.
struct Item {
    ast_text: String,
    name: String,
    kernel: Kernel,
    key: u128,
    /// Places of the steps running this kernel (N of `PREFIX_kN_...` is the first place of
    /// each exported function).
    places: Vec<usize>,
    /// Candidates (hand-coded first) when searched now; empty when cached.
    cands: Vec<Vec<Opt>>,
    choice: Option<KernelChoice>,
}

impl DeviceSearch {
    /// A search keeping its choice files in `device-search` beside the kernel cache.
    pub fn new() -> DeviceSearch {
        DeviceSearch {
            dir: crate::cache::default_dir().map(|d| d.with_file_name("device-search")),
            candidates: DEFAULT_CANDIDATES,
            dir_verdict: OnceLock::new(),
            counters: Default::default(),
        }
    }

    /// The same search with its choice files in `dir`.
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> DeviceSearch {
        self.dir = Some(dir.into());
        self.dir_verdict = OnceLock::new();
        self
    }

    /// The same search trying at most `n` candidates per kernel (at least 1).
    pub fn with_candidates(mut self, n: usize) -> DeviceSearch {
        self.candidates = n.max(1);
        self
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> DeviceSearchStats {
        let g = |i: usize| self.counters[i].load(Ordering::Relaxed);
        DeviceSearchStats {
            searched: g(0),
            cached: g(1),
            corrupt_rebuilt: g(2),
            rounds: g(3),
            rejected_rounds: g(4),
        }
    }

    fn bump(&self, i: usize, n: u64) {
        self.counters[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Searches every kernel of `capture` exported with `export_opts` for `target`, built as
    /// `build` says (its compiler, level and flags) and run on `inputs`; the choices, in the
    /// export's kernel order. Put them in `export_opts.kernel_opts` with [`kernel_opts`].
    pub fn search(
        &self,
        target: &Target,
        capture: &Capture,
        names: &ExportNames,
        export_opts: &ExportOptions,
        build: &BuildOptions,
        inputs: &[(&str, Values)],
    ) -> Result<Vec<KernelChoice>> {
        if target.is_host() {
            return Err(Error::Unsupported(format!(
                "target {}: the device search counts instructions under QEMU; this target runs \
                 natively",
                target.name
            )));
        }
        let cfg = export_opts.opt.ok_or_else(|| {
            Error::Unsupported("the device search needs optimizer settings (`opt`)".into())
        })?;
        let plain = capture.relowered(Some(&cfg), export_opts.fused_mulacc)?;
        let ident = identity(target, build, export_opts)?;
        let plan = picograd_core::export::plan::plan(&plain, export_opts.io_in_arena)?;
        let mut items: Vec<Item> = Vec::new();
        for (place, sp) in plan.steps.iter().enumerate() {
            let st = &plain.steps()[sp.step];
            let (Some(ast), Some(lk)) = (&st.ast, &st.kernel) else {
                continue;
            };
            let ast_text = ast.to_string();
            if let Some(it) = items.iter_mut().find(|it| it.ast_text == ast_text) {
                it.places.push(place);
                continue;
            }
            let mut h = Fnv128::new();
            h.field(b"picograd device search choice v1");
            h.field(ast_text.as_bytes());
            h.field(format!("{cfg:?}").as_bytes());
            for b in &lk.bufs {
                h.field(format!("{} {} {}", b.dtype, b.size, b.writable).as_bytes());
            }
            h.field(ident.as_bytes());
            let kernel = Kernel::new(ast)?;
            let key = h.finish();
            let cached = self.read_choice(key, &kernel);
            let choice = cached.map(|(opts, n)| KernelChoice {
                name: lk.name.clone(),
                ast: ast_text.clone(),
                opts,
                instructions: n,
                hand_instructions: None,
                cached: true,
            });
            let cands = match choice {
                Some(_) => Vec::new(),
                None => candidates(&kernel, &cfg, self.candidates),
            };
            items.push(Item {
                ast_text,
                name: lk.name.clone(),
                kernel,
                key,
                places: vec![place],
                cands,
                choice,
            });
        }
        self.bump(
            1,
            items.iter().filter(|i| i.choice.is_some()).count() as u64,
        );
        if items.iter().any(|i| i.choice.is_none()) {
            self.run_rounds(
                target,
                capture,
                names,
                export_opts,
                build,
                inputs,
                &mut items,
            )?;
        }
        Ok(items.into_iter().filter_map(|i| i.choice).collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_rounds(
        &self,
        target: &Target,
        capture: &Capture,
        names: &ExportNames,
        export_opts: &ExportOptions,
        build: &BuildOptions,
        inputs: &[(&str, Values)],
        items: &mut [Item],
    ) -> Result<()> {
        let rounds = items.iter().map(|i| i.cands.len()).max().unwrap_or(0);
        // Round 0: every searched kernel unoptimized; round r: candidate r - 1 (a kernel with
        // fewer candidates repeats its hand-coded one).
        let round_opts = |r: usize| -> Vec<(String, Vec<Opt>)> {
            items
                .iter()
                .map(|it| match (&it.choice, r) {
                    (Some(c), _) => (it.ast_text.clone(), c.opts.clone()),
                    (None, 0) => (it.ast_text.clone(), Vec::new()),
                    (None, r) => (
                        it.ast_text.clone(),
                        it.cands.get(r - 1).unwrap_or(&it.cands[0]).clone(),
                    ),
                })
                .collect()
        };
        let mut build = build.clone();
        build.icount_runs = Some(1);
        build.on_stage = None;
        build.keep_build_dir = false;
        build.extra_flags.push("-fno-inline-functions".into());
        if build.compiler == CompilerKind::Gcc {
            build.extra_flags.extend([
                "-fno-inline-functions-called-once".into(),
                "-fno-inline-small-functions".into(),
                // Identical kernels folded into one symbol would count under another kernel.
                "-fno-ipa-icf".into(),
            ]);
        }
        let all: Vec<usize> = (0..=rounds).collect();
        let mut reports: Vec<Option<RunReport>> = Vec::new();
        for chunk in all.chunks(PARALLEL_ROUNDS) {
            let done = std::thread::scope(|s| {
                let hs: Vec<_> = chunk
                    .iter()
                    .map(|&r| {
                        let kernel_opts = round_opts(r);
                        let build = &build;
                        s.spawn(move || {
                            let opts = ExportOptions {
                                kernel_opts,
                                ..export_opts.clone()
                            };
                            run_round(target, capture, names, &opts, build, inputs)
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(Error::Device("a device search round panicked".into()))
                        })
                    })
                    .collect::<Vec<_>>()
            });
            self.bump(3, done.len() as u64);
            for d in done {
                match d {
                    Ok(rep) => reports.push(Some(rep)),
                    // Without the reference there is nothing to check against.
                    Err(e) if reports.is_empty() => return Err(e),
                    // A candidate round that does not build or run is rejected, not fatal.
                    Err(e) => {
                        eprintln!("picograd: device search round {}: {e}", reports.len());
                        self.bump(4, 1);
                        reports.push(None);
                    }
                }
            }
        }
        let reference = reports[0].take().map(|r| r.outputs);
        for rep in reports.iter_mut().skip(1) {
            if rep
                .as_ref()
                .is_some_and(|r| Some(&r.outputs) != reference.as_ref())
            {
                self.bump(4, 1);
                *rep = None;
            }
        }
        let prefix = export_opts.prefix.as_str();
        // Per kernel searched now: (instructions, code bytes, candidate) of every counted
        // candidate, and the hand-coded one's instructions.
        let mut counted: Vec<Vec<(u64, u64, usize)>> = Vec::new();
        let mut hands: Vec<Option<u64>> = Vec::new();
        for it in items.iter() {
            // The export names kernels PREFIX_kN_NAME, N the place of the first running step
            // calling it (steps with identical kernels share that one function); a kernel run at
            // several places counts at all of them (summed over the symbols found, so one shared
            // function, or copies the compiler merged into one, still count every call).
            // No symbol at all (inlined after all) leaves the kernel uncounted in that round.
            let mine = |s: &String| kernel_index(s, prefix).is_some_and(|p| it.places.contains(&p));
            let count = |r: usize| -> Option<u64> {
                let rep = reports[r].as_ref()?;
                let found = rep.function_instructions.iter().filter(|(s, _)| mine(s));
                found.map(|(_, c)| *c).reduce(|a, b| a + b)
            };
            let size = |r: usize| -> u64 {
                reports[r].as_ref().map_or(u64::MAX, |rep| {
                    let found = rep.function_sizes.iter().filter(|(s, _)| mine(s));
                    found.map(|(_, b)| *b).sum()
                })
            };
            if it.choice.is_some() {
                counted.push(Vec::new());
                hands.push(None);
                continue;
            }
            counted.push(
                (0..it.cands.len())
                    .filter_map(|c| count(c + 1).map(|k| (k, size(c + 1), c)))
                    .collect(),
            );
            hands.push(count(1));
        }
        let picks = smallest_within_margin(&counted);
        for ((it, pick), hand) in items.iter_mut().zip(picks).zip(hands) {
            if it.choice.is_some() {
                continue;
            }
            let (instructions, pick) = match pick {
                Some((k, c)) => (Some(k), c),
                None => (None, 0),
            };
            let choice = KernelChoice {
                name: it.name.clone(),
                ast: it.ast_text.clone(),
                opts: it.cands[pick].clone(),
                instructions,
                hand_instructions: hand,
                cached: false,
            };
            self.bump(0, 1);
            if let Some(path) = self.path(it.key) {
                let text = choice_text(it.key, &choice.opts, instructions);
                if let Err(e) = private_fs::write_atomic(&path, text.as_bytes(), 0o600) {
                    eprintln!(
                        "picograd: cannot save the device search's choice {}: {e}",
                        path.display()
                    );
                }
            }
            // Fits by construction; checked so a bug here shows as an error, not a bad export.
            fits(&it.kernel, &choice.opts).map_err(Error::Device)?;
            it.choice = Some(choice);
        }
        Ok(())
    }

    /// The path of `key`'s choice file, when the folder exists (or can be made) private.
    fn path(&self, key: u128) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let verdict = self.dir_verdict.get_or_init(|| {
            private_fs::ensure_private_dir(dir).map_err(|why| {
                eprintln!(
                    "picograd: not using the device search's folder {}: {why}; choices last \
                     for this run only",
                    dir.display()
                );
                why
            })
        });
        verdict
            .is_ok()
            .then(|| dir.join(format!("{key:032x}.choice")))
    }

    /// The opts (and count) in `key`'s choice file when it is intact and fits `kernel`.
    fn read_choice(&self, key: u128, kernel: &Kernel) -> Option<(Vec<Opt>, Option<u64>)> {
        let path = self.path(key)?;
        let bytes = match private_fs::open_private_file(&path, MAX_CHOICE_BYTES) {
            private_fs::Opened::Trusted(_, bytes) => bytes,
            private_fs::Opened::Missing => return None,
            private_fs::Opened::Odd(why) => {
                let _ = private_fs::set_aside(&path);
                eprintln!(
                    "picograd: device search choice {} is {why}; not read, searching again",
                    path.display()
                );
                self.bump(2, 1);
                return None;
            }
        };
        let parsed =
            parse_choice(&bytes, key).and_then(|(opts, n)| fits(kernel, &opts).map(|()| (opts, n)));
        match parsed {
            Ok(c) => Some(c),
            Err(why) => {
                eprintln!(
                    "picograd: device search choice {} is corrupt ({why}); searching again",
                    path.display()
                );
                self.bump(2, 1);
                None
            }
        }
    }
}

/// The choices as [`ExportOptions::kernel_opts`] wants them: by the kernel's AST text.
pub fn kernel_opts(choices: &[KernelChoice]) -> Vec<(String, Vec<Opt>)> {
    choices
        .iter()
        .map(|c| (c.ast.clone(), c.opts.clone()))
        .collect()
}

/// N of an exported kernel symbol `PREFIX_kN_NAME`.
/// Per kernel, the candidate kept (its instructions and index) from each kernel's counted
/// `(instructions, code bytes, index)`: every kernel starts at its fastest (the smaller code on a
/// tie); then, while the kernels' total stays within [`SIZE_MARGIN_PER_MILLE`] of the sum of
/// their fastest counts, the switch to a smaller candidate saving the most bytes per added
/// instruction is made, one at a time. Code costs flash on a device, and a variant unrolled for
/// a few instructions can cost kilobytes; the margin bounds what the model gives up for it.
fn smallest_within_margin(counted: &[Vec<(u64, u64, usize)>]) -> Vec<Option<(u64, usize)>> {
    let mut cur: Vec<Option<(u64, u64, usize)>> = counted
        .iter()
        .map(|cs| cs.iter().copied().min_by_key(|&(k, b, c)| (k, b, c)))
        .collect();
    let fastest: u64 = cur.iter().flatten().map(|&(k, _, _)| k).sum();
    let budget = i128::from(fastest * SIZE_MARGIN_PER_MILLE / 1000);
    let mut spent: i128 = 0;
    loop {
        // The most bytes saved per added instruction (fractions compared cross-multiplied).
        // (kernel, its new candidate, bytes saved, instructions added)
        type Switch = (usize, (u64, u64, usize), i128, i128);
        let mut best: Option<Switch> = None;
        for (i, cs) in counted.iter().enumerate() {
            let Some((k0, b0, _)) = cur[i] else { continue };
            for &(k, b, c) in cs {
                if b >= b0 {
                    continue;
                }
                let extra = i128::from(k) - i128::from(k0);
                if spent + extra > budget {
                    continue;
                }
                let saved = i128::from(b0 - b);
                let better =
                    best.is_none_or(|(_, _, bs, be)| saved * be.max(1) > bs * extra.max(1));
                if better {
                    best = Some((i, (k, b, c), saved, extra));
                }
            }
        }
        let Some((i, pick, _, extra)) = best else {
            break;
        };
        cur[i] = Some(pick);
        spent += extra;
    }
    cur.into_iter().map(|p| p.map(|(k, _, c)| (k, c))).collect()
}

fn kernel_index(symbol: &str, prefix: &str) -> Option<usize> {
    let rest = symbol.strip_prefix(prefix)?.strip_prefix("_k")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Exports with `opts` into a fresh private folder and builds and counts it.
fn run_round(
    target: &Target,
    capture: &Capture,
    names: &ExportNames,
    opts: &ExportOptions,
    build: &BuildOptions,
    inputs: &[(&str, Values)],
) -> Result<RunReport> {
    let bundle = export(capture, names, opts)?;
    let dir = private_fs::private_temp_dir("picograd-device-search-").map_err(|e| Error::Io {
        path: std::env::temp_dir().display().to_string(),
        detail: e.to_string(),
    })?;
    crate::export::write_bundle(&bundle, dir.path())?;
    build_and_run(target, dir.path(), inputs, build)
}

/// What the choice depends on besides the kernel: target, compiler (and its version), flags.
fn identity(target: &Target, build: &BuildOptions, export_opts: &ExportOptions) -> Result<String> {
    let description = std::fs::read(&target.file).map_err(|e| Error::Io {
        path: target.file.display().to_string(),
        detail: e.to_string(),
    })?;
    let cc = match build.compiler {
        CompilerKind::Gcc => target.get("cc").unwrap_or("cc").to_owned(),
        CompilerKind::Clang => "clang".to_owned(),
    };
    let version = std::process::Command::new(&cc)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default();
    let level = match build.opt {
        OptLevel::O2 => "-O2",
        OptLevel::Os => "-Os",
    };
    Ok(format!(
        // The selection rule too: choices made under another margin are searched again.
        "{}\n{}\n{cc}\n{version}\n{level}\n{:?}\nfma {}\nfreestanding {}\nsize margin {}",
        target.name,
        String::from_utf8_lossy(&description),
        build.extra_flags,
        export_opts.fused_mulacc,
        export_opts.freestanding_math,
        SIZE_MARGIN_PER_MILLE
    ))
}

// ---- the choice file ----

fn choice_text(key: u128, opts: &[Opt], instructions: Option<u64>) -> String {
    let opts: Vec<String> = opts.iter().map(opt_text).collect();
    let n = instructions.map_or("none".into(), |n| n.to_string());
    let body = format!(
        "{MAGIC}\nkey {key:032x}\nopts {}\ninstructions {n}\n",
        opts.join(" ")
    );
    format!("{body}check {:032x}\n", checksum(&body))
}

type Parsed = (Vec<Opt>, Option<u64>);

fn parse_choice(bytes: &[u8], key: u128) -> std::result::Result<Parsed, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let [magic, key_line, opts, count, check] = lines[..] else {
        return Err(format!("{} lines, not 5", lines.len()));
    };
    if magic != format!("{MAGIC}\n") {
        return Err(format!("no {MAGIC} header (foreign or truncated)"));
    }
    let body = [magic, key_line, opts, count].concat();
    if check != format!("check {:032x}\n", checksum(&body)) {
        return Err("checksum mismatch (contents changed since it was written)".into());
    }
    if key_line != format!("key {key:032x}\n") {
        return Err("it carries another kernel's key".into());
    }
    let count = count
        .strip_prefix("instructions ")
        .ok_or("no instructions line")?
        .trim_end();
    let count = match count {
        "none" => None,
        n => Some(n.parse().map_err(|_| format!("bad count `{n}`"))?),
    };
    let opts = opts.strip_prefix("opts ").ok_or("no opts line")?.trim_end();
    let opts = opts
        .split_whitespace()
        .map(parse_opt)
        .collect::<std::result::Result<_, _>>()?;
    Ok((opts, count))
}

/// Ok when `opts` all apply to `kernel` in order.
fn fits(kernel: &Kernel, opts: &[Opt]) -> std::result::Result<(), String> {
    let mut k = kernel.clone();
    opts.iter().try_for_each(|o| {
        k.apply_opt(*o)
            .map_err(|e| format!("its opts do not fit the kernel: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_file_reads_back_and_every_flip_is_caught() {
        let opts = vec![
            Opt::Upcast { axis: 0, amount: 4 },
            Opt::Unroll { axis: 1, amount: 2 },
        ];
        let text = choice_text(7, &opts, Some(1234));
        assert_eq!(
            parse_choice(text.as_bytes(), 7),
            Ok((opts.clone(), Some(1234)))
        );
        assert!(parse_choice(text.as_bytes(), 8).is_err());
        for i in 0..text.len() {
            let mut b = text.clone().into_bytes();
            b[i] ^= 0x01;
            assert!(parse_choice(&b, 7).is_err(), "flip at {i} accepted");
        }
        assert!(parse_choice(&text.as_bytes()[..text.len() - 1], 7).is_err());
    }

    #[test]
    fn kernel_symbols_give_their_place() {
        assert_eq!(kernel_index("model_k12_r_4_4", "model"), Some(12));
        assert_eq!(kernel_index("model_run", "model"), None);
        assert_eq!(kernel_index("other_k1_x", "model"), None);
    }

    #[test]
    fn smaller_code_is_taken_only_within_the_margin() {
        // Fastest sum 100,000 + 1,000 = 101,000: the margin allows 2,525 more instructions.
        let a = vec![
            (100_000, 6_000, 0),
            (102_000, 3_000, 1),
            (103_000, 1_000, 2),
        ];
        let b = vec![(1_000, 700, 0), (1_300, 100, 1), (900, 900, 2)];
        let picks = smallest_within_margin(&[a.clone(), b.clone(), Vec::new()]);
        // b's switch from its fastest (900 B) to 100 B for 400 instructions goes first (2 B per
        // instruction), then a's 3,000 B for 2,000; a's 1,000 B would overrun the margin.
        assert_eq!(picks, vec![Some((102_000, 1)), Some((1_300, 1)), None]);
        let fastest = 100_000 + 900;
        let total = 102_000 + 1_300;
        assert!(total - fastest <= fastest * SIZE_MARGIN_PER_MILLE / 1000);
        // Alone and with no room to trade, each kernel keeps its fastest candidate.
        let tight = vec![(10, 50, 0), (11, 10, 1)];
        assert_eq!(smallest_within_margin(&[tight]), vec![Some((10, 0))]);
    }
}
