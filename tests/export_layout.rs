//! Export undoes the scheduler's layout transforms for a target without caches: a conv captured
//! on the desktop (where its padded input and channel-blocked weights are copies) exports for a
//! microcontroller with the same files as a capture recorded without layout transforms — no copy
//! kernel, no copy in the arena or in flash.

use std::sync::Arc;

use picograd::codegen::opt::OptConfig;
use picograd::device::Device;
use picograd::export::{export, ExportNames, ExportOptions};
use picograd::jit::Capture;
use picograd::{ConvOpts, Tensor};

fn vals(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0)
        .collect()
}

/// A conv + relu captured on `dev`.
fn capture(dev: &Arc<dyn Device>) -> Capture {
    let x = Tensor::try_from_slice_on(&vals(8 * 12 * 12, 1), &[1, 8, 12, 12], dev).unwrap();
    let w = Tensor::try_from_slice_on(&vals(16 * 8 * 9, 2), &[16, 8, 3, 3], dev).unwrap();
    Tensor::realize_all(&[&x, &w]).unwrap();
    let y = x.conv2d(&w, None, &ConvOpts::default().padding(1)).relu();
    Capture::record(&[&x], &[&y]).unwrap().0
}

#[test]
fn export_for_a_cacheless_target_drops_the_layout_copies() {
    picograd::init();
    let laid: Arc<dyn Device> = Arc::new(
        picograd::runtime::Clang::new()
            .unwrap()
            .with_opt_config(Some(OptConfig::for_vec_width(8))),
    );
    let plain: Arc<dyn Device> = Arc::new(
        picograd::runtime::Clang::new()
            .unwrap()
            .with_opt_config(None),
    );
    let (cap, cap_plain) = (capture(&laid), capture(&plain));
    let copies = cap.steps().iter().filter(|s| s.layout_copy).count();
    assert_eq!(copies, 2, "padded input and weight blocks on the desktop");
    assert!(cap_plain.steps().iter().all(|s| !s.layout_copy));
    let small = cap
        .relowered(Some(&OptConfig::small_device()), false)
        .unwrap();
    assert_eq!(small.steps().len(), cap_plain.steps().len());
    assert!(small
        .steps()
        .iter()
        .all(|s| !s.layout_copy && s.plain.is_none()));
    // The desktop target keeps them.
    let desk = cap
        .relowered(Some(&OptConfig::for_vec_width(8)), false)
        .unwrap();
    assert_eq!(desk.steps().len(), cap.steps().len());
    let names = ExportNames::new(&["x"], &["y"]);
    let opts = ExportOptions::default();
    assert_eq!(opts.opt, Some(OptConfig::small_device()));
    let (a, b) = (
        export(&cap, &names, &opts).unwrap(),
        export(&cap_plain, &names, &opts).unwrap(),
    );
    assert_eq!(a.arena_bytes, b.arena_bytes, "arena");
    assert_eq!(a.files.len(), b.files.len());
    // Kernel names carry the lowered shape and weight symbols the slot number; the rest —
    // kernels, memory plan, weights — must be the same. The manifest lists slots by number, so
    // there only the buffers' roles are compared.
    let roles = |f: &[u8]| {
        let t = String::from_utf8_lossy(f).into_owned();
        let mut r: Vec<String> = t
            .split("\"role\": ")
            .skip(1)
            .map(|x| x[..10].into())
            .collect();
        r.sort();
        r
    };
    let manifest = |b: &picograd::export::Bundle| b.file("model.json").map(&roles);
    assert_eq!(manifest(&a), manifest(&b), "buffer roles");
    for ((name, x), (_, y)) in a.files.iter().zip(&b.files) {
        if name == "model.json" {
            continue;
        }
        let (x, y) = (
            normalized(&String::from_utf8_lossy(x)),
            normalized(&String::from_utf8_lossy(y)),
        );
        assert!(
            x == y,
            "{name} differs:\n{x}\n---- without layout transforms:\n{y}"
        );
    }
}

/// `text` with every identifier starting `model_k` or `model_w` (kernel names, weight symbols)
/// replaced by that prefix.
fn normalized(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("model_") {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let ident = &tail[..end];
        if ident.starts_with("model_k") || ident.starts_with("model_w") {
            out.push_str(&ident[..7]);
        } else {
            out.push_str(ident);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}
