//! Vector UOps (`Opt::Vectorize`, chosen by the strategies when `OptConfig::vector_lanes` is on,
//! printed on GCC/clang vector types by `core/src/codegen/c/lanes.rs`) change how compiled C is
//! printed, never what it computes: every kernel below — matmuls of odd sizes, with transposed
//! operands, bias and ReLU after the reduce; convolutions; plain sum and max reductions — gives
//! bit-identical results with vector lanes and with the same tiles as scalar copies, fused and
//! unfused, under register tiles made for 4, 8 and 16 lanes. The vector C is checked to really
//! hold vector statements, so the comparison cannot pass by the optimizer silently doing
//! nothing.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use picograd::codegen::c::render_kernel;
use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::opt::OptConfig;
use picograd::device::Device;
use picograd::runtime::tuning::host_render_opts;
use picograd::runtime::Clang;
use picograd::schedule::schedule;
use picograd::{ConvOpts, Padding, Tensor};

#[path = "../core/tests/common/strict_cc.rs"]
mod strict_cc;
use strict_cc::compile_strict;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::data;

/// Tiles for `tile_width` lanes, with vector UOps (`lanes`) or as scalar copies.
fn opt_config(tile_width: usize, lanes: bool) -> OptConfig {
    OptConfig {
        vector_lanes: lanes,
        ..OptConfig::for_vec_width(tile_width)
    }
}

fn device(lanes: bool, tile_width: usize, fused: bool) -> Arc<dyn Device> {
    picograd::init();
    let c = Clang::new().expect("no C compiler: the vector-type tests cannot run");
    Arc::new(
        c.with_render_opts(host_render_opts())
            .with_opt_config(Some(opt_config(tile_width, lanes)))
            .with_fused_mulacc(fused),
    )
}

