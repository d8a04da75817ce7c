//! Attention (opset 23/24, and 25's window attributes), composed from shared Tensor ops: 3-D
//! inputs split into heads, the key/value cache appended, grouped-query heads repeated,
//! `softmax(softcap(q·kᵀ·scale) + bias)·v` with the bias built from the mask, causality,
//! the sliding window and the per-batch key padding. A query row whose bias masks every key
//! gives zeros (not NaN), as the reference does.
//!
//! Also RotaryEmbedding: the first `rotary_embedding_dim` features of each head rotated in
//! pairs (halves, or neighbours when `interleaved`) by the cached cos/sin of the position.
//!
//! And LinearAttention: a recurrent state `[b, kv_heads, d_k, d_v]` updated step by step
//! (optionally decayed by `exp(decay)` and delta-corrected by `beta`) and read by each query.
//!
//! Optional outputs: `present_key`, `present_value` (the caches after appending) and the
//! `qk_matmul_output` selected by `qk_matmul_output_mode` (0/1: scores after softcap,
//! 2: plus the bias, 3: the probabilities).

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::dtype_of;
use super::shape::isz;
use super::Handler;

/// The handler for `op` if it is an attention op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Attention" => attention,
        "RotaryEmbedding" => rotary_embedding,
        "LinearAttention" => linear_attention,
        _ => return None,
    })
}

/// Q, K, V in `[batch, heads, seq, head_size]` form and whether they came in as 3-D.
struct Qkv {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    three_d: bool,
}

fn attention(n: &Node) -> Result<Vec<Tensor>> {
    let mut x = split_heads(n)?;
    if let (Some(pk), Some(pv)) = (n.opt_rank(4, 4)?, n.opt_rank(5, 4)?) {
        x.k = Tensor::try_cat(&[pk, &x.k], 2)?;
        x.v = Tensor::try_cat(&[pv, &x.v], 2)?;
    }
    let (present_k, present_v) = (x.k.clone(), x.v.clone());
    let bias = attn_bias(n, &x)?;
    let (k, v) = repeat_kv(n, &x)?;
    let qk = scores(n, &x.q, &k)?;
    let biased = match &bias {
        Some(b) => qk.try_add(b)?,
        None => qk.clone(),
    };
    let probs = guarded_softmax(n, &biased, bias.as_ref())?;
    let dtype = x.q.dtype();
    let mut y = probs.cast(dtype).try_matmul(&v)?;
    if x.three_d {
        let s = y.shape();
        y = y
            .try_permute(&[0, 2, 1, 3])?
            .try_reshape(&[s[0] as isize, s[2] as isize, -1])?;
    }
    let qk_out = match n.int("qk_matmul_output_mode", 0) {
        0 | 1 => qk,
        2 => biased,
        3 => probs,
        m => return Err(bad("Attention", format!("qk_matmul_output_mode {m}"))),
    };
    Ok(vec![y, present_k, present_v, qk_out.cast(dtype)])
}

/// Reshapes 3-D `[batch, seq, heads·size]` inputs to `[batch, heads, seq, size]`.
fn split_heads(n: &Node) -> Result<Qkv> {
    let (q, k, v) = (n.input(0)?, n.input(1)?, n.input(2)?);
    if q.ndim() == 4 {
        if k.ndim() != 4 || v.ndim() != 4 {
            return Err(bad("Attention", "Q, K and V must all be 3-D or 4-D"));
        }
        return Ok(Qkv {
            q: q.clone(),
            k: k.clone(),
            v: v.clone(),
            three_d: false,
        });
    }
    if q.ndim() != 3 || k.ndim() != 3 || v.ndim() != 3 {
        return Err(bad("Attention", "Q, K and V must all be 3-D or 4-D"));
    }
    let qh = n.int("q_num_heads", 0);
    let kvh = n.int("kv_num_heads", 0);
    if qh <= 0 || kvh <= 0 {
        return Err(bad(
            "Attention",
            "3-D inputs need q_num_heads and kv_num_heads",
        ));
    }
    Ok(Qkv {
        q: heads(q, qh as usize)?,
        k: heads(k, kvh as usize)?,
        v: heads(v, kvh as usize)?,
        three_d: true,
    })
}

