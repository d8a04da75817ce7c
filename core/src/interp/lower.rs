//! Lowering a [`LinearKernel`]'s UOps to the interpreter's instructions, once per kernel.
//!
//! Invariant: this is the only place that looks at dtypes. It checks the kernel (sources are
//! earlier UOps, operand dtypes agree, loops nest, loads and stores address `DefineGlobal`s, stores
//! only writable ones) and picks, per UOp, a closure monomorphised for its dtype and op. Constants
//! and variables get no instruction: they live in the initial register file.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use half::{bf16, f16};

use super::elem::{round_bf16, round_f16, Arith, Bits, Conv, Float, Reg, Storage};
use super::instr::{binary, ternary, unary, Fault, FaultKind, Instr};
use crate::codegen::uops::{LinearKernel, UOp, UOpKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{AluOp, Scalar};

/// Runs `$body` with `$T` the type a value of dtype `$dt` computes in, for the listed dtypes;
/// `None` for the others.
macro_rules! on_dtype {
    ($dt:expr, $T:ident => $body:expr; $($d:ident: $t:ty),*) => {
        match $dt {
            $(DType::$d => {
                type $T = $t;
                Some($body)
            })*
            #[allow(unreachable_patterns)]
            _ => None,
        }
    };
}

/// Every dtype, as computed (f16/bf16 in f32).
macro_rules! any_type {
    ($dt:expr, $T:ident => $body:expr) => {
        on_dtype!($dt, $T => $body; Bool: bool, I8: i8, U8: u8, I16: i16, U16: u16, I32: i32,
            U32: u32, I64: i64, U64: u64, F16: f32, BF16: f32, F32: f32, F64: f64)
    };
}

/// Bools and ints.
macro_rules! bits_type {
    ($dt:expr, $T:ident => $body:expr) => {
        on_dtype!($dt, $T => $body; Bool: bool, I8: i8, U8: u8, I16: i16, U16: u16, I32: i32,
            U32: u32, I64: i64, U64: u64)
    };
}

/// Floats, as computed.
macro_rules! float_type {
    ($dt:expr, $T:ident => $body:expr) => {
        on_dtype!($dt, $T => $body; F16: f32, BF16: f32, F32: f32, F64: f64)
    };
}

/// Every dtype, as stored.
macro_rules! storage_type {
    ($dt:expr, $T:ident => $body:expr) => {
        on_dtype!($dt, $T => $body; Bool: bool, I8: i8, U8: u8, I16: i16, U16: u16, I32: i32,
            U32: u32, I64: i64, U64: u64, F16: f16, BF16: bf16, F32: f32, F64: f64)
    };
}

/// A symbolic variable's register and its position among the kernel's variables.
pub(crate) struct VarSlot {
    pub reg: usize,
    pub pos: usize,
    pub dtype: DType,
}

/// A kernel in executable form.
pub(crate) struct Lowered {
    /// The instructions.
    pub code: Vec<Instr>,
    /// The register file a run starts from (constants filled in).
    pub regs: Vec<u64>,
    /// Where variable values go.
    pub vars: Vec<VarSlot>,
    /// Per buffer parameter: does the kernel store to it?
    pub written: Vec<bool>,
    /// Bytes of each `DefineLocal`, in order (slot `bufs.len() + n` at run time).
    pub locals: Vec<usize>,
}

/// The register encoding of a constant converted to `dt`.
pub(crate) fn scalar_reg(s: Scalar, dt: DType) -> u64 {
    let s = s.cast(dt);
    match dt {
        DType::F16 | DType::BF16 | DType::F32 => (s.as_f64() as f32).to_reg(),
        _ => s.bits(),
    }
}

/// Lowers `k`, checking it on the way.
pub(crate) fn lower(k: &LinearKernel) -> Result<Lowered> {
    // Vector UOps run lane by lane: expanded to scalar UOps first.
    let expanded = super::lanes::scalarize(k);
    let k = expanded.as_ref().unwrap_or(k);
    let mut l = Lowerer {
        k,
        out: Lowered {
            code: Vec::new(),
            regs: vec![0; k.uops.len()],
            vars: Vec::new(),
            written: vec![false; k.bufs.len()],
            locals: Vec::new(),
        },
        local_slot: Vec::new(),
        loops: Vec::new(),
    };
    for (i, u) in k.uops.iter().enumerate() {
        l.uop(i, u).map_err(|m| {
            Error::Compile(format!(
                "interp: kernel {}: uop {i} ({}): {m}",
                k.name, u.kind
            ))
        })?;
    }
    if let Some((i, _)) = l.loops.last() {
        return Err(Error::Compile(format!(
            "interp: kernel {}: loop at uop {i} is never closed",
            k.name
        )));
    }
    Ok(l.out)
}

struct Lowerer<'k> {
    k: &'k LinearKernel,
    out: Lowered,
    /// Open loops: (loop UOp, index of its `Loop` instruction).
    loops: Vec<(usize, usize)>,
    /// `(DefineLocal UOp, its slot)`.
    local_slot: Vec<(usize, usize)>,
}

