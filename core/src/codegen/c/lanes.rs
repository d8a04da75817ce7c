//! Printing the vector UOps ([`UOpKind::VecAcc`](crate::codegen::uops::UOpKind::VecAcc),
//! `VecLoad`, `VecStore`, `VecAlu`, `Vectorize`) as statements on the GCC/clang vector types
//! `pg_f32xN` the prelude defines: loads and stores through the unaligned `pg_f32xNu` (a
//! stride-2 load as two such loads and their even lanes, by subscripts; a gated load lane by
//! lane, each lane's gate choosing its element or 0), the
//! fused multiply-add through `pg_fma_f32xN`, the maximum through `pg_max_f32xN` (the scalar
//! `a < b ? b : a` as a lane mask, so NaNs and signed zeros come out as in scalar code). The lanes were chosen by the optimizer (an
//! `Opt::Vectorize`) and made by the linearizer; this file only prints them.
//!
//! Invariant: each lane computes what the scalar UOp computes on that lane's operands (the
//! interpreter runs vector UOps lane by lane, `interp/lanes.rs`); a vector UOp the C types
//! cannot express (not f32, or an op without a lane-wise C form) is an error, never scalar code.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::helpers::Helper;
use super::{arith_sym, literal, Writer};
use crate::codegen::uops::UOpKind;
use crate::dtype::DType;
use crate::ops::{AluOp, Scalar};
use crate::Error;

