//! A tiny GPT-style model (one attention head, one MLP block) written with the Tensor API, run
//! two ways: `step`, which decodes one token with a KV cache whose length is a bound
//! `Variable` (one compiled set of kernels for every position), and `forward_full`, the same
//! model over the whole sequence with a causal mask and no cache (fixed shapes), the reference.
//!
//! Invariant: both compute the same function; `step` at position `p` (after steps `0..p`
//! filled the cache) gives the logits `forward_full` gives for row `p`.

use std::sync::Arc;

use picograd::device::Device;
use picograd::symbolic::{Node, Variable};
use picograd::{DType, Result, Tensor};

/// Model sizes: vocabulary, width, longest context.
pub const VOCAB: usize = 16;
pub const D: usize = 8;
pub const MAX_CTX: usize = 32;

/// Weights and the KV caches (`[MAX_CTX, D]` each, owned: `step` writes them in place).
pub struct TinyGpt {
    tok_emb: Tensor,
    pos_emb: Tensor,
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    w1: Tensor,
    w2: Tensor,
    wout: Tensor,
    pub kc: Tensor,
    pub vc: Tensor,
    /// The sequence length so far, the variable the cache is read up to.
    pub len: Variable,
}

fn weights(n: usize, seed: f32, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f32 * 0.61 + seed).sin() * scale * 64.0).round() / 64.0)
        .collect()
}

impl TinyGpt {
    pub fn new(dev: &Arc<dyn Device>) -> Result<TinyGpt> {
        let t = |shape: &[usize], seed: f32, scale: f32| {
            Tensor::try_from_slice_on(&weights(shape.iter().product(), seed, scale), shape, dev)
        };
        let cache = || Tensor::try_from_slice_on(&vec![0.0f32; MAX_CTX * D], &[MAX_CTX, D], dev);
        Ok(TinyGpt {
            tok_emb: t(&[VOCAB, D], 1.0, 1.0)?,
            pos_emb: t(&[MAX_CTX, D], 2.0, 0.5)?,
            wq: t(&[D, D], 3.0, 0.5)?,
            wk: t(&[D, D], 4.0, 0.5)?,
            wv: t(&[D, D], 5.0, 0.5)?,
            w1: t(&[D, 2 * D], 6.0, 0.5)?,
            w2: t(&[2 * D, D], 7.0, 0.5)?,
            wout: t(&[D, VOCAB], 8.0, 0.5)?,
            kc: cache()?,
            vc: cache()?,
            len: Variable::new("len", 1, MAX_CTX as i64)?,
        })
    }

    /// One-hot rows of `tokens`, `[n, VOCAB]`, with `n` the bound length when `sym`.
    pub fn one_hot(&self, tokens: &[usize], dev: &Arc<dyn Device>, sym: bool) -> Result<Tensor> {
        let mut rows = vec![0.0f32; tokens.len() * VOCAB];
        for (r, &t) in tokens.iter().enumerate() {
            rows[r * VOCAB + t] = 1.0;
        }
        if sym {
            let dims = [self.len.bind(tokens.len() as i64)?, Node::cst(VOCAB as i64)];
            Tensor::try_from_slice_sym_on(&rows, &dims, dev)
        } else {
            Tensor::try_from_slice_on(&rows, &[tokens.len(), VOCAB], dev)
        }
    }

    /// The block after attention: residual, MLP with relu, residual, logits.
    fn head(&self, x: &Tensor, att: &Tensor) -> Result<Tensor> {
        let h = x.try_add(att)?;
        let m = h.try_matmul(&self.w1)?.relu().try_matmul(&self.w2)?;
        h.try_add(&m)?.try_matmul(&self.wout)
    }