type Msg = String;

impl Lowerer<'_> {
    fn uop(&mut self, i: usize, u: &UOp) -> core::result::Result<(), Msg> {
        let src: Vec<usize> = u.src.iter().map(|&s| s as usize).collect();
        if let Some(s) = src.iter().find(|&&s| s >= i) {
            return Err(format!("source {s} is not an earlier uop"));
        }
        match &u.kind {
            UOpKind::DefineGlobal { idx, .. } => self.define_global(*idx, u.dtype),
            UOpKind::DefineVar { name, .. } => self.define_var(i, name, u.dtype),
            UOpKind::DefineLocal { size } => {
                let bytes = size
                    .checked_mul(u.dtype.itemsize())
                    .ok_or("local of too many bytes")?;
                let slot = self.k.bufs.len() + self.out.locals.len();
                self.out.locals.push(bytes);
                self.local_slot.push((i, slot));
                Ok(())
            }
            UOpKind::Const(v) => {
                self.out.regs[i] = scalar_reg(*v, u.dtype);
                Ok(())
            }
            UOpKind::DefineAcc(v) => self.emit(Instr::Set {
                dst: i,
                bits: scalar_reg(*v, u.dtype),
            }),
            UOpKind::Loop => self.open_loop(i, u, &src),
            UOpKind::EndLoop => self.close_loop(&src),
            UOpKind::Load => self.load(i, u.dtype, &src),
            UOpKind::Store => self.store(i, &src),
            UOpKind::Alu(op) => self.alu(i, *op, u.dtype, &src),
            UOpKind::Cast => self.cast(i, u.dtype, &src),
            UOpKind::Bitcast => self.bitcast(i, u.dtype, &src),
            UOpKind::Assign => self.assign(i, &src),
            UOpKind::DualMac => self.dual_mac(i, u.dtype, &src),
            UOpKind::VecAcc { .. }
            | UOpKind::VecLoad { .. }
            | UOpKind::VecStore { .. }
            | UOpKind::VecAlu { .. }
            | UOpKind::Vectorize
            | UOpKind::Gep(_)
            | UOpKind::PairWiden => Err(String::from(
                "a vector uop left after the lane-by-lane expansion",
            )),
        }
    }

    /// `acc + a0·b0 + a1·b1`, lane by lane, wrapping in i32 as the instruction does.
    fn dual_mac(&mut self, i: usize, dt: DType, src: &[usize]) -> core::result::Result<(), Msg> {
        Self::arity(src, 5)?;
        let lanes_fit = src[1..]
            .iter()
            .all(|&s| matches!(self.dtype(s), DType::I8 | DType::U8 | DType::I16));
        if dt != DType::I32 || self.dtype(src[0]) != DType::I32 || !lanes_fit {
            return Err(format!("dual mac of {:?} giving {dt}", self.dtypes(src)));
        }
        let [acc, a0, b0, a1, b1] = [src[0], src[1], src[2], src[3], src[4]];
        // Registers hold narrow ints sign- or zero-extended (see `MulWide`): read as i64.
        let f = move |r: &mut [u64]| {
            let lane = |a: usize, b: usize| (r[a] as i64 as i32).wrapping_mul(r[b] as i64 as i32);
            let sum = (r[acc] as i64 as i32)
                .wrapping_add(lane(a0, b0))
                .wrapping_add(lane(a1, b1));
            r[i] = sum.to_reg();
        };
        self.emit(Instr::Alu(alloc::boxed::Box::new(f)))
    }

    fn emit(&mut self, ins: Instr) -> core::result::Result<(), Msg> {
        self.out.code.push(ins);
        Ok(())
    }

    fn dtype(&self, s: usize) -> DType {
        self.k.uops[s].dtype
    }

    fn arity(src: &[usize], n: usize) -> core::result::Result<(), Msg> {
        if src.len() == n {
            Ok(())
        } else {
            Err(format!("expects {n} sources, has {}", src.len()))
        }
    }

    /// Checks that every source in `src` has dtype `dt`.
    fn dtypes(&self, src: &[usize]) -> Vec<DType> {
        src.iter().map(|&s| self.dtype(s)).collect()
    }

    fn same_dtype(&self, src: &[usize], dt: DType) -> core::result::Result<(), Msg> {
        match src.iter().find(|&&s| self.dtype(s) != dt) {
            Some(&s) => Err(format!("source {s} is {}, expected {dt}", self.dtype(s))),
            None => Ok(()),
        }
    }

    fn define_global(&mut self, idx: usize, dt: DType) -> core::result::Result<(), Msg> {
        match self.k.bufs.get(idx) {
            None => Err(format!(
                "buffer {idx} but the kernel has {}",
                self.k.bufs.len()
            )),
            Some(b) if b.dtype != dt => Err(format!("dtype {dt}, but buffer {idx} is {}", b.dtype)),
            Some(_) => Ok(()),
        }
    }

    fn define_var(&mut self, i: usize, name: &str, dt: DType) -> core::result::Result<(), Msg> {
        let pos = self
            .k
            .vars
            .iter()
            .position(|(n, _, _)| &**n == name)
            .ok_or_else(|| format!("variable {name} is not in the kernel's variable list"))?;
        self.out.vars.push(VarSlot {
            reg: i,
            pos,
            dtype: dt,
        });
        Ok(())
    }

    fn open_loop(&mut self, i: usize, u: &UOp, src: &[usize]) -> core::result::Result<(), Msg> {
        Self::arity(src, 2)?;
        if !u.dtype.is_int() {
            return Err(format!("loop counter of dtype {}", u.dtype));
        }
        self.loops.push((i, self.out.code.len()));
        self.emit(Instr::Loop {
            reg: i,
            start: src[0],
            end: src[1],
            exit: usize::MAX,
        })
    }

    fn close_loop(&mut self, src: &[usize]) -> core::result::Result<(), Msg> {
        Self::arity(src, 1)?;
        let (lp, pc) = self.loops.pop().ok_or("no open loop")?;
        if lp != src[0] {
            return Err(format!("closes loop {} but the innermost is {lp}", src[0]));
        }
        let exit = self.out.code.len() + 1;
        let Instr::Loop { end, exit: e, .. } = &mut self.out.code[pc] else {
            return Err(String::from("internal: loop instruction missing"));
        };
        *e = exit;
        let end = *end;
        self.emit(Instr::EndLoop {
            reg: lp,
            end,
            body: pc + 1,
        })
    }

    /// The buffer parameter a load or store addresses (its source 0), checked to hold `dt`.
    fn slot(&self, buf: usize, dt: DType) -> core::result::Result<(usize, bool), Msg> {
        match self.k.uops[buf].kind {
            UOpKind::DefineGlobal { idx, writable } if self.dtype(buf) == dt => Ok((idx, writable)),
            UOpKind::DefineLocal { .. } if self.dtype(buf) == dt => self
                .local_slot
                .iter()
                .find(|&&(u, _)| u == buf)
                .map(|&(_, s)| (s, true))
                .ok_or_else(|| format!("local uop {buf} was not declared")),
            UOpKind::DefineGlobal { .. } | UOpKind::DefineLocal { .. } => Err(format!(
                "accesses {dt} in buffer uop {buf} of {}",
                self.dtype(buf)
            )),
            _ => Err(format!("source {buf} is not a DEFINE_GLOBAL")),
        }
    }

    fn index(&self, idx: usize) -> core::result::Result<(), Msg> {
        match self.dtype(idx) {
            d if d.is_int() => Ok(()),
            d => Err(format!("index of dtype {d}")),
        }
    }

    fn gate(&self, g: Option<&usize>) -> core::result::Result<Option<usize>, Msg> {
        match g {
            Some(&g) if self.dtype(g) != DType::Bool => {
                Err(format!("gate of dtype {}", self.dtype(g)))
            }
            g => Ok(g.copied()),
        }
    }

    fn load(&mut self, i: usize, dt: DType, src: &[usize]) -> core::result::Result<(), Msg> {
        if !(2..=3).contains(&src.len()) {
            return Err(format!("expects 2 or 3 sources, has {}", src.len()));
        }
        let (slot, _) = self.slot(src[0], dt)?;
        self.index(src[1])?;
        let gate = self.gate(src.get(2))?;
        let ins = storage_type!(dt, S => load::<S>(i, slot, src[1], gate)).ok_or("bad dtype")?;
        self.emit(ins)
    }

    fn store(&mut self, i: usize, src: &[usize]) -> core::result::Result<(), Msg> {
        if !(3..=4).contains(&src.len()) {
            return Err(format!("expects 3 or 4 sources, has {}", src.len()));
        }
        let dt = self.dtype(src[2]);
        let (slot, writable) = self.slot(src[0], dt)?;
        if !writable {
            return Err(format!("stores to buffer {slot}, which is not writable"));
        }
        self.index(src[1])?;
        let gate = self.gate(src.get(3))?;
        if let Some(w) = self.out.written.get_mut(slot) {
            *w = true;
        }
        let ins = storage_type!(dt, S => store::<S>(i, slot, [src[1], src[2]], gate))
            .ok_or("bad dtype")?;
        self.emit(ins)
    }

    fn assign(&mut self, i: usize, src: &[usize]) -> core::result::Result<(), Msg> {
        Self::arity(src, 2)?;
        if !matches!(self.k.uops[src[0]].kind, UOpKind::DefineAcc(_)) {
            return Err(format!("source {} is not a DEFINE_ACC", src[0]));
        }
        self.same_dtype(&src[1..], self.dtype(src[0]))?;
        self.emit(Instr::Assign {
            acc: src[0],
            dst: i,
            src: src[1],
        })
    }

    fn alu(
        &mut self,
        i: usize,
        op: AluOp,
        dt: DType,
        src: &[usize],
    ) -> core::result::Result<(), Msg> {
        Self::arity(src, op.arity())?;
        let ins = match op {
            AluOp::Where => {
                self.same_dtype(&src[..1], DType::Bool)?;
                self.same_dtype(&src[1..], dt)?;
                Some(select(i, [src[0], src[1], src[2]]))
            }
            AluOp::CmpLt | AluOp::CmpEq => {
                if dt != DType::Bool {
                    return Err(format!("comparison of dtype {dt}"));
                }
                self.same_dtype(src, self.dtype(src[0]))?;
                any_type!(self.dtype(src[0]), T => compare::<T>(op, i, src[0], src[1]))
            }
            AluOp::MulWide => {
                let narrow = src.iter().all(|&s| op.defined_on(self.dtype(s)));
                if dt != DType::I32 || !narrow {
                    return Err(format!("mulwide of {:?} giving {dt}", self.dtypes(src)));
                }
                // Registers hold narrow ints sign- or zero-extended: read as i64, any mix of
                // i8/u8/i16 decodes to its value.
                Some(binary::<i64, i32>(i, src[0], src[1], |a, b| (a * b) as i32))
            }
            _ => {
                self.same_dtype(src, dt)?;
                elementwise(op, dt, i, src)
            }
        };
        self.emit(ins.ok_or_else(|| format!("{op} is not defined for {dt}"))?)
    }

    fn cast(&mut self, i: usize, dt: DType, src: &[usize]) -> core::result::Result<(), Msg> {
        Self::arity(src, 1)?;
        let ins = any_type!(self.dtype(src[0]), S => cast_from::<S>(dt, i, src[0])).flatten();
        self.emit(ins.ok_or("bad dtype")?)
    }

    fn bitcast(&mut self, i: usize, dt: DType, src: &[usize]) -> core::result::Result<(), Msg> {
        Self::arity(src, 1)?;
        let from = self.dtype(src[0]);
        if from.itemsize() != dt.itemsize() {
            return Err(format!("bitcast from {from} to {dt} changes the size"));
        }
        let ins = storage_type!(from, S => bitcast_from::<S>(dt, i, src[0])).flatten();
        self.emit(ins.ok_or("bad dtype")?)
    }
}

