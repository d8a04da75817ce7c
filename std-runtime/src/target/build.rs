//! Building a bundle for a target and running it: compile the harness and every `.c` of the
//! bundle with the target's compiler, link, run (natively, or under the target's QEMU command
//! with a timeout), and parse what the harness printed into a [`RunReport`]. With
//! [`BuildOptions::icount_runs`], instructions are counted exactly by picograd's QEMU plugin
//! ([`super::icount`]): two more programs call `model_run` K times and not at all, and the
//! difference over K is one inference; the model's functions are counted one by one the same way.
//! Flash is split into the weights' object and the code, and the library functions the model's
//! objects call are listed with their sizes ([`super::symbols`]).
//!
//! Invariant: every failure names the target and the command, and carries the tool's output; a
//! program that outlives the timeout is killed. C is always compiled with `-std=c99 -Wall -Wextra
//! -Werror -ffp-contract=off`, so float results do not depend on FMA contraction.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use picograd_core::{Error, Result};

use super::bundle::{Bundle, Values};
use super::{icount, symbols, Counter, StackProbe, Target};

/// Flags every build uses, whatever the target and compiler.
const ALWAYS: &[&str] = &[
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-ffp-contract=off",
];

/// Which C compiler builds the bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompilerKind {
    /// The target's `cc` (gcc or the cross gcc).
    Gcc,
    /// clang with the target's `clang_cflags`, linked by its `clang_link` command.
    Clang,
}

/// Optimisation level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptLevel {
    /// `-O2`: speed.
    O2,
    /// `-Os`: size.
    Os,
}

/// How to build and run a bundle.
#[derive(Clone, Debug)]
pub struct BuildOptions {
    /// The C compiler.
    pub compiler: CompilerKind,
    /// The optimisation level.
    pub opt: OptLevel,
    /// More flags for every compile.
    pub extra_flags: Vec<String>,
    /// Build with AddressSanitizer + UndefinedBehaviorSanitizer (host only; the stack probe is
    /// off then).
    pub sanitize: bool,
    /// How long the program may run before it is killed.
    pub timeout: Duration,
    /// Keep the build folder (a fresh private folder in the temporary directory, see
    /// [`crate::private_fs::private_temp_dir`]) and say where it is, on stderr and in
    /// [`RunReport::build_dir`]; by default it is removed after the build, whether it succeeded
    /// or failed.
    pub keep_build_dir: bool,
    /// Told when each stage of the build starts (progress display); `None`: nobody is told.
    pub on_stage: Option<StageHook>,
    /// Count instructions exactly with picograd's QEMU plugin (`targets/common/icount.c`), over
    /// this many calls of `model_run` (at least 1) against none; `None`: the target's in-program
    /// counter (SysTick steps of 40 on Cortex-M, `minstret` on RISC-V). Emulated targets only.
    pub icount_runs: Option<u32>,
}

/// A stage of [`build_and_run`], in the order they happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildStage {
    /// Compiling the harness and the model's C files with the target's compiler.
    Compile,
    /// Linking the program.
    Link,
    /// Measuring the objects' sizes.
    Measure,
    /// Running the program (natively, or under the target's emulator).
    Run,
}

impl BuildStage {
    /// What the stage does, for people (`target` names the target).
    pub fn describe(self, target: &Target) -> String {
        let how = if target.is_host() {
            "natively".to_string()
        } else {
            let emulator = target.words("run").into_iter().next().unwrap_or_default();
            format!("under {emulator}")
        };
        match self {
            BuildStage::Compile => format!("cross-building for {}: compiling", target.name),
            BuildStage::Link => format!("cross-building for {}: linking", target.name),
            BuildStage::Measure => format!("measuring the {} build", target.name),
            BuildStage::Run => format!("running on {} {how}", target.name),
        }
    }
}

/// What a [`StageHook`] calls: the stage starting, and the target built for.
pub type StageFn = dyn Fn(BuildStage, &Target) + Send + Sync;

/// A callback told of each [`BuildStage`] as it starts.
#[derive(Clone)]
pub struct StageHook(pub std::sync::Arc<StageFn>);

impl std::fmt::Debug for StageHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StageHook")
    }
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            compiler: CompilerKind::Gcc,
            opt: OptLevel::O2,
            extra_flags: Vec::new(),
            sanitize: false,
            timeout: Duration::from_secs(30),
            keep_build_dir: false,
            on_stage: None,
            icount_runs: None,
        }
    }
}

