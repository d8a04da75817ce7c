//! Backends agree: random programs of tensor ops give the same values on the interpreter, on
//! compiled C (Clang), and in an eager reference evaluator written here on flat arrays (it shares
//! no code with the ShapeTracker, the scheduler or codegen). Integers must match exactly, floats
//! within a small relative tolerance; and the interpreter lowering kernels as Clang does (fused
//! multiply-adds on an FMA host) must match Clang bit for bit.

use std::sync::Arc;

use picograd::device::Device;
use picograd::ops::{AluOp, ReduceOp};
use picograd::{DType, Tensor};
use proptest::prelude::*;

/// The eager reference: a row-major array of f64 values.
#[derive(Clone, Debug)]
struct Nd {
    shape: Vec<usize>,
    data: Vec<f64>,
}

impl Nd {
    fn strides(shape: &[usize]) -> Vec<usize> {
        let mut s = vec![1; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            s[i] = s[i + 1] * shape[i + 1];
        }
        s
    }
    fn unravel(shape: &[usize], mut i: usize) -> Vec<usize> {
        let mut out = vec![0; shape.len()];
        for a in (0..shape.len()).rev() {
            out[a] = i % shape[a];
            i /= shape[a];
        }
        out
    }
    fn map_positions(&self, shape: Vec<usize>, f: impl Fn(&[usize]) -> Option<Vec<usize>>) -> Nd {
        let st = Nd::strides(&self.shape);
        let n: usize = shape.iter().product();
        let data = (0..n)
            .map(|i| match f(&Nd::unravel(&shape, i)) {
                Some(src) => self.data[src.iter().zip(&st).map(|(a, b)| a * b).sum::<usize>()],
                None => 0.0,
            })
            .collect();
        Nd { shape, data }
    }
    fn permute(&self, order: &[usize]) -> Nd {
        let shape = order.iter().map(|&a| self.shape[a]).collect();
        self.map_positions(shape, |p| {
            let mut src = vec![0; p.len()];
            for (i, &a) in order.iter().enumerate() {
                src[a] = p[i];
            }
            Some(src)
        })
    }
    fn pad(&self, arg: &[(usize, usize)]) -> Nd {
        let shape = self
            .shape
            .iter()
            .zip(arg)
            .map(|(d, (b, e))| d + b + e)
            .collect();
        self.map_positions(shape, |p| {
            p.iter()
                .zip(arg)
                .zip(&self.shape)
                .map(|((&x, &(b, _)), &d)| (x >= b && x - b < d).then(|| x - b))
                .collect()
        })
    }
    fn shrink(&self, arg: &[(usize, usize)]) -> Nd {
        let shape = arg.iter().map(|(b, e)| e - b).collect();
        self.map_positions(shape, |p| {
            Some(p.iter().zip(arg).map(|(x, (b, _))| x + b).collect())
        })
    }
    fn flip(&self, axis: usize) -> Nd {
        let d = self.shape[axis];
        self.map_positions(self.shape.clone(), |p| {
            let mut s = p.to_vec();
            s[axis] = d - 1 - p[axis];
            Some(s)
        })
    }
    fn stride2(&self, axis: usize) -> Nd {
        let mut shape = self.shape.clone();
        shape[axis] = shape[axis].div_ceil(2);
        self.map_positions(shape, |p| {
            let mut s = p.to_vec();
            s[axis] = p[axis] * 2;
            Some(s)
        })
    }
    fn expand(&self, shape: &[usize]) -> Nd {
        self.map_positions(shape.to_vec(), |p| {
            Some(
                p.iter()
                    .zip(&self.shape)
                    .map(|(&x, &d)| if d == 1 { 0 } else { x })
                    .collect(),
            )
        })
    }
    fn reduce(&self, max: bool, axes: &[usize]) -> Nd {
        let shape: Vec<usize> = self
            .shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
            .collect();
        let n: usize = shape.iter().product();
        let mut data = vec![if max { f64::NEG_INFINITY } else { 0.0 }; n];
        let ost = Nd::strides(&shape);
        for (i, v) in self.data.iter().enumerate() {
            let p = Nd::unravel(&self.shape, i);
            let o: usize = p
                .iter()
                .enumerate()
                .map(|(a, &x)| if axes.contains(&a) { 0 } else { x * ost[a] })
                .sum();
            data[o] = if max { data[o].max(*v) } else { data[o] + v };
        }
        Nd { shape, data }
    }
}