/// The element `i` of `size` bytes in a buffer of `len` bytes, if it is in range.
fn element(len: usize, i: i64, size: usize) -> Option<core::ops::Range<usize>> {
    let start = usize::try_from(i).ok()?.checked_mul(size)?;
    let end = start.checked_add(size)?;
    (end <= len).then_some(start..end)
}

fn load<S: Storage>(uop: usize, slot: usize, idx: usize, gate: Option<usize>) -> Instr {
    Instr::Mem(alloc::boxed::Box::new(move |r, m| {
        if gate.is_some_and(|g| r[g] == 0) {
            r[uop] = 0;
            return Ok(());
        }
        let i = r[idx] as i64;
        let buf = m.read(slot);
        let Some(at) = element(buf.len(), i, S::SIZE) else {
            return Err(Fault::out_of_range(uop, slot, i, buf.len() / S::SIZE));
        };
        r[uop] = S::read(&buf[at]);
        Ok(())
    }))
}

fn store<S: Storage>(
    uop: usize,
    slot: usize,
    [idx, val]: [usize; 2],
    gate: Option<usize>,
) -> Instr {
    Instr::Mem(alloc::boxed::Box::new(move |r, m| {
        if gate.is_some_and(|g| r[g] == 0) {
            return Ok(());
        }
        let i = r[idx] as i64;
        let Some(buf) = m.write(slot) else {
            return Err(Fault {
                uop,
                slot,
                index: i,
                len: 0,
                kind: FaultKind::ReadOnly,
            });
        };
        let Some(at) = element(buf.len(), i, S::SIZE) else {
            return Err(Fault::out_of_range(uop, slot, i, buf.len() / S::SIZE));
        };
        S::write(&mut buf[at], r[val]);
        Ok(())
    }))
}