/// What one more feed of a build gave (see [`build_and_run_feeds`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedRun {
    /// `model_run`'s status, when it returns one (a bundle with run-time dimensions).
    pub status: Option<i64>,
    /// Each output, by name, in order: at the feed's dimensions after success, every element
    /// of the (largest) array after an error.
    pub outputs: Vec<(String, Values)>,
}

impl FeedRun {
    /// The output called `name`.
    pub fn output(&self, name: &str) -> Option<&Values> {
        self.outputs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// What one build and run of a bundle gave.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// Each output of `model_run`, by name, in order (for a bundle with run-time dimensions:
    /// at the run's dimensions; after an error status, every element of the largest array).
    pub outputs: Vec<(String, Values)>,
    /// `model_run`'s status, when it returns one (a bundle with run-time dimensions: 0 on
    /// success, `MODEL_ERR_DIM` for a dimension outside its bounds).
    pub status: Option<i64>,
    /// The feeds after the first, in order, with [`build_and_run_feeds`] (empty otherwise).
    pub feeds: Vec<FeedRun>,
    /// Instructions executed by one `model_run`: exact with [`BuildOptions::icount_runs`] (and
    /// from `minstret` on RISC-V), ≈ SysTick ticks × 40 on Cortex-M otherwise; `None` where the
    /// target has no counter.
    pub instructions: Option<u64>,
    /// With [`BuildOptions::icount_runs`]: instructions per inference inside each function the
    /// model's objects define that the linked program holds (kernels gcc inlined count in their
    /// caller), in address order; empty otherwise.
    pub function_instructions: Vec<(String, u64)>,
    /// With [`BuildOptions::icount_runs`]: the code bytes of each function in
    /// `function_instructions` (its symbol's size in the linked program), same order.
    pub function_sizes: Vec<(String, u64)>,
    /// Text + data of the weights' object (`model_weights.c`; 0 when the bundle has none).
    pub weights_flash: u64,
    /// Library functions the model's objects call directly (libgcc, libc: `memset`,
    /// `__aeabi_*`, ...) with their sizes in bytes: flash the model pulls in.
    pub library_functions: Vec<(String, u64)>,
    /// Whole program: code and constants (`size`'s text).
    pub text: u64,
    /// Whole program: initialised data (in flash and RAM).
    pub data: u64,
    /// Whole program: zero-initialised RAM, without the linker's reserved `.stack` section.
    pub bss: u64,
    /// The bundle's objects alone: text, data and bss.
    pub model_text: u64,
    /// See `model_text`.
    pub model_data: u64,
    /// See `model_text`.
    pub model_bss: u64,
    /// Stack high-water mark during `model_run`, when measured.
    pub stack_bytes: Option<u64>,
    /// Everything the program printed.
    pub stdout: String,
    /// Where the build's files were kept (with [`BuildOptions::keep_build_dir`]).
    pub build_dir: Option<PathBuf>,
}

impl RunReport {
    /// The output called `name`.
    pub fn output(&self, name: &str) -> Option<&Values> {
        self.outputs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// Flash the program needs: text + data.
    pub fn flash(&self) -> u64 {
        self.text + self.data
    }

    /// Static RAM the program needs: data + bss (the stack comes on top: `stack_bytes`).
    pub fn ram(&self) -> u64 {
        self.data + self.bss
    }

    /// Flash of the model's code: its objects' text + data without the weights' object.
    pub fn code_flash(&self) -> u64 {
        (self.model_text + self.model_data).saturating_sub(self.weights_flash)
    }

    /// Flash of the library functions the model calls ([`RunReport::library_functions`]).
    pub fn library_flash(&self) -> u64 {
        self.library_functions.iter().map(|(_, n)| n).sum()
    }
}

/// Builds the bundle in `bundle_dir` for `target`, runs it once on `inputs` (by name, as in
/// `model.h`), and reports outputs and costs.
pub fn build_and_run(
    target: &Target,
    bundle_dir: &Path,
    inputs: &[(&str, Values)],
    opts: &BuildOptions,
) -> Result<RunReport> {
    build_and_run_feeds(target, bundle_dir, &[inputs], opts)
}

/// [`build_and_run`] on several feeds in one program: the first is measured and reported as
/// `build_and_run` does, the others run after it (output arrays cleared before each) and are
/// reported in [`RunReport::feeds`] — one build for many inputs, or many values of a run-time
/// dimension (given as an input of one integer named like it).
pub fn build_and_run_feeds(
    target: &Target,
    bundle_dir: &Path,
    feeds: &[&[(&str, Values)]],
    opts: &BuildOptions,
) -> Result<RunReport> {
    if opts.icount_runs.is_some() && target.is_host() {
        return Err(Error::Unsupported(format!(
            "target {}: exact instruction counts run under QEMU; this target runs natively",
            target.name
        )));
    }
    if opts.sanitize && !target.is_host() {
        return Err(Error::Unsupported(format!(
            "target {}: sanitizers run on the host target only",
            target.name
        )));
    }
    let bundle = Bundle::read(bundle_dir)?;
    let folder = fresh_dir(&target.name)?;
    let result = build_in(target, opts, folder.path(), &bundle, bundle_dir, feeds);
    let kept = opts.keep_build_dir.then(|| {
        let dir = folder.keep();
        eprintln!("picograd: build files kept in {}", dir.display());
        dir
    });
    let mut report = result?;
    report.build_dir = kept;
    Ok(report)
}

fn build_in(
    target: &Target,
    opts: &BuildOptions,
    dir: &Path,
    bundle: &Bundle,
    bundle_dir: &Path,
    feeds: &[&[(&str, Values)]],
) -> Result<RunReport> {
    let header = dir.join("inputs.h");
    // The folder is fresh and private; `create_new` refuses anything already there all the same.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&header)
        .map_err(|e| io_err(&header, e))?;
    std::io::Write::write_all(&mut file, bundle.feeds_header(feeds)?.as_bytes())
        .map_err(|e| io_err(&header, e))?;
    drop(file);
    let b = Build { target, opts, dir };
    b.run(bundle, bundle_dir)
}

/// A fresh private build folder (random name, mode 0700, never an existing folder), removed on
/// drop unless kept.
fn fresh_dir(name: &str) -> Result<tempfile::TempDir> {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    crate::private_fs::private_temp_dir(&format!("picograd-build-{safe}-"))
        .map_err(|e| io_err(&std::env::temp_dir(), e))
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

struct Build<'a> {
    target: &'a Target,
    opts: &'a BuildOptions,
    dir: &'a Path,
}

impl Build<'_> {
    fn run(&self, bundle: &Bundle, bundle_dir: &Path) -> Result<RunReport> {
        let mut sources = vec![self.target.harness_source()];
        sources.extend(bundle_sources(bundle_dir)?);
        self.stage(BuildStage::Compile);
        let mut objects = Vec::new();
        for (i, src) in sources.iter().enumerate() {
            let obj = self.dir.join(format!("{i}.o"));
            self.compile(src, &obj, bundle_dir, &self.defines())?;
            objects.push(obj);
        }
        let elf = self.dir.join("prog.elf");
        self.stage(BuildStage::Link);
        self.link(&objects, &elf)?;
        self.stage(BuildStage::Measure);
        let (text, data, bss) = self.sizes(std::slice::from_ref(&elf), true)?;
        let (model_text, model_data, model_bss) = self.sizes(&objects[1..], false)?;
        self.stage(BuildStage::Run);
        let stdout = self.execute(&elf, &[])?;
        let mut report = parse_stdout(&stdout, bundle).map_err(|d| {
            Error::Device(format!(
                "target {}: {d}\nprogram output:\n{stdout}",
                self.target.name
            ))
        })?;
        if self.target.counter == Counter::None {
            report.instructions = None;
        }
        report.text = text;
        report.data = data;
        report.bss = bss;
        report.model_text = model_text;
        report.model_data = model_data;
        report.model_bss = model_bss;
        report.weights_flash = self.weights_flash(&sources, &objects)?;
        report.library_functions = self.library_functions(&objects[1..], &elf)?;
        if let Some(k) = self.opts.icount_runs {
            let (n, per_function, sizes) =
                self.count_exactly(&sources[0], &objects[1..], k, bundle_dir)?;
            report.instructions = Some(n);
            report.function_instructions = per_function;
            report.function_sizes = sizes;
        }
        Ok(report)
    }