/// One step of a random program; the numbers pick details given the current shape.
#[derive(Clone, Debug)]
enum Step {
    Permute(u32),
    Pad(u32),
    Shrink(u32),
    Flip(u32),
    Stride(u32),
    Reshape,
    Reduce(bool, u32),
    Binary(u8, u32),
    Unary(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<u32>().prop_map(Step::Permute),
        any::<u32>().prop_map(Step::Pad),
        any::<u32>().prop_map(Step::Shrink),
        any::<u32>().prop_map(Step::Flip),
        any::<u32>().prop_map(Step::Stride),
        Just(Step::Reshape),
        (any::<bool>(), any::<u32>()).prop_map(|(m, a)| Step::Reduce(m, a)),
        (0u8..4, any::<u32>()).prop_map(|(o, s)| Step::Binary(o, s)),
        (0u8..3).prop_map(Step::Unary),
    ]
}

/// The same program on one device and in the reference.
struct Run {
    t: Tensor,
    r: Nd,
}

fn tensor_on(nd: &Nd, dtype: DType, dev: &Arc<dyn Device>) -> Tensor {
    match dtype {
        DType::I32 => Tensor::try_from_slice_on(
            &nd.data.iter().map(|&v| v as i32).collect::<Vec<_>>(),
            &nd.shape,
            dev,
        )
        .unwrap(),
        _ => Tensor::try_from_slice_on(
            &nd.data.iter().map(|&v| v as f32).collect::<Vec<_>>(),
            &nd.shape,
            dev,
        )
        .unwrap(),
    }
}

fn values(n: usize, seed: u32) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 17) as f64 - 8.0)
        .collect()
}

