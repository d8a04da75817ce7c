//! Nothing another local user plants is written through, compiled, linked or loaded: each
//! reproduction of the security issue, with the attacker made real (files created by uid 65534
//! through `setpriv`, planted cache entries carrying a correctly recomputed digest). Every test
//! checks that the planted code did not run, that no victim file changed, that the user was told,
//! and that the computation still gave the right answer.

#[path = "common/attacker.rs"]
mod attacker;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use attacker::{evil_library_source, listing, Attacker, UID};
use picograd_runtime::target::{build_and_run, BuildOptions, Target, Values};
use picograd_runtime::{cache, Compiler, Stats};

#[path = "common/add_kernel.rs"]
mod add_kernel;
use add_kernel::ADD_SRC;

/// Compiles `ADD_SRC` with `cc` and runs it on 100 elements, on a thread with a time bound (a
/// FIFO that is waited on would hang): `Ok(true)` when every sum is right.
fn add_is_right(cc: Compiler) -> (bool, Stats, Compiler) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let lib = cc.compile(ADD_SRC).expect("compile");
        let entry = lib.entry("add").expect("add_entry");
        let a: Vec<f32> = (0..100).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..100).map(|i| 1.0 - i as f32).collect();
        let mut out = vec![0f32; 100];
        let bufs = [
            out.as_mut_ptr().cast(),
            a.as_ptr().cast_mut().cast(),
            b.as_ptr().cast_mut().cast(),
        ];
        // SAFETY: three buffers of 100 floats, n = 100, as `add_entry` expects.
        unsafe { entry(bufs.as_ptr(), [100i32].as_ptr()) };
        let right = (0..100).all(|i| out[i] == a[i] + b[i]);
        let stats = cc.stats();
        drop(lib);
        tx.send((right, stats, cc)).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("compiling finished in time (nothing was waited on)")
}

/// The file name and key `ADD_SRC`'s entry is filed under.
fn entry_name() -> (String, u128) {
    let scratch = tempfile::tempdir().unwrap();
    let cc = Compiler::detect()
        .expect("a C compiler")
        .with_cache_dir(scratch.path().join("kernels"));
    let lib = cc.compile(ADD_SRC).unwrap();
    let name = lib
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let key = u128::from_str_radix(&name[..32], 16).unwrap();
    (name, key)
}

/// A private folder of ours (0700) inside the attacker's shared folder.
fn our_dir(att: &Attacker, name: &str) -> PathBuf {
    let d = att.shared().join(name);
    fs::create_dir(&d).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
    d
}

