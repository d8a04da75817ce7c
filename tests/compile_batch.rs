//! Compiling a schedule's kernels at once (`Device::compile_many`): on Clang the kernels become a
//! few translation units compiled in parallel. Checked against independent references: results
//! are bit-identical to the interpreter's and to a Clang device compiling kernel by kernel; a
//! schedule costs one compiler run per translation unit (one more when it mixes kernels compiled
//! at `-O1` and `-O2`; the two efforts are separate cache entries), a kernel compiled in a batch is never
//! compiled again alone, a fresh compiler finds every batch in the disk cache, and corrupt batch
//! entries are rebuilt. Zero fills need no kernel at all. Every test uses its own cache directory.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::LinearKernel;
use picograd::device::{Allocator, Device, Program};
use picograd::runtime::clang::effort_for;
use picograd::runtime::{Clang, Compiler, Effort};
use picograd::schedule::schedule;
use picograd::{ConvOpts, DType, Interp, Padding, Result, Tensor};

/// A fresh, empty directory under the target dir, unique to this test and process.
fn fresh_dir(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "batch-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A compiler of its own (its counters see only this test's work) filling `dir`.
fn compiler(dir: &PathBuf) -> &'static Compiler {
    let cc = Compiler::detect()
        .expect("a C compiler")
        .with_cache_dir(dir);
    Box::leak(Box::new(cc))
}

/// A Clang device on `cc` splitting every splittable kernel across `threads` cores (and so
/// compiling a schedule as up to `threads` translation units).
fn clang(cc: &'static Compiler, threads: usize) -> Arc<dyn Device> {
    Arc::new(
        Clang::new()
            .expect("a C compiler")
            .with_compiler(cc)
            .with_threads(threads, 0),
    )
}

/// Clang, but compiling the kernels of a schedule one by one (the trait's default).
struct OneByOne(Clang);

impl Device for OneByOne {
    fn name(&self) -> &str {
        "CLANG-ONE-BY-ONE"
    }
    fn allocator(&self) -> &dyn Allocator {
        self.0.allocator()
    }
    fn compile(&self, k: &LinearKernel) -> Result<Arc<dyn Program>> {
        self.0.compile(k)
    }
    fn opt_config(&self) -> Option<OptConfig> {
        self.0.opt_config()
    }
    fn fused_mulacc(&self) -> bool {
        self.0.fused_mulacc()
    }
}

/// Deterministic inputs with odd sizes (no multiple of a vector width).
fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 250.0 - 2.0
        })
        .collect()
}

/// A small MLP with a softmax-style tail: several kernels of different shapes in one schedule.
fn mlp(dev: &Arc<dyn Device>) -> Tensor {
    let t = |n: usize, shape: &[usize], seed: u32| {
        Tensor::from_slice(&data(n, seed), shape).to_device(dev)
    };
    let x = t(3 * 37, &[3, 37], 1);
    let w1 = t(37 * 29, &[37, 29], 2);
    let b1 = t(29, &[29], 3);
    let w2 = t(29 * 5, &[29, 5], 4);
    let h = x.matmul(&w1).add(&b1).relu();
    let y = h.matmul(&w2);
    y.sub(y.max(&[1], true))
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .expect("runs")
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// How many kernels (not copies) realizing `t` schedules.
fn kernels_in(t: &Tensor) -> usize {
    let items = schedule(&[t.lazy().contiguous()]).expect("schedules");
    items.iter().filter(|i| !i.is_copy).count()
}

#[test]
fn batched_schedule_matches_interp_and_one_by_one() {
    // The interpreter rounds multiply-accumulates as the host's Clang device does (fused or not).
    let fused = picograd::runtime::tuning::host_fma();
    let interp: Arc<dyn Device> = Arc::new(Interp::new().with_fused_mulacc(fused));
    let want = bits(&mlp(&interp));
    for threads in [1, 2, 3] {
        let cc = compiler(&fresh_dir("match"));
        let got = bits(&mlp(&clang(cc, threads)));
        assert_eq!(got, want, "batched Clang ({threads} threads) vs Interp");
        let alone: Arc<dyn Device> = Arc::new(OneByOne(
            Clang::new()
                .unwrap()
                .with_compiler(cc)
                .with_threads(threads, 0),
        ));
        assert_eq!(bits(&mlp(&alone)), want, "one-by-one Clang vs Interp");
    }
}

/// The cache entries (kernel libraries) in a cache directory.
fn entries_in(dir: &std::path::Path) -> Vec<PathBuf> {
    let kernels = dir.join("kernels");
    let dir = if kernels.is_dir() {
        kernels
    } else {
        dir.to_path_buf()
    };
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| !n.to_string_lossy().starts_with('.'))
        })
        .collect()
}

