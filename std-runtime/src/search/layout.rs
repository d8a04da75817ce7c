//! The measured search's layout stage: given a reduce kernel's layout options
//! ([`LayoutOption`], built by the scheduler, the rules' choice first), compile each (its copies
//! and its kernel, with the hand-coded opts, all options side by side), run each on scratch
//! buffers, and keep the fastest per-call time (a copy of constants runs once per capture and is
//! not counted). The kernel search then searches the opts of the chosen layout's kernels only,
//! when realizing lowers them: a joint search (every option's opts searched) cost the per-kernel
//! bound once per option — mobilenet_v2 at `PICOGRAD_SEARCH=300` took 81 s against 33 s
//! staged. The choice is remembered in memory and in a file beside the kernel choices.
//!
//! Invariants (those of the kernel search, `search.rs`): the user's buffers are never touched;
//! an option whose output differs in any bit from the rules' option is rejected; another option
//! replaces the rules' only when it is faster by [`MIN_GAIN`] once both are timed again
//! alternately; a choice file is used only after its magic, key, checksum and option count
//! verify, under the cache's trust rules — anything else is reported, set aside or ignored,
//! measured again and rewritten.
//!
//! ## Layout file
//!
//! `<dir>/<key as 32 lowercase hex digits>.layout`, five text lines:
//!
//! ```text
//! PGLAYOUT1
//! key <the key, 32 hex digits>
//! option <chosen index> of <how many options> <the chosen option's label>
//! micros <the chosen option's best per-call time in microseconds>
//! check <FNV-1a-128 of the four lines above, newlines included, 32 hex digits>
//! ```
//!
//! The key hashes every option's kernels (ASTs, buffers, which run every call), the optimizer
//! settings and the device's identity.

use std::sync::Arc;
use std::time::Instant;

use picograd_core::codegen::kernel::Kernel;
use picograd_core::codegen::lower::lower_ast_with;
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::uops::BufParam;
use picograd_core::context::{debug, log};
use picograd_core::device::{BufId, Device, Program};
use picograd_core::schedule::{LayoutOption, LayoutStep};
use picograd_core::{Error, Result};

use super::{
    bump, choice_line, file_text, lock, Scratch, Search, CONFIRM_ROUNDS, MIN_GAIN, MIN_SAMPLE_NS,
    REPS,
};
use crate::cache::Fnv128;
use crate::private_fs;

/// The first line of every layout file.
const MAGIC: &str = "PGLAYOUT1";

/// An option as [`LayoutOption::steps`] gives it: its buffers and kernels.
type Described = (Vec<BufParam>, Vec<LayoutStep>);

/// One compiled step: its program, buffer indices, variable values, and whether it runs on every
/// call.
type Step = (Arc<dyn Program>, Vec<usize>, Vec<i64>, bool);

/// What one layout measurement found.
struct Found {
    index: usize,
    best_ns: u64,
    rules_ns: u64,
    timed: usize,
}

impl Search {
    /// The layout to give a reduce kernel among `options` (option 0 is the scheduler's rules'
    /// choice) on `dev` (whose identity for the key is `ident`): from memory, else from an
    /// intact layout file, else by measuring (and writing the file). `None` (the rules' choice)
    /// when the device has no optimizer settings, the kernel is too small to search, or the
    /// measurement failed.
    pub fn choose_layout(
        &self,
        dev: &dyn Device,
        ident: &str,
        options: &[LayoutOption],
    ) -> Option<usize> {
        let cfg = dev.opt_config()?;
        let described: Vec<Described> = options.iter().map(LayoutOption::steps).collect();
        let key = layout_key(ident, &cfg, &described);
        if let Some(c) = lock(&self.layouts).get(&key).copied() {
            bump(&self.counters.memory_hits, 1);
            return c;
        }
        let choice = self.layout_choice(dev, key, options, &described, &cfg);
        lock(&self.layouts).insert(key, choice);
        choice
    }

    fn layout_choice(
        &self,
        dev: &dyn Device,
        key: u128,
        options: &[LayoutOption],
        described: &[Described],
        cfg: &OptConfig,
    ) -> Option<usize> {
        let (params, steps) = described.first()?;
        let kernel = steps.last()?;
        if self.too_small(&kernel.ast, &step_params(params, kernel), cfg) {
            return None;
        }
        if let Some(i) = self.read_layout(key, options) {
            return Some(i);
        }
        let start = Instant::now();
        let found = match self.measure_layouts(dev, described, cfg) {
            Ok(f) => f,
            Err(e) => {
                log(1, &format!("search layout: failed ({e})"));
                return None;
            }
        };
        bump(&self.counters.layout_searches, 1);
        if debug() >= 1 {
            log(
                1,
                &format!(
                    "search layout of {}: chose {} {:.1} us (rules' {} {:.1} us), {} of {} options timed in {} ms",
                    Kernel::new(&kernel.ast).map_or_else(|_| String::from("a kernel"), |k| k.name()),
                    options[found.index].label,
                    found.best_ns as f64 / 1e3,
                    options[0].label,
                    found.rules_ns as f64 / 1e3,
                    found.timed,
                    options.len(),
                    start.elapsed().as_millis()
                ),
            );
        }
        if let Some(path) = self.file(key, "layout") {
            let text = layout_text(key, &found, options);
            if let Err(e) = private_fs::write_atomic(&path, text.as_bytes(), 0o600) {
                log(1, &format!("search: cannot save the layout choice: {e}"));
            }
        }
        Some(found.index)
    }