fn apply(run: &mut Run, s: &Step, dtype: DType, dev: &Arc<dyn Device>) {
    let rank = run.r.shape.len();
    let shape = run.r.shape.clone();
    match *s {
        Step::Permute(k) => {
            let mut order: Vec<usize> = (0..rank).collect();
            order.rotate_left(k as usize % rank.max(1));
            if k % 2 == 1 && rank >= 2 {
                order.swap(0, rank - 1);
            }
            run.t = run.t.try_permute(&order).unwrap();
            run.r = run.r.permute(&order);
        }
        Step::Pad(k) => {
            let arg: Vec<(usize, usize)> = (0..rank)
                .map(|a| (((k >> a) & 1) as usize, ((k >> (a + 3)) & 1) as usize))
                .collect();
            run.t = run.t.try_pad(&arg).unwrap();
            run.r = run.r.pad(&arg);
        }
        Step::Shrink(k) => {
            let arg: Vec<(usize, usize)> = shape
                .iter()
                .enumerate()
                .map(|(a, &d)| {
                    let b = if d > 1 { ((k >> a) & 1) as usize } else { 0 };
                    (
                        b,
                        d - if d - b > 1 {
                            ((k >> (a + 4)) & 1) as usize
                        } else {
                            0
                        },
                    )
                })
                .collect();
            run.t = run.t.try_shrink(&arg).unwrap();
            run.r = run.r.shrink(&arg);
        }
        Step::Flip(k) => {
            let a = k as usize % rank;
            run.t = run.t.try_flip(&[a as isize]).unwrap();
            run.r = run.r.flip(a);
        }
        Step::Stride(k) => {
            let a = k as usize % rank;
            let steps: Vec<i64> = (0..rank).map(|i| if i == a { 2 } else { 1 }).collect();
            run.t = run.t.try_stride(&steps).unwrap();
            run.r = run.r.stride2(a);
        }
        Step::Reshape => {
            // Flatten the last two axes, or split a leading even axis.
            let new: Vec<usize> = if rank >= 2 {
                let mut v = shape[..rank - 2].to_vec();
                v.push(shape[rank - 2] * shape[rank - 1]);
                v
            } else if shape[0] % 2 == 0 {
                vec![2, shape[0] / 2]
            } else {
                vec![shape[0], 1]
            };
            run.t = run
                .t
                .try_reshape(&new.iter().map(|&d| d as isize).collect::<Vec<_>>())
                .unwrap();
            run.r = Nd {
                shape: new,
                data: run.r.data.clone(),
            };
        }
        Step::Reduce(max, k) => {
            let axes: Vec<usize> = (0..rank).filter(|a| (k >> a) & 1 == 1).collect();
            let axes = if axes.is_empty() {
                vec![k as usize % rank]
            } else {
                axes
            };
            let op = if max { ReduceOp::Max } else { ReduceOp::Sum };
            let ax: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
            run.t = run.t.try_reduce(op, Some(&ax), true).unwrap();
            run.r = run.r.reduce(max, &axes);
        }
        Step::Binary(o, seed) => {
            // The other operand broadcasts along the axes `seed` picks.
            let oshape: Vec<usize> = shape
                .iter()
                .enumerate()
                .map(|(a, &d)| if (seed >> a) & 1 == 1 { 1 } else { d })
                .collect();
            let other = Nd {
                data: values(oshape.iter().product(), seed),
                shape: oshape,
            };
            let ot = tensor_on(&other, dtype, dev);
            let oe = other.expand(&shape);
            let (op, f): (AluOp, fn(f64, f64) -> f64) = match o {
                0 => (AluOp::Add, |a, b| a + b),
                1 => (AluOp::Sub, |a, b| a - b),
                2 => (AluOp::Mul, |a, b| a * b),
                _ => (AluOp::Max, f64::max),
            };
            run.t = run.t.try_alu(op, &[&ot]).unwrap();
            run.r.data = run
                .r
                .data
                .iter()
                .zip(&oe.data)
                .map(|(a, b)| f(*a, *b))
                .collect();
        }
        Step::Unary(o) => {
            let f: fn(f64) -> f64 = match o {
                0 => |a| -a,
                1 => |a| a.max(0.0),
                _ => |a| a * 3.0,
            };
            let t = &run.t;
            run.t = match o {
                0 => t.try_alu(AluOp::Neg, &[]).unwrap(),
                1 => t.try_alu(AluOp::Max, &[&t.const_like(0.0)]).unwrap(),
                _ => t.try_alu(AluOp::Mul, &[&t.const_like(3.0)]).unwrap(),
            };
            run.r.data = run.r.data.iter().map(|a| f(*a)).collect();
        }
    }
    // Keep values small so f32 stays exact and i32 never wraps in the reference.
    if run.r.data.iter().any(|v| v.abs() > 1e6) {
        let z = run.t.const_like(0.0);
        run.t = run.t.try_alu(AluOp::Mul, &[&z]).unwrap();
        run.r.data.iter_mut().for_each(|v| *v = 0.0);
    }
}

fn check(got: &[f64], want: &Nd, dtype: DType, what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.data.len(), "{}: length", what);
    for (i, (g, w)) in got.iter().zip(&want.data).enumerate() {
        let ok = if dtype == DType::I32 {
            g == w
        } else {
            (g - w).abs() <= 1e-4 * w.abs().max(1.0)
        };
        prop_assert!(
            ok,
            "{}: element {} is {} but the reference says {} (shape {:?})",
            what,
            i,
            g,
            w,
            want.shape
        );
    }
    Ok(())
}

