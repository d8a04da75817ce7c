//! The host C compiler: finding it, compiling kernel source into a shared object through the
//! on-disk cache, and loading the result.
//!
//! Invariant: within one [`Compiler`], a given source is compiled and loaded at most once (later
//! requests share the same [`CompiledLib`]), and a library is only loaded after the cache has
//! verified its file (see [`crate::cache`]). Compiler flags keep IEEE-754 semantics: no fast-math,
//! no floating-point contraction.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock, Weak};

use libloading::Library;
use picograd_core::{Error, Result};

use crate::cache::{self, Key, Lookup};
use crate::private_fs;

/// The default flags: optimise for this machine, position-independent shared object, IEEE float
/// semantics (no contraction into FMA, no fast-math), libm linked.
pub const DEFAULT_FLAGS: &[&str] = &[
    "-O2",
    "-march=native",
    "-fPIC",
    "-shared",
    "-ffp-contract=off",
    "-fno-math-errno",
    "-lm",
];

/// Added to [`DEFAULT_FLAGS`] when the compiler accepts them (clang: LLVM options; the probe in
/// [`Compiler::new`] tries them once): no partial or runtime unrolling by the optimizer. Codegen
/// already unrolls what the target's `OptConfig` says pays, and LLVM unrolling those long
/// bodies again took a third of a cold start's compile time (resnet18's 37 kernels, min
/// of 5 runs: 4.3 → 2.9 s of CPU, 2026-11-27; BENCH.md, cold start). Full unrolling of short
/// constant loops and the vectorizer's interleaving stay (`-fno-unroll-loops` would drop both).
pub const LLVM_FLAGS: &[&str] = &[
    "-mllvm",
    "-unroll-allow-partial=false",
    "-mllvm",
    "-unroll-runtime=false",
];

/// How hard the C compiler optimizes a translation unit. The kernel optimizer decides which
/// kernels need the compiler's own loop and vector passes; the device picks the effort per
/// kernel from what codegen did (see `clang.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effort {
    /// [`DEFAULT_FLAGS`] (`-O2`): scalar code the compiler vectorizes and optimizes itself
    /// (an LSTM's gate kernels ran 44% more instructions at `-O1`, 2026-11-27).
    Full,
    /// `-O1` (with the loop vectorizer, as `-O2` has it): for kernels whose hot loops codegen
    /// already vectorized and unrolled, where `-O2`'s further passes (SLP vectorizer, GVN, more
    /// inlining) find nothing to add (same or fewer run-time instructions) but cost 27% of
    /// clang's instructions on resnet18's conv kernels (2026-11-27, BENCH.md).
    Light,
}

/// What replaces `-O2` in the flags of an [`Effort::Light`] compile.
const LIGHT_OPT: &[&str] = &["-O1", "-fvectorize"];

/// How many lines of the source a compile error quotes.
const SOURCE_LINES_IN_ERRORS: usize = 20;

/// The entry point every kernel library exports as `NAME_entry`: `bufs` holds one pointer per
/// buffer argument, `vars` one value per symbolic variable, in the kernel's calling-convention order.
pub type EntryFn = unsafe extern "C" fn(bufs: *const *mut core::ffi::c_void, vars: *const i32);

/// Counters of a [`Compiler`]'s work, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Times the C compiler was run.
    pub compiles: u64,
    /// Libraries loaded from an intact disk-cache entry, without running the compiler.
    pub disk_hits: u64,
    /// Requests answered by a library this `Compiler` had already loaded.
    pub memory_hits: u64,
    /// Disk-cache entries found corrupt (truncated, altered, foreign) and rebuilt.
    pub corrupt_rebuilt: u64,
}

#[derive(Default)]
struct Counters {
    compiles: AtomicU64,
    disk_hits: AtomicU64,
    memory_hits: AtomicU64,
    corrupt_rebuilt: AtomicU64,
}

