//! Staged weights ([`Opt::StageWeights`](crate::codegen::kernel::Opt::StageWeights)): in a
//! packed int8 sum whose one factor (the weight) does not vary along the kernel's inner output
//! loops, that factor's words are widened once, before those loops, into a stack local
//! ([`UOpKind::DefineLocal`]) as i16 pairs ([`UOpKind::PairWiden`]); each reduce step then
//! widens the other factor's word once and reads every output's pre-widened weight pairs from
//! the local (one `ldrd` on a Cortex-M4) for a `DualMac` of 4-lane i16 operands.
//!
//! Invariant: staging changes no value — each accumulator still adds the products of the same
//! four reduce positions per step (integer sums wrap), and every local element a step reads was
//! stored by the staging loop that runs, with the same reduce loops, just before the output
//! loops that read it. The local holds `trips × quads × slots` words of four lanes, laid out
//! `[reduce loop iteration][quad][slot]`; outputs whose weights are read at the same indices
//! share a slot.

use alloc::vec::Vec;

use super::{lanes, open_reduce_loops, Lin};
use crate::ast::{Ast, AstOp};
use crate::codegen::kernel::Kernel;
use crate::codegen::uops::UOpKind;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{AluOp, Scalar};
use crate::symbolic::Node;

/// The index position of an output combination and reduce combination (`inside` the reduce).
pub(super) type Pos<'a> = &'a dyn Fn(&[i64], &[i64], bool) -> Vec<Node>;

/// Where and how a kernel's weights are staged.
pub(super) struct Stage {
    /// The global loops (from the first) opened before the staging: the weight varies only
    /// with them, the loops after them are the ones the staging pays off over.
    pub split: usize,
    /// The staged factor of the `MulWide` (0 or 1); the other is widened per step.
    pub w: usize,
    /// Each output combination's slot in the local.
    pub slot: Vec<usize>,
    /// Distinct slots.
    pub slots: usize,
    /// Quads (four reduce positions: one word) per reduce loop iteration.
    pub quads: usize,
    /// Reduce loop iterations (all reduce loops together).
    pub trips: usize,
}

impl Stage {
    /// i16 elements of the local.
    pub fn size(&self) -> usize {
        self.trips * self.quads * self.slots * 4
    }
}

