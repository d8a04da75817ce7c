//! The interpreter's executable form: a flat list of [`Instr`]s over a register file of `u64`
//! bit patterns (one register per UOp), and the loop that runs it.
//!
//! Invariant: every dtype decision was made when the instruction was built — an ALU or memory
//! instruction is a closure already specialised for its dtype and op, so running never matches on
//! a dtype. Control flow is explicit jumps: `Loop` jumps past its `EndLoop` when the range is
//! empty, `EndLoop` jumps back to the first instruction of the body while the counter is below the
//! end. Registers and memory belong to one run.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::elem::Reg;

/// A pure register operation.
pub(crate) type AluFn = Box<dyn Fn(&mut [u64]) + Send + Sync>;
/// A register operation that touches buffer memory and may fault.
pub(crate) type MemFn = Box<dyn Fn(&mut [u64], &mut Mem<'_>) -> Result<(), Fault> + Send + Sync>;

/// One step of a compiled kernel.
pub(crate) enum Instr {
    /// Computes one register from others.
    Alu(AluFn),
    /// Loads or stores.
    Mem(MemFn),
    /// `r[dst] = bits` (an accumulator being (re)initialised).
    Set { dst: usize, bits: u64 },
    /// `r[acc] = r[src]; r[dst] = r[src]` (an accumulator update; the Assign's own value too).
    Assign { acc: usize, dst: usize, src: usize },
    /// `r[reg] = r[start]`; jump to `exit` (past the matching `EndLoop`) if it is not below `r[end]`.
    Loop {
        reg: usize,
        start: usize,
        end: usize,
        exit: usize,
    },
    /// `r[reg] += 1`; jump to `body` while it is below `r[end]`.
    EndLoop { reg: usize, end: usize, body: usize },
}

/// A memory access that went wrong, reported by the instruction and turned into an
/// [`Error`](crate::Error) naming the kernel by the program.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fault {
    /// The UOp that faulted.
    pub uop: usize,
    /// The buffer parameter it addressed.
    pub slot: usize,
    /// The element index.
    pub index: i64,
    /// The buffer's length in elements.
    pub len: usize,
    /// What went wrong.
    pub kind: FaultKind,
}

/// Why a memory access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// The index was outside the buffer.
    OutOfRange,
    /// A store to a buffer the run holds read-only (a bug in lowering, never expected).
    ReadOnly,
}

impl Fault {
    /// An out-of-range access.
    pub fn out_of_range(uop: usize, slot: usize, index: i64, len: usize) -> Fault {
        Fault {
            uop,
            slot,
            index,
            len,
            kind: FaultKind::OutOfRange,
        }
    }
}

/// One buffer as a run holds it: read-only or writable.
pub(crate) enum View<'a> {
    /// A buffer only read by this run.
    Read(spin::RwLockReadGuard<'a, Vec<u8>>),
    /// A buffer this run writes.
    Write(spin::RwLockWriteGuard<'a, Vec<u8>>),
}

/// The memory of one run: the distinct buffers it holds, and which one each parameter slot names
/// (an in-place kernel names one buffer from two slots).
pub(crate) struct Mem<'a> {
    pub views: Vec<View<'a>>,
    pub slots: Vec<usize>,
    /// The kernel's `DefineLocal` scratch arrays, this run's own: slot `slots.len() + n` is
    /// local number `n`.
    pub scratch: Vec<Vec<u8>>,
}

impl Mem<'_> {
    /// The bytes of the buffer in parameter `slot` (or of a local, past the parameters).
    pub fn read(&self, slot: usize) -> &[u8] {
        if let Some(n) = slot.checked_sub(self.slots.len()) {
            return &self.scratch[n];
        }
        match &self.views[self.slots[slot]] {
            View::Read(g) => g,
            View::Write(g) => g,
        }
    }

    /// The bytes of the buffer in parameter `slot`, if this run holds it writable (a local
    /// always is).
    pub fn write(&mut self, slot: usize) -> Option<&mut [u8]> {
        if let Some(n) = slot.checked_sub(self.slots.len()) {
            return Some(&mut self.scratch[n]);
        }
        match &mut self.views[self.slots[slot]] {
            View::Read(_) => None,
            View::Write(g) => Some(g),
        }
    }
}

/// Runs `code` to its end.
/// Runs `code`; returns how many operations it executed — ALU ops, loads and stores, not
/// register moves or loop control (the work counter tests read).
pub(crate) fn exec(code: &[Instr], r: &mut [u64], m: &mut Mem<'_>) -> Result<u64, Fault> {
    let mut pc = 0;
    let mut executed = 0u64;
    while let Some(ins) = code.get(pc) {
        pc += 1;
        match ins {
            Instr::Alu(f) => {
                executed += 1;
                f(r)
            }
            Instr::Mem(f) => {
                executed += 1;
                f(r, m)?
            }
            Instr::Set { dst, bits } => r[*dst] = *bits,
            Instr::Assign { acc, dst, src } => {
                let v = r[*src];
                r[*acc] = v;
                r[*dst] = v;
            }
            Instr::Loop {
                reg,
                start,
                end,
                exit,
            } => {
                let s = r[*start];
                r[*reg] = s;
                if s as i64 >= r[*end] as i64 {
                    pc = *exit;
                }
            }
            Instr::EndLoop { reg, end, body } => {
                let n = (r[*reg] as i64).wrapping_add(1);
                r[*reg] = n as u64;
                if n < r[*end] as i64 {
                    pc = *body;
                }
            }
        }
    }
    Ok(executed)
}

/// `r[d] = f(r[a])`, decoding as `A` and encoding the result's type.
pub(crate) fn unary<A: Reg, T: Reg>(
    d: usize,
    a: usize,
    f: impl Fn(A) -> T + Send + Sync + 'static,
) -> Instr {
    Instr::Alu(Box::new(move |r| r[d] = f(A::from_reg(r[a])).to_reg()))
}

/// `r[d] = f(r[a], r[b])`, both operands decoded as `A`.
pub(crate) fn binary<A: Reg, T: Reg>(
    d: usize,
    a: usize,
    b: usize,
    f: impl Fn(A, A) -> T + Send + Sync + 'static,
) -> Instr {
    Instr::Alu(Box::new(move |r| {
        r[d] = f(A::from_reg(r[a]), A::from_reg(r[b])).to_reg()
    }))
}

/// `r[d] = f(r[a], r[b], r[c])`, all decoded as `A`.
pub(crate) fn ternary<A: Reg>(
    d: usize,
    [a, b, c]: [usize; 3],
    f: impl Fn(A, A, A) -> A + Send + Sync + 'static,
) -> Instr {
    Instr::Alu(Box::new(move |r| {
        r[d] = f(A::from_reg(r[a]), A::from_reg(r[b]), A::from_reg(r[c])).to_reg()
    }))
}