/// One slot per key; its lock is held while that key is being compiled or loaded, so concurrent
/// requests for the same source wait for the first instead of compiling again. The slot holds
/// the library weakly: it is unloaded when no program uses it any more (a later request loads
/// it again, from the disk cache).
type Slot = Arc<Mutex<Weak<CompiledLib>>>;

/// Libraries loaded and not yet unloaded, in this process (for tests and diagnostics).
static LIVE_LIBRARIES: AtomicU64 = AtomicU64::new(0);

/// A C compiler plus the kernel cache it fills. `Send + Sync`: share one per process (see
/// [`Compiler::shared`]).
pub struct Compiler {
    path: PathBuf,
    version: String,
    target: String,
    flags: Vec<String>,
    /// `flags` with `-O2` replaced by [`LIGHT_OPT`] ([`Effort::Light`]).
    light_flags: Vec<String>,
    cache_dir: Option<PathBuf>,
    /// Whether `cache_dir` may be used (checked once, on first use), or why not.
    cache_verdict: OnceLock<std::result::Result<(), String>>,
    refusal_said: Once,
    notices: Mutex<Vec<String>>,
    /// Size of `loaded` above which (times two) its dead slots are dropped.
    prune_at: std::sync::atomic::AtomicUsize,
    /// The cache folder's bound in bytes (see [`cache::trim`]).
    cache_limit: u64,
    /// What this compiler believes the folder holds (scanned on first use, then counted up as
    /// it writes): crossing `cache_limit` triggers a trim, which rescans.
    cache_bytes: Mutex<Option<u64>>,
    loaded: Mutex<HashMap<Key, Slot>>,
    counters: Counters,
}