type Workload = (&'static str, fn(&Arc<dyn Device>) -> Tensor);

fn on(dev: &Arc<dyn Device>, shape: &[usize], seed: usize) -> Tensor {
    let n = shape.iter().product();
    Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
}

fn matmul(dev: &Arc<dyn Device>, (m, k, n): (usize, usize, usize)) -> Tensor {
    on(dev, &[m, k], 1).matmul(&on(dev, &[k, n], 2))
}

fn conv(dev: &Arc<dyn Device>, x: [usize; 4], w: [usize; 4], pad: usize) -> Tensor {
    let opts = ConvOpts {
        padding: Padding::All(pad),
        ..ConvOpts::default()
    };
    on(dev, &x, 3).conv2d(&on(dev, &w, 4), Some(&on(dev, &[w[0]], 5)), &opts)
}

fn workloads() -> Vec<Workload> {
    vec![
        ("matmul 13x17x19", |d| matmul(d, (13, 17, 19))),
        ("matmul 16x3x33", |d| matmul(d, (16, 3, 33))),
        ("matmul 24x7x48", |d| matmul(d, (24, 7, 48))),
        ("matmul 1x64x1", |d| matmul(d, (1, 64, 1))),
        ("matmul 5x40x64", |d| matmul(d, (5, 40, 64))),
        ("matmul 3x64x10 (vector body, scalar tail)", |d| {
            matmul(d, (3, 64, 10))
        }),
        ("matmul A·Bᵀ + bias, relu", |d| {
            let bt = on(d, &[32, 29], 6).transpose(0, 1);
            on(d, &[9, 29], 7).matmul(&bt).add(on(d, &[32], 8)).relu()
        }),
        ("conv 3x3 2x3x7x9 -> 5", |d| {
            conv(d, [2, 3, 7, 9], [5, 3, 3, 3], 1).relu()
        }),
        ("conv 3x3 1x4x6x16 -> 16", |d| {
            conv(d, [1, 4, 6, 16], [16, 4, 3, 3], 1)
        }),
        ("conv 3x3 unpadded 2x8x9x19 -> 16", |d| {
            conv(d, [2, 8, 9, 19], [16, 8, 3, 3], 0)
        }),
        ("sum over rows", |d| on(d, &[37, 24], 9).sum(&[0], false)),
        ("max over rows", |d| on(d, &[37, 24], 10).max(&[0], false)),
    ]
}

#[test]
fn vector_kernels_equal_scalar_ones() {
    for fused in [false, true] {
        for tile in [4, 8, 16] {
            let (scalar, vector) = (device(false, tile, fused), device(true, tile, fused));
            for (name, f) in workloads() {
                let want = f(&scalar).to_vec::<f32>().unwrap();
                let got = f(&vector).to_vec::<f32>().unwrap();
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same && got.len() == want.len(),
                    "{name}: vector lanes (tiles for {tile}, fused {fused}) differ from scalar C"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random matmul-shaped kernels (some with `b` transposed, a bias and a ReLU after the
    /// reduce) under random tiles: vector lanes equal scalar C bit for bit.
    #[test]
    fn random_matmuls_vectorize_bit_identically(
        m in 1usize..40, k in 1usize..40, n in 1usize..70,
        transposed in any::<bool>(), epilogue in any::<bool>(), fused in any::<bool>(),
        tile in prop::sample::select(vec![4usize, 8, 16]),
    ) {
        let run = |lanes: bool| {
            let d = device(lanes, tile, fused);
            let b = if transposed {
                on(&d, &[n, k], 2).transpose(0, 1)
            } else {
                on(&d, &[k, n], 2)
            };
            let y = on(&d, &[m, k], 1).matmul(&b);
            let y = if epilogue { y.add(on(&d, &[n], 3)).relu() } else { y };
            y.to_vec::<f32>().unwrap()
        };
        let (packed, scalar) = (run(true), run(false));
        prop_assert_eq!(packed.len(), scalar.len());
        for (i, (p, s)) in packed.iter().zip(&scalar).enumerate() {
            prop_assert_eq!(p.to_bits(), s.to_bits(), "[{}]: {} vs {}", i, p, s);
        }
    }
}

/// The C of `t`'s last kernel, lowered with tiles for `tile` lanes, vector `lanes` or not.
fn last_kernel_c(t: &Tensor, tile: usize, lanes: bool, fused: bool) -> String {
    let items = schedule(&[t.lazy().contiguous()]).unwrap();
    let item = items.last().unwrap();
    let cfg = opt_config(tile, lanes);
    let lk = lower_ast(&item.ast, buf_params(item), Some(&cfg), fused).unwrap();
    render_kernel(&lk, &host_render_opts()).unwrap()
}

#[test]
fn tiled_matmuls_and_convs_are_printed_with_vector_types() {
    picograd::init();
    let dev = picograd::context::interp();
    let mm = matmul(&dev, (32, 40, 64));
    // Unpadded, so the input loads are ungated and consecutive along the width.
    let cv = conv(&dev, [2, 8, 10, 18], [16, 8, 3, 3], 0);
    for (name, t, tile, width) in [("matmul", &mm, 16, 16), ("conv", &cv, 8, 8)] {
        let c = last_kernel_c(t, tile, true, true);
        for needle in [
            format!("pg_f32x{width} acc"),
            format!("pg_fma_f32x{width}("),
            format!("*(const pg_f32x{width}u *)(data"),
            format!("*(pg_f32x{width}u *)(data0"),
        ] {
            assert!(c.contains(&needle), "{name}: no `{needle}` in\n{c}");
        }
        // The prelude's lane-by-lane fallback calls `__builtin_fmaf`; the kernel must not.
        let body = &c[c.find("\nvoid ").unwrap()..];
        assert!(
            !body.contains("__builtin_fmaf("),
            "{name}: a scalar multiply-add was left in\n{c}"
        );
        // The lanes come from the optimizer's `Opt::Vectorize` only: without it, no vectors.
        let plain = last_kernel_c(t, tile, false, true);
        assert!(
            !plain.contains("pg_f32x"),
            "{name}: vector types without vector lanes"
        );
    }
}

/// An output axis the lanes do not divide (an MLP's 10 logits at 8 lanes) is a vector body and
/// a scalar tail: vector accumulators and stores for columns 0-7, scalar stores for 8 and 9.
#[test]
fn a_remainder_axis_is_printed_as_a_vector_body_and_a_scalar_tail() {
    picograd::init();
    let dev = picograd::context::interp();
    let c = last_kernel_c(&matmul(&dev, (3, 64, 10)), 8, true, true);
    for needle in ["pg_f32x8 acc", "*(pg_f32x8u *)(data0", "  data0["] {
        assert!(c.contains(needle), "no `{needle}` in\n{c}");
    }
}

/// The packed C compiles warning-free as C99 under `-Wall -Wextra -Werror -pedantic` with every
/// C compiler on the machine, for the host (`-march=native`, as the Clang device compiles).
#[test]
fn packed_c_compiles_warning_free() {
    picograd::init();
    let dev = picograd::context::interp();
    let mm = matmul(&dev, (32, 40, 64));
    let dir = picograd::runtime::private_fs::private_temp_dir("picograd-vector-types-")
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    let mut compiled = 0;
    for width in [4, 8, 16] {
        for fused in [false, true] {
            let c = last_kernel_c(&mm, width, true, fused);
            assert!(
                c.contains(&format!("pg_f32x{width} acc")),
                "no vector accumulator:\n{c}"
            );
            let file = dir.join(format!("k{width}_{fused}.c"));
            std::fs::write(&file, &c).unwrap();
            // Packed C is rendered only up to the host's vector width; compiling a wider
            // packing for this host (a 16-lane tile without AVX-512) is an ABI warning, not a
            // defect. So each width compiles for an x86-64 level that has it.
            let march = match (cfg!(target_arch = "x86_64"), width) {
                (true, 16) => "-march=x86-64-v4",
                (true, 8) => "-march=x86-64-v3",
                _ => "-march=native",
            };
            for cc in ["clang", "gcc"] {
                let flags = [march, "-O2", "-c"];
                if compile_strict(cc, &file, Path::new("/dev/null"), &flags).is_none() {
                    continue;
                }
                compiled += 1;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(compiled > 0, "no C compiler ran");
}

/// A conv (32 output channels) on a 16-lane target reads its weights through 16-channel blocks
/// (the scheduler's copy, `schedule/layout.rs`) and gets the channel-lane tile: each multiply-add is a broadcast
/// input pixel times a vector of consecutive channels' weights. It computes bit for bit what the
/// unoptimized kernels compute, and agrees with an f64 convolution.
#[test]
fn large_convs_use_channel_panels_and_stay_exact() {
    picograd::init();
    let (ci, co, h, w) = (16, 32, 130, 128);
    let dev = device(true, 16, true);
    let y = conv(&dev, [1, ci, h, w], [co, ci, 3, 3], 1);
    let c = last_kernel_c(&y, 16, true, true);
    assert!(
        c.contains("= pg_splat_f32x16(") && c.contains("pg_fma_f32x16("),
        "no channel-lane tile in\n{c}"
    );
    let got = y.to_vec::<f32>().unwrap();
    let plain = picograd::runtime::Clang::new()
        .unwrap()
        .with_opt_config(None)
        .with_fused_mulacc(true);
    let plain: Arc<dyn Device> = Arc::new(plain);
    let want = conv(&plain, [1, ci, h, w], [co, ci, 3, 3], 1)
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(got.len(), co * h * w);
    for (i, (g, p)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.to_bits(), p.to_bits(), "[{i}]: {g} vs unoptimized {p}");
    }
    let (x, wt, b) = (data(ci * h * w, 3), data(co * ci * 9, 4), data(co, 5));
    for idx in (0..got.len()).step_by(1013) {
        let (o, oy, ox) = (idx / (h * w), idx / w % h, idx % w);
        let mut s = f64::from(b[o]);
        for (c_, ky, kx) in (0..ci).flat_map(|c_| (0..9).map(move |t| (c_, t / 3, t % 3))) {
            let (iy, ix) = ((oy + ky) as isize - 1, (ox + kx) as isize - 1);
            if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                let xv = x[(c_ * h + iy as usize) * w + ix as usize];
                s += f64::from(xv) * f64::from(wt[(o * ci + c_) * 9 + ky * 3 + kx]);
            }
        }
        assert!(
            (f64::from(got[idx]) - s).abs() <= 1e-4,
            "[{idx}]: {} vs f64 {s}",
            got[idx]
        );
    }
}
