//! Files and folders no other local user can plant: the checks behind the kernel cache, the
//! search's choice files and every build folder (see the README's "Trust model").
//!
//! The threat is another local account (or a careless shared folder); the user's own account is
//! trusted. Invariants this module gives its callers:
//! - a folder passed by [`check_private_dir`] is owned by the current user and writable by no one
//!   else, and so is every folder above it unless it is owned by root or the current user and, when
//!   others may write to it, has the sticky bit (as `/tmp` does) — so nobody else can rename,
//!   replace or add anything in it;
//! - [`open_private_file`] hands back bytes only from a regular file owned by the current user and
//!   writable by no one else, opened without following a symbolic link and checked through the
//!   same open handle (`fstat`), so the file cannot be swapped between the check and the read —
//!   and the handle it returns is the one to load from;
//! - [`private_temp_dir`] makes a fresh folder (random name, mode 0700, never an existing one).
//!
//! A recomputable digest is no defence against a planted file: ownership and mode are.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};

/// The effective user id of this process (0 where there are no user ids).
pub fn current_uid() -> u32 {
    #[cfg(unix)]
    // SAFETY: geteuid has no preconditions and cannot fail.
    return unsafe { libc::geteuid() };
    #[cfg(not(unix))]
    0
}

const GROUP_OR_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// Why a folder is not private, with what to do about it.
fn not_private(dir: &Path, what: &str, fix: &str) -> String {
    format!("{} {what}; {fix}", dir.display())
}

