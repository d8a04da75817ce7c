//! The clang compiler and its disk cache: compile and call a hand-written kernel, hit the cache
//! from a fresh compiler, detect and rebuild corrupt entries, fill one cache from several processes
//! at once, share one compiler between threads, fall back to `cc` (saying so once), and fail
//! cleanly without a compiler. Every test uses its own cache directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::{env, fs};

use picograd_core::Error;
use picograd_runtime::{cache, Compiler};

#[path = "common/add_kernel.rs"]
mod add_kernel;
use add_kernel::ADD_SRC;

/// Env var that turns a run of this test binary into a child of `several_processes_fill_one_cache`.
const CHILD_DIR: &str = "PICOGRAD_TEST_CHILD_CACHE";
/// Env var that turns a run of this test binary into a child of `missing_compiler_is_an_error`.
const CHILD_DETECT: &str = "PICOGRAD_TEST_CHILD_DETECT";

/// A fresh, empty directory under the target dir, unique to this test and process.
fn fresh_dir(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "cache-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn compiler(dir: &Path) -> Compiler {
    Compiler::detect()
        .expect("a C compiler")
        .with_cache_dir(dir)
}

/// Compiles `ADD_SRC` with `cc`, runs it on 1000 elements and checks every sum.
fn check_add(cc: &Compiler) -> bool {
    let lib = cc.compile(ADD_SRC).expect("compile");
    let entry = lib.entry("add").expect("add_entry");
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let mut out = vec![0f32; n];
    let bufs = [
        out.as_mut_ptr().cast(),
        a.as_ptr().cast_mut().cast(),
        b.as_ptr().cast_mut().cast(),
    ];
    let vars = [n as i32];
    // SAFETY: three float buffers of n elements and n, as `add_entry` expects.
    unsafe { entry(bufs.as_ptr(), vars.as_ptr()) };
    for i in 0..n {
        assert_eq!(out[i], a[i] + b[i], "element {i}");
    }
    lib.loaded_from_cache()
}

/// The single entry file in `dir` (temporary files start with a dot).
fn only_entry(dir: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "entries in {}: {entries:?}",
        dir.display()
    );
    entries.into_iter().next().unwrap()
}

#[test]
fn compile_and_call_a_kernel() {
    let dir = fresh_dir("call");
    let cc = compiler(&dir);
    assert!(!cc.version().is_empty());
    assert!(!check_add(&cc), "a fresh cache cannot hold the kernel");
    let s = cc.stats();
    assert_eq!((s.compiles, s.disk_hits, s.memory_hits), (1, 0, 0));
    // `check_add` dropped its library, so it was unloaded: asked again, the source is loaded
    // from the disk cache; asked while it is loaded, it is answered from memory, as the same
    // library.
    let live = Compiler::live_libraries();
    let a = cc.compile(ADD_SRC).unwrap();
    let b = cc.compile(ADD_SRC).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    let s = cc.stats();
    assert_eq!((s.compiles, s.disk_hits, s.memory_hits), (1, 1, 1));
    assert!(Compiler::live_libraries() > live.saturating_sub(1));
    cache::verify_entry(a.path()).expect("a freshly written entry verifies");
    assert!(matches!(a.entry("nope"), Err(Error::Device(_))));
}

/// `ADD_SRC` with its function renamed, so each `n` is a distinct source (and cache entry).
fn add_variant(n: usize) -> String {
    ADD_SRC.replace("add", &format!("add{n}"))
}

/// The cache folder stays within its bound: the least recently used entries go first, and a
/// disk hit counts as a use.
#[test]
fn cache_folder_stays_within_its_limit() {
    let dir = fresh_dir("limit");
    // One entry's size, to set a bound of about four entries.
    let one = {
        let cc = compiler(&dir);
        let lib = cc.compile(&add_variant(0)).unwrap();
        fs::metadata(lib.path()).unwrap().len()
    };
    let limit = one * 4 + one / 2;
    let cc = compiler(&dir).with_cache_limit(limit);
    let entry = |n: usize| cc.compile(&add_variant(n)).unwrap().path().to_path_buf();
    let first = entry(1);
    let mut paths = vec![first.clone()];
    for n in 2..=12 {
        // Keep entry 1 recently used: a fresh compiler loads it from disk (a hit touches it).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let again = compiler(&dir).compile(&add_variant(1)).unwrap();
        assert!(
            again.loaded_from_cache(),
            "entry 1 was trimmed although just used"
        );
        drop(again);
        paths.push(entry(n));
        let bytes: u64 = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(bytes <= limit, "{bytes} bytes in the folder, limit {limit}");
    }
    assert!(first.exists() && paths.last().unwrap().exists());
    let gone = paths.iter().filter(|p| !p.exists()).count();
    assert!(gone >= 12 - 4, "only {gone} of 12 entries were trimmed");
}