#[test]
fn planted_cache_entries_are_set_aside_never_loaded() {
    let Some(att) = Attacker::new("planted_cache_entries_are_set_aside_never_loaded") else {
        return;
    };
    let (name, key) = entry_name();
    let marker = att.marker("entry");
    let evil = att.shared().join("evil.so");
    att.plant_library(&evil_library_source(&marker), &evil);
    // The attacker recomputes the digest: a planted entry passes every checksum.
    // The attacker recomputes the digest: a planted entry passes every checksum.
    let sealed = cache::seal(&fs::read(&evil).unwrap(), key);
    let theirs = att.shared().join("theirs.so");
    att.plant_file(&theirs, &sealed, 0o644);
    type Plant<'a> = Box<dyn Fn(&Path) + 'a>;
    let (att_ref, sealed_ref) = (&att, &sealed);
    let planted_by_them = |mode: u32| -> Plant<'_> {
        Box::new(move |at: &Path| {
            let (att, sealed) = (att_ref, sealed_ref);
            let f = att.shared().join(format!("planted-{mode:o}.so"));
            att.plant_file(&f, sealed, mode);
            fs::rename(f, at).unwrap();
        })
    };
    let cases: Vec<(&str, &str, Plant)> = vec![
        (
            "another user's entry",
            "owned by uid 65534",
            planted_by_them(0o644),
        ),
        (
            "another user's entry we cannot read",
            "owned by uid 65534",
            planted_by_them(0o600),
        ),
        (
            "an entry others may write (made under umask 000)",
            "writable by group or others",
            Box::new(|at| {
                fs::write(at, &sealed).unwrap();
                fs::set_permissions(at, fs::Permissions::from_mode(0o666)).unwrap();
            }),
        ),
        (
            "a link to another user's entry",
            "symbolic link",
            Box::new(|at| std::os::unix::fs::symlink(&theirs, at).unwrap()),
        ),
        (
            "a link to /dev/zero",
            "symbolic link",
            Box::new(|at| std::os::unix::fs::symlink("/dev/zero", at).unwrap()),
        ),
        (
            "a FIFO",
            "FIFO",
            Box::new(|at| {
                let c = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
                // SAFETY: a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }),
        ),
        (
            "a folder",
            "a folder",
            Box::new(|at| {
                fs::create_dir(at).unwrap();
                fs::write(at.join("inside"), b"x").unwrap();
            }),
        ),
    ];
    for (i, (what, said, plant)) in cases.iter().enumerate() {
        let dir = our_dir(&att, &format!("cache-{i}"));
        let at = dir.join(&name);
        plant(&at);
        let cc = Compiler::detect().unwrap().with_cache_dir(&dir);
        let (right, s, cc) = add_is_right(cc);
        assert!(right, "{what}: wrong sums");
        assert!(!marker.exists(), "{what}: the planted code ran");
        assert_eq!(
            (s.corrupt_rebuilt, s.compiles, s.disk_hits),
            (1, 1, 0),
            "{what}: {s:?}"
        );
        assert!(cc.cache_refusal().is_none(), "{what}");
        let notices = cc.notices();
        assert!(
            notices
                .iter()
                .any(|n| n.contains(said) && n.contains("set aside")),
            "{what}: the user was not told: {notices:?}"
        );
        // The rebuilt entry is ours, private, intact; what was planted was set aside, not deleted.
        let meta = fs::symlink_metadata(&at).unwrap();
        assert!(
            meta.is_file() && meta.uid() == 0 && meta.mode() & 0o077 == 0,
            "{what}: {meta:?}"
        );
        cache::verify_entry(&at).unwrap();
        let aside = listing(&dir)
            .iter()
            .filter(|n| n.contains(".set-aside."))
            .count();
        assert_eq!(aside, 1, "{what}: the planted thing was not set aside");
        // A fresh compiler now loads the rebuilt entry from disk.
        let (right, s, _) = add_is_right(Compiler::detect().unwrap().with_cache_dir(&dir));
        assert!(
            right && s.disk_hits == 1 && s.compiles == 0,
            "{what}: {s:?}"
        );
    }
    assert!(!marker.exists());
}

#[test]
fn planted_cache_folders_are_refused_with_a_fix() {
    let Some(att) = Attacker::new("planted_cache_folders_are_refused_with_a_fix") else {
        return;
    };
    let (name, key) = entry_name();
    let marker = att.marker("folder");
    let evil = att.shared().join("evil.so");
    att.plant_library(&evil_library_source(&marker), &evil);
    let sealed = cache::seal(&fs::read(&evil).unwrap(), key);

    // PICOGRAD_CACHE pointed at a folder another user made, holding a forged entry.
    let theirs = att.shared().join("cache");
    att.plant_dir(&theirs.join("kernels"));
    att.plant_file(&theirs.join("kernels").join(&name), &sealed, 0o644);
    // Our own folder, but under a folder another user controls.
    let under = att.shared().join("parent");
    att.plant_dir(&under);
    let ours_under_theirs = under.join("kernels");
    fs::create_dir(&ours_under_theirs).unwrap();
    fs::set_permissions(&ours_under_theirs, fs::Permissions::from_mode(0o700)).unwrap();
    // Our own folder, writable by everyone (a careless umask).
    let open = our_dir(&att, "open");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();

    for (dir, said) in [
        (theirs.join("kernels"), "owned by uid 65534"),
        (ours_under_theirs, "a folder above it"),
        (open.clone(), "chmod go-w"),
    ] {
        let before = listing(&dir);
        let (right, s, cc) = add_is_right(Compiler::detect().unwrap().with_cache_dir(&dir));
        assert!(right, "{}: wrong sums", dir.display());
        assert!(!marker.exists(), "{}: the planted code ran", dir.display());
        assert_eq!(
            (s.compiles, s.disk_hits),
            (1, 0),
            "{}: {s:?}",
            dir.display()
        );
        let why = cc.cache_refusal().expect("the folder was refused");
        assert!(
            why.contains(said) && why.contains(&dir.display().to_string()),
            "{why}"
        );
        assert!(
            cc.notices().iter().any(|n| n.contains(why)),
            "{:?}",
            cc.notices()
        );
        assert_eq!(
            listing(&dir),
            before,
            "{}: something was written there",
            dir.display()
        );
    }
}

/// Env var that turns a run of this test binary into the child of
/// `cache_made_under_umask_000_is_private`: the cache folder to fill.
const UMASK_CHILD: &str = "PICOGRAD_TEST_UMASK_CHILD";

#[test]
fn cache_made_under_umask_000_is_private() {
    if let Some(dir) = std::env::var_os(UMASK_CHILD) {
        // SAFETY: the child process is single-purpose; umask only changes its creation mask.
        unsafe { libc::umask(0) };
        let cc = Compiler::detect()
            .unwrap()
            .with_cache_dir(PathBuf::from(dir));
        assert!(add_is_right(cc).0);
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache").join("kernels");
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "cache_made_under_umask_000_is_private",
            "--nocapture",
        ])
        .env(UMASK_CHILD, &dir)
        .status()
        .unwrap();
    assert!(status.success());
    for d in [dir.parent().unwrap(), &dir] {
        let mode = fs::metadata(d).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    let entries: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(fs::metadata(&entries[0]).unwrap().mode() & 0o777, 0o600);
}

/// Env var that turns a run of this test binary into the child of
/// `target_builds_use_fresh_private_folders`: the victim file's path. The child runs with
/// `TMPDIR` set to the attacker's shared folder.
const BUILD_CHILD: &str = "PICOGRAD_TEST_BUILD_CHILD";

fn bundle_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/bundles/dense_relu")
}

