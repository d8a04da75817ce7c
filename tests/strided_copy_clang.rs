//! Movement kernels over constant buffers run as strided copies on the Clang device
//! (`Device::copy_program`), not compiled: the compiler is never run for them (counted through a
//! compiler of the test's own), and their bytes equal the compiled kernel's (the same movement
//! of an unmarked buffer) and the interpreter's — directly, as a layout copy of a linear layer's
//! weight, and in a JIT capture whose frozen copy runs again after the weight is written.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use picograd::device::Device;
use picograd::jit::Jit;
use picograd::runtime::{Clang, Compiler};
use picograd::schedule::schedule;
use picograd::{Interp, Tensor};

fn fresh_dir(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "strided-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A Clang device on a compiler of its own (its counters see only this test's compiles).
fn clang(name: &str) -> (Arc<dyn Device>, &'static Compiler) {
    let cc = Compiler::detect()
        .expect("a C compiler")
        .with_cache_dir(fresh_dir(name));
    let cc: &'static Compiler = Box::leak(Box::new(cc));
    let dev: Arc<dyn Device> = Arc::new(Clang::new().expect("a C compiler").with_compiler(cc));
    (dev, cc)
}

fn interp() -> Arc<dyn Device> {
    Arc::new(Interp::new().with_fused_mulacc(picograd::runtime::tuning::host_fma()))
}

fn vals(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 997) as f32 / 97.0 - 5.0)
        .collect()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn on(dev: &Arc<dyn Device>, v: &[f32], shape: &[usize], constant: bool) -> Tensor {
    let t = Tensor::from_slice(v, shape).to_device(dev);
    t.realize().unwrap();
    if constant {
        t.lazy().realized().unwrap().mark_constant();
    }
    t
}

/// A permute and pad of an odd block: as a copy of a constant it needs no compiler, and its
/// bytes are those of the compiled kernel and of the interpreter.
#[test]
fn a_movement_of_a_constant_is_copied_not_compiled() {
    let v = vals(3 * 5 * 7, 1);
    let mv = |t: &Tensor| {
        t.permute(&[2, 0, 1])
            .pad(&[(1, 2), (0, 1), (2, 0)])
            .contiguous()
    };
    let want = bits(&mv(&on(&interp(), &v, &[3, 5, 7], false)));
    let (dev, cc) = clang("const");
    let got = bits(&mv(&on(&dev, &v, &[3, 5, 7], true)));
    assert_eq!(cc.stats().compiles, 0, "{:?}", cc.stats());
    assert_eq!(got, want, "strided copy vs interpreter");
    // A device of its own: programs are cached per device and kernel, so `dev` would run the
    // same kernel as its strided copy again.
    let (dev2, cc2) = clang("plain");
    let compiled = bits(&mv(&on(&dev2, &v, &[3, 5, 7], false)));
    assert_eq!(
        cc2.stats().compiles,
        1,
        "an unmarked buffer's movement compiles"
    );
    assert_eq!(got, compiled, "strided copy vs compiled kernel");
}

/// `x @ wᵀ` with `w` constant: the layout pass copies `w` into panels, a strided copy; only the
/// product is compiled. Under a JIT the copy is frozen; after `w`'s buffer is written, the next
/// replay runs it again (through its program's handles) and the results follow the new weight.
#[test]
fn a_layout_copy_of_a_weight_is_not_compiled_and_refreshes_in_a_jit() {
    // 48 output columns: whole panels at 8 or 16 lanes.
    jit_case(48, 1);
}

/// 30 output columns leave a remainder panel, padded: its copy reads through two views (the
/// padded weight, then the panels), which the strided copy does not take, so it is compiled —
/// with the same results.
#[test]
fn a_remainder_panel_is_compiled_with_the_same_results() {
    jit_case(30, 2);
}

/// [`a_layout_copy_of_a_weight_is_not_compiled_and_refreshes_in_a_jit`] with `m` output columns,
/// expecting `compiles` compiler runs in all.
fn jit_case(m: usize, compiles: u64) {
    let (n, k) = (3, 20);
    let (dev, cc) = clang("jit");
    let mut wv = vals(m * k, 2);
    let w = on(&dev, &wv, &[m, k], true);
    let x0 = on(&dev, &vals(n * k, 3), &[n, k], false);
    let y0 = x0.matmul(&w.transpose(0, 1));
    let items = schedule(&[y0.lazy().contiguous()]).unwrap();
    let kernels = items.iter().filter(|i| !i.is_copy).count();
    assert_eq!(
        items.iter().filter(|i| i.layout_copy).count(),
        1,
        "the test needs a layout copy of the weight"
    );
    assert_eq!(kernels, 2, "the copy and the product");
    let w2 = w.clone();
    let jit = Jit::new(move |ins: &[Tensor]| Ok(vec![ins[0].matmul(&w2.transpose(0, 1))]));
    let reference = |xv: &[f32], wv: &[f32]| {
        let i = interp();
        bits(&on(&i, xv, &[n, k], false).matmul(&on(&i, wv, &[m, k], false).transpose(0, 1)))
    };
    for call in 0..5 {
        if call == 3 {
            wv = vals(m * k, 7);
            let bytes: Vec<u8> = wv.iter().flat_map(|v| v.to_ne_bytes()).collect();
            w.lazy().realized().unwrap().copy_in(&bytes).unwrap();
        }
        let xv = vals(n * k, 10 + call);
        let y = jit.call(&[on(&dev, &xv, &[n, k], false)]).unwrap();
        assert_eq!(bits(&y[0]), reference(&xv, &wv), "call {call}");
        let cap = jit.capture().unwrap();
        assert_eq!(
            cap.steps().len() - cap.replayed_steps(),
            1,
            "the copy is frozen"
        );
        assert_eq!(cap.refreshes(), usize::from(call >= 3), "call {call}");
    }
    assert_eq!(cc.stats().compiles, compiles, "{:?}", cc.stats());
}