#[test]
fn fresh_compiler_hits_the_disk_cache() {
    let dir = fresh_dir("hit");
    let first = compiler(&dir);
    assert!(!check_add(&first));
    let second = compiler(&dir);
    assert!(
        check_add(&second),
        "second compiler should load the cached entry"
    );
    let s = second.stats();
    assert_eq!((s.compiles, s.disk_hits, s.corrupt_rebuilt), (0, 1, 0));
}

/// Builds an entry in a scratch dir, puts `corrupt(bytes)` into a fresh dir as the same entry
/// (never touching a file this process has loaded), and checks a fresh compiler rebuilds it.
fn corrupt_entry_is_rebuilt(name: &str, corrupt: impl Fn(&mut Vec<u8>)) {
    let good_dir = fresh_dir(name);
    assert!(!check_add(&compiler(&good_dir)));
    let good = only_entry(&good_dir);
    let mut bytes = fs::read(&good).unwrap();
    corrupt(&mut bytes);
    let bad_dir = fresh_dir(name);
    let bad = bad_dir.join(good.file_name().unwrap());
    fs::write(&bad, &bytes).unwrap();
    assert!(matches!(
        cache::verify_entry(&bad),
        Err(Error::Format { .. })
    ));

    let cc = compiler(&bad_dir);
    assert!(
        !check_add(&cc),
        "a corrupt entry must be rebuilt, not loaded"
    );
    let s = cc.stats();
    assert_eq!((s.compiles, s.disk_hits, s.corrupt_rebuilt), (1, 0, 1));
    cache::verify_entry(&bad).expect("the rebuilt entry verifies");
    assert_eq!(only_entry(&bad_dir), bad);
}

#[test]
fn truncated_entry_is_rebuilt() {
    corrupt_entry_is_rebuilt("truncated", |b| b.truncate(b.len() / 2));
}

#[test]
fn truncated_by_one_byte_entry_is_rebuilt() {
    corrupt_entry_is_rebuilt("truncated1", |b| {
        b.pop();
    });
}

#[test]
fn byte_flipped_entry_is_rebuilt() {
    // Same size, still an ELF file: one byte in the middle of the image changed.
    corrupt_entry_is_rebuilt("flipped", |b| {
        assert_eq!(&b[..4], b"\x7fELF");
        let mid = (b.len() - cache::TRAILER_LEN) / 2;
        b[mid] ^= 0x5a;
    });
}

#[test]
fn several_processes_fill_one_cache() {
    if let Some(dir) = env::var_os(CHILD_DIR) {
        // Child: wait for the parent's go signal so all children race, then compile and check.
        let dir = PathBuf::from(dir);
        for _ in 0..2000 {
            if dir.join("go").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let cc = compiler(&dir.join("kernels"));
        check_add(&cc);
        println!("child stats: {:?}", cc.stats());
        return;
    }
    let dir = fresh_dir("procs");
    let exe = env::current_exe().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "several_processes_fill_one_cache",
                    "--exact",
                    "--test-threads=1",
                    "--nocapture",
                ])
                .env(CHILD_DIR, &dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    fs::write(dir.join("go"), b"").unwrap();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a child process failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Informational (visible with --nocapture): how many children ran the compiler.
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .filter(|l| l.contains("child stats"))
            .for_each(|l| println!("{l}"));
    }
    let kernels = dir.join("kernels");
    let entry = only_entry(&kernels);
    cache::verify_entry(&entry).unwrap();
    let leftovers: Vec<_> = fs::read_dir(&kernels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        leftovers,
        vec![entry.clone()],
        "temporary files left behind"
    );
    // And this process loads it from the cache.
    assert!(check_add(&compiler(&kernels)));
}