/// A loaded kernel library. Keeps the library mapped for as long as it lives.
pub struct CompiledLib {
    lib: Library,
    /// The handle the library was checked through and loaded from; declared after `lib` so it
    /// closes after the library is unloaded (see [`cache::load`]).
    _file: Option<fs::File>,
    path: PathBuf,
    from_cache: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Compiler {
    /// Finds the C compiler: `$PICOGRAD_CC` if set (no fallback when it cannot run), else `clang`
    /// on `PATH`, else `cc` on `PATH` (saying so on stderr once per process). The cache directory
    /// is [`cache::default_dir`]. Errors with [`Error::Compile`] when no compiler can be run.
    pub fn detect() -> Result<Self> {
        if let Some(cc) = std::env::var_os("PICOGRAD_CC").filter(|v| !v.is_empty()) {
            return Self::new(&cc).map_err(|e| match e {
                Error::Compile(m) => Error::Compile(format!("{m} (set by PICOGRAD_CC)")),
                other => other,
            });
        }
        if let Some(clang) = find_in_path("clang") {
            return Self::new(clang);
        }
        if let Some(cc) = find_in_path("cc") {
            static SAID: Once = Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "picograd: clang not found on PATH, compiling kernels with {}",
                    cc.display()
                )
            });
            return Self::new(cc);
        }
        Err(Error::Compile(
            "no C compiler found: neither `clang` nor `cc` is on PATH; install clang or set \
             PICOGRAD_CC to a C compiler"
                .into(),
        ))
    }

    /// Uses the compiler at `cc` (a path, or a bare name searched on `PATH`) with the default flags
    /// and cache directory. Runs it once to read its version and target; errors with
    /// [`Error::Compile`] when it cannot be run.
    pub fn new(cc: impl AsRef<Path>) -> Result<Self> {
        let cc = cc.as_ref();
        let path = if cc.components().count() == 1 {
            find_in_path(cc.as_os_str()).unwrap_or_else(|| cc.to_path_buf())
        } else {
            cc.to_path_buf()
        };
        let base: Vec<String> = DEFAULT_FLAGS.iter().map(|f| f.to_string()).collect();
        let llvm: Vec<String> = base
            .iter()
            .cloned()
            .chain(LLVM_FLAGS.iter().map(|f| f.to_string()))
            .collect();
        // One probe, not three (`--version`, `-dumpmachine`, macros): each run of the compiler
        // costs tens of milliseconds, and cold start pays for every one. It also tells whether
        // the LLVM flags are understood (clang parses them even to preprocess); a compiler that
        // rejects them is probed again without.
        let (flags, macros) = match predefined_macros(&path, &llvm) {
            Ok(m) => (llvm, m),
            Err(_) => {
                let m = predefined_macros(&path, &base)?;
                (base, m)
            }
        };
        let version = match macro_value(&macros, "__VERSION__") {
            Some(v) => v.to_string(),
            None => first_line(&probe(&path, &["--version"], "")?),
        };
        let target = target_fingerprint(&macros);
        let light_flags = flags
            .iter()
            .flat_map(|f| match f.as_str() {
                "-O2" => LIGHT_OPT.iter().map(|o| o.to_string()).collect(),
                _ => vec![f.clone()],
            })
            .collect();
        Ok(Compiler {
            path,
            version,
            target,
            flags,
            light_flags,
            cache_dir: cache::default_dir(),
            cache_verdict: OnceLock::new(),
            refusal_said: Once::new(),
            notices: Mutex::new(Vec::new()),
            prune_at: std::sync::atomic::AtomicUsize::new(64),
            cache_limit: cache::default_limit(),
            cache_bytes: Mutex::new(None),
            loaded: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        })
    }

    /// The process-wide compiler, detected once with [`Compiler::detect`]; a detection error is
    /// remembered and returned to every caller.
    pub fn shared() -> Result<&'static Compiler> {
        static SHARED: OnceLock<Result<Compiler>> = OnceLock::new();
        SHARED
            .get_or_init(Compiler::detect)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The same compiler, keeping its cache entries in `dir` (created 0700 on first use; an
    /// existing folder must be private, see [`crate::private_fs::check_private_dir`]) instead.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self.cache_verdict = OnceLock::new();
        self.cache_bytes = Mutex::new(None);
        self
    }

    /// The compiler executable.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first line of the compiler's `--version` output.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The flags passed on every [`Effort::Full`] compile.
    pub fn flags(&self) -> &[String] {
        &self.flags
    }

    /// The flags of a compile at `effort`.
    pub fn flags_for(&self, effort: Effort) -> &[String] {
        match effort {
            Effort::Full => &self.flags,
            Effort::Light => &self.light_flags,
        }
    }

    /// What the compiler targets: a hash of the macros it predefines under the flags (they name
    /// the architecture, OS and ABI, and the CPU features `-march=native` turns on).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The directory holding this compiler's cache entries; `None` when no default could be found
    /// and none was given (kernels are then compiled without a disk cache).
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        Stats {
            compiles: c.compiles.load(Ordering::Relaxed),
            disk_hits: c.disk_hits.load(Ordering::Relaxed),
            memory_hits: c.memory_hits.load(Ordering::Relaxed),
            corrupt_rebuilt: c.corrupt_rebuilt.load(Ordering::Relaxed),
        }
    }

    /// Compiles `src` into a shared object and loads it: from this compiler's loaded libraries,
    /// else from an intact disk-cache entry, else by running the compiler and publishing a new
    /// entry. A corrupt entry, or anything at an entry's path that is not the user's own private
    /// regular file, is reported on stderr, set aside and rebuilt, never loaded. A cache folder
    /// that is not private is not used at all (see [`Compiler::cache_refusal`]). Compiler failures
    /// are [`Error::Compile`] with the compiler's stderr and the first lines of `src`.
    pub fn compile(&self, src: &str) -> Result<Arc<CompiledLib>> {
        self.compile_with(src, Effort::Full)
    }

    /// [`Compiler::compile`] at `effort`: the flags are part of the cache key, so the same
    /// source at two efforts is two entries.
    pub fn compile_with(&self, src: &str, effort: Effort) -> Result<Arc<CompiledLib>> {
        let flags = self.flags_for(effort);
        let key = Key::new(src, &self.path, &self.version, flags, &self.target);
        let slot = {
            let mut loaded = lock(&self.loaded);
            // Forget the slots of unloaded libraries now and then, so the map stays the size of
            // what is loaded (a slot being filled is in use elsewhere: its Arc count is above 1).
            if loaded.len() >= 2 * self.prune_at.load(Ordering::Relaxed) {
                loaded.retain(|_, s| Arc::strong_count(s) > 1 || lock(s).strong_count() > 0);
                self.prune_at.store(loaded.len().max(64), Ordering::Relaxed);
            }
            Arc::clone(loaded.entry(key).or_default())
        };
        let mut slot = lock(&slot);
        if let Some(lib) = slot.upgrade() {
            self.counters.memory_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(lib);
        }
        let lib = Arc::new(self.load_or_build(src, key, effort)?);
        LIVE_LIBRARIES.fetch_add(1, Ordering::Relaxed);
        *slot = Arc::downgrade(&lib);
        Ok(lib)
    }

    /// How many kernel libraries are loaded in this process right now (every compiler's): a
    /// library is unloaded when the last program using it is dropped.
    pub fn live_libraries() -> u64 {
        LIVE_LIBRARIES.load(Ordering::Relaxed)
    }

    fn load_or_build(&self, src: &str, key: Key, effort: Effort) -> Result<CompiledLib> {
        let Some(dir) = self.usable_cache_dir() else {
            return self.build_uncached(src, key, effort);
        };
        let path = dir.join(key.file_name());
        match cache::lookup(&path, key) {
            Lookup::Loaded(lib, file) => {
                self.counters.disk_hits.fetch_add(1, Ordering::Relaxed);
                cache::touch(&file);
                return Ok(CompiledLib {
                    lib,
                    _file: Some(file),
                    path,
                    from_cache: true,
                });
            }
            Lookup::Missing => {}
            Lookup::Refused(why) => {
                let aside = private_fs::set_aside(&path);
                self.say(format!(
                    "kernel cache entry {} is {why}; not loaded: {}, rebuilding",
                    path.display(),
                    match &aside {
                        Some(p) => format!("set aside as {}", p.display()),
                        None => "it could not be moved".into(),
                    }
                ));
                self.counters
                    .corrupt_rebuilt
                    .fetch_add(1, Ordering::Relaxed);
                if aside.is_none() {
                    return self.build_uncached(src, key, effort);
                }
            }
        }
        let tmp = cache::temp_path(dir, key);
        if let Err(e) = self.run(src, &tmp, effort) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.counters.compiles.fetch_add(1, Ordering::Relaxed);
        cache::publish(&tmp, &path, key)?;
        self.account(dir, &path);
        // Another process may have renamed its own (equally complete) entry over ours; either way
        // what is at `path` now is checked and verified again before it is loaded.
        match cache::lookup(&path, key) {
            Lookup::Loaded(lib, file) => Ok(CompiledLib {
                lib,
                _file: Some(file),
                path,
                from_cache: false,
            }),
            Lookup::Missing => Err(Error::Device(format!(
                "kernel cache entry {} vanished right after it was written",
                path.display()
            ))),
            Lookup::Refused(why) => Err(Error::Device(format!(
                "kernel cache entry {} is {why} right after it was written",
                path.display()
            ))),
        }
    }

    /// The cache folder when it exists (or can be made) private — see [`crate::private_fs`] —
    /// checked once per compiler; otherwise `None`, after saying once on stderr why and how to
    /// fix it.
    fn usable_cache_dir(&self) -> Option<&Path> {
        let verdict = self.cache_verdict.get_or_init(|| {
            let Some(dir) = self.cache_dir.as_deref() else {
                return Err("no cache folder: set PICOGRAD_CACHE, XDG_CACHE_HOME or HOME".into());
            };
            private_fs::ensure_private_dir(dir)
                .map_err(|why| format!("not using the kernel cache at {}: {why}", dir.display()))
        });
        match verdict {
            Ok(()) => self.cache_dir.as_deref(),
            Err(why) => {
                self.refusal_said.call_once(|| {
                    self.say(format!("{why}; compiling kernels without a disk cache"))
                });
                None
            }
        }
    }

    /// Counts the entry just written at `path` against the folder's bound, trimming the folder
    /// when it is crossed.
    fn account(&self, dir: &Path, path: &Path) {
        let added = fs::symlink_metadata(path).map_or(0, |m| m.len());
        let mut bytes = lock(&self.cache_bytes);
        let now = match *bytes {
            Some(b) => b + added,
            None => cache::folder_bytes(dir),
        };
        *bytes = Some(if now > self.cache_limit {
            cache::trim(dir, self.cache_limit, path)
        } else {
            now
        });
    }

    /// The same compiler, keeping its cache folder within `bytes` (least recently used entries
    /// are removed past it; default [`cache::default_limit`]).
    pub fn with_cache_limit(mut self, bytes: u64) -> Self {
        self.cache_limit = bytes;
        self
    }

    /// Says `msg` on stderr (prefixed `picograd: `) and keeps it for [`Compiler::notices`].
    fn say(&self, msg: String) {
        eprintln!("picograd: {msg}");
        lock(&self.notices).push(msg);
    }

    /// What this compiler has said on stderr about its cache (entries set aside, a folder
    /// refused), oldest first.
    pub fn notices(&self) -> Vec<String> {
        lock(&self.notices).clone()
    }

    /// Why this compiler does not use its cache folder (it then compiles every kernel afresh in a
    /// private temporary folder); `None` when the folder is in use or has not been needed yet.
    pub fn cache_refusal(&self) -> Option<&str> {
        self.cache_verdict.get()?.as_ref().err().map(String::as_str)
    }

    /// Compiles `src` in a fresh private folder and loads it from there; nothing is cached.
    fn build_uncached(&self, src: &str, key: Key, effort: Effort) -> Result<CompiledLib> {
        let io = |p: &Path, e: std::io::Error| Error::Io {
            path: p.display().to_string(),
            detail: e.to_string(),
        };
        let dir = private_fs::private_temp_dir("picograd-kernel-")
            .map_err(|e| io(&std::env::temp_dir(), e))?;
        let path = dir.path().join(key.file_name());
        self.run(src, &path, effort)?;
        self.counters.compiles.fetch_add(1, Ordering::Relaxed);
        private_fs::make_owner_only(&path).map_err(|e| io(&path, e))?;
        let file = match private_fs::open_private_file(&path, cache::MAX_ENTRY_BYTES) {
            private_fs::Opened::Trusted(file, _) => file,
            private_fs::Opened::Missing => {
                return Err(io(&path, std::io::ErrorKind::NotFound.into()))
            }
            private_fs::Opened::Odd(why) => {
                return Err(Error::Device(format!(
                    "compiled kernel library {} is {why}",
                    path.display()
                )))
            }
        };
        let lib = cache::load(&file, &path)?;
        // The folder goes now; the library stays mapped and its handle open.
        Ok(CompiledLib {
            lib,
            _file: Some(file),
            path,
            from_cache: false,
        })
    }

    /// Runs the compiler on `src` (fed on stdin) at `effort`, writing the shared object to `out`.
    fn run(&self, src: &str, out: &Path, effort: Effort) -> Result<()> {
        let mut args: Vec<OsString> = vec!["-x".into(), "c".into(), "-".into()];
        args.extend(self.flags_for(effort).iter().map(OsString::from));
        args.push("-o".into());
        args.push(out.into());
        let output = run_with_stdin(&self.path, &args, src)?;
        if output.status.success() {
            return Ok(());
        }
        let head: Vec<&str> = src.lines().take(SOURCE_LINES_IN_ERRORS).collect();
        Err(Error::Compile(format!(
            "{} failed ({}):\n{}\n--- first {} lines of the source ---\n{}",
            self.path.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end(),
            head.len(),
            head.join("\n")
        )))
    }
}