fn heads(t: &Tensor, h: usize) -> Result<Tensor> {
    let s = t.shape();
    if s.len() != 3 {
        return Err(bad(
            "Attention",
            format!("a 3-D [batch, seq, hidden] input is needed, got {s:?}"),
        ));
    }
    if h == 0 || s[2] % h != 0 {
        return Err(bad(
            "Attention",
            format!("hidden size {} is not a multiple of {h} heads", s[2]),
        ));
    }
    t.try_reshape(&[
        s[0] as isize,
        s[1] as isize,
        h as isize,
        (s[2] / h) as isize,
    ])?
    .try_permute(&[0, 2, 1, 3])
}

/// Interleaves copies of each key/value head so K and V have as many heads as Q.
fn repeat_kv(n: &Node, x: &Qkv) -> Result<(Tensor, Tensor)> {
    let (qh, kh) = (x.q.shape()[1], x.k.shape()[1]);
    if qh == kh {
        return Ok((x.k.clone(), x.v.clone()));
    }
    if kh == 0 || qh % kh != 0 || x.v.shape()[1] != kh {
        return Err(bad(
            n.op(),
            format!("{qh} query heads cannot share {kh} key/value heads"),
        ));
    }
    Ok((repeat_heads(&x.k, qh / kh)?, repeat_heads(&x.v, qh / kh)?))
}

/// `[b, h, s, d]` → `[b, h·rep, s, d]`, each head repeated `rep` times in place.
pub(crate) fn repeat_heads(t: &Tensor, rep: usize) -> Result<Tensor> {
    if rep == 1 {
        return Ok(t.clone());
    }
    let s = t.shape();
    let mut big = s.clone();
    big.insert(2, rep);
    let h = (s[1] * rep) as isize;
    t.try_unsqueeze(2)?.try_expand(&big)?.try_reshape(&[
        s[0] as isize,
        h,
        s[2] as isize,
        s[3] as isize,
    ])
}

/// `softcap(q·√scale · (k·√scale)ᵀ)`.
fn scores(n: &Node, q: &Tensor, k: &Tensor) -> Result<Tensor> {
    let d = q.shape()[3] as f64;
    let scale = if n.has("scale") {
        f64::from(n.float("scale", 1.0))
    } else {
        1.0 / d.sqrt()
    };
    let s = scale.sqrt() as f32 as f64;
    let qk = q
        .try_mul(s)?
        .try_matmul(&k.try_mul(s)?.try_transpose(-2, -1)?)?;
    let cap = f64::from(n.float("softcap", 0.0));
    if cap > 0.0 {
        return qk.try_div(cap)?.tanh().try_mul(cap);
    }
    Ok(qk)
}

/// Softmax over the keys (in `softmax_precision` when given); rows whose bias is all −∞ → 0.
fn guarded_softmax(n: &Node, x: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    let x = match n.int("softmax_precision", 0) {
        0 => x.clone(),
        code => x.cast(
            dtype_of(code as i32)
                .ok_or_else(|| bad(n.op(), format!("softmax_precision {code} is not a dtype")))?,
        ),
    };
    let p = x.try_softmax(-1)?;
    let Some(b) = bias else { return Ok(p) };
    let dead = b.try_max(&[-1], true)?.try_eq(f64::NEG_INFINITY)?;
    dead.try_where(0.0, &p)
}

/// 0 where `allowed`, −∞ elsewhere, as `dtype`.
fn additive(allowed: &Tensor, dtype: DType) -> Result<Tensor> {
    Ok(allowed.try_where(0.0, f64::NEG_INFINITY)?.cast(dtype))
}