#[test]
fn missing_compiler_is_an_error() {
    if env::var_os(CHILD_DETECT).is_some() {
        let err = Compiler::detect().expect_err("PICOGRAD_CC points nowhere");
        let Error::Compile(msg) = err else {
            panic!("not a compile error: {err:?}")
        };
        assert!(
            msg.contains("/nonexistent/cc") && msg.contains("PICOGRAD_CC"),
            "{msg}"
        );
        return;
    }
    // An explicit path that does not exist.
    let err = Compiler::new("/nonexistent/cc").expect_err("no such compiler");
    assert!(
        matches!(&err, Error::Compile(m) if m.contains("/nonexistent/cc")),
        "{err:?}"
    );
    // An executable that is not a C compiler.
    assert!(matches!(
        Compiler::new("/bin/false"),
        Err(Error::Compile(_))
    ));
    // `detect` honours PICOGRAD_CC; run in a child so no other test sees the variable.
    let out = Command::new(env::current_exe().unwrap())
        .args([
            "missing_compiler_is_an_error",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD_DETECT, "1")
        .env("PICOGRAD_CC", "/nonexistent/cc")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "detect() with a missing PICOGRAD_CC did not fail cleanly:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn compile_error_carries_stderr_and_source() {
    let dir = fresh_dir("err");
    let cc = compiler(&dir);
    let err = cc
        .compile("void broken_entry(void **b, const int *v) { this is not C }\n")
        .unwrap_err();
    let Error::Compile(msg) = err else {
        panic!("not a compile error: {err:?}")
    };
    assert!(msg.contains("error"), "no compiler message: {msg}");
    assert!(msg.contains("this is not C"), "no source excerpt: {msg}");
    assert_eq!(cc.stats().compiles, 0);
    let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "a failed compile left files behind");
}

#[test]
fn threads_sharing_a_compiler_compile_once() {
    let dir = fresh_dir("threads");
    let cc = compiler(&dir);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| check_add(&cc));
        }
    });
    // One compile; every other thread got the library from memory, or — when it came after
    // the library was unloaded (no thread held it any more) — from the disk cache.
    let st = cc.stats();
    assert_eq!(
        (st.compiles, st.disk_hits + st.memory_hits),
        (1, 7),
        "{st:?}"
    );
}

/// Env var that turns a run of this test binary into a child of `falls_back_to_cc_and_says_so_once`.
const CHILD_FALLBACK: &str = "PICOGRAD_TEST_CHILD_FALLBACK";

#[test]
fn falls_back_to_cc_and_says_so_once() {
    if env::var_os(CHILD_FALLBACK).is_some() {
        // PATH holds only a `cc`; detection (which runs the preprocessor only) must pick it.
        for _ in 0..2 {
            let cc = Compiler::detect().expect("cc is on PATH");
            assert_eq!(cc.path().file_name().unwrap(), "cc");
        }
        return;
    }
    #[cfg(unix)]
    {
        let real_cc = ["/usr/bin/cc", "/usr/bin/gcc"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.exists());
        let Some(real_cc) = real_cc else { return };
        let bin = fresh_dir("fallback");
        std::os::unix::fs::symlink(real_cc, bin.join("cc")).unwrap();
        let out = Command::new(env::current_exe().unwrap())
            .args([
                "falls_back_to_cc_and_says_so_once",
                "--exact",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(CHILD_FALLBACK, "1")
            .env_remove("PICOGRAD_CC")
            .env("PATH", &bin)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child failed:\n{}{stderr}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(
            stderr.matches("clang not found").count(),
            1,
            "stderr: {stderr}"
        );
    }
}

/// The LLVM-only flags (`compiler::LLVM_FLAGS`) are passed to a compiler that takes them
/// (clang) and left out for one that rejects them, which still compiles working kernels.
#[test]
fn llvm_flags_only_where_the_compiler_takes_them() {
    let has_llvm = |cc: &Compiler| {
        picograd_runtime::compiler::LLVM_FLAGS
            .iter()
            .all(|f| cc.flags().iter().any(|g| g == f))
    };
    let dir = fresh_dir("llvm-flags");
    let cc = compiler(&dir);
    let is_clang = cc.version().to_lowercase().contains("clang");
    assert_eq!(has_llvm(&cc), is_clang, "flags {:?}", cc.flags());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // A compiler that rejects `-mllvm` as gcc does, and is otherwise the detected one.
        let script = dir.join("no-mllvm-cc");
        fs::write(
            &script,
            format!(
                "#!/bin/sh\nfor a in \"$@\"; do\n  if [ \"$a\" = -mllvm ]; then echo \"unrecognized option -mllvm\" >&2; exit 1; fi\ndone\nexec '{}' \"$@\"\n",
                cc.path().display()
            ),
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        let plain = Compiler::new(&script)
            .expect("probed again without the LLVM flags")
            .with_cache_dir(dir.join("plain"));
        assert!(!has_llvm(&plain), "flags {:?}", plain.flags());
        assert!(plain.flags().iter().all(|f| f != "-mllvm"));
        assert!(!check_add(&plain), "a fresh cache cannot hold the kernel");
    }
}