impl fmt::Debug for Compiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiler")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("target", &self.target)
            .field("flags", &self.flags)
            .field("cache_dir", &self.cache_dir)
            .field("stats", &self.stats())
            .finish()
    }
}

impl CompiledLib {
    /// The entry wrapper of kernel `name`, i.e. the exported symbol `{name}_entry`. The pointer is
    /// valid while this library lives; calling it is `unsafe` (its buffers and variables must match
    /// the kernel).
    pub fn entry(&self, name: &str) -> Result<EntryFn> {
        let symbol = format!("{name}_entry");
        // SAFETY: the symbol is declared by our generated C with exactly the `EntryFn` signature.
        let f = unsafe { self.lib.get::<EntryFn>(symbol.as_bytes()) };
        f.map(|f| *f).map_err(|e| {
            Error::Device(format!(
                "kernel library {} has no `{symbol}`: {e}",
                self.path.display()
            ))
        })
    }

    /// Whether the library was loaded from an existing disk-cache entry (the compiler was not run).
    pub fn loaded_from_cache(&self) -> bool {
        self.from_cache
    }

    /// The cache entry the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CompiledLib {
    fn drop(&mut self) {
        LIVE_LIBRARIES.fetch_sub(1, Ordering::Relaxed);
    }
}

impl fmt::Debug for CompiledLib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledLib")
            .field("path", &self.path)
            .field("from_cache", &self.from_cache)
            .finish()
    }
}

