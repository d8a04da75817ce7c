//! Channel-interleaved activations for the packed dual multiply-accumulate: the scheduling
//! layer's choice of the memory layout an intermediate int8 buffer is stored in, for a target
//! whose [`OptConfig::dual_mac`] says it has `smlad` (Cortex-M4/M7/M33).
//!
//! The linearizer packs four products of an int8 sum into one 32-bit load per factor when both
//! factors are four consecutive bytes along a reduce axis. A pointwise conv's weight is (its
//! input channels are its rows' contiguous axis), but its NCHW input is not: consecutive
//! channels lie `H·W` bytes apart. Rule: in a kernel summing `i8 × i8` products into i32 where
//! one factor moves with stride 1 along a reduce axis of `n` positions (`n` a multiple of 4) and
//! the other with a constant stride `k > 1`, the second factor's buffer — when it is an
//! intermediate written by one kernel and read only by kernels (not a model input, output or
//! weight, not touched by a copy step) and its `N` elements factor as `[N / (n·k), n, k]` — is
//! stored as `[N / (n·k), k, n]`: that axis becomes the contiguous one. The producer writes it
//! there and every reader reads it there (each access's view gets the permutation stacked
//! under it), so no copy is made and no memory is added: the arena keeps its size. The cost is
//! only in the other readers' and the producer's strides (a depthwise conv then reads its
//! taps `n` bytes apart); the packed sum reads one word per four products of each factor.
//!
//! Where: [`Capture::relowered`](crate::jit::Capture::relowered) applies it for a `dual_mac`
//! target (export and the device search), where the capture knows which buffers its caller
//! sees (inputs, outputs, weights keep their layout). A live schedule on a desktop device is
//! left as it is: any buffer it realizes may be read back by its user.
//!
//! Invariant: only memory layout changes. The map from logical positions to memory is a
//! bijection applied to every access of the buffer, so every kernel reads and writes the same
//! values at the same logical positions and results are bit-identical.

use alloc::vec::Vec;

use crate::ast::{Ast, AstOp};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{AluOp, ReduceOp};
use crate::shape::{ShapeTracker, Sint};
use crate::symbolic::Node;

/// Bytes one packed load reads (four i8 lanes).
const WORD: usize = 4;

/// One kernel of a recorded schedule: its AST (`None`: a copy between buffers) and its buffer
/// slots (`slots[0]` the output, `slots[n]` the AST's buffer `n`).
pub type Step = (Option<Ast>, Vec<usize>);

/// A buffer to store interleaved: its slot and `[outer, n, k]` (stored `[outer, k, n]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Choice {
    slot: usize,
    dims: [usize; 3],
}

/// The strides of `st` along its axes, constant ones only.
fn strides(st: &ShapeTracker) -> Vec<Option<i64>> {
    st.real_strides()
        .iter()
        .map(|s| s.as_ref().and_then(Node::as_const))
        .collect()
}

/// `(buffer, view)` of the strided factor and `(n, k)` for a kernel the rule fits.
fn candidate(ast: &Ast) -> Option<(usize, usize, usize)> {
    let red = ast.find_reduce()?;
    let AstOp::Reduce(ReduceOp::Sum, axes) = red.op() else {
        return None;
    };
    let src = red.src().first()?;
    if red.dtype() != DType::I32 || !matches!(src.op(), AstOp::Alu(AluOp::MulWide)) {
        return None;
    }
    let mut factors = Vec::new();
    for f in src.src() {
        let AstOp::Load { buf, st } = f.op() else {
            return None;
        };
        if f.dtype() != DType::I8 {
            return None;
        }
        factors.push((*buf, st.shape().to_vec(), strides(st)));
    }
    let [(ba, shape, sa), (bb, _, sb)] = <[_; 2]>::try_from(factors).ok()?;
    for &r in axes.iter().rev() {
        let n = usize::try_from(shape.get(r)?.as_const()?).ok()?;
        if n % WORD != 0 {
            continue;
        }
        match (sa.get(r).copied()?, sb.get(r).copied()?) {
            (Some(1), Some(k)) if k > 1 => return Some((bb, n, k as usize)),
            (Some(k), Some(1)) if k > 1 => return Some((ba, n, k as usize)),
            _ => {}
        }
    }
    None
}