/// `Where`: a register select, the same for every dtype (registers are canonical).
fn select(d: usize, [c, a, b]: [usize; 3]) -> Instr {
    Instr::Alu(alloc::boxed::Box::new(move |r| {
        r[d] = if r[c] != 0 { r[a] } else { r[b] }
    }))
}

fn compare<T: Arith>(op: AluOp, d: usize, a: usize, b: usize) -> Instr {
    match op {
        AluOp::CmpLt => binary::<T, bool>(d, a, b, T::lt),
        _ => binary::<T, bool>(d, a, b, T::eq),
    }
}

/// Ops whose operands and result share the UOp's dtype, by family.
fn elementwise(op: AluOp, dt: DType, d: usize, src: &[usize]) -> Option<Instr> {
    use AluOp::*;
    match op {
        Add | Sub | Mul | Div | Max | Mod => any_type!(dt, T => arith::<T>(op, d, src[0], src[1])),
        Neg => any_type!(dt, T => unary::<T, T>(d, src[0], T::neg)),
        MulAcc => any_type!(dt, T => ternary::<T>(d, [src[0], src[1], src[2]], mulacc::<T>)),
        Fma => float_type!(dt, T => ternary::<T>(d, [src[0], src[1], src[2]], T::fma)),
        Xor | And | Or | FloorDiv | FloorMod => {
            bits_type!(dt, T => bitwise::<T>(op, d, src[0], src[1]))
        }
        Exp2 | Log2 | Sin | Sqrt | Recip => float_type!(dt, T => float::<T>(op, d, src[0])),
        Requant if dt == DType::I32 => Some(ternary::<i32>(
            d,
            [src[0], src[1], src[2]],
            crate::ops::requant,
        )),
        Clamp if dt == DType::I32 => Some(ternary::<i32>(
            d,
            [src[0], src[1], src[2]],
            |x: i32, lo, hi| Ord::min(Ord::max(x, lo), hi),
        )),
        Where | CmpLt | CmpEq | MulWide | Requant | Clamp => None,
    }
}