    /// The target's `nm` (its `nm` key, else the one beside its `size`).
    fn nm(&self) -> String {
        match self.target.get("nm") {
            Some(nm) => nm.to_owned(),
            None => symbols::nm_beside(self.target.get("size").unwrap_or("size")),
        }
    }

    /// Text + data of the object built from the bundle's `model_weights.c`, if any.
    fn weights_flash(&self, sources: &[PathBuf], objects: &[PathBuf]) -> Result<u64> {
        let at = sources
            .iter()
            .position(|s| s.file_name().is_some_and(|n| n == "model_weights.c"));
        match at {
            Some(i) => {
                let (t, d, _) = self.sizes(std::slice::from_ref(&objects[i]), false)?;
                Ok(t + d)
            }
            None => Ok(0),
        }
    }

    /// The library functions `model_objects` call, with their sizes in the linked `elf`.
    fn library_functions(
        &self,
        model_objects: &[PathBuf],
        elf: &PathBuf,
    ) -> Result<Vec<(String, u64)>> {
        let nm = self.nm();
        let wanted = symbols::undefined(&nm, model_objects)?;
        let own = symbols::defined(&nm, model_objects, false)?;
        Ok(symbols::sized_functions(&nm, elf)?
            .into_iter()
            .filter(|s| wanted.contains(&s.name) && !own.contains(&s.name))
            .map(|s| (s.name, s.size))
            .collect())
    }