    /// Decodes the last token of `onehots` (`[len, VOCAB]`, `len` bound): writes its key and
    /// value into row `len - 1` of the caches (in place, lazily) and returns its logits
    /// `[1, VOCAB]`. Every shape is over `len`, so every position runs the same kernels.
    pub fn step(&self, onehots: &Tensor) -> Result<Tensor> {
        let len = onehots.sym_shape()[0].clone();
        let d = Node::cst(D as i64);
        let last = [(&len - 1, len.clone())];
        let tok =
            onehots.try_shrink_sym(&[last[0].clone(), (Node::cst(0), Node::cst(VOCAB as i64))])?;
        let pos = self
            .pos_emb
            .try_shrink_sym(&[last[0].clone(), (Node::cst(0), d.clone())])?;
        let x = tok.try_matmul(&self.tok_emb)?.try_add(&pos)?;
        let (q, k, v) = (
            x.try_matmul(&self.wq)?,
            x.try_matmul(&self.wk)?,
            x.try_matmul(&self.wv)?,
        );
        // Row len-1 of a [MAX_CTX, D] grid: the new row padded into place, and where it is.
        let rows = [
            (&len - 1, Node::cst(MAX_CTX as i64) - &len),
            (Node::cst(0), Node::cst(0)),
        ];
        let at = x.const_like(1.0).cast(DType::Bool).try_pad_sym(&rows)?;
        let kc = at.try_where(&k.try_pad_sym(&rows)?, &self.kc)?;
        let vc = at.try_where(&v.try_pad_sym(&rows)?, &self.vc)?;
        self.kc.try_assign(&kc)?;
        self.vc.try_assign(&vc)?;
        let upto = [(Node::cst(0), len.clone()), (Node::cst(0), d)];
        let keys = self.kc.try_shrink_sym(&upto)?;
        let vals = self.vc.try_shrink_sym(&upto)?;
        let scores = q.try_matmul(&keys.try_transpose(0, 1)?)?.mul(SCALE);
        let att = scores.try_softmax(-1)?.try_matmul(&vals)?;
        self.head(&x, &att)
    }

    /// The whole sequence at once (`onehots` `[n, VOCAB]`, fixed shape), causally masked, no
    /// cache: logits `[n, VOCAB]`.
    pub fn forward_full(&self, onehots: &Tensor, dev: &Arc<dyn Device>) -> Result<Tensor> {
        let n = onehots.shape()[0];
        let pos = self.pos_emb.try_shrink(&[(0, n), (0, D)])?;
        let x = onehots.try_matmul(&self.tok_emb)?.try_add(&pos)?;
        let (q, k, v) = (
            x.try_matmul(&self.wq)?,
            x.try_matmul(&self.wk)?,
            x.try_matmul(&self.wv)?,
        );
        let mut mask = vec![0.0f32; n * n];
        for r in 0..n {
            for c in r + 1..n {
                mask[r * n + c] = f32::NEG_INFINITY;
            }
        }
        let mask = Tensor::try_from_slice_on(&mask, &[n, n], dev)?;
        let scores = q
            .try_matmul(&k.try_transpose(0, 1)?)?
            .mul(SCALE)
            .try_add(&mask)?;
        let att = scores.try_softmax(-1)?.try_matmul(&v)?;
        self.head(&x, &att)
    }
}

/// 1/sqrt(D), D = 8.
const SCALE: f64 = 0.353_553_390_593_273_8;

/// The index of the largest logit (the first of equal ones).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// What [`decode`] saw: the tokens, the largest difference between the cached logits and the
/// uncached model's, and the kernels compiled (or lowered) after the first step.
pub struct Decoded {
    pub tokens: Vec<usize>,
    pub max_diff: f32,
    pub compiled_after_first: u64,
    pub lowered_after_first: u64,
    /// Captures the JIT made (1: every position replayed the first step's capture).
    pub captures: u64,
}

/// Greedy decoding of `n_new` tokens after `prompt` with the KV cache, one JIT for every
/// position (the prompt goes through the same step, a token at a time). Afterwards each
/// step's logits are checked against [`TinyGpt::forward_full`] over the tokens so far.
pub fn decode(
    m: &TinyGpt,
    dev: &Arc<dyn Device>,
    prompt: &[usize],
    n_new: usize,
) -> Result<Decoded> {
    let jit = picograd::jit::Jit::new(|x: &[Tensor]| {
        let logits = m.step(&x[0])?;
        Ok(vec![logits, m.kc.clone(), m.vc.clone()])
    });
    let mut tokens = vec![prompt[0]];
    let mut logits = Vec::new();
    let mut first = None;
    while tokens.len() < prompt.len() + n_new {
        let outs = jit.call(&[m.one_hot(&tokens, dev, true)?])?;
        let got = outs[0].to_vec::<f32>()?;
        first.get_or_insert_with(picograd::realize::counters);
        let next = match prompt.get(tokens.len()) {
            Some(&t) => t,
            None => argmax(&got),
        };
        logits.push(got);
        tokens.push(next);
    }
    let end = picograd::realize::counters();
    let first = first.unwrap_or(end);
    let mut max_diff = 0.0f32;
    for (i, got) in logits.iter().enumerate() {
        let full = m.forward_full(&m.one_hot(&tokens[..=i], dev, false)?, dev)?;
        let want = full.to_vec::<f32>()?;
        for (a, b) in got.iter().zip(&want[i * VOCAB..]) {
            max_diff = max_diff.max((a - b).abs());
        }
    }
    Ok(Decoded {
        tokens,
        max_diff,
        compiled_after_first: end.compiled - first.compiled,
        lowered_after_first: end.lowered - first.lowered,
        captures: jit.captures(),
    })
}