    /// The choice in `key`'s layout file when it is intact and names one of `options`; a
    /// corrupt, foreign or planted file is reported and counted.
    fn read_layout(&self, key: u128, options: &[LayoutOption]) -> Option<usize> {
        let path = self.file(key, "layout")?;
        let i = self.read_trusted(&path, "layout choice", |bytes| {
            parse_layout(bytes, key, options.len())
        })?;
        bump(&self.counters.layout_disk_hits, 1);
        log(2, &format!("search layout: cached {}", options[i].label));
        Some(i)
    }

    /// Compiles every option (each step with the hand-coded opts), then times each on scratch
    /// buffers, all under the search's lock.
    fn measure_layouts(
        &self,
        dev: &dyn Device,
        described: &[Described],
        cfg: &OptConfig,
    ) -> Result<Found> {
        // Held from the compiles on, so no other search times its kernels beside them.
        let _busy = lock(&self.busy);
        // Compiled side by side: the compiler runs as separate processes.
        let results: Vec<Result<Vec<Step>>> = std::thread::scope(|s| {
            let handles: Vec<_> = described
                .iter()
                .map(|d| s.spawn(move || build_option(dev, d, cfg)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Device("a layout option's compile panicked".into()))
                    })
                })
                .collect()
        });
        let mut built: Vec<Option<Vec<Step>>> = Vec::new();
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(steps) => built.push(Some(steps)),
                Err(e) if i > 0 => {
                    log(2, &format!("search layout: option {i} failed: {e}"));
                    built.push(None);
                }
                Err(e) => return Err(e),
            }
        }
        let deadline = Instant::now() + self.budget;
        let mut reference: Option<Vec<u8>> = None;
        let mut timed: Vec<(usize, u64, Scratch<'_>)> = Vec::new();
        for (i, (steps, (params, _))) in built.iter().zip(described).enumerate() {
            let Some(steps) = steps else { continue };
            if i > 0 && Instant::now() >= deadline {
                break;
            }
            let scratch = Scratch::new(dev.allocator(), params)?;
            scratch.reset()?;
            // The verifying run makes every copy, the once-per-capture ones included.
            run_steps(steps, &scratch.ids, false)?;
            let out = scratch.output()?;
            match &reference {
                None => reference = Some(out),
                Some(r) if *r != out => {
                    log(
                        1,
                        &format!("search layout: option {i} changed the results; rejected"),
                    );
                    continue;
                }
                Some(_) => {}
            }
            let ns = best_of(steps, &scratch.ids, REPS)?;
            timed.push((i, ns, scratch));
        }
        let rules = timed
            .iter()
            .position(|t| t.0 == 0)
            .ok_or_else(|| Error::Device("search layout: the rules' option did not run".into()))?;
        let best = (0..timed.len())
            .min_by_key(|&j| timed[j].1)
            .unwrap_or(rules);
        let (index, best_ns, rules_ns) = if best == rules {
            (0, timed[rules].1, timed[rules].1)
        } else {
            // Both again, alternately, so one lucky sample under load cannot decide.
            let (mut r, mut b) = (u64::MAX, u64::MAX);
            let (rs, bs) = (
                built[0].as_deref().unwrap_or_default(),
                built[timed[best].0].as_deref().unwrap_or_default(),
            );
            let start = Instant::now();
            for _ in 0..CONFIRM_ROUNDS {
                r = r.min(best_of(rs, &timed[rules].2.ids, 1)?);
                b = b.min(best_of(bs, &timed[best].2.ids, 1)?);
                if start.elapsed() >= self.budget / 4 {
                    break;
                }
            }
            if (b as f64) * (1.0 + MIN_GAIN) < r as f64 {
                (timed[best].0, b, r)
            } else {
                (0, r, r)
            }
        };
        Ok(Found {
            index,
            best_ns,
            rules_ns,
            timed: timed.len(),
        })
    }
}

/// Lowers and compiles one option's steps with the hand-coded opts for `cfg`.
fn build_option(
    dev: &dyn Device,
    (params, steps): &Described,
    cfg: &OptConfig,
) -> Result<Vec<Step>> {
    steps
        .iter()
        .map(|st| {
            let bufs = step_params(params, st);
            let lk = lower_ast_with(&st.ast, bufs, Some(cfg), None, dev.fused_mulacc())?;
            let vars = lk.vars.iter().map(|(_, _, hi)| *hi).collect();
            Ok((dev.compile(&lk)?, st.bufs.clone(), vars, st.every_call))
        })
        .collect()
}

