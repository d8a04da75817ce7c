//! Vector lowering: the linearizer's path for a kernel with a vector axis
//! ([`Opt::Vectorize`](crate::codegen::kernel::Opt::Vectorize)). The `W` positions of that axis
//! are computed together: each AST node becomes one [`LaneVal`] — a scalar shared by every lane
//! (a broadcast operand), one vector UOp (`VecLoad` of consecutive or every-other elements,
//! gated lane by lane when padded, a lane-wise `VecAlu`, a `VecAcc`), or `W` scalar UOps where
//! the lanes cannot share one vector (a gather, an op with no lane-wise vector form, a dtype
//! other than f32). Stores of
//! consecutive elements are one `VecStore`.
//!
//! Invariant: lane `k` computes exactly the UOps the scalar linearizer makes for position `k`
//! of the axis — the same IEEE operations on the same operands, each accumulator lane folded in
//! the same order — so a vectorized kernel is bit-identical to its scalar form.

use alloc::vec::Vec;

use hashbrown::HashMap;

use super::Lin;
use crate::ast::{Ast, AstOp};
use crate::codegen::uops::UOpKind;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{AluOp, ReduceOp, Scalar};
use crate::symbolic::Node;

/// A value across the lanes of a vector axis.
#[derive(Clone, Debug)]
pub(super) enum LaneVal {
    /// The same scalar UOp in every lane.
    Uni(u32),
    /// One vector UOp.
    Vec(u32),
    /// One scalar UOp per lane.
    Lanes(Vec<u32>),
}

/// Ops whose vector form (C's vector operators, `pg_fma_f32xN`, `pg_max_f32xN`) computes each
/// lane exactly as the scalar op does.
fn lane_wise(op: AluOp) -> bool {
    matches!(
        op,
        AluOp::Add
            | AluOp::Sub
            | AluOp::Mul
            | AluOp::Div
            | AluOp::Neg
            | AluOp::MulAcc
            | AluOp::Fma
            | AluOp::Max
    )
}

/// Are `idxs` the elements `idxs[0] + k`, lane `k` by lane?
pub(super) fn consecutive(idxs: &[Node]) -> bool {
    strided(idxs, 1)
}

/// Are the lane indices `stride` apart (`idxs[k] = idxs[0] + k·stride`)?
pub(super) fn strided(idxs: &[Node], stride: i64) -> bool {
    (idxs.iter().enumerate())
        .all(|(k, i)| i.sub_node(&idxs[0]).as_const() == Some(k as i64 * stride))
}

impl Lin {
    fn width(lanes: &[Vec<Node>]) -> u8 {
        lanes.len() as u8
    }

    /// The value as one vector UOp (scalars put together with `Vectorize`).
    pub(super) fn as_vec(&mut self, v: &LaneVal, dtype: DType, w: usize) -> u32 {
        match v {
            LaneVal::Vec(u) => *u,
            LaneVal::Uni(u) => self.push(UOpKind::Vectorize, dtype, alloc::vec![*u; w]),
            LaneVal::Lanes(ls) => self.push(UOpKind::Vectorize, dtype, ls.clone()),
        }
    }

    /// Lane `k` of the value as a scalar UOp (`Gep` of a vector).
    pub(super) fn lane(&mut self, v: &LaneVal, dtype: DType, k: usize) -> u32 {
        match v {
            LaneVal::Uni(u) => *u,
            LaneVal::Lanes(ls) => ls[k],
            LaneVal::Vec(u) => self.push(UOpKind::Gep(k as u8), dtype, alloc::vec![*u]),
        }
    }

    /// `op` on the lanes: scalar when every operand is, one `VecAlu` when the op and dtype
    /// have a lane-wise vector form, else lane by lane.
    fn lane_alu(&mut self, op: AluOp, dtype: DType, src: &[LaneVal], w: usize) -> LaneVal {
        let uni: Option<Vec<u32>> = src
            .iter()
            .map(|v| match v {
                LaneVal::Uni(u) => Some(*u),
                _ => None,
            })
            .collect();
        if let Some(s) = uni {
            return LaneVal::Uni(self.alu(op, dtype, s));
        }
        let dts: Vec<DType> = src.iter().map(|v| self.lane_dtype(v)).collect();
        if dtype == DType::F32 && lane_wise(op) && dts.iter().all(|&d| d == DType::F32) {
            let vs = src.iter().map(|v| self.as_vec(v, DType::F32, w)).collect();
            let kind = UOpKind::VecAlu { op, lanes: w as u8 };
            return LaneVal::Vec(self.push(kind, dtype, vs));
        }
        LaneVal::Lanes(
            (0..w)
                .map(|k| {
                    let s = (src.iter().zip(&dts))
                        .map(|(v, &d)| self.lane(v, d, k))
                        .collect();
                    self.alu(op, dtype, s)
                })
                .collect(),
        )
    }

