//! The measured search's layout stage (`PICOGRAD_SEARCH`, `std-runtime/src/search/layout.rs`):
//! on a device that measures layouts, the scheduler offers every reduce kernel's layout options
//! and the search times them; whatever it picks, results are bit-identical to an unoptimized
//! device's. The choice is remembered on disk and reused without measuring; a corrupt or foreign
//! layout file is ignored and rebuilt, one another user planted is never read; with the search
//! off, the device measures nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use picograd::device::Device;
use picograd::runtime::search::Search;
use picograd::runtime::Clang;
use picograd::{ConvOpts, Tensor};

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) * 0.37 + (i % 5) as f32 * 1e-3)
        .collect()
}

fn clang() -> Clang {
    Clang::new()
        .expect("no C compiler: layout search tests cannot run")
        .with_threads(1, 0)
}

fn temp_dir(name: &str) -> tempfile::TempDir {
    picograd::runtime::private_fs::private_temp_dir(&format!("picograd-layout-{name}-")).unwrap()
}

/// A device searching every kernel, however small (test kernels are tiny), keeping its choices
/// in `dir`.
fn searching(dir: &Path) -> Arc<Clang> {
    let s = Search::new(Duration::from_millis(30))
        .with_dir(dir)
        .with_min_work(0);
    Arc::new(clang().with_search(Some(s)))
}

fn layout_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "layout"));
    v.sort();
    v
}

/// A padded 3×3 conv with 24 output channels (channel blocks and an unpadded input are among
/// its layouts), computed on `dev`: the output's bits.
fn conv_bits(dev: &Arc<dyn Device>) -> Vec<u32> {
    let (cin, cout) = (5, 24);
    let x = Tensor::from_slice(&data(cin * 14 * 13, 1), &[1, cin, 14, 13]).to_device(dev);
    let w = Tensor::from_slice(&data(cout * cin * 9, 2), &[cout, cin, 3, 3]).to_device(dev);
    let y = x.conv2d(&w, None, &ConvOpts::default().padding(1)).relu();
    let v = y.to_vec::<f32>().unwrap();
    v.iter().map(|x| x.to_bits()).collect()
}

fn unoptimized() -> Arc<dyn Device> {
    Arc::new(clang().with_opt_config(None).with_search(None))
}

/// [`conv_bits`] on a searching device.
fn bits_on(dev: &Arc<Clang>) -> Vec<u32> {
    conv_bits(&(dev.clone() as Arc<dyn Device>))
}

/// A folder holding one measured layout choice: the unoptimized device's bits, and the layout
/// file's path and intact bytes.
struct Measured {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    want: Vec<u32>,
    path: PathBuf,
    intact: Vec<u8>,
}

fn measured_once(name: &str) -> Measured {
    picograd::init();
    let tmp = temp_dir(name);
    let dir = tmp.path().join("choices");
    let want = conv_bits(&unoptimized());
    assert_eq!(bits_on(&searching(&dir)), want);
    let path = layout_files(&dir).pop().expect("a layout file");
    let intact = std::fs::read(&path).unwrap();
    Measured {
        _tmp: tmp,
        dir,
        want,
        path,
        intact,
    }
}

/// A new search in `m`'s folder gives the same bits, and measured again after refusing the file
/// (one rebuilt, none read).
fn assert_rebuilt(m: &Measured, what: &str) {
    let dev = searching(&m.dir);
    assert_eq!(bits_on(&dev), m.want, "{what}");
    let s = dev.search().unwrap().stats();
    assert_eq!(
        (s.corrupt_rebuilt, s.layout_searches, s.layout_disk_hits),
        (1, 1, 0),
        "{what}: {s:?}"
    );
}

#[test]
fn measured_layouts_keep_results_and_are_remembered() {
    picograd::init();
    let tmp = temp_dir("reuse");
    let dir = tmp.path().join("choices");
    let want = conv_bits(&unoptimized());
    let first = searching(&dir);
    assert!(first.measures_layouts());
    assert_eq!(bits_on(&first), want);
    let s = first.search().unwrap().stats();
    assert_eq!((s.layout_searches, s.layout_disk_hits), (1, 0), "{s:?}");
    assert_eq!(layout_files(&dir).len(), 1);
    // The same device again: from memory.
    assert_eq!(bits_on(&first), want);
    let s = first.search().unwrap().stats();
    assert_eq!(s.layout_searches, 1, "{s:?}");
    // A new search (as in a second process): from the file, no measuring.
    let second = searching(&dir);
    assert_eq!(bits_on(&second), want);
    let s = second.search().unwrap().stats();
    assert_eq!((s.layout_searches, s.layout_disk_hits), (0, 1), "{s:?}");
}

#[test]
fn a_corrupt_or_foreign_layout_file_is_rebuilt() {
    let m = measured_once("corrupt");
    let intact = &m.intact;
    let mut flipped = intact.clone();
    flipped[intact.len() / 2] ^= 1;
    let other_count = String::from_utf8(intact.clone())
        .unwrap()
        .replacen(" of ", " of 9", 1);
    for (what, bytes) in [
        ("flipped bit", flipped),
        ("truncated", intact[..intact.len() - 7].to_vec()),
        ("empty", Vec::new()),
        ("another option count", other_count.into_bytes()),
    ] {
        std::fs::write(&m.path, bytes).unwrap();
        assert_rebuilt(&m, what);
        // The rebuilt file is intact: the next search reads it.
        let next = searching(&m.dir);
        assert_eq!(bits_on(&next), m.want, "{what}");
        let s = next.search().unwrap().stats();
        assert_eq!(
            (s.layout_disk_hits, s.layout_searches),
            (1, 0),
            "{what}: {s:?}"
        );
    }
}

#[path = "../std-runtime/tests/common/attacker.rs"]
mod attacker;

/// A layout file another user planted (valid contents, their file), or a link to one, is never
/// read: it is set aside and the layouts measured again, and our own file written in its place.
#[test]
fn a_layout_file_planted_by_another_user_is_not_read() {
    let Some(att) = attacker::Attacker::new("a_layout_file_planted_by_another_user_is_not_read")
    else {
        return;
    };
    let m = measured_once("planted");
    for how in attacker::Swap::ALL {
        att.swap_in(&m.path, &m.intact, how);
        let what = format!("{how:?}");
        assert_rebuilt(&m, &what);
        let meta = std::fs::symlink_metadata(&m.path).unwrap();
        assert!(meta.is_file(), "{what}: not rewritten as our own file");
    }
}

#[test]
fn with_the_search_off_no_layout_is_measured() {
    let dev = clang().with_search(None);
    assert!(!dev.measures_layouts());
    assert_eq!(dev.choose_layout(&[]), None);
}
