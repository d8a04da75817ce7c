//! Recurrent layers: RNN, GRU and LSTM, unrolled over the (static) sequence into lazy tensor
//! ops, forward, reverse or bidirectional, in either `layout`. Each step's gate pre-activations
//! are one matmul against the input and one against the hidden state; `sequence_lens` (forward
//! only) freezes a batch entry's state past its length and zeroes its outputs there. The
//! activations are the ONNX defaults (sigmoid gates, tanh cells); `clip` bounds the
//! pre-activations.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::Handler;

/// The handler for `op` if it is a recurrent layer.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "RNN" => |n| recurrent(n, Cell::Rnn),
        "GRU" => |n| recurrent(n, Cell::Gru),
        "LSTM" => |n| recurrent(n, Cell::Lstm),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    /// Gates per hidden unit.
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }
}

/// One direction's weights: `W` `[G·H, I]`, `R` `[G·H, H]`, biases `[G·H]`, peepholes `[3H]`.
struct Weights {
    w: Tensor,
    r: Tensor,
    wb: Option<Tensor>,
    rb: Option<Tensor>,
    p: Option<Tensor>,
}

/// The state carried between steps: hidden, and the LSTM cell.
#[derive(Clone)]
struct State {
    h: Tensor,
    c: Option<Tensor>,
}

/// Index `d` of axis 0, dropped.
fn pick(t: &Tensor, d: usize) -> Result<Tensor> {
    let mut keep: Vec<(usize, usize)> = t.shape().iter().map(|&s| (0, s)).collect();
    keep[0] = (d, d + 1);
    t.try_shrink(&keep)?.try_squeeze(Some(0))
}

/// `[from, to)` of the last axis.
fn cols(t: &Tensor, from: usize, to: usize) -> Result<Tensor> {
    let mut keep: Vec<(usize, usize)> = t.shape().iter().map(|&s| (0, s)).collect();
    if let Some(l) = keep.last_mut() {
        *l = (from, to);
    }
    t.try_shrink(&keep)
}

fn weights(n: &Node, d: usize, gh: usize) -> Result<Weights> {
    let b = n.opt(3).map(|b| pick(b, d)).transpose()?;
    Ok(Weights {
        w: pick(n.input(1)?, d)?,
        r: pick(n.input(2)?, d)?,
        wb: b.as_ref().map(|b| cols(b, 0, gh)).transpose()?,
        rb: b.as_ref().map(|b| cols(b, gh, 2 * gh)).transpose()?,
        p: n.opt(7).map(|p| pick(p, d)).transpose()?,
    })
}

/// `1 − t`.
fn one_minus(t: &Tensor) -> Result<Tensor> {
    t.const_like(1.0).try_sub(t)
}

/// Rows `[from, to)` of a matrix.
fn rows(t: &Tensor, from: usize, to: usize) -> Result<Tensor> {
    t.try_shrink(&[(from, to), (0, t.shape()[1])])
}