/// The buffers the rule stores interleaved, given each slot's element count and the slots
/// whose layout is seen outside the steps (`fixed`).
fn choose(steps: &[Step], sizes: &[usize], fixed: &[usize]) -> Vec<Choice> {
    let mut writers = alloc::vec![Vec::new(); sizes.len()];
    let mut opaque = alloc::vec![false; sizes.len()];
    for (j, (ast, slots)) in steps.iter().enumerate() {
        if let Some(w) = slots.first().and_then(|&s| writers.get_mut(s)) {
            w.push(j);
        }
        if ast.is_none() {
            slots.iter().for_each(|&s| opaque[s] = true);
        }
    }
    let mut out: Vec<Choice> = Vec::new();
    for (j, (ast, slots)) in steps.iter().enumerate() {
        let Some((buf, n, k)) = ast.as_ref().and_then(candidate) else {
            continue;
        };
        let Some(&slot) = slots.get(buf) else {
            continue;
        };
        let produced = matches!(writers[slot][..], [p] if p < j);
        let total = sizes[slot];
        if !produced
            || opaque[slot]
            || fixed.contains(&slot)
            || total % (n * k) != 0
            || out.iter().any(|c| c.slot == slot)
        {
            continue;
        }
        out.push(Choice {
            slot,
            dims: [total / (n * k), n, k],
        });
    }
    out
}

/// The view from a buffer's logical (row-major) positions to its interleaved memory.
fn base(c: &Choice) -> Result<ShapeTracker> {
    let [outer, n, k] = c.dims;
    let flat: Vec<Sint> = alloc::vec![Node::cst((outer * n * k) as i64)];
    ShapeTracker::from_dims(&[outer, k, n])
        .permute(&[0, 2, 1])?
        .reshape(&flat)
}

/// Stores the buffers the rule picks interleaved (see the module doc), rewriting every access
/// of theirs in `steps`; `sizes` is each slot's element count, `fixed` the slots whose layout
/// must stay (inputs, outputs, weights). Returns how many buffers were interleaved.
pub fn apply(steps: &mut [Step], sizes: &[usize], fixed: &[usize]) -> Result<usize> {
    let choices = choose(steps, sizes, fixed);
    for c in &choices {
        let b = base(c)?;
        crate::context::log(5, &alloc::format!("schedule: interleave slot {c:?}"));
        for (ast, slots) in steps.iter_mut() {
            let Some(a) = ast.as_mut() else { continue };
            if !slots.contains(&c.slot) {
                continue;
            }
            let mut err = None;
            let mut remap = |st: &ShapeTracker| match b.concat(st) {
                Ok(s) => s,
                Err(e) => {
                    err = Some(e);
                    st.clone()
                }
            };
            let mine = |buf: usize| slots.get(buf) == Some(&c.slot);
            let new = a.map_ops(&mut |op, _| match op {
                AstOp::Load { buf, st } if mine(*buf) => AstOp::Load {
                    buf: *buf,
                    st: remap(st),
                },
                AstOp::Store { buf, st } if mine(*buf) => AstOp::Store {
                    buf: *buf,
                    st: remap(st),
                },
                other => other.clone(),
            });
            if let Some(e) = err {
                return Err(e);
            }
            *a = new;
        }
    }
    Ok(choices.len())
}

#[cfg(test)]
mod tests {
    //! The rule's conditions on hand-built steps: a pointwise-shaped int8 sum over an
    //! intermediate one kernel writes is interleaved (its strided factor then reads with unit
    //! stride, the producer's store is remapped); a fixed slot, a second writer, a copy step
    //! touching the buffer, or a channel count that is not a whole number of words leave it.

    use super::*;
    use crate::shape::sints_usize;

    const CO: usize = 4;
    const P: usize = 6;

    fn load(buf: usize, st: ShapeTracker) -> Ast {
        Ast::new(AstOp::Load { buf, st }, DType::I8, Vec::new())
    }