    /// Exact instructions per inference, in all and per model function (with each function's
    /// code bytes): the harness built again to call `model_run` `k` times and not at all, both
    /// run under the counting plugin.
    fn count_exactly(
        &self,
        harness: &Path,
        model_objects: &[PathBuf],
        k: u32,
        bundle_dir: &Path,
    ) -> Result<(u64, PerFunction, PerFunction)> {
        let k = k.max(1);
        let plugin = icount::build_plugin("cc", &self.target.root, self.dir)?;
        let mut elves = Vec::new();
        for runs in [0, k] {
            let obj = self.dir.join(format!("harness-count-{runs}.o"));
            let defines = [format!("-DPICOGRAD_COUNT_RUNS={runs}")];
            self.compile(harness, &obj, bundle_dir, &defines)?;
            let elf = self.dir.join(format!("count-{runs}.elf"));
            let objects: Vec<PathBuf> = std::iter::once(obj)
                .chain(model_objects.iter().cloned())
                .collect();
            self.link(&objects, &elf)?;
            elves.push(elf);
        }
        let nm = self.nm();
        let own = symbols::defined(&nm, model_objects, true)?;
        let mut functions: Vec<symbols::Symbol> = symbols::sized_functions(&nm, &elves[1])?
            .into_iter()
            .filter(|s| own.contains(&s.name) && s.size > 0)
            .collect();
        functions.sort_by_key(|s| s.addr);
        let ranges: Vec<(u64, u64)> = functions
            .iter()
            .map(|s| (s.addr, s.addr + s.size))
            .collect();
        let without = self.counted_run(&elves[0], &plugin, &[], "0")?;
        let with = self.counted_run(&elves[1], &plugin, &ranges, "k")?;
        let sizes = functions.iter().map(|s| (s.name.clone(), s.size)).collect();
        let per_function = functions
            .into_iter()
            .zip(&with.ranges)
            .map(|(s, &n)| (s.name, icount::per_inference(n, 0, k)))
            .collect();
        Ok((
            icount::per_inference(with.total, without.total, k),
            per_function,
            sizes,
        ))
    }

    /// Runs `elf` under the counting plugin (counting `ranges` too) and reads its log.
    fn counted_run(
        &self,
        elf: &Path,
        plugin: &Path,
        ranges: &[(u64, u64)],
        tag: &str,
    ) -> Result<icount::Counts> {
        let log = self.dir.join(format!("icount-{tag}.log"));
        self.execute(elf, &icount::qemu_args(plugin, ranges, &log))?;
        let text = std::fs::read_to_string(&log).map_err(|e| io_err(&log, e))?;
        icount::parse_log(&text, ranges.len(), &log)
    }

    fn stage(&self, stage: BuildStage) {
        if let Some(hook) = &self.opts.on_stage {
            (hook.0)(stage, self.target);
        }
    }

    fn compile(&self, src: &Path, obj: &Path, bundle_dir: &Path, defines: &[String]) -> Result<()> {
        let t = self.target;
        let mut cmd: Vec<String> = match self.opts.compiler {
            CompilerKind::Gcc => [
                vec![t.get("cc").unwrap_or("cc").to_owned()],
                t.words("cflags"),
            ]
            .concat(),
            CompilerKind::Clang => [vec!["clang".to_owned()], t.words("clang_cflags")].concat(),
        };
        cmd.extend(ALWAYS.iter().map(|s| s.to_string()));
        cmd.push(match self.opts.opt {
            OptLevel::O2 => "-O2".into(),
            OptLevel::Os => "-Os".into(),
        });
        cmd.extend(defines.iter().cloned());
        cmd.extend(self.sanitize_flags());
        cmd.extend(self.opts.extra_flags.iter().cloned());
        cmd.push(format!("-I{}", self.dir.display()));
        cmd.push(format!("-I{}", bundle_dir.display()));
        cmd.extend([
            "-c".into(),
            src.display().to_string(),
            "-o".into(),
            obj.display().to_string(),
        ]);
        self.tool(&cmd, "compile").map(drop)
    }