    fn lane_dtype(&self, v: &LaneVal) -> DType {
        let u = match v {
            LaneVal::Uni(u) | LaneVal::Vec(u) => *u,
            LaneVal::Lanes(ls) => ls[0],
        };
        self.uops[u as usize].dtype
    }

    /// [`Lin::value`] across the lanes (`lanes[k]`: the positions of lane `k`).
    pub(super) fn lane_value(
        &mut self,
        ast: &Ast,
        lanes: &[Vec<Node>],
        acc: Option<&LaneVal>,
        memo: &mut HashMap<usize, LaneVal>,
    ) -> Result<LaneVal> {
        for n in ast.toposort_until(|n| matches!(n.op(), AstOp::Reduce(..))) {
            if !memo.contains_key(&n.id()) {
                let v = self.lane_value_of(n, lanes, acc, memo)?;
                memo.insert(n.id(), v);
            }
        }
        Ok(memo[&ast.id()].clone())
    }

    fn lane_value_of(
        &mut self,
        ast: &Ast,
        lanes: &[Vec<Node>],
        acc: Option<&LaneVal>,
        memo: &HashMap<usize, LaneVal>,
    ) -> Result<LaneVal> {
        let (dtype, w) = (ast.dtype(), lanes.len());
        match ast.op() {
            AstOp::Load { buf, st } => {
                let (idxs, valid): (Vec<Node>, Vec<Node>) =
                    lanes.iter().map(|p| st.expr_idxs(p)).unzip();
                let ungated = valid.iter().all(|v| v.as_const().is_some_and(|c| c != 0));
                let never = valid.iter().all(|v| v.as_const() == Some(0));
                // Consecutive elements, or every other one (a stride-2 conv's input row: the C
                // renderer reads it as two vector loads and keeps the even lanes).
                let stride = [1u8, 2].into_iter().find(|&s| strided(&idxs, i64::from(s)));
                if let Some(stride) = stride.filter(|_| !never && dtype == DType::F32 && w > 1) {
                    let (b, i) = (self.buf_uop(*buf), self.node(&idxs[0]));
                    let kind = UOpKind::VecLoad {
                        lanes: Self::width(lanes),
                        stride,
                    };
                    let mut src = alloc::vec![b, i];
                    // A padded row: one gate per lane, which the padding-bounds pass drops in
                    // the interior (where they all hold), leaving a plain vector load.
                    if !ungated {
                        for v in &valid {
                            let g = match v.as_const() {
                                Some(c) => self.konst(Scalar::from_bool(c != 0)),
                                None => self.node(v),
                            };
                            src.push(g);
                        }
                    }
                    return Ok(LaneVal::Vec(self.push(kind, dtype, src)));
                }
                self.per_lane(ast, lanes)
            }
            AstOp::Const { .. } => self.per_lane(ast, lanes),
            AstOp::Reduce(..) => acc
                .cloned()
                .ok_or_else(|| Error::internal("linearizer: reduce outside its kernel")),
            AstOp::Alu(op) => {
                let src: Vec<LaneVal> = ast.src().iter().map(|s| memo[&s.id()].clone()).collect();
                (0..w).for_each(|_| self.count_flop());
                Ok(self.lane_alu(*op, dtype, &src, w))
            }
            AstOp::Cast | AstOp::Bitcast => {
                let kind = if matches!(ast.op(), AstOp::Cast) {
                    UOpKind::Cast
                } else {
                    UOpKind::Bitcast
                };
                let x = &memo[&ast.src()[0].id()];
                let xd = self.lane_dtype(x);
                Ok(match x {
                    LaneVal::Uni(u) => LaneVal::Uni(self.push(kind, dtype, alloc::vec![*u])),
                    _ => LaneVal::Lanes(
                        (0..w)
                            .map(|k| {
                                let s = self.lane(x, xd, k);
                                self.push(kind.clone(), dtype, alloc::vec![s])
                            })
                            .collect(),
                    ),
                })
            }
            AstOp::Store { .. } => Err(Error::internal("linearizer: nested store")),
        }
    }

    /// A leaf lowered lane by lane, as the scalar linearizer does; one scalar when every lane
    /// gives the same UOp (a broadcast).
    fn per_lane(&mut self, ast: &Ast, lanes: &[Vec<Node>]) -> Result<LaneVal> {
        let mut us = Vec::with_capacity(lanes.len());
        for p in lanes {
            us.push(self.value_of(ast, p, None, &HashMap::new())?);
        }
        Ok(if us.iter().all(|&u| u == us[0]) {
            LaneVal::Uni(us[0])
        } else {
            LaneVal::Lanes(us)
        })
    }

