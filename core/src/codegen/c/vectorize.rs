//! Lane packing for the C renderer: finds the groups of `W` scalar f32 UOps that a reduce
//! kernel's upcasts made — one per lane of an output axis — and that do the same thing lane by
//! lane, so the renderer prints each group as one statement on a GCC/clang vector type
//! (`pg_f32x8`, ...). Left to itself, clang's SLP vectorizer packs such code only sometimes: a
//! register-tiled conv came out half scalar, with shuffles and spills, at about 60% of the speed
//! of the same tile written with vector types.
//!
//! Seeds are accumulator chunks: `W` consecutive f32 `DefineAcc`s whose assignments pack lane by
//! lane. An operand packs when it is the same UOp in every lane (a broadcast), a load of `W`
//! consecutive elements (one vector load, or for a padded input's gated loads the scalar loads
//! put together), an accumulator chunk, or an ALU op whose operands
//! pack. Runs of `W` stores to consecutive elements whose values pack become vector stores.
//!
//! Invariant: a packed kernel computes bit for bit what the scalar one does. Every lane performs
//! the IEEE operation its scalar UOp performs, on the same operands; each accumulator lane sees
//! its assignments in the same order; and every read of an accumulator lane — by a group, or by
//! a scalar UOp through `accvN[lane]` — sees as many assignments as the scalar read would. When
//! any check fails the chunk (or, for a scalar read, the whole kernel) stays scalar.

use alloc::vec;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::super::uops::{UOp, UOpKind};
use crate::dtype::DType;
use crate::ops::{AluOp, Scalar};

/// A packed operand: one scalar UOp broadcast to every lane, or a group's vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operand {
    Splat(u32),
    Vec(u32),
}

/// What a group computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GroupKind {
    /// An accumulator vector, every lane starting at the value.
    Acc(Scalar),
    /// `W` consecutive elements of buffer `buf` from the element at UOp `index`.
    Load { buf: u32, index: u32 },
    /// The lanes' gated scalar loads of consecutive elements, put together.
    Gather,
    /// The op lane by lane.
    Alu(AluOp),
    /// The accumulator group takes the operand.
    Assign { acc: u32 },
    /// The operand is stored to `W` consecutive elements from the element at UOp `index`.
    Store { buf: u32, index: u32 },
}

/// `W` UOps printed as one vector statement.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub(super) kind: GroupKind,
    /// The scalar UOp of each lane.
    pub(super) lanes: Vec<u32>,
    pub(super) src: Vec<Operand>,
    /// Printed right after this UOp: the last of its lanes.
    pub(super) at: usize,
}

/// The packing of one kernel.
pub(super) struct Packing {
    pub(super) groups: Vec<Group>,
    /// For each UOp, the groups printed right after it, in dependency order.
    pub(super) after: Vec<Vec<u32>>,
    /// UOps printed only by their group (accumulators, their assignments, packed stores).
    pub(super) replaced: Vec<bool>,
    /// For each accumulator lane: its group and lane (read by scalars as `accvN[lane]`).
    pub(super) acc_lane: Vec<Option<(u32, usize)>>,
}

impl Packing {
    /// The scalar UOps groups read: broadcast operands, load and store indices, buffers.
    pub(super) fn needed(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for g in &self.groups {
            match g.kind {
                GroupKind::Load { buf, index } | GroupKind::Store { buf, index } => {
                    out.extend([buf, index]);
                }
                GroupKind::Gather => out.extend(&g.lanes),
                _ => {}
            }
            out.extend(g.src.iter().filter_map(|o| match o {
                Operand::Splat(u) => Some(*u),
                Operand::Vec(_) => None,
            }));
        }
        out
    }
}

