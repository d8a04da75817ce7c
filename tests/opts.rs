//! Kernel optimizations (upcast of output axes, unroll of reduce axes) change how a kernel is
//! lowered, never what it computes: each optimized kernel runs on the interpreter and on compiled
//! C and must give bit-identical results to the unoptimized kernel.

use std::sync::Arc;

use picograd::codegen::kernel::{Kernel, Opt};
use picograd::codegen::linearizer::linearize;
use picograd::codegen::uops::BufParam;
use picograd::device::{Buffer, Device};
use picograd::ops::{AluOp, ReduceOp};
use picograd::schedule::{schedule, ScheduleItem};
use picograd::Tensor;

fn bufparams(item: &ScheduleItem) -> Vec<BufParam> {
    let size = |s: &[picograd::shape::Sint]| s.iter().map(|d| d.vmax() as usize).product();
    let mut b = vec![BufParam {
        dtype: item.out.dtype(),
        size: size(item.out.shape()),
        writable: true,
    }];
    b.extend(item.inputs.iter().map(|i| BufParam {
        dtype: i.dtype(),
        size: size(i.shape()),
        writable: false,
    }));
    b
}

/// Runs `item` lowered with `opts` on `dev`, returning the output bytes.
fn run(item: &ScheduleItem, opts: &[Opt], dev: &Arc<dyn Device>) -> Vec<u8> {
    let mut k = Kernel::new(&item.ast).unwrap();
    for o in opts {
        k.apply_opt(*o).unwrap();
    }
    assert_eq!(
        k.rank() - k.first_upcast,
        opts.len(),
        "every opt adds one unrolled axis: {}",
        k.describe()
    );
    let lk = linearize(&k, bufparams(item), format!("opt_{}", k.name())).unwrap();
    let loops = lk
        .uops
        .iter()
        .filter(|u| u.kind == picograd::codegen::uops::UOpKind::Loop)
        .count();
    let looped = k.full_shape[..k.first_upcast]
        .iter()
        .filter(|d| d.as_const() != Some(1))
        .count();
    assert_eq!(
        loops,
        looped,
        "unrolled axes must not loop: {}",
        k.describe()
    );
    let prog = dev.compile(&lk).unwrap();
    let out = Buffer::new(dev.clone(), item.out.dtype(), lk.bufs[0].size).unwrap();
    let ins: Vec<Arc<Buffer>> = item
        .inputs
        .iter()
        .map(|i| {
            let src = i.realized().unwrap();
            let b = Buffer::new(dev.clone(), src.dtype(), src.len()).unwrap();
            b.copy_in(&src.to_bytes().unwrap()).unwrap();
            Arc::new(b)
        })
        .collect();
    let mut ids = vec![out.id()];
    ids.extend(ins.iter().map(|b| b.id()));
    prog.run(&ids, &[]).unwrap();
    out.to_bytes().unwrap()
}

fn single_item(t: &Tensor) -> ScheduleItem {
    let items = schedule(&[t.lazy().contiguous()]).unwrap();
    assert_eq!(items.len(), 1, "expected one kernel");
    items.into_iter().next().unwrap()
}

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
        .collect()
}

fn devices() -> Vec<Arc<dyn Device>> {
    picograd::init();
    vec![
        picograd::context::interp(),
        picograd::runtime::clang().expect("no C compiler: compiled-opt tests cannot run"),
    ]
}

#[test]
fn upcast_of_output_axes_keeps_results() {
    // Odd sizes: 7 rows (prime), 6 columns; upcast splits must divide.
    let a = Tensor::from_slice(&data(42), &[7, 6]);
    let b = Tensor::from_slice(&data(6), &[1, 6]);
    let y = a
        .try_alu(AluOp::Mul, &[&b])
        .unwrap()
        .try_alu(AluOp::Add, &[&a])
        .unwrap()
        .try_permute(&[1, 0])
        .unwrap();
    let item = single_item(&y);
    let k = Kernel::new(&item.ast).unwrap();
    let sizes: Vec<i64> = k.full_shape.iter().map(|d| d.as_const().unwrap()).collect();
    for dev in devices() {
        let base = run(&item, &[], &dev);
        for (axis, &s) in sizes.iter().enumerate().take(k.first_reduce) {
            for amount in [2, 3, 7] {
                if s % amount == 0 {
                    assert_eq!(
                        run(
                            &item,
                            &[Opt::Upcast {
                                axis,
                                amount: amount as usize
                            }],
                            &dev
                        ),
                        base,
                        "upcast {axis} by {amount} on {}",
                        dev.name()
                    );
                }
            }
        }
    }
}

#[test]
fn unroll_of_reduce_axes_keeps_results() {
    // A matmul-shaped reduce with a reduce axis of 6 and an output axis of 5 (not a multiple of 2).
    let a = Tensor::from_slice(&data(30), &[5, 1, 6]);
    let b = Tensor::from_slice(&data(24), &[1, 4, 6]);
    let y = a
        .try_alu(AluOp::Mul, &[&b])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[2]), false)
        .unwrap();
    let item = single_item(&y);
    for dev in devices() {
        let base = run(&item, &[], &dev);
        for opts in [
            vec![Opt::Unroll { axis: 0, amount: 2 }],
            vec![Opt::Unroll { axis: 0, amount: 3 }],
            vec![Opt::Unroll { axis: 0, amount: 6 }],
            vec![
                Opt::Upcast { axis: 0, amount: 5 },
                Opt::Unroll { axis: 0, amount: 2 },
            ],
            vec![
                Opt::Upcast { axis: 1, amount: 2 },
                Opt::Upcast { axis: 0, amount: 5 },
            ],
        ] {
            // Summation order inside an unrolled group is unchanged (each copy folds into one
            // accumulator in index order), so results are bit-identical.
            assert_eq!(run(&item, &opts, &dev), base, "{opts:?} on {}", dev.name());
        }
    }
}

#[test]
fn bad_opts_are_errors() {
    let a = Tensor::from_slice(&data(35), &[5, 7]);
    let y = a.try_reduce(ReduceOp::Sum, Some(&[1]), false).unwrap();
    let mut k = Kernel::new(&single_item(&y).ast).unwrap();
    let e = k
        .apply_opt(Opt::Unroll { axis: 0, amount: 2 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not split by 2"), "{e}");
    let e = k
        .apply_opt(Opt::Upcast { axis: 3, amount: 5 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such axis"), "{e}");
}
