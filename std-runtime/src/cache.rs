//! The content-addressed on-disk kernel cache: where entries live, how they are keyed, how they are
//! sealed with a checksum, published, verified and loaded.
//!
//! Invariant: a file at an entry's final path is only ever created by an atomic `rename` of a
//! complete, sealed temporary file from the same directory, and no byte of an entry reaches
//! `dlopen` before the whole file has been read and its trailer (magic, length, key, checksum)
//! verified. Entries are never modified in place, so a library this process has mapped is never
//! changed underneath it by picograd.
//!
//! Trust: the checksum detects accidents only — anyone can recompute it. What keeps other users'
//! code out is ownership and mode: the folder must be private ([`crate::private_fs`]), and an
//! entry is read and loaded only through one handle opened without following links and checked
//! with `fstat` (a regular file of the current user's, writable by no one else). Anything else
//! at an entry's path is set aside by the caller and rebuilt, never loaded, never waited on.
//!
//! ## Entry format
//!
//! `<dir>/<key as 32 lowercase hex digits>.<DLL_EXTENSION>` holds the shared object exactly as the
//! compiler wrote it (the *payload*), followed by a 48-byte trailer — the dynamic loader ignores
//! bytes after the ELF image:
//!
//! | offset from trailer start | bytes | content                                           |
//! | ------------------------- | ----- | ------------------------------------------------- |
//! | 0                         | 16    | the entry's key, u128 little-endian               |
//! | 16                        | 16    | FNV-1a-128 of `payload ‖ key bytes`, little-endian |
//! | 32                        | 8     | payload length in bytes, u64 little-endian        |
//! | 40                        | 8     | magic `PGKCACH1`                                  |
//!
//! Temporary files are named `.<key>.<pid>.<counter>.tmp` in the same directory (unique among
//! live processes); a crash can leave one behind, which is harmless and never loaded.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use libloading::Library;
use picograd_core::{Error, Result};

use crate::private_fs::{make_owner_only, open_private_file, Opened};

/// The magic closing every cache entry.
pub const MAGIC: [u8; 8] = *b"PGKCACH1";
/// Length in bytes of the trailer appended after the shared object.
pub const TRAILER_LEN: usize = 48;

const FNV128_OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
const FNV128_PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

/// FNV-1a with a 128-bit state. Not cryptographic: it keys and checksums our own files, which
/// guards against accidents (torn writes, bit rot, stale files), not against an attacker who can
/// write to the cache directory. Every step is a bijection of the state, so a change to any single
/// byte always changes the hash.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fnv128(u128);

impl Fnv128 {
    pub(crate) fn new() -> Self {
        Fnv128(FNV128_OFFSET)
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u128::from(b);
            self.0 = self.0.wrapping_mul(FNV128_PRIME);
        }
    }

    /// Hashes one length-prefixed field, so that field boundaries are unambiguous.
    pub(crate) fn field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    pub(crate) fn finish(self) -> u128 {
        self.0
    }
}

/// The key of a cache entry: a hash of everything that determines the compiled bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key(pub(crate) u128);

impl Key {
    /// Hashes (source, compiler path, compiler version, flags, target) into a key.
    pub(crate) fn new(src: &str, cc: &Path, version: &str, flags: &[String], target: &str) -> Key {
        let mut h = Fnv128::new();
        h.field(b"picograd kernel cache v1");
        h.field(src.as_bytes());
        h.field(cc.as_os_str().as_encoded_bytes());
        h.field(version.as_bytes());
        h.write(&(flags.len() as u64).to_le_bytes());
        for f in flags {
            h.field(f.as_bytes());
        }
        h.field(target.as_bytes());
        Key(h.finish())
    }

    /// The entry's file name: the key in hex plus the platform's shared-library extension.
    pub(crate) fn file_name(self) -> String {
        format!("{:032x}.{}", self.0, std::env::consts::DLL_EXTENSION)
    }
}

/// The default cache directory for compiled kernels: `$PICOGRAD_CACHE/kernels`, else
/// `$XDG_CACHE_HOME/picograd/kernels`, else `$HOME/.cache/picograd/kernels`; `None` when none
/// of these variables is set (picograd never falls back to a shared directory such as `/tmp`).
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let root = var("PICOGRAD_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|p| p.join("picograd")))
        .or_else(|| var("HOME").map(|p| p.join(".cache").join("picograd")))?;
    Some(root.join("kernels"))
}