    /// An accumulator for the lanes: one `VecAcc` for f32, else one `DefineAcc` per lane.
    pub(super) fn lane_acc(&mut self, init: Scalar, dtype: DType, w: usize) -> LaneVal {
        if dtype == DType::F32 {
            let kind = UOpKind::VecAcc {
                init,
                lanes: w as u8,
            };
            return LaneVal::Vec(self.push(kind, dtype, Vec::new()));
        }
        LaneVal::Lanes(
            (0..w)
                .map(|_| self.push(UOpKind::DefineAcc(init), dtype, Vec::new()))
                .collect(),
        )
    }

    /// [`Lin::accumulate`] across the lanes.
    pub(super) fn lane_accumulate(
        &mut self,
        op: ReduceOp,
        src: &Ast,
        lanes: &[Vec<Node>],
        acc: &LaneVal,
        dtype: DType,
    ) -> Result<()> {
        let w = lanes.len();
        let new = match (op, src.op()) {
            (ReduceOp::Sum, AstOp::Alu(AluOp::Mul)) => {
                let mut memo = HashMap::new();
                let a = self.lane_value(&src.src()[0], lanes, None, &mut memo)?;
                let b = self.lane_value(&src.src()[1], lanes, None, &mut memo)?;
                (0..w).for_each(|_| self.count_flop());
                let op = if self.fused && dtype.is_float() {
                    AluOp::Fma
                } else {
                    AluOp::MulAcc
                };
                self.lane_alu(op, dtype, &[a, b, acc.clone()], w)
            }
            _ => {
                let v = self.lane_value(src, lanes, None, &mut HashMap::new())?;
                self.lane_alu(op.alu(), dtype, &[acc.clone(), v], w)
            }
        };
        (0..w).for_each(|_| self.count_flop());
        let trips = self.trip().saturating_mul(w as u64);
        self.cost.reduce_ops = self.cost.reduce_ops.saturating_add(trips);
        match acc {
            LaneVal::Vec(a) => {
                let v = self.as_vec(&new, dtype, w);
                self.push(UOpKind::Assign, dtype, alloc::vec![*a, v]);
            }
            LaneVal::Lanes(accs) => {
                for (k, &a) in accs.iter().enumerate() {
                    let v = self.lane(&new, dtype, k);
                    self.push(UOpKind::Assign, dtype, alloc::vec![a, v]);
                }
            }
            LaneVal::Uni(_) => {
                return Err(Error::internal(
                    "linearizer: a shared scalar as an accumulator",
                ))
            }
        }
        Ok(())
    }

    /// Loads a blocked reduce's partial sums back from the output at the lanes' indices into
    /// `acc` (a scalar accumulator is `Uni`): one `VecLoad` for consecutive f32 elements, else
    /// one load per lane — the same elements, in the same dtype, the previous block stored.
    pub(super) fn resume_acc(&mut self, idxs: &[Node], acc: &LaneVal, dtype: DType) {
        let w = idxs.len();
        let load = |l: &mut Self, idx: &Node| {
            let i = l.node(idx);
            l.push(UOpKind::Load, dtype, alloc::vec![0, i])
        };
        match acc {
            LaneVal::Uni(a) => {
                let v = load(self, &idxs[0]);
                self.push(UOpKind::Assign, dtype, alloc::vec![*a, v]);
            }
            LaneVal::Vec(a) => {
                let v = if dtype == DType::F32 && consecutive(idxs) {
                    let i = self.node(&idxs[0]);
                    let kind = UOpKind::VecLoad {
                        lanes: w as u8,
                        stride: 1,
                    };
                    self.push(kind, dtype, alloc::vec![0, i])
                } else {
                    let ls = idxs.iter().map(|i| load(self, i)).collect();
                    self.push(UOpKind::Vectorize, dtype, ls)
                };
                self.push(UOpKind::Assign, dtype, alloc::vec![*a, v]);
            }
            LaneVal::Lanes(accs) => {
                for (a, idx) in accs.iter().zip(idxs) {
                    let v = load(self, idx);
                    self.push(UOpKind::Assign, dtype, alloc::vec![*a, v]);
                }
            }
        }
    }

    /// Stores `v` at the lanes' output indices: one `VecStore` when they are consecutive f32
    /// elements, else one store per lane.
    pub(super) fn lane_store(&mut self, idxs: &[Node], v: &LaneVal, dtype: DType) {
        let w = idxs.len();
        if dtype == DType::F32 && consecutive(idxs) {
            let (i, x) = (self.node(&idxs[0]), self.as_vec(v, dtype, w));
            let kind = UOpKind::VecStore { lanes: w as u8 };
            self.push(kind, dtype, alloc::vec![0, i, x]);
            return;
        }
        for (k, idx) in idxs.iter().enumerate() {
            let (i, x) = (self.node(idx), self.lane(v, dtype, k));
            self.push(UOpKind::Store, dtype, alloc::vec![0, i, x]);
        }
    }
}
