//! The IR verifier between lowering passes: a hand-written valid kernel passes, each hand-broken
//! variant is rejected with an internal error naming the pass and the broken invariant, and
//! every kernel the real passes produce passes.

use picograd_core::codegen::lower::{lower_ast, UOP_PASSES};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::uops::{BufParam, KernelCost, LinearKernel, UOp, UOpKind};
use picograd_core::codegen::verify::verify_uops;
use picograd_core::dtype::DType;
use picograd_core::error::Error;
use picograd_core::ops::{AluOp, Scalar};

fn uop(kind: UOpKind, dtype: DType, src: &[u32]) -> UOp {
    UOp {
        kind,
        dtype,
        src: src.to_vec(),
    }
}

fn global(idx: usize, writable: bool) -> UOp {
    uop(UOpKind::DefineGlobal { idx, writable }, DType::F32, &[])
}

fn int(v: i64) -> UOp {
    uop(
        UOpKind::Const(Scalar::from_i64(v, DType::I32)),
        DType::I32,
        &[],
    )
}

/// `for i in 0..4: out[i] = x[i] + x[i]`.
fn valid() -> LinearKernel {
    let f = DType::F32;
    LinearKernel {
        name: "hand".into(),
        uops: vec![
            global(0, true),
            global(1, false),
            int(0),
            int(4),
            uop(UOpKind::Loop, DType::I32, &[2, 3]),
            uop(UOpKind::Load, f, &[1, 4]),
            uop(UOpKind::Alu(AluOp::Add), f, &[5, 5]),
            uop(UOpKind::Store, f, &[0, 4, 6]),
            uop(UOpKind::EndLoop, DType::I32, &[4]),
        ],
        bufs: vec![
            BufParam {
                dtype: f,
                size: 4,
                writable: true,
            },
            BufParam {
                dtype: f,
                size: 4,
                writable: false,
            },
        ],
        vars: vec![],
        cost: KernelCost::default(),
    }
}

/// The verifier's message for `k` after a pass called `broken_pass`.
fn rejected(k: &LinearKernel) -> String {
    match verify_uops("broken_pass", k) {
        Err(e @ Error::Internal(_)) => e.to_string(),
        other => panic!("expected an internal error, got {other:?} for\n{k}"),
    }
}

fn assert_names(k: &LinearKernel, needles: &[&str]) {
    let msg = rejected(k);
    assert!(msg.contains("broken_pass"), "the pass is named: {msg}");
    assert!(msg.contains("hand"), "the kernel is named: {msg}");
    for n in needles {
        assert!(msg.contains(n), "`{n}` in: {msg}");
    }
}

#[test]
fn a_valid_hand_written_kernel_passes() {
    verify_uops("hand", &valid()).unwrap();
}

#[test]
fn a_use_before_its_definition_is_named() {
    let mut k = valid();
    // The add reads the store's slot: a source after its user.
    k.uops[6].src = vec![5, 7];
    assert_names(&k, &["uop 6", "source 7 is not defined before its use"]);
}

#[test]
fn unbalanced_loops_are_named() {
    let mut k = valid();
    k.uops.pop();
    assert_names(&k, &["loop 4 is never closed"]);

    let mut k = valid();
    k.uops[8].src = vec![3];
    assert_names(
        &k,
        &["uop 8", "closes Some(3)", "innermost open loop is Some(4)"],
    );
}

#[test]
fn a_value_used_after_its_loop_closed_is_named() {
    let mut k = valid();
    // A second store after the loop, of the value loaded inside it.
    k.uops.push(uop(UOpKind::Store, DType::F32, &[0, 2, 5]));
    assert_names(
        &k,
        &["uop 9", "source 5", "defined inside loop 4, which closed"],
    );
}

#[test]
fn undeclared_and_misused_buffers_are_named() {
    let mut k = valid();
    k.uops[1] = global(2, false);
    assert_names(&k, &["buffer 2 is not among the 2 declared"]);

    let mut k = valid();
    k.uops[7].src = vec![1, 4, 6];
    assert_names(&k, &["uop 7", "stores to read-only buffer 1"]);

    let mut k = valid();
    k.uops[5].src = vec![3, 4];
    assert_names(&k, &["uop 5", "not a declared buffer"]);

    let mut k = valid();
    k.uops.push(uop(
        UOpKind::DefineVar {
            name: "n".into(),
            min: 1,
            max: 9,
        },
        DType::I32,
        &[],
    ));
    assert_names(&k, &["variable n [1, 9] is not in the kernel's vars"]);
}