#[test]
fn target_builds_use_fresh_private_folders() {
    if let Some(victim) = std::env::var_os(BUILD_CHILD) {
        build_child(Path::new(&victim));
        return;
    }
    let Some(att) = Attacker::new("target_builds_use_fresh_private_folders") else {
        return;
    };
    let victims = tempfile::tempdir().unwrap();
    let victim = victims.path().join("precious.txt");
    fs::write(&victim, b"precious").unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "target_builds_use_fresh_private_folders",
            "--nocapture",
        ])
        .env(BUILD_CHILD, &victim)
        .env("TMPDIR", att.shared())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed:\n{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        fs::read(&victim).unwrap(),
        b"precious",
        "the victim file changed"
    );
    assert!(
        !att.marker("build").exists(),
        "the planted header's code ran"
    );
    assert!(stderr.contains("build files kept in"), "{stderr}");
}

/// The child: plants the folders the old code would have used (it knew their names: the pid and
/// a counter), then builds, fails a build, and keeps a build.
fn build_child(victim: &Path) {
    let shared = std::env::temp_dir();
    let att = Attacker::in_folder(&shared);
    let marker = att.marker("build");
    let target = Target::by_name("host").unwrap();
    for n in 0..4 {
        let planted = shared.join(format!("picograd-target-host-{}-{n}", std::process::id()));
        att.plant_dir(&planted);
        att.run(&[
            "ln",
            "-s",
            victim.to_str().unwrap(),
            planted.join("inputs.h").to_str().unwrap(),
        ]);
        let header = format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {{ FILE *f = fopen(\"{}\", \"w\"); if (f) fclose(f); }}\n#include \"{}/model.h\"\n",
            marker.display(),
            bundle_dir().display()
        );
        att.plant_file(&planted.join("model.h"), header.as_bytes(), 0o644);
    }
    let before = listing(&shared);
    let x: Vec<f32> = (0..8).map(|j| j as f32 * 0.25 - 1.0).collect();
    let inputs = [("x", Values::f32(&x))];
    let r = build_and_run(&target, &bundle_dir(), &inputs, &BuildOptions::default()).unwrap();
    assert_eq!(
        r.output("y").and_then(Values::to_f32).map(|y| y.len()),
        Some(4)
    );
    assert!(r.build_dir.is_none());
    assert!(!marker.exists(), "the planted header's code ran");
    assert_eq!(
        fs::read(victim).unwrap(),
        b"precious",
        "the victim file changed"
    );
    assert_eq!(
        listing(&shared),
        before,
        "a build folder was left behind after a success"
    );
    // A failed build leaves nothing either.
    let failing = BuildOptions {
        extra_flags: vec![
            "-DPICOGRAD_BROKEN=(".into(),
            "-include".into(),
            "no-such-header.h".into(),
        ],
        ..BuildOptions::default()
    };
    assert!(build_and_run(&target, &bundle_dir(), &inputs, &failing).is_err());
    assert_eq!(
        listing(&shared),
        before,
        "a build folder was left behind after a failure"
    );
    // Kept on request: a fresh private folder, its path said.
    let keep = BuildOptions {
        keep_build_dir: true,
        ..BuildOptions::default()
    };
    let r = build_and_run(&target, &bundle_dir(), &inputs, &keep).unwrap();
    let dir = r.build_dir.expect("the kept folder");
    let meta = fs::metadata(&dir).unwrap();
    assert!(
        dir.starts_with(&shared)
            && !before.contains(&dir.file_name().unwrap().to_string_lossy().into_owned())
    );
    assert_eq!((meta.uid(), meta.mode() & 0o777), (0, 0o700));
    assert!(fs::symlink_metadata(dir.join("inputs.h"))
        .unwrap()
        .is_file());
    fs::remove_dir_all(&dir).unwrap();
    assert_ne!(UID, 0);
}

#[test]
fn target_names_are_looked_up_never_joined_as_paths() {
    let Some(att) = Attacker::new("target_names_are_looked_up_never_joined_as_paths") else {
        return;
    };
    // A description another user left where `--target ../../<it>` would have reached it.
    let planted = att.shared().join("x");
    att.plant_dir(&planted);
    let marker = att.marker("target");
    let host = fs::read_to_string(Target::root_dir().join("host/target.txt")).unwrap();
    let evil = format!("{host}\nrun = touch {}\n", marker.display());
    att.plant_file(&planted.join("target.txt"), evil.as_bytes(), 0o644);
    let root = Target::root_dir();
    let relative = pathdiff(&planted, &root.join("host"));
    for name in [relative.as_str(), planted.to_str().unwrap(), "host/../../x"] {
        let e = Target::by_name(name).unwrap_err();
        assert!(e.to_string().contains("known targets"), "{name}: {e}");
    }
    assert!(!marker.exists());
}

/// `to` relative to `from` (both absolute), as `../..` steps and the rest.
fn pathdiff(to: &Path, from: &Path) -> String {
    let ups = from.components().count();
    let mut s = "../".repeat(ups);
    s.push_str(to.strip_prefix("/").unwrap().to_str().unwrap());
    s
}