/// Checks a whole entry file's bytes against its trailer; on success returns the payload.
/// `expected` is the key the entry must carry (`None` accepts any key).
fn check(bytes: &[u8], expected: Option<u128>) -> std::result::Result<&[u8], String> {
    let len = bytes.len();
    if len < TRAILER_LEN {
        return Err(format!(
            "{len} bytes, shorter than the {TRAILER_LEN}-byte trailer"
        ));
    }
    let (payload, trailer) = bytes.split_at(len - TRAILER_LEN);
    let word = |at: usize| u128::from_le_bytes(trailer[at..at + 16].try_into().unwrap_or([0; 16]));
    if trailer[40..48] != MAGIC {
        return Err("no cache trailer at the end of the file (truncated or foreign)".into());
    }
    let stored_len = u64::from_le_bytes(trailer[32..40].try_into().unwrap_or([0; 8]));
    if stored_len != payload.len() as u64 {
        return Err(format!(
            "trailer records {stored_len} payload bytes, file holds {}",
            payload.len()
        ));
    }
    let key = word(0);
    if expected.is_some_and(|k| k != key) {
        return Err(format!(
            "entry carries key {key:032x}, not the key it is filed under"
        ));
    }
    if word(16) != checksum(payload, key) {
        return Err("checksum mismatch (contents changed since the entry was written)".into());
    }
    Ok(payload)
}

fn checksum(payload: &[u8], key: u128) -> u128 {
    let mut h = Fnv128::new();
    h.write(payload);
    h.write(&key.to_le_bytes());
    h.finish()
}

fn trailer(payload: &[u8], key: u128) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    t[0..16].copy_from_slice(&key.to_le_bytes());
    t[16..32].copy_from_slice(&checksum(payload, key).to_le_bytes());
    t[32..40].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    t[40..48].copy_from_slice(&MAGIC);
    t
}

fn io_err(path: &Path, e: io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Largest entry the cache reads: a kernel library is tens of kilobytes; anything near this is
/// not one of ours.
pub const MAX_ENTRY_BYTES: u64 = 256 << 20;

/// Verifies the cache entry at `path`: `Ok(())` when it is a trusted file (see
/// [`crate::private_fs::open_private_file`]) whose trailer and checksum are intact,
/// `Err(Error::Format)` naming what is wrong otherwise.
pub fn verify_entry(path: &Path) -> Result<()> {
    let format = |offset: u64, detail: String| Error::Format {
        file: path.display().to_string(),
        offset,
        detail,
    };
    match open_private_file(path, MAX_ENTRY_BYTES) {
        Opened::Missing => Err(io_err(path, io::ErrorKind::NotFound.into())),
        Opened::Odd(why) => Err(format(0, why)),
        Opened::Trusted(_, bytes) => check(&bytes, None)
            .map(|_| ())
            .map_err(|detail| format(bytes.len().saturating_sub(TRAILER_LEN) as u64, detail)),
    }
}

/// Seals a payload into a whole entry for `key`: the payload followed by its trailer. Anyone can
/// compute this; it detects corruption, not planting.
pub fn seal(payload: &[u8], key: u128) -> Vec<u8> {
    let mut v = payload.to_vec();
    v.extend_from_slice(&trailer(payload, key));
    v
}

/// The outcome of looking an entry up on disk.
pub(crate) enum Lookup {
    /// The entry was trusted and intact and is now loaded from the handle it was checked through
    /// (which must stay open as long as the library: see [`load`]).
    Loaded(Library, File),
    /// There is no entry.
    Missing,
    /// There is something at the entry's path that must not be loaded (why): not a trusted file
    /// (a link, FIFO, device, folder, another user's file, one others may write), or a file that
    /// failed verification or loading.
    Refused(String),
}

/// Opens the entry for `key` at `path` without following links, checks the open handle's owner,
/// mode and kind, verifies the bytes read through it, and only then loads the library from that
/// same handle.
pub(crate) fn lookup(path: &Path, key: Key) -> Lookup {
    let (file, bytes) = match open_private_file(path, MAX_ENTRY_BYTES) {
        Opened::Missing => return Lookup::Missing,
        Opened::Odd(why) => return Lookup::Refused(why),
        Opened::Trusted(file, bytes) => (file, bytes),
    };
    if let Err(reason) = check(&bytes, Some(key.0)) {
        return Lookup::Refused(format!("corrupt: {reason}"));
    }
    match load(&file, path) {
        Ok(lib) => Lookup::Loaded(lib, file),
        Err(e) => Lookup::Refused(format!("not loadable: {e}")),
    }
}

/// `dlopen`s a verified entry through its open handle (`/proc/self/fd/N` on Linux), so the file
/// loaded is the file checked. The handle must stay open while the library is loaded: the loader
/// recognises libraries by name, and an fd number is reused once closed. Symbols are bound now,
/// so a missing one fails here, not at a call.
pub(crate) fn load(file: &File, path: &Path) -> Result<Library> {
    let fail = |e: libloading::Error| {
        Error::Device(format!(
            "cannot load kernel library {}: {e}",
            path.display()
        ))
    };
    // Without /proc (a bare chroot) the checked path itself is loaded: the folder is private,
    // so only the user could swap the file in between.
    #[cfg(target_os = "linux")]
    let target = {
        use std::os::fd::AsRawFd;
        let by_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        if by_fd.exists() {
            by_fd
        } else {
            path.to_path_buf()
        }
    };
    #[cfg(not(target_os = "linux"))]
    let target = {
        let _ = file;
        path.to_path_buf()
    };
    // SAFETY: the file is the current user's own, writable by no one else, and verified as an
    // entry written by this cache; kernel libraries have no initialisers with side effects.
    #[cfg(unix)]
    let lib = unsafe {
        use libloading::os::unix::{Library as UnixLibrary, RTLD_LOCAL, RTLD_NOW};
        UnixLibrary::open(Some(&target), RTLD_NOW | RTLD_LOCAL).map(Library::from)
    };
    #[cfg(not(unix))]
    let lib = unsafe { Library::new(&target) };
    lib.map_err(fail)
}

/// A fresh temporary path in `dir` for building the entry `key`: unique among live processes
/// (pid) and within this process (a counter). `dir` is private, so nobody else can have put
/// anything there.
pub(crate) fn temp_path(dir: &Path, key: Key) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{:032x}.{}.{n}.tmp", key.0, std::process::id()))
}