impl Writer<'_> {
    /// The vector type of `w` f32 lanes (declared in the prelude), or `None` (recorded as the
    /// rendering's error) for UOp `i` of another dtype.
    fn vec_type(&mut self, i: usize, w: usize) -> Option<String> {
        let dt = self.k.uops[i].dtype;
        if dt != DType::F32 || !matches!(w, 2 | 4 | 8 | 16) {
            self.error.get_or_insert(Error::Compile(format!(
                "C renderer: kernel {}: uop {i} is a vector of {w} {} lanes; C vectors are \
                 f32 of 2, 4, 8 or 16 lanes",
                self.k.name,
                dt.name()
            )));
            return None;
        }
        self.needs.add(Helper::VecF32(w));
        Some(format!("pg_f32x{w}"))
    }

    /// Declares `const pg_f32xN val{i} = expr;` and names UOp `i` after it.
    fn vec_value(&mut self, i: usize, t: &str, expr: &str) {
        let name = format!("val{i}");
        self.line(&format!("const {t} {name} = {expr};"));
        self.names[i] = name;
    }

    pub(super) fn vec_acc(&mut self, i: usize, init: Scalar, w: usize) {
        let Some(t) = self.vec_type(i, w) else { return };
        let name = format!("acc{}", self.accs);
        self.accs += 1;
        let lanes: Vec<String> = (0..w).map(|_| literal(init)).collect();
        self.line(&format!("{t} {name} = {{{}}};", lanes.join(", ")));
        self.names[i] = name;
    }

    pub(super) fn vec_load(&mut self, i: usize, w: usize, stride: usize) {
        if self.k.uops[i].dtype == DType::I16 && w == 4 && stride == 1 {
            // Four i16 lanes (widened pairs in a local) as two words by one `ldrd`.
            self.needs.add(Helper::SmladPairs);
            let (b, x) = (String::from(self.src(i, 0)), String::from(self.src(i, 1)));
            self.line(&format!("int32_t val{i}_lo, val{i}_hi;"));
            self.line(&format!("pg_ld_pairs({b} + {x}, &val{i}_lo, &val{i}_hi);"));
            self.names[i] = format!("val{i}");
            return;
        }
        if self.k.uops[i].dtype == DType::I8 && w == 4 {
            // Four i8 lanes are made only as a packed `DualMac`'s operand: one 32-bit word.
            self.needs.add(Helper::SmladWords);
            let e = format!("pg_ld_i8x4({} + {})", self.src(i, 0), self.src(i, 1));
            self.vec_value(i, "int32_t", &e);
            return;
        }
        let Some(t) = self.vec_type(i, w) else { return };
        let (b, x) = (String::from(self.src(i, 0)), String::from(self.src(i, 1)));
        if self.k.uops[i].src.len() > 2 {
            // Gated lanes (a padded row's border): each lane loads only where its gate holds,
            // as a gated scalar load does (the element need not be in bounds elsewhere).
            let lanes: Vec<String> = (0..w)
                .map(|k| {
                    let e = format!("{b}[{x} + {}]", k * stride);
                    let gate = &self.k.uops[self.k.uops[i].src[2 + k] as usize];
                    match gate.kind {
                        UOpKind::Const(c) if c.as_i64() != 0 => e,
                        UOpKind::Const(_) => String::from("0.0f"),
                        _ => format!("{} ? {e} : 0.0f", self.src(i, 2 + k)),
                    }
                })
                .collect();
            self.vec_value(i, &t, &format!("{{{}}}", lanes.join(", ")));
            return;
        }
        if stride == 2 {
            // Every other element: two vector loads, the second starting one element early so
            // it ends on the last lane's element (nothing past it is read), then the even
            // lanes of the first and the odd lanes of the second, by subscripts (GCC and clang
            // both print them as shuffles).
            let (lo, hi) = (format!("val{i}_lo"), format!("val{i}_hi"));
            self.line(&format!("const {t} {lo} = *(const {t}u *)({b} + {x});"));
            self.line(&format!(
                "const {t} {hi} = *(const {t}u *)({b} + {x} + {});",
                w - 1
            ));
            let lanes: Vec<String> = (0..w)
                .map(|k| match 2 * k {
                    j if j < w => format!("{lo}[{j}]"),
                    j => format!("{hi}[{}]", j - (w - 1)),
                })
                .collect();
            self.vec_value(i, &t, &format!("{{{}}}", lanes.join(", ")));
            return;
        }
        let e = format!("*(const {t}u *)({b} + {x})");
        self.vec_value(i, &t, &e);
    }

    pub(super) fn vec_store(&mut self, i: usize, w: usize) {
        if self.k.uops[i].dtype == DType::I16 && w == 4 {
            // Four i16 lanes (a `PairWiden`'s two words) into a local.
            let (b, x, v) = (self.src(i, 0), self.src(i, 1), self.src(i, 2));
            let s = format!("pg_st_pairs({b} + {x}, {v}_lo, {v}_hi);");
            self.line(&s);
            return;
        }
        let Some(t) = self.vec_type(i, w) else { return };
        let (b, x, v) = (self.src(i, 0), self.src(i, 1), self.src(i, 2));
        let s = format!("*({t}u *)({b} + {x}) = {v};");
        self.line(&s);
    }

    pub(super) fn vec_alu(&mut self, i: usize, op: AluOp, w: usize) {
        let Some(t) = self.vec_type(i, w) else { return };
        let a: Vec<String> = (0..self.k.uops[i].src.len())
            .map(|n| String::from(self.src(i, n)))
            .collect();
        let e = match op {
            AluOp::Neg => format!("-{}", a[0]),
            AluOp::MulAcc => format!("{} * {} + {}", a[0], a[1], a[2]),
            AluOp::Fma => format!("pg_fma_f32x{w}({}, {}, {})", a[0], a[1], a[2]),
            AluOp::Max => format!("pg_max_f32x{w}({}, {})", a[0], a[1]),
            _ => match arith_sym(op).filter(|_| lane_wise(op)) {
                Some(sym) => format!("{} {sym} {}", a[0], a[1]),
                None => self.undefined(op, DType::F32),
            },
        };
        self.vec_value(i, &t, &e);
    }

    /// A broadcast (one source repeated) through `pg_splat_f32xN`, other lanes as an
    /// initializer list.
    pub(super) fn vectorize(&mut self, i: usize) {
        let src = &self.k.uops[i].src;
        let w = src.len();
        let Some(t) = self.vec_type(i, w) else { return };
        let e = if src.iter().all(|&s| s == src[0]) {
            format!("pg_splat_f32x{w}({})", self.src(i, 0))
        } else {
            let lanes: Vec<&str> = (0..w).map(|n| self.src(i, n)).collect();
            format!("{{{}}}", lanes.join(", "))
        };
        self.vec_value(i, &t, &e);
    }
}

/// The binary ops whose C vector operator computes each lane as the scalar op does.
fn lane_wise(op: AluOp) -> bool {
    matches!(op, AluOp::Add | AluOp::Sub | AluOp::Mul | AluOp::Div)
}