/// The additive bias: mask + causal + window + key padding, or `None` when there is none.
fn attn_bias(n: &Node, x: &Qkv) -> Result<Option<Tensor>> {
    let dtype = x.q.dtype();
    let (sq, skv) = (x.q.shape()[2], x.k.shape()[2]);
    let mut parts = Vec::new();
    if let Some(m) = n.opt(3) {
        parts.push(padded_mask(m, skv, dtype)?);
    }
    let offset = query_offset(n, sq)?;
    let (left, right) = (
        n.int("left_window_size", -1),
        n.int("right_window_size", -1),
    );
    if n.int("is_causal", 0) != 0 || left >= 0 || right >= 0 {
        let diff = position_diff(&offset, sq, skv)?;
        if n.int("is_causal", 0) != 0 {
            parts.push(additive(&diff.try_ge(0i64)?, dtype)?);
        }
        if left >= 0 {
            parts.push(additive(&diff.try_le(left)?, dtype)?);
        }
        if right >= 0 {
            parts.push(additive(&diff.try_ge(-right)?, dtype)?);
        }
    }
    if let Some(lens) = n.opt_rank(6, 1)? {
        let b = lens.shape()[0] as isize;
        let j = Tensor::try_arange(0.0, skv as f64, 1.0, DType::I64)?.try_reshape(&[1, -1])?;
        let keep = j.try_lt(&lens.cast(DType::I64).try_reshape(&[b, 1])?)?;
        parts.push(additive(
            &keep.try_reshape(&[b, 1, 1, skv as isize])?,
            dtype,
        )?);
    }
    let mut it = parts.into_iter();
    let Some(first) = it.next() else {
        return Ok(None);
    };
    it.try_fold(first, |acc, p| acc.try_add(&p)).map(Some)
}

/// The float mask, padded with −∞ (or `false`) up to `skv` keys.
fn padded_mask(m: &Tensor, skv: usize, dtype: DType) -> Result<Tensor> {
    let m = if m.dtype() == DType::Bool {
        additive(m, dtype)?
    } else {
        m.cast(dtype)
    };
    let Some(&have) = m.shape().last() else {
        return Err(bad(
            "Attention",
            "attn_mask is a scalar: it needs a key axis",
        ));
    };
    if have >= skv {
        return Ok(m);
    }
    let mut pads = vec![(0usize, 0usize); m.ndim()];
    pads[m.ndim() - 1] = (0, skv - have);
    m.try_pad_value(&pads, f64::NEG_INFINITY)
}

/// Where query 0 sits among the keys: the past length, `nonpad_kv_seqlen − q_len` per batch
/// (`[batch, 1, 1, 1]`), or 0.
fn query_offset(n: &Node, sq: usize) -> Result<Tensor> {
    if let Some(pk) = n.opt_rank(4, 4)? {
        return Tensor::try_from_slice(&[pk.shape()[2] as i64], &[1, 1, 1, 1]);
    }
    if let Some(lens) = n.opt_rank(6, 1)? {
        let b = lens.shape()[0] as isize;
        return lens
            .cast(DType::I64)
            .try_sub(sq as i64)?
            .try_reshape(&[b, 1, 1, 1]);
    }
    Tensor::try_from_slice(&[0i64], &[1, 1, 1, 1])
}

/// `offset + i − j` for query `i` and key `j`, broadcast to `[.., sq, skv]`.
fn position_diff(offset: &Tensor, sq: usize, skv: usize) -> Result<Tensor> {
    let i = Tensor::try_arange(0.0, sq as f64, 1.0, DType::I64)?.try_reshape(&[sq as isize, 1])?;
    let j =
        Tensor::try_arange(0.0, skv as f64, 1.0, DType::I64)?.try_reshape(&[1, skv as isize])?;
    i.try_add(offset)?.try_sub(&j)
}

/// `[batch, seq, heads, head_size]` view of a RotaryEmbedding input (4-D inputs come as
/// `[batch, heads, seq, head_size]`, 3-D ones as `[batch, seq, heads·head_size]`).
fn rope_layout(n: &Node, x: &Tensor) -> Result<Tensor> {
    if x.ndim() == 4 {
        return x.try_permute(&[0, 2, 1, 3]);
    }
    let s = x.shape();
    let h = n.int("num_heads", 0);
    if x.ndim() != 3 || h <= 0 || s[2] % h as usize != 0 {
        return Err(bad(n.op(), format!("input {s:?} with num_heads {h}")));
    }
    x.try_reshape(&[s[0] as isize, s[1] as isize, h as isize, -1])
}

