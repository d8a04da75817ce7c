//! The stack-scratch UOp (`DefineLocal`), the pair widening (`PairWiden`) and the packed
//! `DualMac` of pre-widened operands, on a hand-built kernel of the shape the staged int8 tile
//! takes (the linearizer does not emit it yet): `C` channels' i8 weights widened once into a
//! local as i16 pairs, then for each pixel every reduce step widens one input word and reads
//! each channel's two weight words from the local (`ldrd` under the DSP extension).
//!
//! Checked against a naive i64 reference on the interpreter, the Clang device (the portable C
//! branch) and the C built for Cortex-M4 under QEMU (the `__sxtb16`/`ldrd`/`__smlad` branch,
//! `-Wall -Wextra -Werror`). The kernel also copies the local out, so the lane order the
//! renderer and the interpreter give a widened word — `(b0, b2, b1, b3)`, the pairs `sxtb16`
//! makes — is checked on each backend too (a dot product alone would not see a wrong order,
//! both operands being widened alike).

use std::process::Command;

use picograd::codegen::c::{render_kernel, CRenderOpts};
use picograd::codegen::uops::{BufParam, KernelCost, LinearKernel, UOp, UOpKind};
use picograd::codegen::verify::verify_uops;
use picograd::device::Device;
use picograd::interp::Interp;
use picograd::ops::{AluOp, Scalar};
use picograd::runtime::clang::Clang;
use picograd::runtime::private_fs::private_temp_dir;
use picograd::DType;

#[path = "common/rng.rs"]
mod rng;

/// Channels, pixels and reduce length (a whole number of words).
const C: usize = 3;
const P: usize = 7;
const K: usize = 12;

struct B(Vec<UOp>);

impl B {
    fn push(&mut self, kind: UOpKind, dtype: DType, src: &[u32]) -> u32 {
        self.0.push(UOp {
            kind,
            dtype,
            src: src.to_vec(),
        });
        (self.0.len() - 1) as u32
    }
    fn i32c(&mut self, v: i64) -> u32 {
        self.push(
            UOpKind::Const(Scalar::from_i64(v, DType::I32)),
            DType::I32,
            &[],
        )
    }
    /// `a * m + c` in i32.
    fn affine(&mut self, a: u32, m: i64, c: i64) -> u32 {
        let m = self.i32c(m);
        let p = self.push(UOpKind::Alu(AluOp::Mul), DType::I32, &[a, m]);
        let c = self.i32c(c);
        self.push(UOpKind::Alu(AluOp::Add), DType::I32, &[p, c])
    }
    fn word(&mut self, buf: u32, idx: u32) -> u32 {
        let w = self.push(
            UOpKind::VecLoad {
                lanes: 4,
                stride: 1,
            },
            DType::I8,
            &[buf, idx],
        );
        self.push(UOpKind::PairWiden, DType::I16, &[w])
    }
}