    /// `out[co, p] = Σ_ci x[ci, p] · w[co, ci]`, `x` buffer 1 (NCHW: channels `P` apart).
    fn consumer(ci: usize) -> Ast {
        let full = sints_usize(&[CO, P, ci]);
        let x = ShapeTracker::from_dims(&[ci, P])
            .permute(&[1, 0])
            .and_then(|s| s.reshape(&sints_usize(&[1, P, ci])))
            .and_then(|s| s.expand(&full))
            .unwrap();
        let w = ShapeTracker::from_dims(&[CO, ci])
            .reshape(&sints_usize(&[CO, 1, ci]))
            .and_then(|s| s.expand(&full))
            .unwrap();
        let prod = Ast::new(
            AstOp::Alu(AluOp::MulWide),
            DType::I32,
            alloc::vec![load(1, x), load(2, w)],
        );
        let red = Ast::new(
            AstOp::Reduce(ReduceOp::Sum, alloc::vec![2]),
            DType::I32,
            alloc::vec![prod],
        );
        let st = ShapeTracker::from_dims(&[CO, P, 1]);
        Ast::new(AstOp::Store { buf: 0, st }, DType::I32, alloc::vec![red])
    }

    /// Writes `ci · P` elements of buffer 0 from buffer 1.
    fn producer(ci: usize) -> Ast {
        let st = ShapeTracker::from_dims(&[ci, P]);
        Ast::new(
            AstOp::Store {
                buf: 0,
                st: st.clone(),
            },
            DType::I8,
            alloc::vec![load(1, st)],
        )
    }

    /// Slot 1: the model input, 2: the intermediate, 3: the weight, 4: the output.
    fn steps(ci: usize) -> Vec<Step> {
        alloc::vec![
            (Some(producer(ci)), alloc::vec![2, 1]),
            (Some(consumer(ci)), alloc::vec![4, 2, 3]),
        ]
    }

    fn sizes(ci: usize) -> Vec<usize> {
        alloc::vec![0, ci * P, ci * P, CO * ci, CO * P]
    }

    fn x_strides(steps: &[Step]) -> Vec<Option<i64>> {
        let ast = steps[1].0.as_ref().unwrap();
        let red = ast.find_reduce().unwrap();
        let AstOp::Load { st, .. } = red.src()[0].src()[0].op() else {
            panic!("not a load")
        };
        strides(st)
    }

    #[test]
    fn intermediate_is_interleaved_and_read_along_its_channels() {
        let mut s = steps(8);
        assert_eq!(x_strides(&s)[2], Some(P as i64));
        let before = s[0].0.clone();
        assert_eq!(apply(&mut s, &sizes(8), &[1, 3, 4]).unwrap(), 1);
        assert_eq!(x_strides(&s)[2], Some(1), "the channels are not contiguous");
        assert_eq!(
            x_strides(&s)[1],
            Some(8),
            "the pixels are not a word row apart"
        );
        assert_ne!(s[0].0, before, "the producer's store was not remapped");
    }

    #[test]
    fn buffers_seen_outside_or_shared_keep_their_layout() {
        let fixed = |s: &mut Vec<Step>| apply(s, &sizes(8), &[1, 2, 3, 4]).unwrap();
        assert_eq!(fixed(&mut steps(8)), 0, "a fixed slot");
        let mut two = steps(8);
        two.insert(0, (Some(producer(8)), alloc::vec![2, 1]));
        assert_eq!(
            apply(&mut two, &sizes(8), &[1, 3, 4]).unwrap(),
            0,
            "two writers"
        );
        let mut copied = steps(8);
        copied.push((None, alloc::vec![1, 2]));
        assert_eq!(
            apply(&mut copied, &sizes(8), &[1, 3, 4]).unwrap(),
            0,
            "a copy"
        );
        let mut odd = steps(6);
        assert_eq!(
            apply(&mut odd, &sizes(6), &[1, 3, 4]).unwrap(),
            0,
            "6 channels"
        );
    }
}
