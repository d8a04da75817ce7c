//! Padding by loop bounds (`codegen/pad_bounds.rs`): padded convs lowered for a small device
//! (loops split at their padding gates) compute bit-identical results to the unoptimized
//! lowering on the interpreter (finite inputs), multiply only the taps inside the input (counted
//! against the taps a direct loop nest visits), and keep no gated load in any loop.

use picograd_core::codegen::lower::{buf_params, lower_ast};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::uops::{LinearKernel, UOp, UOpKind};
use picograd_core::ops::AluOp;
use picograd_core::realize::run_schedule;
use picograd_core::schedule::{schedule_for, ScheduleItem};
use picograd_core::tensor::{ConvOpts, Padding};
use picograd_core::Tensor;

#[path = "common/interp_run.rs"]
mod interp_run;
use interp_run::run;

/// One conv: input `[1, cin, h, w]`, `cout` filters of `k × k`, padding, stride, groups.
struct Conv {
    cin: usize,
    cout: usize,
    hw: [usize; 2],
    k: usize,
    pad: usize,
    stride: usize,
    groups: usize,
}

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) * 0.173)
        .collect()
}

impl Conv {
    fn out_hw(&self) -> [usize; 2] {
        self.hw
            .map(|d| (d + 2 * self.pad - self.k) / self.stride + 1)
    }

    /// The conv kernel's schedule item for a device without caches (no padded copy of the
    /// input: the conv reads through padding gates), its inputs realized.
    fn item(&self) -> ScheduleItem {
        let [h, w] = self.hw;
        let x = Tensor::from_slice(&data(self.cin * h * w, 1), &[1, self.cin, h, w]);
        let cg = self.cin / self.groups;
        let ws = [self.cout, cg, self.k, self.k];
        let wt = Tensor::from_slice(&data(ws.iter().product(), 2), &ws);
        let opts = ConvOpts::default()
            .padding(Padding::All(self.pad))
            .stride(&[self.stride, self.stride])
            .groups(self.groups);
        let y = x.conv2d(&wt, None, &opts);
        let cfg = OptConfig::small_device();
        let mut items = schedule_for(&[y.lazy().contiguous()], Some(&cfg)).unwrap();
        let last = items.pop().unwrap();
        run_schedule(&items).unwrap();
        last
    }

    /// Multiplies a direct loop nest does: taps inside the input only.
    fn inside_taps(&self) -> u64 {
        let [oh, ow] = self.out_hw();
        let inside = |o: usize, n: usize| {
            (0..self.k)
                .filter(|&t| {
                    let i = (o * self.stride + t) as i64 - self.pad as i64;
                    i >= 0 && i < n as i64
                })
                .count() as u64
        };
        let rows: u64 = (0..oh).map(|y| inside(y, self.hw[0])).sum();
        let cols: u64 = (0..ow).map(|x| inside(x, self.hw[1])).sum();
        rows * cols * (self.cout * (self.cin / self.groups)) as u64
    }
}

fn cases() -> Vec<Conv> {
    let c = |cin, cout, hw, k, pad, stride, groups| Conv {
        cin,
        cout,
        hw,
        k,
        pad,
        stride,
        groups,
    };
    vec![
        c(1, 8, [8, 8], 3, 1, 1, 1),
        c(3, 4, [7, 9], 3, 1, 1, 1),
        c(2, 4, [9, 7], 3, 2, 1, 1),
        c(2, 6, [11, 9], 5, 2, 2, 1),
        c(3, 3, [7, 5], 3, 1, 2, 1),
        c(4, 4, [6, 7], 3, 1, 1, 4),
    ]
}

/// How often each UOp runs: the product of its enclosing loops' (constant) trip counts.
fn executed(lk: &LinearKernel, pick: impl Fn(&UOp) -> bool) -> u64 {
    let konst = |i: u32| match &lk.uops[i as usize].kind {
        UOpKind::Const(s) => s.as_i64(),
        k => panic!("loop bound is not a constant: {k:?}"),
    };
    let mut trips: Vec<u64> = Vec::new();
    let mut n = 0;
    for u in &lk.uops {
        match u.kind {
            UOpKind::Loop => trips.push((konst(u.src[1]) - konst(u.src[0])) as u64),
            UOpKind::EndLoop => {
                trips.pop();
            }
            _ if pick(u) => n += trips.iter().product::<u64>(),
            _ => {}
        }
    }
    n
}

fn multiplies(u: &UOp) -> bool {
    let mul = matches!(
        u.kind,
        UOpKind::Alu(AluOp::Fma | AluOp::MulAcc | AluOp::Mul)
    );
    mul && u.dtype.is_float()
}

fn gated_loads(u: &UOp) -> bool {
    u.kind == UOpKind::Load && u.src.len() == 3
}