/// Packs `uops` with groups of at most `max_width` lanes (4, 8 or 16); `None` when nothing
/// packs.
pub(super) fn pack(uops: &[UOp], max_width: usize) -> Option<Packing> {
    let widths: Vec<usize> = [16, 8, 4].into_iter().filter(|&w| w <= max_width).collect();
    if widths.is_empty() {
        return None;
    }
    let mut p = Packer::new(uops);
    p.pack_accumulators(&widths);
    if p.groups.is_empty() {
        return None;
    }
    p.pack_stores(&widths);
    p.finish()
}

struct Packer<'a> {
    uops: &'a [UOp],
    /// The innermost loop open at each UOp (`usize::MAX` outside every loop).
    scope: Vec<usize>,
    users: Vec<Vec<u32>>,
    groups: Vec<Group>,
    memo: HashMap<Vec<u32>, Operand>,
    memo_log: Vec<Vec<u32>>,
    acc_lane: Vec<Option<(u32, usize)>>,
    /// For each accumulator group: each lane's assignment positions, and where each assignment
    /// group is printed.
    acc_assigns: HashMap<u32, (Vec<Vec<usize>>, Vec<usize>)>,
}

impl<'a> Packer<'a> {
    fn new(uops: &'a [UOp]) -> Self {
        let mut scope = Vec::with_capacity(uops.len());
        let mut open: Vec<usize> = Vec::new();
        let mut users = vec![Vec::new(); uops.len()];
        for (i, u) in uops.iter().enumerate() {
            if u.kind == UOpKind::EndLoop {
                open.pop();
            }
            scope.push(open.last().copied().unwrap_or(usize::MAX));
            if u.kind == UOpKind::Loop {
                open.push(i);
            }
            for &s in &u.src {
                users[s as usize].push(i as u32);
            }
        }
        Packer {
            uops,
            scope,
            users,
            groups: Vec::new(),
            memo: HashMap::new(),
            memo_log: Vec::new(),
            acc_lane: vec![None; uops.len()],
            acc_assigns: HashMap::new(),
        }
    }

    fn is_f32(&self, u: u32) -> bool {
        self.uops[u as usize].dtype == DType::F32
    }

    fn same_scope(&self, lanes: &[u32]) -> bool {
        let s = self.scope[lanes[0] as usize];
        lanes.iter().all(|&l| self.scope[l as usize] == s)
    }

    fn push_group(&mut self, kind: GroupKind, lanes: Vec<u32>, src: Vec<Operand>) -> u32 {
        let at = lanes.iter().map(|&l| l as usize).max().unwrap_or(0);
        self.groups.push(Group {
            kind,
            lanes,
            src,
            at,
        });
        (self.groups.len() - 1) as u32
    }

    /// Everything made since `mark` is undone (a chunk or store run that did not pack).
    fn rollback(&mut self, mark: (usize, usize)) {
        for g in self.groups.drain(mark.0..) {
            if let GroupKind::Acc(_) = g.kind {
                for &l in &g.lanes {
                    self.acc_lane[l as usize] = None;
                }
            }
        }
        for key in self.memo_log.drain(mark.1..) {
            self.memo.remove(&key);
        }
        let n = self.groups.len() as u32;
        self.acc_assigns.retain(|&g, _| g < n);
    }

    fn mark(&self) -> (usize, usize) {
        (self.groups.len(), self.memo_log.len())
    }

    // ---- accumulators ----

    fn pack_accumulators(&mut self, widths: &[usize]) {
        let accs: Vec<u32> = (0..self.uops.len() as u32)
            .filter(|&i| matches!(self.uops[i as usize].kind, UOpKind::DefineAcc(_)))
            .collect();
        self.pack_runs(&accs, widths, Self::try_chunk);
    }

    /// Packs `items` in runs: at each position the widest run `try_run` accepts, else moves on
    /// by one.
    fn pack_runs(
        &mut self,
        items: &[u32],
        widths: &[usize],
        try_run: fn(&mut Self, &[u32]) -> bool,
    ) {
        let mut j = 0;
        while j < items.len() {
            let packed = widths
                .iter()
                .find(|&&w| j + w <= items.len() && try_run(self, &items[j..j + w]));
            j += packed.copied().unwrap_or(1);
        }
    }