#[test]
fn a_schedule_compiles_once_per_translation_unit_and_hits_the_disk_cache() {
    let dir = fresh_dir("once");
    let cc = compiler(&dir);
    let dev = clang(cc, 2);
    let y = mlp(&dev);
    let n = kernels_in(&y);
    assert!(
        n >= 3,
        "the test needs a schedule of several kernels, got {n}"
    );
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let lowered: Vec<LinearKernel> = items
        .iter()
        .filter(|i| !i.is_copy)
        .map(|i| picograd::codegen::lower::lower(i).unwrap())
        .collect();
    // The MLP mixes codegen-vectorized kernels (-O1) with scalar ones (-O2); its few vector
    // kernels do not repay a compiler run of their own, so the two compile threads make two
    // units.
    let efforts: Vec<Effort> = lowered.iter().map(effort_for).collect();
    assert!(
        efforts.contains(&Effort::Light) && efforts.contains(&Effort::Full),
        "the test needs both efforts, got {efforts:?}"
    );
    y.realize().unwrap();
    let s = cc.stats();
    assert_eq!(s.compiles, 2, "{n} kernels as two units: {s:?}");
    assert_eq!((s.disk_hits, s.corrupt_rebuilt), (0, 0), "{s:?}");
    assert_eq!(entries_in(&dir).len(), 2, "one cache entry per unit");
    // Asking for a batched kernel on its own reuses the batch's library.
    for k in &lowered {
        dev.compile(k).unwrap();
    }
    assert_eq!(cc.stats().compiles, 2, "{:?}", cc.stats());
    // A fresh compiler (another process, in effect) finds every unit on disk.
    let cc2 = compiler(&dir);
    let want = bits(&y);
    assert_eq!(bits(&mlp(&clang(cc2, 2))), want);
    let s2 = cc2.stats();
    assert_eq!((s2.compiles, s2.disk_hits), (0, 2), "{s2:?}");
}

/// The same source at two efforts is two cache entries (the flags are part of the key), both
/// loadable, and a kernel needs the effort it was planned at: its -O1 library is not taken for
/// -O2 or the other way round.
#[test]
fn efforts_are_separate_cache_entries() {
    let dir = fresh_dir("effort");
    let cc = compiler(&dir);
    assert_ne!(cc.flags_for(Effort::Light), cc.flags_for(Effort::Full));
    let src = "int pg_effort_probe(int x) { return x * 3 + 1; }\n";
    let full = cc.compile_with(src, Effort::Full).unwrap();
    let light = cc.compile_with(src, Effort::Light).unwrap();
    assert_ne!(full.path(), light.path());
    assert_eq!(cc.stats().compiles, 2, "{:?}", cc.stats());
    assert_eq!(entries_in(&dir).len(), 2);
    let cc2 = compiler(&dir);
    cc2.compile_with(src, Effort::Light).unwrap();
    cc2.compile_with(src, Effort::Full).unwrap();
    assert_eq!((cc2.stats().compiles, cc2.stats().disk_hits), (0, 2));
}