#[test]
fn inconsistent_dtypes_and_arity_are_named() {
    let mut k = valid();
    k.uops[6].src = vec![5, 2];
    assert_names(&k, &["uop 6", "add mixes dtypes", "f32", "i32"]);

    let mut k = valid();
    k.uops[5].src = vec![1, 4, 0];
    assert_names(&k, &["uop 5", "gate is f32, not bool"]);

    let mut k = valid();
    k.uops[6].src = vec![5];
    assert_names(&k, &["uop 6", "1 sources, not 2"]);

    let mut k = valid();
    k.uops[7] = uop(UOpKind::Assign, DType::F32, &[5, 6]);
    assert_names(&k, &["uop 7", "not an accumulator"]);
}

/// Every kernel of a small model, lowered through all passes (the lowering itself verifies in
/// debug builds), passes the verifier; the sequence of UOp passes is the documented one.
#[test]
fn real_kernels_pass_after_every_pass() {
    use picograd_core::schedule::schedule;
    use picograd_core::Tensor;
    let names: Vec<&str> = UOP_PASSES.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["hoist"]);
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = Tensor::from_slice(&[0.5f32, -1.0, 2.0, 0.25, 1.5, -0.75], &[3, 2]);
    let y = a.matmul(&b).relu().sum(&[1], false).exp();
    for item in schedule(&[y.lazy().contiguous()]).unwrap() {
        let bufs = picograd_core::codegen::lower::buf_params(&item);
        for cfg in [None, Some(OptConfig::for_vec_width(4))] {
            let lk = lower_ast(&item.ast, bufs.clone(), cfg.as_ref(), false).unwrap();
            verify_uops("test", &lk).unwrap();
        }
    }
}

/// `for i in 0..1: out[0..4] = x[0..4] + splat(x[0])` in vector UOps, then `out[0] = lane 1`.
fn valid_vector() -> LinearKernel {
    let f = DType::F32;
    let mut k = valid();
    k.uops = vec![
        global(0, true),
        global(1, false),
        int(0),
        int(1),
        uop(UOpKind::Loop, DType::I32, &[2, 3]),
        uop(
            UOpKind::VecLoad {
                lanes: 4,
                stride: 1,
            },
            f,
            &[1, 2],
        ),
        uop(UOpKind::Load, f, &[1, 2]),
        uop(UOpKind::Vectorize, f, &[6, 6, 6, 6]),
        uop(
            UOpKind::VecAlu {
                op: AluOp::Add,
                lanes: 4,
            },
            f,
            &[5, 7],
        ),
        uop(UOpKind::VecStore { lanes: 4 }, f, &[0, 2, 8]),
        uop(UOpKind::Gep(1), f, &[8]),
        uop(UOpKind::Store, f, &[0, 2, 10]),
        uop(UOpKind::EndLoop, DType::I32, &[4]),
    ];
    k
}

#[test]
fn vector_uops_pass_and_lane_mismatches_are_named() {
    verify_uops("hand", &valid_vector()).expect("the vector kernel is valid");
    // A scalar op reading a vector.
    let mut k = valid_vector();
    k.uops[10] = uop(UOpKind::Alu(AluOp::Neg), DType::F32, &[8]);
    assert_names(&k, &["uop 10", "source 0 has 4 lanes", "takes scalars"]);
    // A vector op of 4 lanes reading a vector of 2.
    let mut k = valid_vector();
    k.uops[7] = uop(UOpKind::Vectorize, DType::F32, &[6, 6]);
    assert_names(&k, &["uop 8", "source 1 has 2 lanes"]);
    // A lane that is not there.
    let mut k = valid_vector();
    k.uops[10] = uop(UOpKind::Gep(4), DType::F32, &[8]);
    assert_names(&k, &["uop 10", "gep reads a lane"]);
    // A vector store of a scalar.
    let mut k = valid_vector();
    k.uops[9] = uop(UOpKind::VecStore { lanes: 4 }, DType::F32, &[0, 2, 6]);
    assert_names(&k, &["uop 9", "source 2 has 1 lanes"]);
}
