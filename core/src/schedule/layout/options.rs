//! The layout alternatives of one reduce kernel, offered to a device that measures them
//! ([`Device::choose_layout`](crate::device::Device::choose_layout); the measured search,
//! `PICOGRAD_SEARCH`): the layout stage's search space, as [`super::choose`] is its heuristic
//! pick — the two faces every strategy of `codegen/strategy/mod.rs` has, for the choices the
//! scheduler owns. The rules' choice comes first, then no copies at all, then each load's other
//! layouts one at a time (another channel-block or panel width, no copy, an unpadded copy where
//! the rules made none), each panel choice with and without its loop reorder.
//!
//! Invariant: every option only changes memory layout (the rules' invariant, `layout.rs`), so
//! each computes bit-identical results; no two plans are equal; at most [`MAX_OPTIONS`].

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::iter::once;

use super::{channel_lanes, choose, conv_weight, outermost, unpad_size, Choice, Facts, Plan};
use crate::ast::Ast;
use crate::codegen::lower::buf_params;
use crate::codegen::opt::OptConfig;
use crate::codegen::uops::BufParam;
use crate::lazy::LazyBuffer;
use crate::schedule::ScheduleItem;

/// At most this many layouts are offered per kernel (each is compiled and timed).
pub const MAX_OPTIONS: usize = 8;

/// One layout of a reduce kernel: the copies it makes (not yet realized) and the kernel reading
/// them.
#[derive(Clone, Debug)]
pub struct LayoutOption {
    /// What the layout is, e.g. `buf2 in blocks of 8 along axis 1, buf1 unpadded` or `plain`.
    pub label: String,
    /// The copy kernels, run before the kernel.
    pub copies: Vec<ScheduleItem>,
    /// The kernel, reading the copies.
    pub kernel: ScheduleItem,
}

/// One kernel of a [`LayoutOption`], for measuring it on scratch buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutStep {
    /// The kernel's AST.
    pub ast: Ast,
    /// Its buffers (output first), as indices into the option's buffer list.
    pub bufs: Vec<usize>,
    /// Does it run on every call? A copy of constants (an ONNX model's weights) runs once per
    /// capture, so it is not part of the per-call time.
    pub every_call: bool,
}

impl LayoutOption {
    pub(super) fn new(label: String, copies: Vec<ScheduleItem>, kernel: ScheduleItem) -> Self {
        LayoutOption {
            label,
            copies,
            kernel,
        }
    }

    /// The option as kernels over numbered buffers: the buffers (the kernel's output is
    /// buffer 0) and the steps in the order they run (the copies, then the kernel).
    pub fn steps(&self) -> (Vec<BufParam>, Vec<LayoutStep>) {
        let mut pool: Vec<LazyBuffer> = alloc::vec![self.kernel.out.clone()];
        let mut params: Vec<BufParam> = buf_params(&self.kernel)[..1].to_vec();
        let mut steps = Vec::new();
        for it in self.copies.iter().chain(once(&self.kernel)) {
            let bufs = once(&it.out)
                .chain(&it.inputs)
                .zip(buf_params(it))
                .map(|(b, p)| slot(&mut pool, &mut params, b, p))
                .collect();
            let constant = |b: &LazyBuffer| b.realized().is_some_and(|r| r.is_constant());
            steps.push(LayoutStep {
                ast: it.ast.clone(),
                bufs,
                every_call: !it.layout_copy || !it.inputs.iter().all(constant),
            });
        }
        (params, steps)
    }
}

impl fmt::Display for LayoutOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} copies)", self.label, self.copies.len())
    }
}

/// The index of `b` in `pool`, added with `p` when new (writable if any step writes it).
fn slot(
    pool: &mut Vec<LazyBuffer>,
    params: &mut Vec<BufParam>,
    b: &LazyBuffer,
    p: BufParam,
) -> usize {
    if let Some(i) = pool.iter().position(|x| x.ptr_eq(b)) {
        params[i].writable |= p.writable;
        return i;
    }
    pool.push(b.clone());
    params.push(p);
    pool.len() - 1
}