    /// Packs the accumulators `accs` (lane order) and every assignment to them, or changes
    /// nothing.
    fn try_chunk(&mut self, accs: &[u32]) -> bool {
        let UOpKind::DefineAcc(init) = self.uops[accs[0] as usize].kind else {
            return false;
        };
        let same = accs
            .iter()
            .all(|&a| self.uops[a as usize].kind == UOpKind::DefineAcc(init) && self.is_f32(a));
        if !same || !self.same_scope(accs) {
            return false;
        }
        let mark = self.mark();
        if self.chunk(accs, init).is_none() {
            self.rollback(mark);
            return false;
        }
        true
    }

    fn chunk(&mut self, accs: &[u32], init: Scalar) -> Option<()> {
        let acc = self.push_group(GroupKind::Acc(init), accs.to_vec(), Vec::new());
        for (k, &a) in accs.iter().enumerate() {
            self.acc_lane[a as usize] = Some((acc, k));
        }
        // Each lane's assignments, in program order.
        let per_lane: Vec<Vec<u32>> = accs
            .iter()
            .map(|&a| {
                self.users[a as usize]
                    .iter()
                    .copied()
                    .filter(|&v| {
                        let u = &self.uops[v as usize];
                        u.kind == UOpKind::Assign && u.src[0] == a
                    })
                    .collect()
            })
            .collect();
        let n = per_lane[0].len();
        // An assignment's own value read elsewhere would name a replaced UOp.
        let read = |a: &u32| !self.users[*a as usize].is_empty();
        if per_lane.iter().any(|l| l.len() != n || l.iter().any(read)) {
            return None;
        }
        let mut at = Vec::with_capacity(n);
        for i in 0..n {
            let lanes: Vec<u32> = per_lane.iter().map(|l| l[i]).collect();
            if !self.same_scope(&lanes) {
                return None;
            }
            let vals: Vec<u32> = lanes
                .iter()
                .map(|&l| self.uops[l as usize].src[1])
                .collect();
            let v = self.operand(&vals)?;
            let g = self.push_group(GroupKind::Assign { acc }, lanes, vec![v]);
            at.push(self.groups[g as usize].at);
        }
        if at.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        let positions = per_lane
            .iter()
            .map(|l| l.iter().map(|&u| u as usize).collect())
            .collect();
        self.acc_assigns.insert(acc, (positions, at));
        let first_use = accs
            .iter()
            .flat_map(|&a| self.users[a as usize].iter())
            .min()
            .map_or(usize::MAX, |&u| u as usize);
        if first_use <= self.groups[acc as usize].at {
            return None;
        }
        self.check_group_reads(acc as usize..self.groups.len())
            .then_some(())
    }

    /// How many assignments lane `k` of accumulator group `acc` has had before position `p`,
    /// and how many assignment groups have been printed before position `p`.
    fn versions(&self, acc: u32, k: usize, p: usize) -> (usize, usize) {
        let (lanes, printed) = &self.acc_assigns[&acc];
        let count = |at: &[usize]| at.iter().filter(|&&a| a < p).count();
        (count(&lanes[k]), count(printed))
    }

    /// Every group in `range` that reads an accumulator vector reads, in each lane, the value
    /// that lane's scalar UOp reads.
    fn check_group_reads(&self, range: core::ops::Range<usize>) -> bool {
        range.into_iter().all(|g| {
            let grp = &self.groups[g];
            grp.src.iter().all(|o| match *o {
                Operand::Vec(h) if self.acc_assigns.contains_key(&h) => {
                    grp.lanes.iter().enumerate().all(|(k, &m)| {
                        let (lane, _) = self.versions(h, k, m as usize);
                        let (_, vector) = self.versions(h, k, grp.at);
                        lane == vector
                    })
                }
                _ => true,
            })
        })
    }