fn clang() -> Arc<dyn Device> {
    picograd::runtime::install();
    // A test that claims to run compiled code fails, never falls back, without a compiler.
    picograd::runtime::clang().expect("no C compiler: the Clang backend tests cannot run")
}

fn program(
    shape: Vec<usize>,
    steps: &[Step],
    dtype: DType,
    seed: u32,
) -> Result<(), TestCaseError> {
    let input = Nd {
        data: values(shape.iter().product(), seed),
        shape,
    };
    let interp = picograd::context::interp();
    let clang: Arc<dyn Device> = clang();
    // The interpreter lowering kernels as the Clang device does (fused multiply-adds when the
    // host has FMA) must agree with it bit for bit: these programs use only exact IEEE ops.
    let like_clang: Arc<dyn Device> =
        Arc::new(picograd::Interp::new().with_fused_mulacc(clang.fused_mulacc()));
    let mut outs = Vec::new();
    for dev in [&interp, &clang, &like_clang] {
        let mut run = Run {
            t: tensor_on(&input, dtype, dev),
            r: input.clone(),
        };
        for s in steps {
            apply(&mut run, s, dtype, dev);
        }
        outs.push((
            run.t
                .to_f64_vec()
                .map_err(|e| TestCaseError::fail(e.to_string()))?,
            run.r,
        ));
    }
    check(&outs[0].0, &outs[0].1, dtype, "interp")?;
    check(&outs[1].0, &outs[1].1, dtype, "clang")?;
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    prop_assert_eq!(
        bits(&outs[2].0),
        bits(&outs[1].0),
        "interp lowered like clang differs from clang"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_f32_programs_agree(shape in prop::collection::vec(1usize..5, 1..4), steps in prop::collection::vec(step(), 1..7), seed in any::<u32>()) {
        program(shape, &steps, DType::F32, seed)?;
    }

    #[test]
    fn random_i32_programs_agree(shape in prop::collection::vec(1usize..5, 1..4), steps in prop::collection::vec(step(), 1..7), seed in any::<u32>()) {
        program(shape, &steps, DType::I32, seed)?;
    }
}

#[test]
fn every_reduce_axis_combination_agrees() {
    for mask in 1u32..8 {
        for max in [false, true] {
            program(vec![2, 3, 4], &[Step::Reduce(max, mask)], DType::F32, mask).unwrap();
            program(
                vec![3, 1, 2],
                &[Step::Pad(mask), Step::Reduce(max, mask)],
                DType::I32,
                mask,
            )
            .unwrap();
        }
    }
}

#[test]
fn clang_really_compiles() {
    let dev = clang();
    assert_eq!(dev.name(), "CLANG");
    let before = picograd::realize::counters().compiled;
    let t = Tensor::try_from_slice_on(&[1.5f32, -2.0, 3.25], &[3], &dev).unwrap();
    // A kernel no other test makes: compiled here, by the C compiler.
    let y = t
        .try_alu(AluOp::Mul, &[&t.const_like(17.0)])
        .unwrap()
        .try_alu(AluOp::Sub, &[&t.const_like(0.125)])
        .unwrap();
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        vec![1.5 * 17.0 - 0.125, -34.125, 3.25 * 17.0 - 0.125]
    );
    assert!(picograd::realize::counters().compiled > before);
}

#[test]
fn bool_ops_agree() {
    // Bools compute on 0/1 and convert back: + is or, * is and, - is xor, neg is not.
    let (a, b) = ([true, true, false, false], [true, false, true, false]);
    let want: [(AluOp, [bool; 4]); 4] = [
        (AluOp::Add, [true, true, true, false]),
        (AluOp::Mul, [true, false, false, false]),
        (AluOp::Sub, [false, true, true, false]),
        (AluOp::Max, [true, true, true, false]),
    ];
    for dev in [picograd::context::interp(), clang()] {
        let ta = Tensor::try_from_slice_on(&a, &[4], &dev).unwrap();
        let tb = Tensor::try_from_slice_on(&b, &[4], &dev).unwrap();
        for (op, w) in want {
            assert_eq!(
                ta.try_alu(op, &[&tb]).unwrap().to_vec::<bool>().unwrap(),
                w,
                "{op} on {}",
                dev.name()
            );
        }
        assert_eq!(
            ta.try_alu(AluOp::Neg, &[])
                .unwrap()
                .to_vec::<bool>()
                .unwrap(),
            [false, false, true, true],
            "neg on {}",
            dev.name()
        );
    }
}