/// A step's buffer parameters, output first.
fn step_params(params: &[BufParam], step: &LayoutStep) -> Vec<BufParam> {
    step.bufs
        .iter()
        .enumerate()
        .map(|(j, &b)| BufParam {
            writable: j == 0,
            ..params[b].clone()
        })
        .collect()
}

/// Runs the steps once on the pool `ids` (only those run on every call when `per_call`).
fn run_steps(steps: &[Step], ids: &[BufId], per_call: bool) -> Result<()> {
    let mut bufs = Vec::new();
    for (prog, idx, vars, every_call) in steps {
        if per_call && !every_call {
            continue;
        }
        bufs.clear();
        bufs.extend(idx.iter().map(|&i| ids[i]));
        prog.run(&bufs, vars)?;
    }
    Ok(())
}

/// The best of `reps` samples of the per-call steps, in nanoseconds per call; a sample of a
/// short option repeats it for at least [`MIN_SAMPLE_NS`].
fn best_of(steps: &[Step], ids: &[BufId], reps: usize) -> Result<u64> {
    let t = Instant::now();
    run_steps(steps, ids, true)?;
    let first = (t.elapsed().as_nanos() as u64).max(1);
    let inner = (MIN_SAMPLE_NS / first).clamp(1, 1000);
    let mut best = u64::MAX;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        for _ in 0..inner {
            run_steps(steps, ids, true)?;
        }
        best = best.min((t.elapsed().as_nanos() as u64 / inner).max(1));
    }
    Ok(best)
}

/// The stable key of a kernel's layout choice.
fn layout_key(ident: &str, cfg: &OptConfig, described: &[Described]) -> u128 {
    let mut h = Fnv128::new();
    h.field(b"picograd layout choice v1");
    h.field(format!("{cfg:?}").as_bytes());
    h.field(ident.as_bytes());
    for (params, steps) in described {
        h.field(format!("option {} buffers", params.len()).as_bytes());
        for b in params {
            h.field(format!("{} {} {}", b.dtype, b.size, b.writable).as_bytes());
        }
        for s in steps {
            h.field(format!("{:?} {}", s.bufs, s.every_call).as_bytes());
            h.field(s.ast.to_string().as_bytes());
        }
    }
    h.finish()
}

fn layout_text(key: u128, f: &Found, options: &[LayoutOption]) -> String {
    let choice = format!(
        "option {} of {} {}",
        f.index,
        options.len(),
        options[f.index].label
    );
    file_text(MAGIC, key, &choice, f.best_ns)
}

/// The chosen option of a layout file's bytes, checked against `key` and the option count `n`;
/// the reason when it is not intact.
fn parse_layout(bytes: &[u8], key: u128, n: usize) -> std::result::Result<usize, String> {
    let line = choice_line(bytes, MAGIC, key)?;
    let mut words = line
        .strip_prefix("option ")
        .ok_or("no option line")?
        .split(' ');
    let index = words.next().and_then(|w| w.parse::<usize>().ok());
    let of = words.next();
    let count = words.next().and_then(|w| w.parse::<usize>().ok());
    match (index, of, count) {
        (Some(i), Some("of"), Some(c)) if c == n && i < n => Ok(i),
        (Some(_), Some("of"), Some(c)) => {
            Err(format!("it chose among {c} options, this kernel has {n}"))
        }
        _ => Err("its option line does not parse".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(index: usize, count: usize) -> (u128, String) {
        let key = 0xfeed_0000_0000_0000_0000_0000_0000_beef;
        let choice = format!("option {index} of {count} buf2 in blocks of 8 along axis 1");
        (key, file_text(MAGIC, key, &choice, 12_500))
    }

    #[test]
    fn a_layout_file_reads_back() {
        let (key, t) = text(2, 4);
        assert_eq!(parse_layout(t.as_bytes(), key, 4), Ok(2));
    }

    #[test]
    fn every_byte_flip_truncation_and_foreign_count_is_caught() {
        let (key, t) = text(1, 3);
        let bytes = t.as_bytes();
        for i in 0..bytes.len() {
            let mut bad = bytes.to_vec();
            bad[i] ^= 0x01;
            assert!(parse_layout(&bad, key, 3).is_err(), "flip at {i}");
        }
        for n in 0..bytes.len() {
            assert!(parse_layout(&bytes[..n], key, 3).is_err(), "cut to {n}");
        }
        let e = parse_layout(bytes, key, 5).unwrap_err();
        assert!(e.contains("3 options"), "{e}");
        let e = parse_layout(bytes, key ^ 1, 3).unwrap_err();
        assert!(e.contains("another kernel's key"), "{e}");
    }
}