    // ---- operands ----

    /// The lanes' values as one operand, making groups as needed; `None` when they don't pack.
    fn operand(&mut self, lanes: &[u32]) -> Option<Operand> {
        let u0 = lanes[0];
        if lanes.iter().all(|&l| l == u0) {
            // A broadcast scalar is read where the group is printed, after its lanes: only a
            // value that never changes (not an accumulator) reads the same there.
            let mutable = matches!(self.uops[u0 as usize].kind, UOpKind::DefineAcc(_));
            return (!mutable).then_some(Operand::Splat(u0));
        }
        if let Some(&o) = self.memo.get(lanes) {
            return Some(o);
        }
        let first = &self.uops[u0 as usize];
        let alike = lanes.iter().all(|&l| {
            let u = &self.uops[l as usize];
            u.kind == first.kind && u.src.len() == first.src.len() && self.is_f32(l)
        });
        if !alike || !self.same_scope(lanes) {
            return None;
        }
        let o = match first.kind {
            UOpKind::DefineAcc(_) => self.acc_operand(lanes)?,
            UOpKind::Load => self.load_operand(lanes)?,
            UOpKind::Alu(op) if lane_wise(op) => {
                let mut src = Vec::with_capacity(first.src.len());
                for j in 0..first.src.len() {
                    let s: Vec<u32> = lanes
                        .iter()
                        .map(|&l| self.uops[l as usize].src[j])
                        .collect();
                    src.push(self.operand(&s)?);
                }
                Operand::Vec(self.push_group(GroupKind::Alu(op), lanes.to_vec(), src))
            }
            _ => return None,
        };
        self.memo.insert(lanes.to_vec(), o);
        self.memo_log.push(lanes.to_vec());
        Some(o)
    }

    /// Lanes that are exactly an accumulator group's lanes, in order.
    fn acc_operand(&self, lanes: &[u32]) -> Option<Operand> {
        let (g, _) = self.acc_lane[lanes[0] as usize]?;
        (self.groups[g as usize].lanes == lanes).then_some(Operand::Vec(g))
    }

    /// Loads of consecutive elements of one buffer: one vector load when ungated; when gated
    /// (a padded input), the lanes' scalar loads put together. Other loads don't pack: lanes
    /// mixing rows or channels (a tile wider than the contiguous axis) would gather every
    /// operand, slower than the narrower packing that the caller tries next.
    fn load_operand(&mut self, lanes: &[u32]) -> Option<Operand> {
        let first = &self.uops[lanes[0] as usize];
        if self.uops[first.src[0] as usize].dtype != DType::F32 {
            return None;
        }
        let buf = first.src[0];
        let (base, off) = self.split_index(first.src[1]);
        let consecutive = lanes.iter().enumerate().all(|(k, &l)| {
            let u = &self.uops[l as usize];
            u.src[0] == buf && self.split_index(u.src[1]) == (base, off + k as i64)
        });
        if !consecutive {
            return None;
        }
        let kind = if first.src.len() == 2 {
            GroupKind::Load {
                buf,
                index: first.src[1],
            }
        } else {
            GroupKind::Gather
        };
        Some(Operand::Vec(self.push_group(
            kind,
            lanes.to_vec(),
            Vec::new(),
        )))
    }

    /// An index as `(base, constant offset)`: `base + c` and `c + base` peel into the offset; a
    /// constant has no base.
    fn split_index(&self, i: u32) -> (Option<u32>, i64) {
        let u = &self.uops[i as usize];
        match u.kind {
            UOpKind::Const(c) => (None, c.as_i64()),
            UOpKind::Alu(AluOp::Add) => {
                let (a, b) = (u.src[0], u.src[1]);
                if let UOpKind::Const(c) = self.uops[b as usize].kind {
                    let (base, off) = self.split_index(a);
                    (base, off + c.as_i64())
                } else if let UOpKind::Const(c) = self.uops[a as usize].kind {
                    let (base, off) = self.split_index(b);
                    (base, off + c.as_i64())
                } else {
                    (Some(i), 0)
                }
            }
            _ => (Some(i), 0),
        }
    }