#[test]
fn tensors_move_between_devices_with_gradients() {
    let interp = picograd::context::interp();
    let clang = clang();
    let x = Tensor::try_from_slice_on(&[1.0f32, -2.0, 3.0], &[3], &interp)
        .unwrap()
        .requires_grad_(true);
    let y = x.to_device(&clang);
    assert_eq!(y.device().name(), "CLANG");
    let z = y.mul(&y).to_device(&interp).sum_all();
    assert_eq!(z.item::<f32>().unwrap(), 14.0);
    let g = z.gradient(&[&x]).unwrap();
    assert_eq!(g[0].device().name(), "INTERP");
    assert_eq!(g[0].to_vec::<f32>().unwrap(), vec![2.0, -4.0, 6.0]);
    // Mixing devices in one op is an error naming both.
    let e = x
        .try_alu(AluOp::Add, &[&y])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("INTERP") && e.contains("CLANG"), "{e}");
}

#[test]
fn shards_on_two_backends_agree_with_one() {
    let clang = clang();
    let interp = picograd::context::interp();
    let x = Tensor::try_from_slice_on(
        &(0..24).map(|i| i as f32 * 0.25 - 3.0).collect::<Vec<_>>(),
        &[6, 4],
        &clang,
    )
    .unwrap();
    let s = x.shard(&[clang.clone(), interp.clone()], 0);
    let parts = s.shards().unwrap();
    assert_eq!(
        (parts[0].device().name(), parts[1].device().name()),
        ("CLANG", "INTERP")
    );
    let y = s.mul(&s).sub(1.0).sum(&[1], false);
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        x.mul(&x).sub(1.0).sum(&[1], false).to_vec::<f32>().unwrap()
    );
}

/// Kernel outputs reuse freed large blocks without zeroing them first (the kernel writes every
/// element): results computed into a block full of stale values still match the interpreter bit
/// for bit (exact ops only), including a padded output whose zeros the kernel itself writes and
/// a reduce; a zero-filled tensor (no kernel) still comes back zeroed.
#[test]
fn outputs_in_recycled_blocks_agree() {
    // 100_003 f32 (a prime count) is above the host allocator's 256 KiB reuse threshold.
    let n = 100_003usize;
    let xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5 - 250.0).collect();
    let results = |dev: &Arc<dyn Device>| {
        let x = Tensor::try_from_slice_on(&xs, &[n], dev).unwrap();
        let mut out = Vec::new();
        for round in 0..3 {
            // A block of stale nonzero values, freed before the next outputs are allocated.
            let stale = x.mul(7.0).add(round as f64 + 1.0);
            stale.realize().unwrap();
            drop(stale);
            let padded = x.shrink(&[(0, n - 8)]).pad(&[(3, 5)]).add(1.0);
            out.push(padded.to_vec::<f32>().unwrap());
            let rows = x
                .shrink(&[(0, n - 3)])
                .reshape(&[(n - 3) as isize / 100, 100]);
            out.push(rows.sum(&[1], false).to_vec::<f32>().unwrap());
            x.mul(3.0).realize().unwrap();
            out.push(x.zeros_like().contiguous().to_vec::<f32>().unwrap());
        }
        out
    };
    let (interp, clang) = (results(&picograd::context::interp()), results(&clang()));
    let bits = |v: &[Vec<f32>]| {
        v.iter()
            .map(|r| r.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(&clang), bits(&interp));
    assert!(clang[2].iter().all(|&z| z.to_bits() == 0));
}