/// The cos or sin cache for each (batch, position): `[batch, seq, 1, rot/2]`.
fn rope_cache(cache: &Tensor, pos: Option<&Tensor>) -> Result<Tensor> {
    if cache.ndim() != 2 && !(pos.is_none() && cache.ndim() == 3) {
        return Err(bad(
            "RotaryEmbedding",
            format!("cos/sin cache of shape {:?}", cache.shape()),
        ));
    }
    if pos.is_some_and(|p| p.ndim() != 2) {
        return Err(bad(
            "RotaryEmbedding",
            "position_ids must be 2-D [batch, seq]",
        ));
    }
    let c = match pos {
        None => cache.clone(),
        Some(p) => {
            let (ps, w) = (p.shape(), cache.shape()[1]);
            let rows = p.cast(DType::I64).try_reshape(&[-1, 1])?;
            let idx = rows.try_expand(&[rows.shape()[0], w])?;
            cache
                .try_gather(0, &idx)?
                .try_reshape(&[ps[0] as isize, ps[1] as isize, w as isize])?
        }
    };
    c.try_unsqueeze(2)
}

/// Keeps `[from, to)` of the last axis.
fn last_range(t: &Tensor, from: usize, to: usize) -> Result<Tensor> {
    let mut keep: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
    if let Some(l) = keep.last_mut() {
        *l = (from, to);
    }
    t.try_shrink(&keep)
}

fn rotary_embedding(n: &Node) -> Result<Vec<Tensor>> {
    let input = n.input(0)?;
    let x = rope_layout(n, input)?;
    let d = x.shape()[3];
    let rot = match n.int("rotary_embedding_dim", 0) {
        r if r > 0 && r as usize <= d && r % 2 == 0 => r as usize,
        0 => d,
        r => {
            return Err(bad(
                n.op(),
                format!("rotary_embedding_dim {r} for heads of {d}"),
            ))
        }
    };
    let cos = rope_cache(n.input(1)?, n.opt(3))?;
    let sin = rope_cache(n.input(2)?, n.opt(3))?;
    let part = last_range(&x, 0, rot)?;
    let interleaved = n.int("interleaved", 0) != 0;
    let (x1, x2) = if interleaved {
        let s = part.shape();
        let pairs = part.try_reshape(&[s[0] as isize, s[1] as isize, s[2] as isize, -1, 2])?;
        let take = |i| -> Result<Tensor> { last_range(&pairs, i, i + 1)?.try_squeeze(Some(-1)) };
        (take(0)?, take(1)?)
    } else {
        (
            last_range(&part, 0, rot / 2)?,
            last_range(&part, rot / 2, rot)?,
        )
    };
    let real = cos.try_mul(&x1)?.try_sub(sin.try_mul(&x2)?)?;
    let imag = sin.try_mul(&x1)?.try_add(cos.try_mul(&x2)?)?;
    let rotated = if interleaved {
        Tensor::try_stack(&[&real, &imag], -1)?.try_reshape(&isz(&part.shape()))?
    } else {
        Tensor::try_cat(&[&real, &imag], -1)?
    };
    let y = Tensor::try_cat(&[&rotated, &last_range(&x, rot, d)?], -1)?.cast(input.dtype());
    if input.ndim() == 4 {
        return Ok(vec![y.try_permute(&[0, 2, 1, 3])?]);
    }
    Ok(vec![y.try_reshape(&isz(&input.shape()))?])
}

/// Step `i` of `[b, h, t, d]`, kept as `[b, h, 1, d]`.
fn step(t: &Tensor, i: usize) -> Result<Tensor> {
    let mut keep: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
    keep[2] = (i, i + 1);
    t.try_shrink(&keep)
}