#[test]
fn split_padding_is_bit_identical_and_multiplies_only_inside_taps() {
    let cfg = OptConfig::small_device();
    for (ci, case) in cases().iter().enumerate() {
        let item = case.item();
        for fused in [false, true] {
            let plain = lower_ast(&item.ast, buf_params(&item), None, fused).unwrap();
            let split = lower_ast(&item.ast, buf_params(&item), Some(&cfg), fused).unwrap();
            assert_eq!(
                run(&split, &item),
                run(&plain, &item),
                "case {ci} fused {fused}"
            );
            assert!(
                executed(&plain, gated_loads) > 0,
                "case {ci}: no padding gates"
            );
            assert_eq!(
                executed(&split, gated_loads),
                0,
                "case {ci}: gated loads left"
            );
            assert_eq!(
                executed(&split, multiplies),
                case.inside_taps(),
                "case {ci}: multiplies"
            );
        }
    }
}

#[test]
fn the_interior_loop_has_no_gate() {
    let case = &cases()[0];
    let item = case.item();
    let cfg = OptConfig::small_device();
    let lk = lower_ast(&item.ast, buf_params(&item), Some(&cfg), true).unwrap();
    let text = picograd_core::codegen::c::render_kernel(&lk, &Default::default()).unwrap();
    // The output rows 1..7 of an 8-row conv with padding 1 form one loop over interior rows.
    let interior = text
        .find("= 1; ")
        .and_then(|at| text[at..].find("< 7;").map(|n| at + n))
        .expect("no loop over the interior rows 1..7");
    let body = &text[interior..];
    let body = &body[..body.find("\n  }\n").unwrap_or(body.len())];
    assert!(!body.contains(" ? "), "a gate inside the interior:\n{text}");
    assert!(
        body.contains("__builtin_fmaf"),
        "no taps in the interior:\n{text}"
    );
}

/// How many UOps `pick` selects in the code (copies, not executions).
fn static_count(lk: &LinearKernel, pick: impl Fn(&UOp) -> bool) -> usize {
    lk.uops.iter().filter(|u| pick(u)).count()
}

#[test]
fn the_code_budget_bounds_each_split_and_keeps_gates_beyond_it() {
    // Every loop of an 8×8 conv padded by 1 splits into 3 parts (border, interior, border).
    // A budget of 1 or 2 copies (size mode's) keeps the gates; 3 splits every loop; all stay
    // bit-identical to the unoptimized lowering.
    let case = &cases()[0];
    let item = case.item();
    let plain = lower_ast(&item.ast, buf_params(&item), None, true).unwrap();
    let want = run(&plain, &item);
    for budget in [1, 2, 3] {
        let cfg = OptConfig {
            max_unrolled: budget,
            max_accs: 1,
            ..OptConfig::small_device()
        };
        let lk = lower_ast(&item.ast, buf_params(&item), Some(&cfg), true).unwrap();
        assert_eq!(run(&lk, &item), want, "budget {budget}");
        let (copies, gated) = (static_count(&lk, multiplies), executed(&lk, gated_loads));
        if budget < 3 {
            // The tile (c·w within the budget) makes the only copies of the tap.
            assert!(copies <= budget, "budget {budget}: {copies} copies");
            assert!(gated > 0, "budget {budget}: the gates were peeled");
        } else {
            assert_eq!(gated, 0, "budget 3: gated loads left");
        }
    }
}

/// `out[i - 5] = in[(i + 7995) % 8000]` for `i` in `[lo, 10)`, as UOps: the wrapped index of a
/// padded view, read where its bounds may or may not prove the wrap.
fn wrapped_index(lo: i64) -> Vec<UOp> {
    use picograd_core::dtype::DType;
    use picograd_core::ops::Scalar;
    let u = |kind, dtype, src: Vec<u32>| UOp { kind, dtype, src };
    let c = |v: i64| {
        u(
            UOpKind::Const(Scalar::from_i64(v, DType::I32)),
            DType::I32,
            vec![],
        )
    };
    let g = |idx, writable| u(UOpKind::DefineGlobal { idx, writable }, DType::I8, vec![]);
    let alu = |op, src| u(UOpKind::Alu(op), DType::I32, src);
    vec![
        g(0, true),                                   // 0
        g(1, false),                                  // 1
        c(lo),                                        // 2
        c(10),                                        // 3
        u(UOpKind::Loop, DType::I32, vec![2, 3]),     // 4
        c(7995),                                      // 5
        alu(AluOp::Add, vec![4, 5]),                  // 6
        c(8000),                                      // 7
        alu(AluOp::Mod, vec![6, 7]),                  // 8
        u(UOpKind::Load, DType::I8, vec![1, 8]),      // 9
        c(-5),                                        // 10
        alu(AluOp::Add, vec![4, 10]),                 // 11
        u(UOpKind::Store, DType::I8, vec![0, 11, 9]), // 12
        u(UOpKind::EndLoop, DType::I32, vec![4]),     // 13
    ]
}