/// Seals the compiler's output at `tmp` (makes it the owner's alone, appends the trailer) and
/// renames it to `dest`. The temporary file is removed on failure.
pub(crate) fn publish(tmp: &Path, dest: &Path, key: Key) -> Result<()> {
    let seal = || -> Result<()> {
        make_owner_only(tmp).map_err(|e| io_err(tmp, e))?;
        let payload = fs::read(tmp).map_err(|e| io_err(tmp, e))?;
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(tmp)
            .map_err(|e| io_err(tmp, e))?;
        f.write_all(&trailer(&payload, key.0))
            .map_err(|e| io_err(tmp, e))?;
        drop(f);
        fs::rename(tmp, dest).map_err(|e| io_err(dest, e))
    };
    let r = seal();
    if r.is_err() {
        let _ = fs::remove_file(tmp);
    }
    r
}

/// The default bound on a cache folder's size: `$PICOGRAD_CACHE_MAX_MB` mebibytes when set to a
/// positive number, else 1 GiB.
pub fn default_limit() -> u64 {
    const DEFAULT: u64 = 1 << 30;
    match std::env::var("PICOGRAD_CACHE_MAX_MB") {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(mb) if mb > 0 => mb.saturating_mul(1 << 20),
            _ => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "picograd: PICOGRAD_CACHE_MAX_MB={v:?} is not a positive number of \
                         mebibytes; using 1024"
                    )
                });
                DEFAULT
            }
        },
        Err(_) => DEFAULT,
    }
}

/// Marks an entry as just used (its modification time, through the handle it was loaded from),
/// which is what [`trim`] orders by.
pub(crate) fn touch(file: &File) {
    let _ = file.set_modified(std::time::SystemTime::now());
}

/// The bytes a cache folder's files take: entries, set-aside files and temporary files.
pub(crate) fn folder_bytes(dir: &Path) -> u64 {
    cache_files(dir).iter().map(|f| f.1).sum()
}

/// Every regular file directly in `dir`, with its size and modification time (links and folders
/// are not followed or counted).
fn cache_files(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let meta = fs::symlink_metadata(e.path()).ok()?;
            let when = meta.modified().ok()?;
            meta.is_file().then(|| (e.path(), meta.len(), when))
        })
        .collect()
}

/// Keeps a cache folder within `limit` bytes: when it holds more, removes the least recently
/// used files (oldest modification time first; a hit refreshes it, see [`touch`]) until it holds
/// at most three quarters of `limit`. `keep` is never removed (the entry just written). Returns
/// the bytes left. Removing an entry another process has loaded is harmless: its mapping stays.
pub(crate) fn trim(dir: &Path, limit: u64, keep: &Path) -> u64 {
    let mut files = cache_files(dir);
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    if total <= limit {
        return total;
    }
    files.sort_by_key(|f| f.2);
    let target = limit / 4 * 3;
    for (path, len, _) in files {
        if total <= target {
            break;
        }
        if path != keep && fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(payload: &[u8], key: u128) -> Vec<u8> {
        seal(payload, key)
    }

    #[test]
    fn intact_entry_checks() {
        let e = entry(b"\x7fELF some bytes", 7);
        assert_eq!(check(&e, Some(7)), Ok(&b"\x7fELF some bytes"[..]));
        assert!(check(&e, Some(8)).is_err());
    }

    #[test]
    fn every_single_byte_flip_is_caught() {
        let e = entry(b"\x7fELF payload of a kernel", 42);
        for i in 0..e.len() {
            let mut bad = e.clone();
            bad[i] ^= 0x01;
            assert!(
                check(&bad, Some(42)).is_err(),
                "flip at byte {i} went unnoticed"
            );
        }
    }

    #[test]
    fn every_truncation_is_caught() {
        let e = entry(b"\x7fELF payload of a kernel", 42);
        for n in 0..e.len() {
            assert!(
                check(&e[..n], Some(42)).is_err(),
                "truncation to {n} went unnoticed"
            );
        }
    }

    #[test]
    fn key_fields_are_unambiguous() {
        let a = Key::new("ab", Path::new("c"), "v", &["-O2".into()], "t");
        let b = Key::new("a", Path::new("bc"), "v", &["-O2".into()], "t");
        let c = Key::new("ab", Path::new("c"), "v", &["-O2".into()], "u");
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, Key::new("ab", Path::new("c"), "v", &["-O2".into()], "t"));
    }
}