/// Checks that `dir` is a folder owned by the current user and writable by no one else, and that
/// no folder above it lets another user replace it (see the module doc). Returns why not, with
/// how to fix it.
pub fn check_private_dir(dir: &Path) -> Result<(), String> {
    let uid = current_uid();
    check_links_on_the_way(dir, uid)?;
    let real = fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let meta = fs::metadata(&real).map_err(|e| format!("{}: {e}", real.display()))?;
    if !meta.is_dir() {
        return Err(not_private(&real, "is not a folder", "remove it"));
    }
    #[cfg(unix)]
    {
        if meta.uid() != uid {
            return Err(not_private(
                &real,
                &format!("is owned by uid {}, not by you (uid {uid})", meta.uid()),
                "another user could plant files there: remove it, or choose a folder of your own",
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & GROUP_OR_OTHER_WRITE != 0 {
            return Err(not_private(
                &real,
                &format!("is writable by group or others (mode {mode:04o})"),
                &format!("run `chmod go-w {}`", real.display()),
            ));
        }
        for parent in real.ancestors().skip(1) {
            check_ancestor(parent, uid)?;
        }
    }
    Ok(())
}

/// A folder above a private one: owned by root or the current user, and when others may write to
/// it, sticky (so they cannot rename what they do not own).
#[cfg(unix)]
fn check_ancestor(dir: &Path, uid: u32) -> Result<(), String> {
    let meta = fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if meta.uid() != uid && meta.uid() != 0 {
        return Err(not_private(
            dir,
            &format!(
                "(a folder above it) is owned by uid {}, who could replace what is inside",
                meta.uid()
            ),
            "choose a folder that only you and root control",
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & GROUP_OR_OTHER_WRITE != 0 && mode & STICKY == 0 {
        return Err(not_private(
            dir,
            &format!("(a folder above it) is writable by others without the sticky bit (mode {mode:04o})"),
            "choose a folder that only you and root control",
        ));
    }
    Ok(())
}

/// Every symbolic link on the way to `dir` (as written) must be owned by root or the current user:
/// someone else's link could be pointed elsewhere after the check.
fn check_links_on_the_way(dir: &Path, uid: u32) -> Result<(), String> {
    let mut prefix = PathBuf::new();
    for part in dir.components() {
        prefix.push(part);
        let Ok(meta) = fs::symlink_metadata(&prefix) else {
            break;
        };
        #[cfg(unix)]
        if meta.file_type().is_symlink() && meta.uid() != uid && meta.uid() != 0 {
            return Err(not_private(
                &prefix,
                &format!("is a symbolic link owned by uid {}", meta.uid()),
                "use a path without links other users own",
            ));
        }
        #[cfg(not(unix))]
        let _ = (meta, uid);
    }
    Ok(())
}

/// Creates `dir` (and any missing folder above it) with mode 0700 whatever the umask, then checks
/// it with [`check_private_dir`].
pub fn ensure_private_dir(dir: &Path) -> Result<(), String> {
    if fs::symlink_metadata(dir).is_err() {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        builder.mode(0o700);
        builder
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    check_private_dir(dir)
}

/// What [`open_private_file`] found at a path.
#[derive(Debug)]
pub enum Opened {
    /// Nothing is there.
    Missing,
    /// A trusted regular file: the open handle and its whole contents, read through that handle.
    Trusted(File, Vec<u8>),
    /// Something is there that must not be read (why): a link, FIFO, device, folder, a file of
    /// another user or one others may write, one too large, or one that cannot be read.
    Odd(String),
}

/// Opens `path` without following a link and without waiting on a FIFO, checks the open handle
/// (a regular file, owned by the current user, writable by no one else, at most `max_len`
/// bytes) and reads it whole through that handle.
pub fn open_private_file(path: &Path, max_len: u64) -> Opened {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    let mut file = match options.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Opened::Missing,
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Opened::Odd("a symbolic link".into())
        }
        Err(e) => return Opened::Odd(format!("cannot be opened: {e}")),
    };
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(e) => return Opened::Odd(format!("cannot be examined: {e}")),
    };
    if let Err(why) = trusted_file(&meta, max_len) {
        return Opened::Odd(why);
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // One byte more than allowed: a file that grows after the check is still caught.
    match (&mut file).take(max_len + 1).read_to_end(&mut bytes) {
        Ok(n) if n as u64 > max_len => Opened::Odd(format!("larger than {max_len} bytes")),
        Ok(_) => Opened::Trusted(file, bytes),
        Err(e) => Opened::Odd(format!("cannot be read: {e}")),
    }
}

/// A regular file owned by the current user that no one else may write, of at most `max_len`
/// bytes.
fn trusted_file(meta: &fs::Metadata, max_len: u64) -> Result<(), String> {
    let kind = meta.file_type();
    if kind.is_dir() {
        return Err("a folder".into());
    }
    if !kind.is_file() {
        return Err("not a regular file (a FIFO, socket or device)".into());
    }
    #[cfg(unix)]
    {
        let uid = current_uid();
        if meta.uid() != uid {
            return Err(format!(
                "owned by uid {}, not by you (uid {uid})",
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & GROUP_OR_OTHER_WRITE != 0 {
            return Err(format!("writable by group or others (mode {mode:04o})"));
        }
    }
    if meta.len() > max_len {
        return Err(format!("{} bytes, more than {max_len}", meta.len()));
    }
    Ok(())
}

/// Moves whatever is at `path` out of the way (to `.<name>.set-aside.<pid>.<n>` beside it) so a
/// fresh file can take its place; returns the new name, or `None` when it could not be moved.
/// Nothing is followed or opened: a link is moved as a link.
pub fn set_aside(path: &Path) -> Option<PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name()?.to_string_lossy().into_owned();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let aside = path.with_file_name(format!(".{name}.set-aside.{}.{n}", std::process::id()));
    fs::rename(path, &aside).ok().map(|()| aside)
}

/// Makes a file written by a tool (a compiler's output) readable and writable by its owner only,
/// whatever the umask was.
pub fn make_owner_only(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// A fresh private folder in the system's temporary directory: a random name starting with
/// `prefix`, mode 0700, created by this call (an existing folder is never used). Removed when the
/// returned value drops, unless kept with [`tempfile::TempDir::keep`].
pub fn private_temp_dir(prefix: &str) -> io::Result<tempfile::TempDir> {
    // Whoever controls the temporary directory could rename our folder away and put their own in
    // its place: it must be root's or ours, and sticky if others may write to it (as /tmp is).
    #[cfg(unix)]
    {
        let root = std::env::temp_dir();
        let uid = current_uid();
        let real = fs::canonicalize(&root)?;
        for dir in real.ancestors() {
            check_ancestor(dir, uid).map_err(|why| {
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "the temporary directory {} is not safe for private folders: {why} \
                         (set TMPDIR to a folder of your own)",
                        root.display()
                    ),
                )
            })?;
        }
    }
    // mkdir fails when the name exists (tempfile then retries with another random name); the
    // mode is asked for explicitly, since tempfile's default follows the umask.
    let mut builder = tempfile::Builder::new();
    builder.prefix(prefix);
    #[cfg(unix)]
    builder.permissions(fs::Permissions::from_mode(0o700));
    builder.tempdir()
}

/// Writes `bytes` to `path` atomically: a new file with a unique random name in the same folder
/// (created exclusively, mode 0600, then given `mode`), then renamed over `path` — a link at `path`
/// is replaced, never followed, and readers see the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".picograd-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    #[cfg(unix)]
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))?;
    #[cfg(not(unix))]
    let _ = mode;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("pg-private-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn private_dir_made_0700_under_any_umask() {
        let root = scratch("umask");
        let dir = root.path().join("a").join("b");
        // SAFETY: umask only changes this process's file-creation mask; restored below.
        let old = unsafe { libc::umask(0) };
        let made = ensure_private_dir(&dir);
        unsafe { libc::umask(old) };
        made.unwrap();
        let mode = fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn group_writable_dir_is_refused_with_a_fix() {
        let root = scratch("gw");
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o775)).unwrap();
        let why = check_private_dir(root.path()).unwrap_err();
        assert!(why.contains("writable by group or others"), "{why}");
        assert!(why.contains("chmod go-w"), "{why}");
    }

    #[test]
    fn odd_things_are_reported_not_read() {
        let root = scratch("odd");
        let p = root.path();
        fs::write(p.join("ok"), b"fine").unwrap();
        make_owner_only(&p.join("ok")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", p.join("link")).unwrap();
        fs::create_dir(p.join("dir")).unwrap();
        fs::write(p.join("open"), b"x").unwrap();
        fs::set_permissions(p.join("open"), fs::Permissions::from_mode(0o666)).unwrap();
        let fifo = std::ffi::CString::new(p.join("fifo").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(
            matches!(open_private_file(&p.join("ok"), 100), Opened::Trusted(_, b) if b == b"fine")
        );
        assert!(matches!(
            open_private_file(&p.join("none"), 100),
            Opened::Missing
        ));
        for (name, why) in [
            ("link", "symbolic link"),
            ("dir", "folder"),
            ("open", "writable by group or others"),
            ("fifo", "FIFO"),
        ] {
            match open_private_file(&p.join(name), 100) {
                Opened::Odd(w) => assert!(w.contains(why), "{name}: {w}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        match open_private_file(&p.join("ok"), 3) {
            Opened::Odd(w) => assert!(w.contains("more than 3"), "{w}"),
            other => panic!("{other:?}"),
        }
        let aside = set_aside(&p.join("link")).unwrap();
        assert!(fs::symlink_metadata(&aside)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(fs::symlink_metadata(p.join("link")).is_err());
    }

    #[test]
    fn atomic_write_replaces_a_link_instead_of_following_it() {
        let root = scratch("atomic");
        let victim = root.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let out = root.path().join("out");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        write_atomic(&out, b"new", 0o600).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(&out).unwrap(), b"new");
        assert!(!fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
    }

    #[test]
    fn temp_dirs_are_fresh_and_private() {
        let a = private_temp_dir("pg-test-").unwrap();
        let b = private_temp_dir("pg-test-").unwrap();
        assert_ne!(a.path(), b.path());
        assert_eq!(fs::metadata(a.path()).unwrap().mode() & 0o777, 0o700);
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists());
    }
}