#[test]
fn corrupt_batch_entries_are_rebuilt() {
    let dir = fresh_dir("corrupt");
    let want = bits(&mlp(&clang(compiler(&dir), 2)));
    let mut entries = 0;
    for path in entries_in(&dir) {
        let mut b = std::fs::read(&path).unwrap();
        let mid = b.len() / 2;
        b[mid] ^= 0x40;
        // A new file renamed over the entry, never an in-place write: the entry may still
        // be mapped by the first compiler's programs.
        let tmp = path.with_extension("corrupting");
        std::fs::write(&tmp, b).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        entries += 1;
    }
    assert_eq!(entries, 2, "two translation units in {}", dir.display());
    let cc = compiler(&dir);
    assert_eq!(bits(&mlp(&clang(cc, 2))), want);
    let s = cc.stats();
    assert_eq!((s.corrupt_rebuilt, s.compiles), (2, 2), "{s:?}");
}

#[test]
fn zero_fills_need_no_kernel() {
    let cc = compiler(&fresh_dir("zeros"));
    let dev = clang(cc, 1);
    let like = |dt: DType| {
        Tensor::from_slice(&[1.0f32; 6], &[2, 3])
            .to_device(&dev)
            .cast(dt)
    };
    let z = like(DType::F32).zeros_like();
    z.realize().unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 6]);
    let zi = like(DType::I32).zeros_like();
    zi.realize().unwrap();
    assert_eq!(zi.to_vec::<i32>().unwrap(), vec![0; 6]);
    assert_eq!(cc.stats().compiles, 0, "{:?}", cc.stats());
    // -0.0 is not all-zero bits: it needs its kernel, and keeps its sign.
    let nz = like(DType::F32).full_like(-0.0);
    nz.realize().unwrap();
    let got: Vec<u32> = nz
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(got, vec![(-0.0f32).to_bits(); 6]);
    assert_eq!(cc.stats().compiles, 1, "{:?}", cc.stats());
}

/// Three convs (3×3, padded, with ReLU) and their scalar pads and copies: the convs are
/// codegen-vectorized and many enough to get an `-O1` unit of their own next to the `-O2` one.
fn convs(dev: &Arc<dyn Device>) -> Tensor {
    let t = |n: usize, shape: &[usize], seed: u32| {
        Tensor::from_slice(&data(n, seed), shape).to_device(dev)
    };
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let mut x = t(16 * 14 * 14, &[1, 16, 14, 14], 7);
    for (i, (cin, cout)) in [(16, 32), (32, 24), (24, 40)].into_iter().enumerate() {
        let w = t(cout * cin * 9, &[cout, cin, 3, 3], 10 + i as u32);
        x = x.conv2d(&w, None, &opts).relu();
    }
    x
}

/// A batch with an `-O1` unit gives the interpreter's bits, costs one compiler run per unit,
/// and a fresh compiler finds both units on disk.
#[test]
fn light_units_match_interp_and_hit_the_disk_cache() {
    let fused = picograd::runtime::tuning::host_fma();
    let interp: Arc<dyn Device> = Arc::new(Interp::new().with_fused_mulacc(fused));
    let want = bits(&convs(&interp));
    let dir = fresh_dir("light");
    let cc = compiler(&dir);
    let y = convs(&clang(cc, 1));
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let light = items
        .iter()
        .filter(|i| !i.is_copy)
        .map(|i| picograd::codegen::lower::lower(i).unwrap())
        .filter(|k| effort_for(k) == Effort::Light)
        .count();
    assert!(
        light >= 3,
        "the test needs the convs vectorized, {light} are"
    );
    assert_eq!(bits(&y), want, "batched Clang with an -O1 unit vs Interp");
    let s = cc.stats();
    assert_eq!(s.compiles, 2, "one -O2 and one -O1 unit: {s:?}");
    assert_eq!(entries_in(&dir).len(), 2);
    let cc2 = compiler(&dir);
    assert_eq!(bits(&convs(&clang(cc2, 1))), want);
    assert_eq!((cc2.stats().compiles, cc2.stats().disk_hits), (0, 2));
}