    fn link(&self, objects: &[PathBuf], elf: &Path) -> Result<()> {
        let t = self.target;
        let mut cmd = match self.opts.compiler {
            CompilerKind::Gcc => [
                vec![t.get("cc").unwrap_or("cc").to_owned()],
                t.words("cflags"),
            ]
            .concat(),
            CompilerKind::Clang => t.words("clang_link"),
        };
        cmd.extend(self.sanitize_flags());
        cmd.extend(objects.iter().map(|o| o.display().to_string()));
        cmd.extend(t.words("ldflags"));
        cmd.extend(["-o".into(), elf.display().to_string()]);
        self.tool(&cmd, "link").map(drop)
    }

    fn defines(&self) -> Vec<String> {
        let mut d = Vec::new();
        match self.target.counter {
            Counter::None => {}
            Counter::Systick => d.push("-DPICOGRAD_COUNTER_SYSTICK".to_owned()),
            Counter::Minstret => d.push("-DPICOGRAD_COUNTER_MINSTRET".to_owned()),
        }
        if self.opts.sanitize {
            d.push("-DPICOGRAD_STACK_NONE".to_owned());
        } else if self.target.stack_probe == StackProbe::Linker {
            d.push("-DPICOGRAD_STACK_LINKER".to_owned());
        }
        d
    }