/// A per-step gate `[b, t, h·x]` (or `[b, t, h]`) as `[b, h, t, x]` f32.
fn gate(g: &Tensor, h: usize) -> Result<Tensor> {
    let s = g.shape();
    if s.len() != 3 {
        return Err(bad(
            "LinearAttention",
            format!("a gate must be 3-D [batch, seq, heads·x], got {s:?}"),
        ));
    }
    let t = if s[2] == h || s[2] == 1 {
        g.try_reshape(&[s[0] as isize, s[1] as isize, s[2] as isize, 1])?
            .try_permute(&[0, 2, 1, 3])?
    } else {
        heads(g, h)?
    };
    Ok(t.cast(DType::F32))
}

/// The linear-attention inputs in `[b, heads, t, d]` f32 form, with the optional gates.
struct Linear {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    decay: Option<Tensor>,
    beta: Option<Tensor>,
}

impl Linear {
    fn read(n: &Node, qh: usize, kvh: usize) -> Result<Linear> {
        let (gating, delta) = match n.string("update_rule", "gated_delta").as_str() {
            "linear" => (false, false),
            "gated" => (true, false),
            "delta" => (false, true),
            "gated_delta" => (true, true),
            r => return Err(bad(n.op(), format!("update_rule '{r}'"))),
        };
        let f32 =
            |i: usize, h: usize| -> Result<Tensor> { Ok(heads(n.input(i)?, h)?.cast(DType::F32)) };
        let opt_gate = |on: bool, i: usize| on.then(|| gate(n.input(i)?, kvh)).transpose();
        Ok(Linear {
            q: f32(0, qh)?,
            k: f32(1, kvh)?,
            v: f32(2, kvh)?,
            decay: opt_gate(gating, 4)?,
            beta: opt_gate(delta, 5)?,
        })
    }

    /// The state after step `i`: decayed, then updated by `kᵀ·v` (delta-corrected).
    fn advance(&self, state: Tensor, i: usize) -> Result<Tensor> {
        let (kt, mut vt) = (step(&self.k, i)?, step(&self.v, i)?);
        let mut state = state;
        if let Some(g) = &self.decay {
            state = state.try_mul(step(g, i)?.exp().try_transpose(-1, -2)?)?;
        }
        if let Some(be) = &self.beta {
            let got = kt.try_matmul(&state)?;
            vt = step(be, i)?.try_mul(vt.try_sub(&got)?)?;
        }
        state.try_add(kt.try_transpose(-1, -2)?.try_matmul(&vt)?)
    }
}

fn linear_attention(n: &Node) -> Result<Vec<Tensor>> {
    let (qh, kvh) = (n.int("q_num_heads", 0), n.int("kv_num_heads", 0));
    if qh <= 0 || kvh <= 0 || qh % kvh != 0 {
        return Err(bad(
            n.op(),
            format!("{qh} query heads, {kvh} key/value heads"),
        ));
    }
    let (qh, kvh) = (qh as usize, kvh as usize);
    let x = Linear::read(n, qh, kvh)?;
    let (b, t, dk, dv) = (
        x.q.shape()[0],
        x.q.shape()[2],
        x.q.shape()[3],
        x.v.shape()[3],
    );
    let mut state = match n.opt(3) {
        Some(s) => s.cast(DType::F32),
        None => Tensor::try_zeros(&[b, kvh, dk, dv], DType::F32)?,
    };
    let scale = match n.float("scale", 0.0) {
        s if s != 0.0 => f64::from(s),
        _ => 1.0 / (dk as f64).sqrt(),
    };
    let mut outs = Vec::with_capacity(t);
    for i in 0..t {
        state = x.advance(state, i)?;
        let read = repeat_heads(&state, qh / kvh)?;
        outs.push(step(&x.q, i)?.try_matmul(&read)?.try_mul(scale)?);
    }
    let refs: Vec<&Tensor> = outs.iter().collect();
    let y = Tensor::try_cat(&refs, 2)?
        .try_permute(&[0, 2, 1, 3])?
        .try_reshape(&[b as isize, t as isize, (qh * dv) as isize])?;
    let dtype = n.input(0)?.dtype();
    let state_dtype = n.opt(3).map_or(dtype, Tensor::dtype);
    Ok(vec![y.cast(dtype), state.cast(state_dtype)])
}