/// `x·Wᵀ (+ wb)` and `h·Rᵀ (+ rb)`, each clipped later with the gate.
fn affine(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Result<Tensor> {
    let y = x.try_matmul(&w.try_transpose(0, 1)?)?;
    match b {
        Some(b) => y.try_add(b),
        None => Ok(y),
    }
}

fn clip(n: &Node, t: Tensor) -> Result<Tensor> {
    match n.float("clip", 0.0) {
        c if c > 0.0 => t.try_maximum(-f64::from(c))?.try_minimum(f64::from(c)),
        _ => Ok(t),
    }
}

/// One step of `cell` from `s` on input `x` `[B, I]`.
fn step(n: &Node, cell: Cell, w: &Weights, x: &Tensor, s: &State) -> Result<State> {
    let hs = w.r.shape()[1];
    let xi = affine(x, &w.w, w.wb.as_ref())?;
    let hr = affine(&s.h, &w.r, w.rb.as_ref())?;
    let gate = |t: &Tensor, k: usize| cols(t, k * hs, (k + 1) * hs);
    match cell {
        Cell::Rnn => Ok(State {
            h: clip(n, xi.try_add(&hr)?)?.tanh(),
            c: None,
        }),
        Cell::Gru => {
            let z = clip(n, gate(&xi, 0)?.try_add(gate(&hr, 0)?)?)?.sigmoid();
            let r = clip(n, gate(&xi, 1)?.try_add(gate(&hr, 1)?)?)?.sigmoid();
            let cand = if n.int("linear_before_reset", 0) != 0 {
                gate(&xi, 2)?.try_add(r.try_mul(gate(&hr, 2)?)?)?
            } else {
                let rh_w = rows(&w.r, 2 * hs, 3 * hs)?;
                let rb = w.rb.as_ref().map(|b| cols(b, 2 * hs, 3 * hs)).transpose()?;
                let rh = affine(&r.try_mul(&s.h)?, &rh_w, rb.as_ref())?;
                gate(&xi, 2)?.try_add(&rh)?
            };
            let h = clip(n, cand)?.tanh();
            let keep = z.try_mul(&s.h)?;
            Ok(State {
                h: one_minus(&z)?.try_mul(&h)?.try_add(&keep)?,
                c: None,
            })
        }
        Cell::Lstm => lstm_step(n, w, &xi, &hr, s, hs),
    }
}

/// LSTM gates (i, o, f, c) with optional peepholes.
fn lstm_step(
    n: &Node,
    w: &Weights,
    xi: &Tensor,
    hr: &Tensor,
    s: &State,
    hs: usize,
) -> Result<State> {
    let c0 = s.c.clone().ok_or_else(|| bad("LSTM", "no cell state"))?;
    let pre = |k: usize| -> Result<Tensor> {
        cols(xi, k * hs, (k + 1) * hs)?.try_add(cols(hr, k * hs, (k + 1) * hs)?)
    };
    let peep = |k: usize, c: &Tensor| -> Result<Option<Tensor>> {
        w.p.as_ref()
            .map(|p| cols(p, k * hs, (k + 1) * hs)?.try_mul(c))
            .transpose()
    };
    let with = |t: Tensor, p: Option<Tensor>| -> Result<Tensor> {
        match p {
            Some(p) => t.try_add(&p),
            None => Ok(t),
        }
    };
    let i = clip(n, with(pre(0)?, peep(0, &c0)?)?)?.sigmoid();
    let f = if n.int("input_forget", 0) != 0 {
        one_minus(&i)?
    } else {
        clip(n, with(pre(2)?, peep(2, &c0)?)?)?.sigmoid()
    };
    let g = clip(n, pre(3)?)?.tanh();
    let c = f.try_mul(&c0)?.try_add(i.try_mul(&g)?)?;
    let o = clip(n, with(pre(1)?, peep(1, &c)?)?)?.sigmoid();
    Ok(State {
        h: o.try_mul(c.tanh())?,
        c: Some(c),
    })
}

/// The state after step `t` where `t < lens[b]`, else the old one; the step's output (zero
/// past the end).
fn masked(lens: &Tensor, t: usize, new: State, old: &State) -> Result<(State, Tensor)> {
    let live = lens.try_gt(t as i64)?.try_reshape(&[-1, 1])?;
    let h = live.try_where(&new.h, &old.h)?;
    let c = match (&new.c, &old.c) {
        (Some(nc), Some(oc)) => Some(live.try_where(nc, oc)?),
        _ => None,
    };
    let y = live.try_where(&new.h, new.h.const_like(0.0))?;
    Ok((State { h, c }, y))
}

/// Initial state of direction `d`: `initial_h`/`initial_c` or zeros.
fn initial(n: &Node, cell: Cell, d: usize, batch: usize, hs: usize, dtype: DType) -> Result<State> {
    let layout = n.int("layout", 0) != 0;
    let read = |i: usize| -> Result<Tensor> {
        match n.opt(i) {
            Some(t) if layout => pick(&t.try_transpose(0, 1)?, d),
            Some(t) => pick(t, d),
            None => Tensor::try_zeros(&[batch, hs], dtype),
        }
    };
    Ok(State {
        h: read(5)?,
        c: if cell == Cell::Lstm {
            Some(read(6)?)
        } else {
            None
        },
    })
}

/// Runs one direction over the sequence `x` `[seq, B, I]`: outputs `[seq, B, H]` and the
/// final state.
fn run_direction(
    n: &Node,
    cell: Cell,
    x: &Tensor,
    d: usize,
    rev: bool,
    hs: usize,
) -> Result<(Tensor, State)> {
    let (seq, batch) = (x.shape()[0], x.shape()[1]);
    let w = weights(n, d, cell.gates() * hs)?;
    let mut s = initial(n, cell, d, batch, hs, x.dtype())?;
    let lens = n.opt(4).map(|l| l.cast(DType::I64));
    let mut ys: Vec<Option<Tensor>> = vec![None; seq];
    for k in 0..seq {
        let t = if rev { seq - 1 - k } else { k };
        let new = step(n, cell, &w, &pick(x, t)?, &s)?;
        let (next, y) = match &lens {
            Some(l) => masked(l, t, new, &s)?,
            None => (new.clone(), new.h),
        };
        s = next;
        ys[t] = Some(y);
    }
    let ys: Vec<Tensor> = ys.into_iter().flatten().collect();
    let refs: Vec<&Tensor> = ys.iter().collect();
    Ok((Tensor::try_stack(&refs, 0)?, s))
}

fn recurrent(n: &Node, cell: Cell) -> Result<Vec<Tensor>> {
    let layout = n.int("layout", 0) != 0;
    let x = n.input_rank(0, 3)?;
    let (w, r) = (n.input_rank(1, 3)?, n.input_rank(2, 3)?);
    n.opt_rank(3, 2)?;
    n.opt_rank(4, 1)?;
    n.opt_rank(5, 3)?;
    n.opt_rank(6, 3)?;
    n.opt_rank(7, 2)?;
    let x = if layout {
        x.try_transpose(0, 1)?
    } else {
        x.clone()
    };
    let hs = r.shape()[2];
    let h_attr = n.int("hidden_size", 0);
    let gh = cell.gates().checked_mul(hs);
    if (h_attr > 0 && h_attr as u64 != hs as u64)
        || gh != Some(w.shape()[1])
        || gh != Some(r.shape()[1])
    {
        return Err(bad(
            n.op(),
            format!(
                "W {:?} and R {:?} do not fit hidden_size {h_attr} ({} gates)",
                w.shape(),
                r.shape(),
                cell.gates()
            ),
        ));
    }
    let dirs: &[bool] = match n.string("direction", "forward").as_str() {
        "forward" => &[false],
        "reverse" => &[true],
        "bidirectional" => &[false, true],
        d => return Err(bad(n.op(), format!("direction '{d}'"))),
    };
    if n.opt(4).is_some() && dirs.contains(&true) {
        return Err(bad(
            n.op(),
            "sequence_lens with a reverse direction is not supported",
        ));
    }
    let (mut ys, mut hs_out, mut cs_out) = (Vec::new(), Vec::new(), Vec::new());
    for (d, &rev) in dirs.iter().enumerate() {
        let (y, s) = run_direction(n, cell, &x, d, rev, hs)?;
        ys.push(y);
        hs_out.push(s.h);
        cs_out.extend(s.c);
    }
    let st = |v: &[Tensor], a: isize| -> Result<Tensor> {
        let refs: Vec<&Tensor> = v.iter().collect();
        Tensor::try_stack(&refs, a)
    };
    let (mut y, mut yh) = (st(&ys, 1)?, st(&hs_out, 0)?);
    let mut yc = if cs_out.is_empty() {
        None
    } else {
        Some(st(&cs_out, 0)?)
    };
    if layout {
        y = y.try_permute(&[2, 0, 1, 3])?;
        yh = yh.try_transpose(0, 1)?;
        yc = yc.map(|c| c.try_transpose(0, 1)).transpose()?;
    }
    let mut out = vec![y, yh];
    out.extend(yc);
    Ok(out)
}