/// `x % c` whose operand the loop's bounds keep in `[c, 2c)` becomes `x - c` (`(i + 7995) %
/// 8000` for `i >= 5`); when the bounds span a wrap, the `%` stays.
#[test]
fn a_bounded_wrapped_index_loses_its_modulo() {
    use picograd_core::codegen::pad_bounds::pad_bounds;
    let has_mod = |us: &[UOp]| us.iter().any(|u| u.kind == UOpKind::Alu(AluOp::Mod));
    let folded = pad_bounds(wrapped_index(5));
    assert!(!has_mod(&folded), "{folded:?}");
    let minus_c = folded
        .iter()
        .any(|u| matches!(u.kind, UOpKind::Const(s) if s.as_i64() == -8000));
    assert!(minus_c, "no `- 8000` offset: {folded:?}");
    assert!(
        has_mod(&pad_bounds(wrapped_index(0))),
        "i + 7995 spans 8000 for i in [0, 10)"
    );
}

/// `out[i] = (len - 2 < i && i < len) ? i + 100 : i` for `i` in `[0, 10)`, `len` a kernel
/// variable in `[1, 12]` (a KV cache's row `len - 1`), as UOps; `len - 2` is computed inside
/// the loop (invariant there).
fn symbolic_row() -> LinearKernel {
    use picograd_core::codegen::uops::{BufParam, KernelCost};
    use picograd_core::dtype::DType;
    use picograd_core::ops::Scalar;
    let u = |kind, dtype, src: Vec<u32>| UOp { kind, dtype, src };
    let c = |v: i64| {
        u(
            UOpKind::Const(Scalar::from_i64(v, DType::I32)),
            DType::I32,
            vec![],
        )
    };
    let alu = |op, dtype, src| u(UOpKind::Alu(op), dtype, src);
    let uops = vec![
        u(
            UOpKind::DefineGlobal {
                idx: 0,
                writable: true,
            },
            DType::I32,
            vec![],
        ), // 0
        u(
            UOpKind::DefineVar {
                name: "len".into(),
                min: 1,
                max: 12,
            },
            DType::I32,
            vec![],
        ), // 1
        c(0),                                          // 2
        c(10),                                         // 3
        u(UOpKind::Loop, DType::I32, vec![2, 3]),      // 4
        c(-2),                                         // 5
        alu(AluOp::Add, DType::I32, vec![1, 5]),       // 6: len - 2
        alu(AluOp::CmpLt, DType::Bool, vec![6, 4]),    // 7: len - 2 < i
        alu(AluOp::CmpLt, DType::Bool, vec![4, 1]),    // 8: i < len
        alu(AluOp::And, DType::Bool, vec![7, 8]),      // 9
        c(100),                                        // 10
        alu(AluOp::Add, DType::I32, vec![4, 10]),      // 11
        alu(AluOp::Where, DType::I32, vec![9, 11, 4]), // 12
        u(UOpKind::Store, DType::I32, vec![0, 4, 12]), // 13
        u(UOpKind::EndLoop, DType::I32, vec![4]),      // 14
    ];
    LinearKernel {
        name: "sym_row".into(),
        uops,
        bufs: vec![BufParam {
            dtype: DType::I32,
            size: 10,
            writable: true,
        }],
        vars: vec![("len".into(), 1, 12)],
        cost: KernelCost::default(),
    }
}

/// A loop whose gates compare its variable with a kernel variable plus constants splits at
/// those (clamped) points: no comparison is left, and the values equal the unsplit kernel's
/// and the formula's at every value of the variable, including ones that put both points
/// outside the loop's range.
#[test]
fn gates_on_a_kernel_variable_split_at_symbolic_points() {
    use picograd_core::codegen::pad_bounds::pad_bounds;
    use picograd_core::device::Device;
    let plain = symbolic_row();
    let split = LinearKernel {
        uops: pad_bounds(plain.uops.clone()),
        ..plain.clone()
    };
    let cmps = |k: &LinearKernel| {
        k.uops
            .iter()
            .filter(|u| u.kind == UOpKind::Alu(AluOp::CmpLt))
            .count()
    };
    let loops = |k: &LinearKernel| k.uops.iter().filter(|u| u.kind == UOpKind::Loop).count();
    assert_eq!(loops(&split), 3, "{:?}", split.uops);
    assert!(
        split
            .uops
            .iter()
            .all(|u| u.kind != UOpKind::Alu(AluOp::And)),
        "gates left: {:?}",
        split.uops
    );
    assert!(cmps(&split) < cmps(&plain));
    let dev = picograd_core::Interp::new();
    let mem = dev.allocator();
    for len in 1..=12i64 {
        let mut outs = Vec::new();
        for k in [&plain, &split] {
            let id = mem.alloc(40).unwrap();
            dev.compile(k).unwrap().run(&[id], &[len]).unwrap();
            let mut b = vec![0u8; 40];
            mem.copy_out(id, &mut b).unwrap();
            outs.push(
                b.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                    .collect::<Vec<_>>(),
            );
        }
        let want: Vec<i32> = (0..10)
            .map(|i| {
                if i == len - 1 {
                    i as i32 + 100
                } else {
                    i as i32
                }
            })
            .collect();
        assert_eq!(outs[0], want, "unsplit, len {len}");
        assert_eq!(outs[1], want, "split, len {len}");
    }
}