/// `out[c·P + p] = Σₖ x[p·K + k]·w[c·K + k]`, and `dump` = the local after staging.
fn kernel() -> LinearKernel {
    let mut b = B(Vec::new());
    let out = b.push(
        UOpKind::DefineGlobal {
            idx: 0,
            writable: true,
        },
        DType::I32,
        &[],
    );
    let dump = b.push(
        UOpKind::DefineGlobal {
            idx: 1,
            writable: true,
        },
        DType::I16,
        &[],
    );
    let x = b.push(
        UOpKind::DefineGlobal {
            idx: 2,
            writable: false,
        },
        DType::I8,
        &[],
    );
    let w = b.push(
        UOpKind::DefineGlobal {
            idx: 3,
            writable: false,
        },
        DType::I8,
        &[],
    );
    let local = b.push(UOpKind::DefineLocal { size: C * K }, DType::I16, &[]);
    let (zero, words) = (b.i32c(0), b.i32c((K / 4) as i64));
    // Staging: word j of channel c at local[(j·C + c)·4 ..], its pairs (w0, w2), (w1, w3).
    let j = b.push(UOpKind::Loop, DType::I32, &[zero, words]);
    for c in 0..C {
        let wi = b.affine(j, 4, (c * K) as i64);
        let pw = b.word(w, wi);
        let li = b.affine(j, (4 * C) as i64, (4 * c) as i64);
        b.push(UOpKind::VecStore { lanes: 4 }, DType::I16, &[local, li, pw]);
    }
    b.push(UOpKind::EndLoop, DType::I32, &[j]);
    let n_all = b.i32c((C * K) as i64);
    let n = b.push(UOpKind::Loop, DType::I32, &[zero, n_all]);
    let v = b.push(UOpKind::Load, DType::I16, &[local, n]);
    b.push(UOpKind::Store, DType::I16, &[dump, n, v]);
    b.push(UOpKind::EndLoop, DType::I32, &[n]);
    // Pixels: one input word widened per step, each channel's pairs read from the local.
    let pixels = b.i32c(P as i64);
    let p = b.push(UOpKind::Loop, DType::I32, &[zero, pixels]);
    let accs: Vec<u32> = (0..C)
        .map(|_| {
            b.push(
                UOpKind::DefineAcc(Scalar::from_i64(0, DType::I32)),
                DType::I32,
                &[],
            )
        })
        .collect();
    let r = b.push(UOpKind::Loop, DType::I32, &[zero, words]);
    let pk = b.affine(p, K as i64, 0);
    let r4 = b.affine(r, 4, 0);
    let xi = b.push(UOpKind::Alu(AluOp::Add), DType::I32, &[pk, r4]);
    let xp = b.word(x, xi);
    for (c, &acc) in accs.iter().enumerate() {
        let li = b.affine(r, (4 * C) as i64, (4 * c) as i64);
        let wp = b.push(
            UOpKind::VecLoad {
                lanes: 4,
                stride: 1,
            },
            DType::I16,
            &[local, li],
        );
        let d = b.push(UOpKind::DualMac, DType::I32, &[acc, xp, wp]);
        b.push(UOpKind::Assign, DType::I32, &[acc, d]);
    }
    b.push(UOpKind::EndLoop, DType::I32, &[r]);
    for (c, &acc) in accs.iter().enumerate() {
        let oi = b.affine(zero, 0, 0);
        let oi = b.push(UOpKind::Alu(AluOp::Add), DType::I32, &[oi, p]);
        let ci = b.i32c((c * P) as i64);
        let oi = b.push(UOpKind::Alu(AluOp::Add), DType::I32, &[oi, ci]);
        b.push(UOpKind::Store, DType::I32, &[out, oi, acc]);
    }
    b.push(UOpKind::EndLoop, DType::I32, &[p]);
    let buf = |dtype, size, writable| BufParam {
        dtype,
        size,
        writable,
    };
    LinearKernel {
        name: String::from("staged"),
        uops: b.0,
        bufs: vec![
            buf(DType::I32, C * P, true),
            buf(DType::I16, C * K, true),
            buf(DType::I8, P * K, false),
            buf(DType::I8, C * K, false),
        ],
        vars: Vec::new(),
        cost: KernelCost::default(),
    }
}

/// Full-range int8 inputs and weights (−128 included: its products are the largest).
fn data() -> (Vec<i8>, Vec<i8>) {
    let mut g = rng::Rng(29);
    let mut v = |n: usize| -> Vec<i8> { (0..n).map(|_| g.range(-128, 127) as i8).collect() };
    let (mut x, w) = (v(P * K), v(C * K));
    x[0] = -128;
    (x, w)
}

fn reference(x: &[i8], w: &[i8]) -> (Vec<i32>, Vec<i16>) {
    let mut out = vec![0i32; C * P];
    for c in 0..C {
        for p in 0..P {
            let s: i64 = (0..K)
                .map(|k| i64::from(x[p * K + k]) * i64::from(w[c * K + k]))
                .sum();
            out[c * P + p] = s as i32;
        }
    }
    let mut dump = vec![0i16; C * K];
    for j in 0..K / 4 {
        for c in 0..C {
            for (lane, byte) in [0, 2, 1, 3].into_iter().enumerate() {
                dump[(j * C + c) * 4 + lane] = i16::from(w[c * K + 4 * j + byte]);
            }
        }
    }
    (out, dump)
}

fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
    let n = std::mem::size_of_val(v);
    // SAFETY: plain integers, read as their bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }.to_vec()
}