/// `a * b` rounded, then `+ c` rounded: no fused multiply-add.
fn mulacc<T: Arith>(a: T, b: T, c: T) -> T {
    a.mul(b).add(c)
}

fn arith<T: Arith>(op: AluOp, d: usize, a: usize, b: usize) -> Instr {
    match op {
        AluOp::Add => binary::<T, T>(d, a, b, T::add),
        AluOp::Sub => binary::<T, T>(d, a, b, T::sub),
        AluOp::Mul => binary::<T, T>(d, a, b, T::mul),
        AluOp::Div => binary::<T, T>(d, a, b, T::div),
        AluOp::Max => binary::<T, T>(d, a, b, T::max),
        _ => binary::<T, T>(d, a, b, T::rem),
    }
}

fn bitwise<T: Bits>(op: AluOp, d: usize, a: usize, b: usize) -> Instr {
    match op {
        AluOp::Xor => binary::<T, T>(d, a, b, T::xor),
        AluOp::And => binary::<T, T>(d, a, b, T::and),
        AluOp::Or => binary::<T, T>(d, a, b, T::or),
        AluOp::FloorDiv => binary::<T, T>(d, a, b, T::floordiv),
        _ => binary::<T, T>(d, a, b, T::floormod),
    }
}

fn float<T: Float>(op: AluOp, d: usize, a: usize) -> Instr {
    match op {
        AluOp::Exp2 => unary::<T, T>(d, a, T::exp2),
        AluOp::Log2 => unary::<T, T>(d, a, T::log2),
        AluOp::Sin => unary::<T, T>(d, a, T::sin),
        AluOp::Sqrt => unary::<T, T>(d, a, T::sqrt),
        _ => unary::<T, T>(d, a, T::recip),
    }
}

/// A cast from computed type `S` to `dt`; to f16/bf16 goes through f32 and rounds there.
fn cast_from<S: Conv>(dt: DType, d: usize, a: usize) -> Option<Instr> {
    match dt {
        DType::F16 => Some(unary::<S, f32>(d, a, |x| round_f16(x.conv()))),
        DType::BF16 => Some(unary::<S, f32>(d, a, |x| round_bf16(x.conv()))),
        _ => any_type!(dt, D => unary::<S, D>(d, a, |x| x.conv::<D>())),
    }
}

/// A bitcast from stored type `S` to `dt`, through the stored bit pattern.
fn bitcast_from<S: Storage>(dt: DType, d: usize, a: usize) -> Option<Instr> {
    fn go<S: Storage, D: Storage>(d: usize, a: usize) -> Instr {
        Instr::Alu(alloc::boxed::Box::new(move |r| {
            r[d] = D::from_raw(S::to_raw(r[a]))
        }))
    }
    storage_type!(dt, D => go::<S, D>(d, a))
}
