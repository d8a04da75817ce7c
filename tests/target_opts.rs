//! A target description's `opt.` keys: parsed with errors naming the file and line; absent, the
//! shipped descriptions keep the small-device shape export always used; a target describing a
//! wider vector shapes kernels differently (other opts, other exported C) and computes
//! bit-identical results.

use std::path::Path;
use std::sync::Arc;

use picograd::codegen::kernel::Kernel;
use picograd::codegen::opt::OptConfig;
use picograd::codegen::strategy::hand_coded;
use picograd::device::Device;
use picograd::export::{export, ExportNames};
use picograd::jit::Capture;
use picograd::runtime::target::Target;
use picograd::runtime::Clang;
use picograd::{ConvOpts, Padding, Tensor};

const FILE: &str = "/descriptions/wide/target.txt";

fn host_text() -> String {
    std::fs::read_to_string(Target::root_dir().join("host").join("target.txt")).unwrap()
}

/// The host's description with `extra` lines appended.
fn described(extra: &str) -> picograd::Result<Target> {
    Target::parse(
        &format!("{}{extra}", host_text()),
        Path::new(FILE),
        Path::new("/descriptions"),
    )
}

fn shape(c: &OptConfig) -> (usize, usize, usize) {
    (c.vec_width, c.max_accs, c.max_unrolled)
}

#[test]
fn shipped_descriptions_keep_the_small_device_shape() {
    let small = OptConfig::small_device();
    for name in Target::names().unwrap() {
        let t = Target::by_name(&name).unwrap();
        // The FPU-less targets name no float registers (no small-core conv tiles); the FPU
        // devices unroll up to 64 body copies in speed mode (a depthwise row's 3×3 window);
        // only the core with the DSP extension (`smlad`) has the dual multiply-accumulate, and
        // a stack budget for the weights its int8 sums stage.
        let no_fpu = ["cortex-m3", "riscv32imac"].contains(&name.as_str());
        let fpu_device = ["cortex-m4", "riscv32imafc"].contains(&name.as_str());
        let want = OptConfig {
            float_registers: if no_fpu { 0 } else { small.float_registers },
            max_unrolled: if fpu_device { 64 } else { small.max_unrolled },
            dual_mac: name == "cortex-m4",
            stack_scratch: if name == "cortex-m4" { 640 } else { 0 },
            ..small
        };
        assert_eq!(t.opt, want, "{name}");
        assert_eq!(t.export_options().opt, Some(want), "{name}");
    }
}

#[test]
fn int_registers_are_read_and_bounded() {
    assert_eq!(
        described("opt.int_registers = 0\n")
            .unwrap()
            .opt
            .int_registers,
        0
    );
    assert_eq!(described("").unwrap().opt.int_registers, 14);
    let e = described("opt.int_registers = 65\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`opt.int_registers` is `65`"), "{e}");
}

#[test]
fn dual_mac_is_a_yes_or_no() {
    assert!(described("opt.dual_mac = 1\n").unwrap().opt.dual_mac);
    assert!(!described("opt.dual_mac = 0\n").unwrap().opt.dual_mac);
    let e = described("opt.dual_mac = 2\n").unwrap_err().to_string();
    assert!(e.contains("`opt.dual_mac` is `2`"), "{e}");
}

#[test]
fn opt_keys_parse_and_bad_ones_name_file_line_and_key() {
    let t = described("opt.vec_width = 8\nopt.max_accs = 32\n").unwrap();
    assert_eq!(
        shape(&t.opt),
        (8, 32, OptConfig::small_device().max_unrolled)
    );
    assert_eq!(t.export_options().opt, Some(t.opt));

    let line = host_text().lines().count() + 2;
    for (extra, needle) in [
        (
            "opt.max_accs = 4\nopt.vec_width = 0\n",
            "`opt.vec_width` is `0`",
        ),
        (
            "opt.max_accs = 4\nopt.vec_width = wide\n",
            "`opt.vec_width` is `wide`",
        ),
        (
            "opt.max_accs = 4\nopt.max_unrolled = 99999\n",
            "from 1 to 4096",
        ),
        (
            "opt.max_accs = 4\nopt.vec_with = 4\n",
            "unknown key `opt.vec_with`",
        ),
    ] {
        let e = described(extra).unwrap_err().to_string();
        assert!(e.contains(FILE), "{e}");
        assert!(e.contains(&format!("line {line}:")), "line {line}: {e}");
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 997) as f32 / 250.0 - 2.0
        })
        .collect()
}

/// A matmul with a bias and relu, a padded conv, and an elementwise chain, on `dev`.
fn model(dev: &Arc<dyn Device>) -> (Vec<Tensor>, Vec<Tensor>) {
    let t = |shape: &[usize], seed: u32| {
        Tensor::from_slice(&data(shape.iter().product(), seed), shape).to_device(dev)
    };
    let (x, w, b) = (t(&[6, 20], 1), t(&[20, 32], 2), t(&[32], 3));
    let (img, k) = (t(&[1, 3, 10, 16], 4), t(&[8, 3, 3, 3], 5));
    let conv = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let outs = vec![
        x.matmul(&w).add(&b).relu(),
        img.conv2d(&k, None, &conv).relu(),
        x.mul(2.0).add(1.0).sigmoid(),
    ];
    (vec![x, w, b, img, k], outs)
}

#[path = "common/f32_bits.rs"]
mod f32_bits;
use f32_bits::bits;

#[test]
fn a_wider_target_shapes_kernels_differently_and_computes_the_same_bits() {
    picograd::init();
    let narrow = described("").unwrap();
    // A SIMD target: vector lanes, and no scalar register file for the small-core tiles.
    let wide =
        described("opt.vec_width = 8\nopt.max_accs = 32\nopt.float_registers = 0\n").unwrap();

    // The hand-coded opts of the captured kernels differ for at least the matmul and the conv.
    let interp = picograd::context::interp();
    let (ins, outs) = model(&interp);
    let (cap, _) = Capture::record(
        &ins.iter().collect::<Vec<_>>(),
        &outs.iter().collect::<Vec<_>>(),
    )
    .unwrap();
    let mut differing = 0;
    for ast in cap.steps().iter().filter_map(|s| s.ast.as_ref()) {
        let opts = |t: &Target| hand_coded(&mut Kernel::new(ast).unwrap(), &t.opt);
        differing += usize::from(opts(&narrow) != opts(&wide));
    }
    assert!(
        differing >= 2,
        "only {differing} kernels shaped differently"
    );

    // Export takes each target's own shape: the kernels' C differs.
    let names = ExportNames::new(&["x", "w", "b", "img", "k"], &["mm", "conv", "ew"]);
    let c_of = |t: &Target| {
        let b = export(&cap, &names, &t.export_options()).unwrap();
        b.files.iter().find(|f| f.0 == "model.c").unwrap().1.clone()
    };
    assert_ne!(c_of(&narrow), c_of(&wide));

    // Compiled with either shape, every output has the same bits.
    let on = |t: &Target| -> Vec<Vec<u32>> {
        let clang = Clang::new().expect("no C compiler: target opt tests cannot run");
        let dev: Arc<dyn Device> = Arc::new(clang.with_opt_config(Some(t.opt)).with_search(None));
        model(&dev).1.iter().map(bits).collect()
    };
    assert_eq!(on(&narrow), on(&wide));
}