    fn sanitize_flags(&self) -> Vec<String> {
        if !self.opts.sanitize {
            return Vec::new();
        }
        [
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            "-g",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// text, data, bss summed over `files` (Berkeley format); for a linked program the
    /// linker's reserved `.stack` section is taken out of bss.
    fn sizes(&self, files: &[PathBuf], linked: bool) -> Result<(u64, u64, u64)> {
        let size = self.target.get("size").unwrap_or("size").to_owned();
        let mut cmd = vec![size.clone()];
        cmd.extend(files.iter().map(|f| f.display().to_string()));
        let out = self.tool(&cmd, "size")?;
        let (mut text, mut data, mut bss) = (0, 0, 0);
        for line in out.lines().skip(1) {
            let w: Vec<u64> = line
                .split_whitespace()
                .take(3)
                .filter_map(|x| x.parse().ok())
                .collect();
            if let [t, d, b] = w[..] {
                text += t;
                data += d;
                bss += b;
            }
        }
        if linked {
            let mut cmd = vec![size, "-A".to_owned()];
            cmd.extend(files.iter().map(|f| f.display().to_string()));
            let sysv = self.tool(&cmd, "size")?;
            for line in sysv.lines() {
                let mut w = line.split_whitespace();
                if w.next() == Some(".stack") {
                    bss -= w
                        .next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .unwrap_or(0)
                        .min(bss);
                }
            }
        }
        Ok((text, data, bss))
    }

    /// Runs a build tool; its stdout on success, else an error carrying its output.
    fn tool(&self, cmd: &[String], what: &str) -> Result<String> {
        let out = Command::new(&cmd[0])
            .args(&cmd[1..])
            .output()
            .map_err(|e| {
                Error::Compile(format!(
                    "target {}: cannot {what}: `{}` did not start: {e}",
                    self.target.name,
                    cmd.join(" ")
                ))
            })?;
        if !out.status.success() {
            return Err(Error::Compile(format!(
                "target {}: {what} failed ({}): `{}`\n{}{}",
                self.target.name,
                out.status,
                cmd.join(" "),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs the program (directly, or by the target's `run` command, with `extra` arguments
    /// after it) under the timeout.
    fn execute(&self, elf: &Path, extra: &[String]) -> Result<String> {
        let elf_s = elf.display().to_string();
        let cmd: Vec<String> = self
            .target
            .words("run")
            .into_iter()
            .map(|w| w.replace("{elf}", &elf_s))
            .chain(extra.iter().cloned())
            .collect();
        let shown = cmd.join(" ");
        let fail = |detail: String| {
            Error::Device(format!("target {}: `{shown}` {detail}", self.target.name))
        };
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("did not start: {e}")))?;
        let out = drain(child.stdout.take());
        let err = drain(child.stderr.take());
        let deadline = Instant::now() + self.opts.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let (o, e) = (join(out), join(err));
                    return Err(fail(format!(
                        "timed out after {:?} and was killed\nstdout:\n{o}\nstderr:\n{e}",
                        self.opts.timeout
                    )));
                }
                Err(e) => return Err(fail(format!("could not be waited for: {e}"))),
            }
        };
        let (o, e) = (join(out), join(err));
        if !status.success() {
            return Err(fail(format!(
                "failed ({status})\nstdout:\n{o}\nstderr:\n{e}"
            )));
        }
        Ok(o)
    }
}

type Reader = Option<std::thread::JoinHandle<String>>;

/// Reads a pipe to its end on a thread (so a chatty program never blocks on a full pipe).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> Reader {
    pipe.map(|mut p| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = p.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    })
}

fn join(r: Reader) -> String {
    r.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// Every `.c` file of the bundle, sorted by name.
fn bundle_sources(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_err(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    v.sort();
    if v.is_empty() {
        return Err(Error::Io {
            path: dir.display().to_string(),
            detail: "bundle has no .c files".into(),
        });
    }
    Ok(v)
}

/// `(function name, figure)` per model function, in address order.
type PerFunction = Vec<(String, u64)>;

/// The harness's lines into outputs, instruction count and stack figure.
fn parse_stdout(stdout: &str, bundle: &Bundle) -> std::result::Result<RunReport, String> {
    let mut report = RunReport {
        outputs: Vec::new(),
        status: None,
        feeds: Vec::new(),
        instructions: None,
        function_instructions: Vec::new(),
        function_sizes: Vec::new(),
        weights_flash: 0,
        library_functions: Vec::new(),
        text: 0,
        data: 0,
        bss: 0,
        model_text: 0,
        model_data: 0,
        model_bss: 0,
        stack_bytes: None,
        stdout: stdout.to_owned(),
        build_dir: None,
    };
    // Lines before the first `feed K` are the measured feed's; each `feed K` starts another.
    let mut feed = FeedRun::default();
    let mut later: Vec<FeedRun> = Vec::new();
    let mut in_later = false;
    for line in stdout.lines() {
        if line.starts_with("feed ") {
            let done = std::mem::take(&mut feed);
            match in_later {
                true => later.push(done),
                false => (report.status, report.outputs) = (done.status, done.outputs),
            }
            in_later = true;
        } else if let Some(n) = line.strip_prefix("status: ") {
            feed.status = Some(n.trim().parse().map_err(|_| format!("bad line `{line}`"))?);
        } else if let Some(n) = line.strip_prefix("instructions: ") {
            report.instructions = Some(n.trim().parse().map_err(|_| format!("bad line `{line}`"))?);
        } else if let Some(n) = line.strip_prefix("stack: ") {
            let n = n.trim().trim_end_matches(" bytes");
            report.stack_bytes = Some(n.parse().map_err(|_| format!("bad line `{line}`"))?);
        } else if let Some(rest) = line.strip_prefix("output ") {
            let mut words = rest.split_whitespace();
            let name = words.next().unwrap_or("");
            let p = bundle
                .outputs()
                .find(|p| p.name == name)
                .ok_or_else(|| format!("unknown output `{name}`"))?;
            let bits = words
                .map(|w| u64::from_str_radix(w, 16))
                .collect::<std::result::Result<Vec<u64>, _>>()
                .map_err(|_| format!("bad output line for `{name}`"))?;
            // A symbolic array prints its length at the run's dimensions, at most the largest.
            let fits = p.size_of.is_some() && bits.len() <= p.size;
            if bits.len() != p.size && !fits {
                return Err(format!(
                    "output `{name}`: {} values, want {}",
                    bits.len(),
                    p.size
                ));
            }
            feed.outputs.push((
                name.to_owned(),
                Values {
                    dtype: p.dtype,
                    bits,
                },
            ));
        }
    }
    match in_later {
        true => later.push(feed),
        false => (report.status, report.outputs) = (feed.status, feed.outputs),
    }
    report.feeds = later;
    let runs = std::iter::once((&report.status, &report.outputs))
        .chain(report.feeds.iter().map(|f| (&f.status, &f.outputs)));
    for (status, outputs) in runs {
        if bundle.returns_status && status.is_none() {
            return Err("model_run's status was not printed".into());
        }
        for p in bundle.outputs() {
            if !outputs.iter().any(|(n, _)| *n == p.name) {
                return Err(format!("output `{}` was not printed", p.name));
            }
        }
    }
    Ok(report)
}
