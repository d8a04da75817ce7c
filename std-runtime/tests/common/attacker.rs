//! Another local user, made real for the security tests: commands run as uid/gid 65534 (`nobody`)
//! through `setpriv`, so the files they leave are owned by someone else, as a planted file is.
//!
//! Needs root (CI runs as root). Without root, or without `setpriv`, [`Attacker::new`] returns
//! `None` and the test says it was skipped — except under `CI=true`, where it fails: CI has both.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The attacker's user and group id.
pub const UID: u32 = 65534;

/// How [`Attacker::swap_in`] puts the attacker's file where ours was.
#[derive(Clone, Copy, Debug)]
pub enum Swap {
    /// Their file, moved into place (same contents, their owner).
    TheirFile,
    /// A link to their file.
    LinkToTheirFile,
}

impl Swap {
    /// Every way.
    pub const ALL: [Swap; 2] = [Swap::TheirFile, Swap::LinkToTheirFile];
}

/// Runs commands as [`UID`] and owns a shared scratch folder (sticky and world-writable, like
/// `/tmp`) where it plants things. A folder it made is removed on drop.
pub struct Attacker {
    shared: PathBuf,
    _made: Option<tempfile::TempDir>,
}

impl Attacker {
    /// An attacker, or `None` (with a note on stderr) when this machine cannot make one and we are
    /// not under CI.
    pub fn new(test: &str) -> Option<Attacker> {
        Self::can_act(test).then(|| {
            let made = tempfile::Builder::new()
                .prefix("picograd-attack-")
                .tempdir()
                .expect("a scratch folder");
            fs::set_permissions(made.path(), fs::Permissions::from_mode(0o1777)).unwrap();
            Attacker {
                shared: made.path().to_path_buf(),
                _made: Some(made),
            }
        })
    }

    /// An attacker sharing `folder` (made by another [`Attacker::new`], e.g. in a parent process).
    pub fn in_folder(folder: &Path) -> Attacker {
        Attacker {
            shared: folder.to_path_buf(),
            _made: None,
        }
    }

    /// Whether this machine can run commands as another user; see the module doc.
    fn can_act(test: &str) -> bool {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let setpriv = Command::new("setpriv").arg("--version").output().is_ok();
        if !(root && setpriv) {
            let why = format!(
                "{test}: needs root and setpriv to act as another user (root: {root}, setpriv: {setpriv})"
            );
            if std::env::var_os("CI").is_some_and(|v| v == "true") {
                panic!("{why}");
            }
            eprintln!("SKIPPED {why}");
            return false;
        }
        true
    }

    /// The shared folder (mode 1777, owned by root) both users can write to.
    pub fn shared(&self) -> &Path {
        &self.shared
    }

    /// Runs `args` as the attacker and panics if it fails.
    pub fn run(&self, args: &[&str]) {
        let out = Command::new("setpriv")
            .args([
                "--reuid",
                &UID.to_string(),
                "--regid",
                &UID.to_string(),
                "--clear-groups",
                "--",
            ])
            .args(args)
            .output()
            .expect("setpriv runs");
        assert!(
            out.status.success(),
            "as uid {UID}: {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Writes `bytes` to `dest` as the attacker (a file owned by [`UID`], mode `mode`): staged by
    /// us in the shared folder, copied by the attacker.
    pub fn plant_file(&self, dest: &Path, bytes: &[u8], mode: u32) {
        let stage = self.shared().join(format!(
            "stage-{}",
            dest.file_name().unwrap().to_string_lossy()
        ));
        fs::write(&stage, bytes).unwrap();
        fs::set_permissions(&stage, fs::Permissions::from_mode(0o644)).unwrap();
        self.run(&["cp", stage.to_str().unwrap(), dest.to_str().unwrap()]);
        self.run(&["chmod", &format!("{mode:o}"), dest.to_str().unwrap()]);
        fs::remove_file(&stage).unwrap();
        assert_eq!(fs::metadata(dest).unwrap().uid(), UID);
    }

    /// Replaces our file at `path` with one of the attacker's holding `bytes`, as `how` says.
    pub fn swap_in(&self, path: &Path, bytes: &[u8], how: Swap) {
        let name = path.file_name().unwrap().to_string_lossy();
        let theirs = self.shared().join(format!("theirs-{name}"));
        self.plant_file(&theirs, bytes, 0o644);
        match how {
            Swap::TheirFile => fs::rename(&theirs, path).unwrap(),
            Swap::LinkToTheirFile => {
                fs::remove_file(path).unwrap();
                std::os::unix::fs::symlink(&theirs, path).unwrap();
            }
        }
    }

    /// Makes a folder as the attacker, mode 0777 (so the victim can write there, as a folder
    /// meant as bait would be).
    pub fn plant_dir(&self, dir: &Path) {
        self.run(&["mkdir", "-p", "-m", "0777", dir.to_str().unwrap()]);
    }

    /// Compiles `c_source` as the attacker into a shared library at `dest` (owned by [`UID`]).
    pub fn plant_library(&self, c_source: &str, dest: &Path) {
        let src = self
            .shared()
            .join(format!("{}.c", dest.file_name().unwrap().to_string_lossy()));
        fs::write(&src, c_source).unwrap();
        fs::set_permissions(&src, fs::Permissions::from_mode(0o644)).unwrap();
        self.run(&[
            "cc",
            "-shared",
            "-fPIC",
            "-O1",
            src.to_str().unwrap(),
            "-o",
            dest.to_str().unwrap(),
        ]);
    }

    /// A marker path the planted code writes when it runs.
    pub fn marker(&self, name: &str) -> PathBuf {
        self.shared().join(format!("ran-{name}"))
    }
}

/// C for a planted kernel library: a constructor that leaves `marker` behind when the library is
/// loaded, and an `add_entry` that writes 42 everywhere (a wrong answer).
pub fn evil_library_source(marker: &Path) -> String {
    format!(
        r#"
#include <stdio.h>
#include <stdint.h>
__attribute__((constructor)) static void planted(void) {{
  FILE *f = fopen("{}", "w");
  if (f) {{ fputs("planted code ran\n", f); fclose(f); }}
}}
void add_entry(void **bufs, const int32_t *vars) {{
  float *out = (float *)bufs[0];
  for (int32_t i = 0; i < vars[0]; i++) out[i] = 42.0f;
}}
"#,
        marker.display()
    )
}

/// The names in `dir`, sorted (to compare a folder before and after).
pub fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