    // ---- stores ----

    /// Packs runs of stores to consecutive elements, taking each buffer's stores in order
    /// (a kernel with several outputs interleaves them).
    fn pack_stores(&mut self, widths: &[usize]) {
        let mut by_buf: Vec<(u32, Vec<u32>)> = Vec::new();
        for i in 0..self.uops.len() as u32 {
            let u = &self.uops[i as usize];
            if u.kind != UOpKind::Store {
                continue;
            }
            match by_buf.iter_mut().find(|(b, _)| *b == u.src[0]) {
                Some((_, list)) => list.push(i),
                None => by_buf.push((u.src[0], vec![i])),
            }
        }
        for (_, stores) in by_buf {
            self.pack_runs(&stores, widths, Self::try_store_run);
        }
    }

    fn try_store_run(&mut self, lanes: &[u32]) -> bool {
        let first = &self.uops[lanes[0] as usize];
        let (buf, index) = (first.src[0], first.src[1]);
        let (base, off) = self.split_index(index);
        let fits = lanes.iter().enumerate().all(|(k, &l)| {
            let u = &self.uops[l as usize];
            u.src.len() == 3
                && u.dtype == DType::F32
                && u.src[0] == buf
                && self.split_index(u.src[1]) == (base, off + k as i64)
        });
        if !fits || !self.same_scope(lanes) {
            return false;
        }
        let mark = self.mark();
        let vals: Vec<u32> = lanes
            .iter()
            .map(|&l| self.uops[l as usize].src[2])
            .collect();
        let packed = match self.operand(&vals) {
            Some(v @ Operand::Vec(_)) => {
                self.push_group(GroupKind::Store { buf, index }, lanes.to_vec(), vec![v]);
                self.check_group_reads(mark.0..self.groups.len())
            }
            _ => false,
        };
        if !packed {
            self.rollback(mark);
        }
        packed
    }

    // ---- result ----

    /// The packing, after checking that every scalar UOp still rendered that reads an
    /// accumulator lane sees the same number of assignments through `accvN[lane]`.
    fn finish(mut self) -> Option<Packing> {
        let n = self.uops.len();
        let mut replaced = vec![false; n];
        let mut after = vec![Vec::new(); n];
        for (g, grp) in self.groups.iter().enumerate() {
            after[grp.at].push(g as u32);
            if matches!(
                grp.kind,
                GroupKind::Acc(_) | GroupKind::Assign { .. } | GroupKind::Store { .. }
            ) {
                grp.lanes.iter().for_each(|&l| replaced[l as usize] = true);
            }
        }
        let packing = Packing {
            groups: core::mem::take(&mut self.groups),
            after,
            replaced,
            acc_lane: core::mem::take(&mut self.acc_lane),
        };
        let live = super::liveness(self.uops, Some(&packing));
        let scalar_reads_agree = (0..n).filter(|&i| live[i]).all(|i| {
            self.uops[i]
                .src
                .iter()
                .all(|&s| match packing.acc_lane[s as usize] {
                    Some((acc, k)) => {
                        let (lane, vector) = self.versions(acc, k, i);
                        lane == vector
                    }
                    None => true,
                })
        });
        scalar_reads_agree.then_some(packing)
    }
}

/// Ops whose vector form computes each lane exactly as the scalar op does.
fn lane_wise(op: AluOp) -> bool {
    matches!(
        op,
        AluOp::Add | AluOp::Sub | AluOp::Mul | AluOp::Div | AluOp::Neg | AluOp::MulAcc | AluOp::Fma
    )
}
