//! A UOp kernel builder shared by the tests that drive devices and the C renderer with
//! hand-made kernels (`interp.rs`, `render_c.rs`). Each UOp is appended in order; the builder
//! returns its index for use as a source.
#![allow(dead_code)] // each test file uses its own subset

use std::sync::Arc;

use picograd_core::codegen::uops::{BufParam, KernelCost, LinearKernel, UOp, UOpKind};
use picograd_core::ops::{AluOp, Scalar};
use picograd_core::DType;

/// Builds a kernel one UOp at a time.
#[derive(Default)]
pub struct KernelBuilder {
    pub uops: Vec<UOp>,
    pub bufs: Vec<BufParam>,
    pub vars: Vec<(Arc<str>, i64, i64)>,
}

impl KernelBuilder {
    pub fn push(&mut self, kind: UOpKind, dtype: DType, src: &[u32]) -> u32 {
        self.uops.push(UOp {
            kind,
            dtype,
            src: src.to_vec(),
        });
        (self.uops.len() - 1) as u32
    }
    pub fn global(&mut self, dtype: DType, size: usize, writable: bool) -> u32 {
        let idx = self.bufs.len();
        self.bufs.push(BufParam {
            dtype,
            size,
            writable,
        });
        self.push(UOpKind::DefineGlobal { idx, writable }, dtype, &[])
    }
    pub fn var(&mut self, name: &str, min: i64, max: i64) -> u32 {
        let name: Arc<str> = name.into();
        self.vars.push((name.clone(), min, max));
        self.push(UOpKind::DefineVar { name, min, max }, DType::I32, &[])
    }
    pub fn cst(&mut self, v: Scalar) -> u32 {
        self.push(UOpKind::Const(v), v.dtype(), &[])
    }
    /// An i32 constant.
    pub fn int(&mut self, v: i64) -> u32 {
        self.cst(Scalar::from_i64(v, DType::I32))
    }
    pub fn alu(&mut self, op: AluOp, dtype: DType, src: &[u32]) -> u32 {
        self.push(UOpKind::Alu(op), dtype, src)
    }
    /// `buf[src[0]]`, gated by `src[1]` when given.
    pub fn load(&mut self, buf: u32, src: &[u32]) -> u32 {
        let dt = self.uops[buf as usize].dtype;
        let mut s = vec![buf];
        s.extend_from_slice(src);
        self.push(UOpKind::Load, dt, &s)
    }
    pub fn store(&mut self, buf: u32, idx: u32, val: u32) {
        let dt = self.uops[buf as usize].dtype;
        self.push(UOpKind::Store, dt, &[buf, idx, val]);
    }
    pub fn cast(&mut self, x: u32, to: DType) -> u32 {
        self.push(UOpKind::Cast, to, &[x])
    }
    /// A loop over `[start, end)`, counting in `end`'s dtype.
    pub fn lp(&mut self, start: u32, end: u32) -> u32 {
        let dt = self.uops[end as usize].dtype;
        self.push(UOpKind::Loop, dt, &[start, end])
    }
    pub fn end(&mut self, lp: u32) {
        let dt = self.uops[lp as usize].dtype;
        self.push(UOpKind::EndLoop, dt, &[lp]);
    }
    pub fn build(self, name: &str) -> LinearKernel {
        LinearKernel {
            name: name.into(),
            uops: self.uops,
            bufs: self.bufs,
            vars: self.vars,
            cost: KernelCost::default(),
        }
    }
}