/// The first executable file named `name` in a `PATH` directory.
fn find_in_path(name: impl AsRef<std::ffi::OsStr>) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name.as_ref()))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

/// Runs `cc args` with `stdin` as its input and collects its output. Writes stdin on a thread so a
/// compiler that talks before it has read everything cannot deadlock us.
fn run_with_stdin(cc: &Path, args: &[OsString], stdin: &str) -> Result<Output> {
    let cannot = |e: std::io::Error| {
        Error::Compile(format!("cannot run the C compiler {}: {e}", cc.display()))
    };
    let mut child = Command::new(cc)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(cannot)?;
    let mut pipe = child.stdin.take();
    std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(p) = pipe.as_mut() {
                // A write error means the compiler stopped reading; its exit status says why.
                let _ = p.write_all(stdin.as_bytes());
            }
        });
        child.wait_with_output().map_err(cannot)
    })
}

/// Runs the compiler for information and returns its stdout; errors unless it exits successfully.
fn probe(cc: &Path, args: &[&str], stdin: &str) -> Result<String> {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let out = run_with_stdin(cc, &args, stdin)?;
    if !out.status.success() {
        return Err(Error::Compile(format!(
            "the C compiler {} failed on `{}` ({}): {}",
            cc.display(),
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_string()
}

/// The macros the compiler predefines under the code-generation flags, as `-E -dM` prints them.
fn predefined_macros(cc: &Path, flags: &[String]) -> Result<String> {
    let mut args: Vec<&str> = vec!["-x", "c", "-", "-E", "-dM"];
    args.extend(
        flags
            .iter()
            .map(String::as_str)
            .filter(|f| *f != "-shared" && !f.starts_with("-l")),
    );
    probe(cc, &args, "")
}

/// The string value of `#define name "value"` in `-E -dM` output.
fn macro_value<'a>(macros: &'a str, name: &str) -> Option<&'a str> {
    macros.lines().find_map(|l| {
        let rest = l.strip_prefix("#define ")?.strip_prefix(name)?;
        let v = rest.strip_prefix(' ')?.trim();
        Some(v.trim_matches('"')).filter(|v| !v.is_empty())
    })
}

/// A hash of the predefined macros, which pin the target triple, ABI and CPU features.
fn target_fingerprint(macros: &str) -> String {
    let mut h = cache::Fnv128::new();
    h.write(macros.as_bytes());
    format!("macros {:032x}", h.finish())
}