/// Runs the kernel on `dev`: (outputs, dump).
fn run_on(dev: &dyn Device, k: &LinearKernel, x: &[i8], w: &[i8]) -> (Vec<i32>, Vec<i16>) {
    let a = dev.allocator();
    let ids: Vec<_> = k
        .bufs
        .iter()
        .map(|b| a.alloc(b.size * b.dtype.itemsize()).unwrap())
        .collect();
    a.copy_in(ids[2], &bytes(x)).unwrap();
    a.copy_in(ids[3], &bytes(w)).unwrap();
    dev.compile(k).unwrap().run(&ids, &[]).unwrap();
    let mut o = vec![0u8; C * P * 4];
    let mut d = vec![0u8; C * K * 2];
    a.copy_out(ids[0], &mut o).unwrap();
    a.copy_out(ids[1], &mut d).unwrap();
    ids.into_iter().for_each(|b| a.free(b));
    let out = o
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let dump = d
        .chunks(2)
        .map(|c| i16::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (out, dump)
}

#[test]
fn staged_pairs_match_the_reference_on_every_backend() {
    let k = kernel();
    verify_uops("test", &k).unwrap();
    let (x, w) = data();
    let want = reference(&x, &w);
    assert_eq!(run_on(&Interp::new(), &k, &x, &w), want, "interpreter");
    assert_eq!(
        run_on(&Clang::new().unwrap(), &k, &x, &w),
        want,
        "Clang device"
    );
    cortex_m4(&k, &x, &w, &want);
}

/// A C array initializer.
fn list<T: std::fmt::Display>(v: &[T]) -> String {
    v.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds the kernel's C with a `main` that compares it with `want`, for Cortex-M4 (DSP
/// branch) under QEMU; exit status 0 when every value matches.
fn cortex_m4(k: &LinearKernel, x: &[i8], w: &[i8], want: &(Vec<i32>, Vec<i16>)) {
    let opts = CRenderOpts {
        libm: false,
        entry_wrapper: false,
        ..CRenderOpts::default()
    };
    let c = render_kernel(k, &opts).unwrap();
    assert!(
        c.contains("pg_ld_pairs(local"),
        "the pair load is printed:\n{c}"
    );
    let main = format!(
        "{c}\nstatic const int8_t x[] = {{{}}};\nstatic const int8_t w[] = {{{}}};\n\
         static const int32_t want[] = {{{}}};\nstatic const int16_t want_dump[] = {{{}}};\n\
         static int32_t out[{}];\nstatic int16_t dump[{}];\n\
         int main(void) {{\n  int bad = 0, i;\n  staged(out, dump, x, w);\n\
         for (i = 0; i < {}; i++) bad += out[i] != want[i];\n\
         for (i = 0; i < {}; i++) bad += dump[i] != want_dump[i];\n  return bad;\n}}\n",
        list(x),
        list(w),
        list(&want.0),
        list(&want.1),
        C * P,
        C * K,
        C * P,
        C * K
    );
    let dir = private_temp_dir("staged-pairs").unwrap();
    let src = dir.path().join("main.c");
    std::fs::write(&src, main).unwrap();
    let elf = dir.path().join("main.elf");
    let gcc = Command::new("arm-none-eabi-gcc")
        .args([
            "-mcpu=cortex-m4",
            "-mthumb",
            "-mfloat-abi=hard",
            "-mfpu=fpv4-sp-d16",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "--specs=picolibc.specs",
            "--oslib=semihost",
            "--crt0=semihost",
            "-Wl,--defsym=__flash=0x0",
            "-Wl,--defsym=__flash_size=0x400000",
            "-Wl,--defsym=__ram=0x20000000",
            "-Wl,--defsym=__ram_size=0x400000",
        ])
        .arg(&src)
        .arg("-o")
        .arg(&elf)
        .output()
        .expect("arm-none-eabi-gcc");
    assert!(
        gcc.status.success(),
        "arm-none-eabi-gcc: {}",
        String::from_utf8_lossy(&gcc.stderr)
    );
    let run = Command::new("qemu-system-arm")
        .args([
            "-M",
            "mps2-an386",
            "-nographic",
            "-monitor",
            "none",
            "-serial",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
        ])
        .arg(&elf)
        .output()
        .expect("qemu-system-arm");
    assert_eq!(
        run.status.code(),
        Some(0),
        "Cortex-M4 under QEMU: {} mismatching values",
        run.status.code().unwrap_or(-1)
    );
}
