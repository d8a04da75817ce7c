//! ShapeTracker tests: a shadow oracle (every op sequence indexes exactly like the same ops applied
//! eagerly to a numbered array), view-count checks, strides, symbolic shapes, errors, and golden
//! `Display` output.

use picograd_core::shape::{sints, Sint};
use picograd_core::symbolic::{bindings, Node};
use picograd_core::{Error, ShapeTracker, View};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// The eager reference: shares no code with the ShapeTracker. Each op builds a new array; padding
// is the sentinel -1 (the numbered data is 0..n, so -1 never collides).

#[derive(Clone, Debug)]
struct Arr {
    shape: Vec<usize>,
    data: Vec<i64>,
}

/// Every position of `shape`, in row-major order.
fn positions(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out
            .into_iter()
            .flat_map(|p| (0..d).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

impl Arr {
    fn numbered(shape: &[usize]) -> Arr {
        let n: usize = shape.iter().product();
        Arr {
            shape: shape.to_vec(),
            data: (0..n as i64).collect(),
        }
    }

    fn get(&self, pos: &[usize]) -> i64 {
        let flat = pos
            .iter()
            .zip(&self.shape)
            .fold(0, |acc, (&p, &d)| acc * d + p);
        self.data[flat]
    }

    fn build(shape: Vec<usize>, f: impl Fn(&[usize]) -> i64) -> Arr {
        let data = positions(&shape).iter().map(|p| f(p)).collect();
        Arr { shape, data }
    }

    fn reshape(&self, shape: &[usize]) -> Arr {
        Arr {
            shape: shape.to_vec(),
            data: self.data.clone(),
        }
    }

    fn permute(&self, order: &[usize]) -> Arr {
        let shape = order.iter().map(|&a| self.shape[a]).collect();
        Arr::build(shape, |p| {
            let mut old = vec![0; p.len()];
            for (i, &a) in order.iter().enumerate() {
                old[a] = p[i];
            }
            self.get(&old)
        })
    }

    fn expand(&self, shape: &[usize]) -> Arr {
        Arr::build(shape.to_vec(), |p| {
            let old: Vec<usize> = p
                .iter()
                .zip(&self.shape)
                .map(|(&i, &d)| if d == 1 { 0 } else { i })
                .collect();
            self.get(&old)
        })
    }

    fn pad(&self, arg: &[(usize, usize)]) -> Arr {
        let shape = self
            .shape
            .iter()
            .zip(arg)
            .map(|(d, (b, e))| d + b + e)
            .collect();
        Arr::build(shape, |p| {
            let mut old = Vec::new();
            for ((&i, &d), &(b, _)) in p.iter().zip(&self.shape).zip(arg) {
                if i < b || i >= b + d {
                    return -1;
                }
                old.push(i - b);
            }
            self.get(&old)
        })
    }

    fn shrink(&self, arg: &[(usize, usize)]) -> Arr {
        let shape = arg.iter().map(|(b, e)| e - b).collect();
        Arr::build(shape, |p| {
            let old: Vec<usize> = p.iter().zip(arg).map(|(i, (b, _))| i + b).collect();
            self.get(&old)
        })
    }

    fn stride(&self, mul: &[i64]) -> Arr {
        let step = |m: i64| m.unsigned_abs() as usize;
        let shape = self
            .shape
            .iter()
            .zip(mul)
            .map(|(&d, &m)| d.div_ceil(step(m)))
            .collect();
        Arr::build(shape, |p| {
            let old: Vec<usize> = p
                .iter()
                .zip(&self.shape)
                .zip(mul)
                .map(|((&i, &d), &m)| {
                    if m > 0 {
                        i * step(m)
                    } else {
                        d - 1 - i * step(m)
                    }
                })
                .collect();
            self.get(&old)
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Random op sequences.

/// A tiny deterministic generator (splitmix64) turning one proptest-drawn seed into the
/// parameters of one op, chosen to fit the current shape.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Clone, Debug)]
enum Op {
    Reshape(Vec<usize>),
    Permute(Vec<usize>),
    Expand(Vec<usize>),
    Pad(Vec<(usize, usize)>),
    Shrink(Vec<(usize, usize)>),
    Stride(Vec<i64>),
    Simplify,
}

fn new_reshape(shape: &[usize], r: &mut Rng) -> Option<Vec<usize>> {
    let mut s = shape.to_vec();
    let i = r.below(s.len());
    match r.below(7) {
        0 => {
            // Split a dimension into two factors.
            let d = s[i];
            let f = (2..d).filter(|f| d % f == 0).nth(r.below(3))?;
            s.splice(i..=i, [f, d / f]);
        }
        1 if i + 1 < s.len() && s[i] * s[i + 1] <= 12 => {
            let m = s[i] * s[i + 1];
            s.splice(i..=i + 1, [m]);
        }
        2 => s.insert(i, 1),
        3 if s[i] == 1 && s.len() > 1 => {
            s.remove(i);
        }
        4 if s.iter().product::<usize>() <= 60 => s = vec![s.iter().product()],
        5 | 6 => s = factorization(s.iter().product(), r),
        _ => return None,
    }
    (s.len() <= 4).then_some(s)
}

/// A random shape of `n` elements, at most 4 dimensions.
fn factorization(mut n: usize, r: &mut Rng) -> Vec<usize> {
    let mut out = Vec::new();
    while out.len() < 3 && n > 1 {
        let divisors: Vec<usize> = (2..=n).filter(|d| n % d == 0).collect();
        let d = divisors[r.below(divisors.len())];
        out.push(d);
        n /= d;
    }
    if n > 1 || out.is_empty() {
        out.push(n);
    }
    out
}

fn new_op(kind: u8, shape: &[usize], r: &mut Rng) -> Option<Op> {
    let n = shape.len();
    // Weights: reshape 4, permute 2, expand 1, pad 2, shrink 1, stride 1, simplify 1.
    let kind = [0, 0, 0, 0, 1, 1, 2, 3, 3, 4, 5, 6][usize::from(kind) % 12];
    Some(match kind {
        0 => Op::Reshape(new_reshape(shape, r)?),
        1 => {
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                order.swap(i, r.below(i + 1));
            }
            Op::Permute(order)
        }
        2 => {
            if !shape.contains(&1) {
                return None;
            }
            Op::Expand(
                shape
                    .iter()
                    .map(|&d| if d == 1 { 1 + r.below(3) } else { d })
                    .collect(),
            )
        }
        3 => Op::Pad(
            shape
                .iter()
                .map(|_| {
                    if r.below(2) == 0 {
                        (0, 0)
                    } else {
                        (r.below(3), r.below(3))
                    }
                })
                .collect(),
        ),
        4 => Op::Shrink(
            shape
                .iter()
                .map(|&d| match r.below(3) {
                    0 if d > 1 => (r.below(2).min(d - 1), d),
                    1 if d > 1 => (0, d - r.below(2)),
                    _ => (0, d),
                })
                .collect(),
        ),
        5 => Op::Stride(
            shape
                .iter()
                .map(|_| [-2, -1, 1, 2, 1, -1, 1, -1][r.below(8)])
                .collect(),
        ),
        _ => Op::Simplify,
    })
}

fn pairs(arg: &[(usize, usize)]) -> Vec<(i64, i64)> {
    arg.iter().map(|&(b, e)| (b as i64, e as i64)).collect()
}

fn dims(shape: &[usize]) -> Vec<Sint> {
    shape.iter().map(|&d| Node::cst(d as i64)).collect()
}

fn apply(op: &Op, st: &ShapeTracker, arr: &Arr) -> (ShapeTracker, Arr) {
    match op {
        Op::Reshape(s) => (st.reshape(&dims(s)).unwrap(), arr.reshape(s)),
        Op::Permute(o) => (st.permute(o).unwrap(), arr.permute(o)),
        Op::Expand(s) => (st.expand(&dims(s)).unwrap(), arr.expand(s)),
        Op::Pad(a) => (st.pad(&pairs(a)).unwrap(), arr.pad(a)),
        Op::Shrink(a) => (st.shrink(&pairs(a)).unwrap(), arr.shrink(a)),
        Op::Stride(m) => (st.stride(m).unwrap(), arr.stride(m)),
        Op::Simplify => (st.simplify(), arr.clone()),
    }
}

/// Every position of `arr` must read the same element through `st` (validity 0 ⇔ padding).
fn check(st: &ShapeTracker, arr: &Arr) -> Result<(), TestCaseError> {
    let shape: Vec<i64> = st.shape().iter().map(|s| s.as_const().unwrap()).collect();
    let want: Vec<i64> = arr.shape.iter().map(|&d| d as i64).collect();
    prop_assert_eq!(shape, want);
    let (idx, valid) = st.expr_idxs(&st.idx_vars());
    prop_assert!(st.valid_size() <= st.real_size());
    for (flat, pos) in positions(&arr.shape).iter().enumerate() {
        let env = |name: &str| {
            name.strip_prefix("idx")?
                .parse::<usize>()
                .ok()
                .map(|k| pos[k] as i64)
        };
        let expect = arr.data[flat];
        let v = valid.eval(&env).unwrap();
        // `valid_size` bounds every valid read, and is never above `real_size`.
        prop_assert!(
            expect < st.valid_size(),
            "{} reads {} past valid_size",
            st,
            expect
        );
        if expect == -1 {
            prop_assert_eq!(v, 0, "position {:?} should be padding in {}", pos, st);
        } else {
            prop_assert_eq!(v, 1, "position {:?} should be valid in {}", pos, st);
            prop_assert_eq!(
                idx.eval(&env).unwrap(),
                expect,
                "position {:?} in {}: {}",
                pos,
                st,
                idx
            );
        }
    }
    Ok(())
}

fn check_flat(st: &ShapeTracker, arr: &Arr) -> Result<(), TestCaseError> {
    let n = arr.data.len() as i64;
    let flat = Node::var("flat", 0, (n - 1).max(1));
    let (idx, valid) = st.expr_node(&flat).unwrap();
    for (i, &expect) in arr.data.iter().enumerate() {
        let env = |name: &str| (name == "flat").then_some(i as i64);
        let v = valid.eval(&env).unwrap();
        prop_assert_eq!(v, i64::from(expect != -1), "flat {} in {}", i, st);
        if expect != -1 {
            prop_assert_eq!(idx.eval(&env).unwrap(), expect, "flat {} in {}", i, st);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn shadow_oracle(
        start in prop::collection::vec(2usize..=6, 1..=3),
        ops in prop::collection::vec((0u8..12, any::<u64>()), 0..12),
    ) {
        let mut arr = Arr::numbered(&start);
        let mut st = ShapeTracker::from_shape(&dims(&start));
        for (kind, seed) in ops {
            let Some(op) = new_op(kind, &arr.shape, &mut Rng(seed)) else { continue };
            let (st2, arr2) = apply(&op, &st, &arr);
            if arr2.data.len() > 1500 {
                continue;
            }
            (st, arr) = (st2, arr2);
        }
        check(&st, &arr)?;
        check(&st.simplify(), &arr)?;
        check_flat(&st, &arr)?;
    }
}

/// Applies the seeded non-reshape ops `ops` (kinds 1..=5 of [`new_op`]'s table entries 4..=10).
fn apply_seeded(ops: &[(u8, u64)], mut st: ShapeTracker, mut arr: Arr) -> (ShapeTracker, Arr) {
    for &(kind, seed) in ops {
        let Some(op) = new_op(4 + kind % 7, &arr.shape, &mut Rng(seed)) else {
            continue;
        };
        let (st2, arr2) = apply(&op, &st, &arr);
        if arr2.data.len() <= 1500 {
            (st, arr) = (st2, arr2);
        }
    }
    (st, arr)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Targets view merging: ops, a flattening reshape (which stacks a view), a regrouping
    /// reshape, more ops; then the raw and the simplified tracker must both index right.
    #[test]
    fn shadow_oracle_two_views(
        start in prop::collection::vec(2usize..=6, 1..=3),
        before in prop::collection::vec((0u8..7, any::<u64>()), 0..4),
        regroup in any::<u64>(),
        after in prop::collection::vec((0u8..7, any::<u64>()), 0..4),
    ) {
        let (st, arr) = apply_seeded(&before, ShapeTracker::from_shape(&dims(&start)), Arr::numbered(&start));
        let n = arr.data.len();
        let (st, arr) = apply(&Op::Reshape(vec![n]), &st, &arr);
        let (st, arr) = apply(&Op::Reshape(factorization(n, &mut Rng(regroup))), &st, &arr);
        let (st, arr) = apply_seeded(&after, st, arr);
        check(&st, &arr)?;
        check(&st.simplify(), &arr)?;
    }
}

#[test]
fn oracle_single_position_masks() {
    // A dimension masked to one position away from 0 folds its offset in; reshapes carry it.
    let cases: Vec<(Vec<usize>, Vec<Op>)> = vec![
        (
            vec![3],
            vec![Op::Pad(vec![(2, 2)]), Op::Shrink(vec![(0, 3)])],
        ),
        (
            vec![3, 4],
            vec![
                Op::Pad(vec![(2, 2), (0, 0)]),
                Op::Shrink(vec![(0, 3), (0, 4)]),
                Op::Reshape(vec![12]),
            ],
        ),
        (
            vec![2, 3],
            vec![
                Op::Pad(vec![(0, 0), (3, 1)]),
                Op::Stride(vec![1, -2]),
                Op::Reshape(vec![2, 2, 2]),
                Op::Permute(vec![2, 0, 1]),
            ],
        ),
        (
            vec![4, 2],
            vec![
                Op::Stride(vec![-1, 1]),
                Op::Pad(vec![(1, 0), (1, 1)]),
                Op::Reshape(vec![20]),
                Op::Reshape(vec![5, 4]),
                Op::Simplify,
            ],
        ),
    ];
    for (start, ops) in cases {
        let (mut st, mut arr) = (
            ShapeTracker::from_shape(&dims(&start)),
            Arr::numbered(&start),
        );
        for op in &ops {
            (st, arr) = apply(op, &st, &arr);
        }
        check(&st, &arr).unwrap();
        check(&st.simplify(), &arr).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Shapes, views, strides.

fn st(dims: &[usize]) -> ShapeTracker {
    ShapeTracker::from_dims(dims)
}

#[test]
fn permute_then_splitting_reshape_stays_one_view() {
    let a = st(&[10, 10])
        .permute(&[1, 0])
        .unwrap()
        .reshape(&sints(&[5, 2, 5, 2]))
        .unwrap();
    assert_eq!(a.views().len(), 1);
    assert_eq!(a.views()[0].strides(), &sints(&[2, 1, 20, 10])[..]);
}

#[test]
fn expand_of_size_one_dim_stays_one_view() {
    let a = st(&[3, 1]).expand(&sints(&[3, 4])).unwrap();
    assert_eq!(a.views().len(), 1);
    assert_eq!(
        a.real_strides(),
        vec![Some(Node::cst(1)), Some(Node::cst(0))]
    );
    assert_eq!(a.expanded_axes(), vec![1]);
    assert!(a.is_expanded());
    assert!(!st(&[3, 4]).is_expanded());
}

#[test]
fn pad_then_shrink_stays_one_view() {
    let a = st(&[4, 4])
        .pad(&[(1, 1), (2, 0)])
        .unwrap()
        .shrink(&[(1, 5), (2, 6)])
        .unwrap();
    assert_eq!(a.views().len(), 1);
    assert!(
        a.contiguous(),
        "shrinking the padding away gives the original back: {a}"
    );
}

#[test]
fn transpose_then_flatten_needs_two_views() {
    let a = st(&[10, 10])
        .permute(&[1, 0])
        .unwrap()
        .reshape(&sints(&[100]))
        .unwrap();
    assert_eq!(a.views().len(), 2);
    assert_eq!(
        a.simplify().views().len(),
        2,
        "no single view reads a transpose flat"
    );
    // Reshaping back lets simplify merge to the plain transpose.
    let b = a.reshape(&sints(&[10, 10])).unwrap().simplify();
    assert_eq!(b.views().len(), 1);
    assert_eq!(
        b.real_strides(),
        vec![Some(Node::cst(1)), Some(Node::cst(10))]
    );
    assert!(b.permute(&[1, 0]).unwrap().contiguous());
}

#[test]
fn real_strides_through_views_and_masks() {
    let a = st(&[4, 6]);
    assert_eq!(
        a.real_strides(),
        vec![Some(Node::cst(6)), Some(Node::cst(1))]
    );
    assert_eq!(a.unit_stride_axes(), vec![1]);
    // Padding masks axis 0: its stride is not always real.
    let p = a.pad(&[(1, 0), (0, 0)]).unwrap();
    assert_eq!(p.real_strides(), vec![None, Some(Node::cst(1))]);
    assert_eq!(
        p.real_strides_ignore_valid(),
        vec![Some(Node::cst(6)), Some(Node::cst(1))]
    );
    assert!(p.axis_is_masked(0) && !p.axis_is_masked(1));
    // Through two views: the flat transpose has no stride.
    let t = st(&[3, 4])
        .permute(&[1, 0])
        .unwrap()
        .reshape(&sints(&[12]))
        .unwrap();
    assert_eq!(t.real_strides(), vec![None]);
    // Splitting the flat axis again gives strides through both views.
    let u = t.reshape(&sints(&[4, 3])).unwrap();
    assert_eq!(
        u.real_strides(),
        vec![Some(Node::cst(1)), Some(Node::cst(4))]
    );
}

#[test]
fn contiguous_and_offsets() {
    assert!(st(&[2, 3]).contiguous());
    assert!(!st(&[2, 3]).permute(&[1, 0]).unwrap().contiguous());
    let s = st(&[4, 5]).shrink(&[(1, 3), (2, 5)]).unwrap();
    assert!(!s.contiguous());
    assert_eq!(s.real_offset(), Node::cst(7));
    assert_eq!(s.real_size(), 15);
    let f = st(&[4]).stride(&[-1]).unwrap();
    assert_eq!(f.real_offset(), Node::cst(3));
    assert_eq!(f.real_strides(), vec![Some(Node::cst(-1))]);
    assert_eq!(st(&[2, 3]).size(), Node::cst(6));
    assert_eq!(st(&[2, 3]).reduce_shape(&[1]), sints(&[2, 1]));
}

#[test]
fn symbolic_dimension() {
    let n = Node::var("n", 1, 10);
    let a = ShapeTracker::from_shape(&[n.clone(), Node::cst(4)]);
    assert_eq!(a.size(), &n * 4);
    assert_eq!(a.vars(), vec![n.clone()]);
    let flat = a.reshape(&[&n * 4]).unwrap();
    assert!(flat.contiguous());
    assert_eq!(flat.views().len(), 1);
    let (idx, valid) = a.expr_idxs(&a.idx_vars());
    assert_eq!(valid, Node::cst(1));
    for nv in [1, 3, 10] {
        for (i, j) in [(0, 0), (nv - 1, 3), (nv / 2, 2)] {
            let vals = [("n", nv), ("idx0", i), ("idx1", j)];
            let env = bindings(&vals);
            assert_eq!(idx.eval(&env).unwrap(), i * 4 + j);
        }
    }
    // A permuted symbolic tracker still indexes right.
    let t = a.permute(&[1, 0]).unwrap();
    let (idx, _) = t.expr_idxs(&t.idx_vars());
    let vals = [("n", 5), ("idx0", 2), ("idx1", 3)];
    let env = bindings(&vals);
    assert_eq!(idx.eval(&env).unwrap(), 3 * 4 + 2);
    // Shrinking a fixed buffer to a symbolic length.
    let s = st(&[10, 4])
        .shrink_nodes(&[(Node::cst(0), n.clone()), (Node::cst(0), Node::cst(4))])
        .unwrap();
    assert_eq!(s.shape(), &[n.clone(), Node::cst(4)][..]);
    assert!(s.contiguous());
}

// ---------------------------------------------------------------------------------------------
// Errors name the op and the shapes.

fn message(e: Error) -> String {
    e.to_string()
}

#[test]
fn bad_reshape_size() {
    let e = message(st(&[2, 3]).reshape(&sints(&[4, 2])).unwrap_err());
    assert_eq!(
        e,
        "reshape: shape error: cannot reshape (2, 3) (size 6) to (4, 2) (size 8)"
    );
}

#[test]
fn bad_permutation() {
    let e = message(st(&[2, 3, 4]).permute(&[0, 0, 1]).unwrap_err());
    assert_eq!(
        e,
        "permute: axis error: [0, 0, 1] is not a permutation of the 3 axes of shape (2, 3, 4)"
    );
    assert!(st(&[2, 3]).permute(&[1]).is_err());
    assert!(st(&[2, 3]).permute(&[0, 2]).is_err());
}

#[test]
fn negative_pad() {
    let e = message(st(&[2, 3]).pad(&[(0, 0), (-1, 0)]).unwrap_err());
    assert_eq!(
        e,
        "pad: shape error: negative padding ((0, 0), (-1, 0)) for shape (2, 3)"
    );
}

#[test]
fn shrink_out_of_range() {
    let e = message(st(&[2, 3]).shrink(&[(0, 2), (1, 4)]).unwrap_err());
    assert_eq!(
        e,
        "shrink: shape error: range ((0, 2), (1, 4)) is outside shape (2, 3) (axis 1)"
    );
    assert!(st(&[2, 3]).shrink(&[(2, 1), (0, 3)]).is_err());
    assert!(st(&[2, 3]).shrink(&[(0, 3)]).is_err());
}

#[test]
fn expand_of_non_one_dim() {
    let e = message(st(&[2, 3]).expand(&sints(&[2, 6])).unwrap_err());
    assert_eq!(
        e,
        "expand: shape error: cannot expand (2, 3) to (2, 6): axis 1 is not of size 1"
    );
    assert!(st(&[2, 1]).expand(&sints(&[2, 1, 3])).is_err());
}

#[test]
fn zero_stride() {
    let e = message(st(&[2, 3]).stride(&[1, 0]).unwrap_err());
    assert_eq!(
        e,
        "stride: shape error: zero step in [1, 0] for shape (2, 3)"
    );
}

// ---------------------------------------------------------------------------------------------
// Golden Display.

#[test]
fn display_view() {
    let v = View::from_shape(&sints(&[2, 3]));
    assert_eq!(
        v.to_string(),
        "View(shape=(2, 3), strides=(3, 1), offset=0, mask=None, contiguous=True)"
    );
    let p = v.pad(&[(1, 0), (0, 2)]).unwrap();
    assert_eq!(
        p.to_string(),
        "View(shape=(3, 5), strides=(3, 1), offset=-3, mask=((1, 3), (0, 3)), contiguous=False)"
    );
}

#[test]
fn display_shapetracker() {
    let a = st(&[10, 10]).permute(&[1, 0]).unwrap();
    assert_eq!(
        a.to_string(),
        "ShapeTracker(views=(View(shape=(10, 10), strides=(1, 10), offset=0, mask=None, contiguous=False),))"
    );
    let b = a
        .reshape(&sints(&[5, 2, 5, 2]))
        .unwrap()
        .reshape(&sints(&[100]))
        .unwrap();
    assert_eq!(
        b.to_string(),
        "ShapeTracker(views=(View(shape=(5, 2, 5, 2), strides=(2, 1, 20, 10), offset=0, mask=None, \
         contiguous=False), View(shape=(100,), strides=(1,), offset=0, mask=None, contiguous=True)))"
    );
    let (idx, _) = b.expr_idxs(&b.idx_vars());
    assert_eq!(idx.to_string(), "((idx0//10)+((idx0%10)*10))");
    let c = b.reshape(&sints(&[10, 10])).unwrap();
    let (idx, _) = c.expr_idxs(&c.idx_vars());
    assert_eq!(idx.to_string(), "(idx0+(idx1*10))");
    let sym = ShapeTracker::from_shape(&[Node::var("n", 1, 8), Node::cst(3)]);
    assert_eq!(
        sym.to_string(),
        "ShapeTracker(views=(View(shape=(n, 3), strides=(3, 1), offset=0, mask=None, contiguous=True),))"
    );
}

#[test]
fn symbolic_pad_and_shrink() {
    let n = Node::var("n", 1, 10);
    let a = ShapeTracker::from_shape(&[n.clone(), Node::cst(4)])
        .pad(&[(1, 1), (0, 0)])
        .unwrap();
    assert_eq!(a.shape(), &[&n + 2, Node::cst(4)][..]);
    let (idx, valid) = a.expr_idxs(&a.idx_vars());
    for nv in [1, 4, 10] {
        for i in 0..nv + 2 {
            let vals = [("n", nv), ("idx0", i), ("idx1", 3)];
            let env = bindings(&vals);
            let inside = (1..=nv).contains(&i);
            assert_eq!(valid.eval(&env).unwrap(), i64::from(inside), "n={nv} i={i}");
            if inside {
                assert_eq!(idx.eval(&env).unwrap(), (i - 1) * 4 + 3);
            }
        }
    }
    // Shrinking the front padding away is decided by bounds; the mask keeps the back padding.
    let s = a.shrink(&[(1, 2), (0, 4)]).unwrap();
    assert_eq!(
        s.real_strides(),
        vec![Some(Node::cst(0)), Some(Node::cst(1))]
    );
    // A non-contiguous symbolic reshape that needs a second view is unsupported, not wrong.
    let t = ShapeTracker::from_shape(&[n.clone(), Node::cst(4)])
        .permute(&[1, 0])
        .unwrap();
    assert!(matches!(t.reshape(&[&n * 4]), Err(Error::Unsupported(_))));
}

/// A symbolic batch rides through the window ops of pooling (pad, expand, a reshape that stacks
/// a second view, shrink, a reshape under the shared leading batch after a permute): at each
/// batch value every position indexes and validates exactly as the same ops on the concrete
/// tracker of that batch.
#[test]
fn symbolic_batch_through_window_ops() {
    let n = Node::var("n", 1, 6);
    let ops = |b: Sint| -> ShapeTracker {
        let c = Node::cst;
        ShapeTracker::from_shape(&[b.clone(), c(2), c(5)])
            .pad(&[(0, 0), (0, 0), (1, 2)])
            .and_then(|t| t.reshape(&[b.clone(), c(2), c(1), c(8)]))
            .and_then(|t| t.expand(&[b.clone(), c(2), c(3), c(8)]))
            .and_then(|t| t.reshape(&[b.clone(), c(2), c(24)]))
            .and_then(|t| t.shrink_nodes(&[(c(0), b.clone()), (c(0), c(2)), (c(0), c(20))]))
            .and_then(|t| t.reshape(&[b.clone(), c(2), c(4), c(5)]))
            .and_then(|t| t.permute(&[0, 2, 1, 3]))
            .and_then(|t| t.reshape(&[b.clone(), c(4), c(10)]))
            .unwrap()
    };
    let sym = ops(n.clone());
    assert!(sym.views().len() >= 2, "expected a stacked view: {sym}");
    let (idx, valid) = sym.expr_idxs(&sym.idx_vars());
    for nv in [1i64, 3, 6] {
        let fixed = ops(Node::cst(nv));
        let (fidx, fvalid) = fixed.expr_idxs(&fixed.idx_vars());
        for pos in positions(&[nv as usize, 4, 10]) {
            let p: Vec<i64> = pos.iter().map(|&v| v as i64).collect();
            let vals = [("n", nv), ("idx0", p[0]), ("idx1", p[1]), ("idx2", p[2])];
            let env = bindings(&vals);
            let ok = valid.eval(&env).unwrap();
            assert_eq!(ok, fvalid.eval(&env).unwrap(), "valid at n={nv} {pos:?}");
            if ok != 0 {
                let want = fidx.eval(&env).unwrap();
                assert_eq!(idx.eval(&env).unwrap(), want, "index at n={nv} {pos:?}");
            }
        }
    }
}

/// A padded 3×3 window read (a conv's input through pad + pool windows): `valid_size` is the
/// largest index a valid position reads, plus one (the buffer's size), where `real_size`
/// counts the padding's indices past the end.
#[test]
fn valid_size_of_a_padded_window_read() {
    let c = Node::cst;
    let st = ShapeTracker::from_shape(&[c(2), c(6), c(6)])
        .pad(&[(0, 0), (1, 1), (1, 1)])
        .and_then(|t| t.reshape(&[c(2), c(1), c(8), c(1), c(8)]))
        .and_then(|t| t.expand(&[c(2), c(3), c(8), c(3), c(8)]))
        .and_then(|t| t.reshape(&[c(2), c(24), c(24)]))
        .and_then(|t| t.shrink(&[(0, 2), (0, 18), (0, 18)]))
        .and_then(|t| t.reshape(&[c(2), c(3), c(6), c(3), c(6)]))
        .unwrap();
    let (idx, valid) = st.expr_idxs(&st.idx_vars());
    let shape: Vec<usize> = st
        .shape()
        .iter()
        .map(|d| d.as_const().unwrap() as usize)
        .collect();
    let mut top = -1;
    for pos in positions(&shape) {
        let env = |name: &str| {
            let k: usize = name.strip_prefix("idx")?.parse().ok()?;
            Some(pos[k] as i64)
        };
        if valid.eval(&env).unwrap() != 0 {
            top = top.max(idx.eval(&env).unwrap());
        }
    }
    assert_eq!(top, 71, "{st}");
    assert_eq!(st.valid_size(), top + 1, "{st}: idx {idx}, valid {valid}");
    assert!(
        st.real_size() > top + 1,
        "the plain bound counts padding: {st}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The row-major view of a shape (built without symbolic products when the shape is
    /// constant) is the view `View::new` makes from strides computed by hand: each dimension's
    /// stride the product of the later ones, 0 on size-1 dimensions; contiguous unless empty.
    #[test]
    fn row_major_view_matches_hand_strides(shape in prop::collection::vec(0usize..=5, 0..=4)) {
        let mut strides = vec![0i64; shape.len()];
        let mut acc = 1i64;
        for i in (0..shape.len()).rev() {
            if shape[i] != 1 {
                strides[i] = acc;
            }
            acc *= shape[i] as i64;
        }
        let hand = View::new(dims(&shape), strides.iter().map(|&s| Node::cst(s)).collect(), Node::cst(0), None);
        let v = View::from_shape(&dims(&shape));
        prop_assert_eq!(&v, &hand);
        prop_assert_eq!(v.contiguous(), hand.contiguous());
        prop_assert_eq!(v.strides().to_vec(), hand.strides().to_vec());
    }
}

#[test]
fn row_major_view_of_a_symbolic_shape() {
    // [n, 3, 1, 4]: strides [12, 4, 0, 1]; [3, n]: strides [n, 1].
    let n = Node::var("n", 1, 9);
    let v = View::from_shape(&[n.clone(), Node::cst(3), Node::cst(1), Node::cst(4)]);
    assert_eq!(v.strides(), &sints(&[12, 4, 0, 1])[..]);
    assert!(v.contiguous());
    let w = View::from_shape(&[Node::cst(3), n.clone()]);
    assert_eq!(w.strides(), &[n, Node::cst(1)][..]);
    assert!(w.contiguous());
}