/// The staging of `k` whose outputs are `out` and reduce positions `red` (quads of a packed
/// word, in order), `pos` giving an index position; `None` when `k` is not marked staged or
/// its shape does not allow it: both factors must be ungated i8 loads of four consecutive
/// elements at every quad and output, the weight constant along some inner global loop
/// along which the other factor moves, and the reduce loops of constant length, not blocked.
pub(super) fn plan(
    k: &Kernel,
    src: &Ast,
    outer: usize,
    out: &[Vec<i64>],
    red: &[Vec<i64>],
    pos: Pos<'_>,
) -> Option<Stage> {
    if !k.staged || k.reduce_block.is_some() || k.vector_upcast.is_some() {
        return None;
    }
    if red.is_empty() || red.len() % 4 != 0 || !matches!(src.op(), AstOp::Alu(AluOp::MulWide)) {
        return None;
    }
    let strides: Vec<Vec<Option<i64>>> = src
        .src()
        .iter()
        .map(|f| match f.op() {
            AstOp::Load { st, .. } if f.dtype() == DType::I8 => Some(
                st.real_strides()
                    .iter()
                    .map(|s| s.as_ref().and_then(Node::as_const))
                    .collect(),
            ),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let moves = |f: usize, a: usize| strides[f].get(a).copied() != Some(Some(0));
    // The weight: constant along the innermost global loop; the staging goes after the last
    // global loop it moves along.
    let inner = k.first_reduce.checked_sub(1).filter(|&a| a >= outer)?;
    let w = (0..2).find(|&f| !moves(f, inner))?;
    let split = (outer..k.first_reduce)
        .rev()
        .find(|&a| moves(w, a))
        .map_or(outer, |a| a + 1);
    if !(split..k.first_reduce).any(|a| moves(1 - w, a)) {
        return None;
    }
    // Every factor's quad is one ungated word.
    for g in out {
        for quad in red.chunks(4) {
            let ps: Vec<Vec<Node>> = quad.iter().map(|r| pos(g, r, true)).collect();
            for f in src.src() {
                let AstOp::Load { st, .. } = f.op() else {
                    return None;
                };
                let (idxs, valid): (Vec<Node>, Vec<Node>) =
                    ps.iter().map(|p| st.expr_idxs(p)).unzip();
                let ungated = valid.iter().all(|v| v.as_const().is_some_and(|c| c != 0));
                if !ungated || !lanes::consecutive(&idxs) {
                    return None;
                }
            }
        }
    }
    // Outputs whose weight words are the same share a slot.
    let AstOp::Load { st: wst, .. } = src.src()[w].op() else {
        return None;
    };
    let mut keys: Vec<Vec<Node>> = Vec::new();
    let mut slot = Vec::with_capacity(out.len());
    for g in out {
        let key: Vec<Node> = red
            .chunks(4)
            .map(|q| wst.expr_idxs(&pos(g, &q[0], true)).0)
            .collect();
        slot.push(match keys.iter().position(|k| *k == key) {
            Some(s) => s,
            None => {
                keys.push(key);
                keys.len() - 1
            }
        });
    }
    let mut trips = 1usize;
    for a in k.first_reduce..k.first_upcast {
        trips = trips.checked_mul(usize::try_from(k.full_shape[a].as_const()?).ok()?)?;
    }
    Some(Stage {
        split,
        w,
        slot,
        slots: keys.len(),
        quads: red.len() / 4,
        trips,
    })
}

impl Lin {
    /// The kernel's local for `st`: the one declared before the kernel's loops (sized for
    /// every part) when it is large enough, else a new one; `None` when the declared one is
    /// too small (this part then reads its weights as words; not expected, the declaration
    /// being sized by the same plans).
    pub(super) fn stage_local(&mut self, st: &Stage) -> Option<u32> {
        match self.local {
            Some((u, size)) if size >= st.size() => Some(u),
            Some(_) => None,
            None => {
                let u = self.push(
                    UOpKind::DefineLocal { size: st.size() },
                    DType::I16,
                    Vec::new(),
                );
                self.local = Some((u, st.size()));
                Some(u)
            }
        }
    }

    /// The staging loop: every slot's weight words of every reduce iteration, widened into
    /// the local.
    pub(super) fn stage_weights(
        &mut self,
        k: &Kernel,
        (st, local): (&Stage, u32),
        src: &Ast,
        (out, red): (&[Vec<i64>], &[Vec<i64>]),
        pos: Pos<'_>,
        loop_idxs: &[Node],
    ) {
        let rloops = open_reduce_loops(self, k, loop_idxs);
        let AstOp::Load { buf, st: wst } = src.src()[st.w].op() else {
            return;
        };
        let b = self.buf_uop(*buf);
        for (q, quad) in red.chunks(4).enumerate() {
            for s in 0..st.slots {
                let Some(g) = st.slot.iter().position(|&x| x == s) else {
                    continue;
                };
                let idx = wst.expr_idxs(&pos(&out[g], &quad[0], true)).0;
                let i = self.node(&idx);
                let pairs = self.widened_word(b, i);
                let at = self.stage_index(k, st, q, s, loop_idxs);
                self.push(
                    UOpKind::VecStore { lanes: 4 },
                    DType::I16,
                    alloc::vec![local, at, pairs],
                );
            }
        }
        for lp in rloops.into_iter().rev() {
            self.close_loop(lp);
        }
    }

    /// The word of four i8 at index `i` of buffer `b`, widened to the i16 pairs the dual
    /// multiply-accumulate takes (`PairWiden`).
    fn widened_word(&mut self, b: u32, i: u32) -> u32 {
        let word = self.push(
            UOpKind::VecLoad {
                lanes: 4,
                stride: 1,
            },
            DType::I8,
            alloc::vec![b, i],
        );
        self.push(UOpKind::PairWiden, DType::I16, alloc::vec![word])
    }

    /// Index of quad `q`, slot `s` of the current reduce iteration in the local:
    /// `((iteration · quads + q) · slots + s) · 4`, the iteration flattened from the open
    /// reduce loops (outermost first).
    fn stage_index(&mut self, k: &Kernel, st: &Stage, q: usize, s: usize, idxs: &[Node]) -> u32 {
        let d = self.idx_dtype;
        let mut it = self.konst(Scalar::zero(d));
        for (a, idx) in idxs
            .iter()
            .enumerate()
            .take(k.first_upcast)
            .skip(k.first_reduce)
        {
            let n = self.konst(Scalar::from_i64(k.full_shape[a].as_const().unwrap_or(1), d));
            let v = self.node(idx);
            let m = self.alu(AluOp::Mul, d, alloc::vec![it, n]);
            it = self.alu(AluOp::Add, d, alloc::vec![m, v]);
        }
        let per = self.konst(Scalar::from_i64((st.quads * st.slots * 4) as i64, d));
        let m = self.alu(AluOp::Mul, d, alloc::vec![it, per]);
        let off = self.konst(Scalar::from_i64(((q * st.slots + s) * 4) as i64, d));
        self.alu(AluOp::Add, d, alloc::vec![m, off])
    }

    /// One packed step from the local: the other factor's word at `quad` widened (shared by
    /// every output of the step), output `gi`'s pairs loaded from its slot, one `DualMac`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn accumulate_staged(
        &mut self,
        k: &Kernel,
        (st, local): (&Stage, u32),
        src: &Ast,
        (q, gi): (usize, usize),
        first: &[Node],
        loop_idxs: &[Node],
        acc: u32,
    ) -> Result<()> {
        let AstOp::Load { buf, st: xst } = src.src()[1 - st.w].op() else {
            return Err(crate::error::Error::internal(
                "linearizer: a staged sum's input is not a load",
            ));
        };
        let b = self.buf_uop(*buf);
        let idx = xst.expr_idxs(first).0;
        let i = self.node(&idx);
        let x = self.widened_word(b, i);
        let at = self.stage_index(k, st, q, st.slot[gi], loop_idxs);
        let wp = self.push(
            UOpKind::VecLoad {
                lanes: 4,
                stride: 1,
            },
            DType::I16,
            alloc::vec![local, at],
        );
        (0..8).for_each(|_| self.count_flop());
        self.cost.reduce_ops = self.cost.reduce_ops.saturating_add(4 * self.trip());
        let new = self.push(UOpKind::DualMac, DType::I32, alloc::vec![acc, x, wp]);
        self.push(UOpKind::Assign, DType::I32, alloc::vec![acc, new]);
        Ok(())
    }
}