/// The plans a measuring device chooses among (see the module doc).
pub(super) fn space(f: &Facts, cfg: &OptConfig) -> Vec<Plan> {
    let rule = choose(f, cfg);
    let mut plans = alloc::vec![rule.clone()];
    let mut add = |p: Plan| {
        if !plans.contains(&p) {
            plans.push(p);
        }
    };
    add((Vec::new(), None));
    if rule.1.is_some() {
        add((rule.0.clone(), None));
    }
    for i in 0..f.loads.len() {
        let current = rule.0.iter().find(|c| c.0 == i).map(|c| c.1.clone());
        for alt in alternatives(f, cfg, i).into_iter().map(Some).chain([None]) {
            if alt == current {
                continue;
            }
            let mut choices: Vec<(usize, Choice)> =
                rule.0.iter().filter(|c| c.0 != i).cloned().collect();
            if let Some(c) = alt {
                choices.push((i, c));
                choices.sort_by_key(|c| c.0);
            }
            let order = panel_order(f, cfg, &choices);
            add((choices.clone(), order));
            if order.is_some() {
                add((choices, None));
            }
        }
    }
    plans.truncate(MAX_OPTIONS);
    plans
}

/// Every layout load `i` could be read in (beside its plain one), whatever the rules' cost
/// thresholds say: an unpadded copy of a masked load; channel blocks of each width a narrower
/// vector would take for a conv weight; panels of 4, 2 and 1 vectors for an operand varying
/// along the output row of any other reduce.
fn alternatives(f: &Facts, cfg: &OptConfig, i: usize) -> Vec<Choice> {
    let (_, st, s) = &f.loads[i];
    if st.has_mask() {
        return unpad_size(st).map(|_| Choice::Unpad).into_iter().collect();
    }
    if st.views().len() != 1 || s.iter().any(Option::is_none) {
        return Vec::new();
    }
    let v = cfg.vec_width.max(1);
    let mut out = Vec::new();
    if f.loads.iter().any(|l| conv_weight(f, &l.2).is_some()) {
        let Some(axis) = conv_weight(f, s).filter(|&a| s[a] != Some(1)) else {
            return out;
        };
        let mut lanes = v;
        while lanes >= 2 {
            let width = channel_lanes(f.full[axis], lanes);
            let c = Choice::Blocks { axis, width };
            if width > 1 && !out.contains(&c) {
                out.push(c);
            }
            lanes /= 2;
        }
        return out;
    }
    let Some(wide) = f.wide.filter(|&w| s[w].is_some_and(|x| x != 0)) else {
        return out;
    };
    let taps: usize = (0..f.full.len())
        .filter(|&a| !f.global(a) && f.big(a) && s[a] != Some(0))
        .map(|a| f.full[a])
        .product();
    if taps > 1 {
        out.extend([4 * v, 2 * v, v].map(|width| Choice::Blocks { axis: wide, width }));
    }
    out
}

/// The loop reorder a plan's first panel copy asks for (none in conv kernels, as in the rules).
fn panel_order(f: &Facts, cfg: &OptConfig, choices: &[(usize, Choice)]) -> Option<(usize, usize)> {
    if f.loads.iter().any(|l| conv_weight(f, &l.2).is_some()) {
        return None;
    }
    choices.iter().find_map(|(i, c)| match c {
        Choice::Blocks { axis, width } if outermost(f, &f.loads[*i].2, *width, cfg) => {
            Some((*axis, *width))
        }
        Choice::Blocks { .. } | Choice::Unpad => None,
    })
}

/// A plan's readable name.
pub(super) fn label(
    f: &Facts,
    choices: &[(usize, Choice)],
    order: Option<(usize, usize)>,
) -> String {
    let mut parts: Vec<String> = choices
        .iter()
        .map(|(i, c)| {
            let buf = f.loads[*i].0;
            match c {
                Choice::Unpad => format!("buf{buf} unpadded"),
                Choice::Blocks { axis, width } => {
                    format!("buf{buf} in blocks of {width} along axis {axis}")
                }
            }
        })
        .collect();
    if order.is_some() {
        parts.push(String::from("panels outermost"));
    }
    if parts.is_empty() {
        return String::from("plain");
    }
    parts.join(", ")
}
