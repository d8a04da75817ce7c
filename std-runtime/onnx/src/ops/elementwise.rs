//! Elementwise ONNX ops: arithmetic (with ONNX's broadcasting), math functions, comparisons,
//! logic and bitwise ops, `Where`, the variadic `Sum/Mean/Max/Min`, `Clip`, `Cast`/`CastLike`.

use picograd_core::lowbit::{E8M0Round, LowBit};
use picograd_core::ops::AluOp;
use picograd_core::{Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::{dtype_of, lowbit_of, tensor_from_le_bytes, to_i64s};
use super::{math, one, Handler};

/// The handler for `op` if it is elementwise.
pub fn lookup(op: &str) -> Option<Handler> {
    unary_lookup(op)
        .or_else(|| binary_lookup(op))
        .or_else(|| other_lookup(op))
}

fn unary_lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Neg" => |n| one(n.input(0)?.neg()),
        "Abs" => |n| one(n.input(0)?.abs()),
        "Sqrt" => |n| one(n.input(0)?.sqrt()),
        "Exp" => |n| one(n.input(0)?.exp()),
        "Log" => |n| one(n.input(0)?.log()),
        "Reciprocal" => |n| one(n.input(0)?.reciprocal()),
        "Sin" => |n| one(n.input(0)?.sin()),
        "Cos" => |n| one(n.input(0)?.cos()),
        "Tan" => |n| one(n.input(0)?.tan()),
        "Sign" => |n| one(n.input(0)?.sign()),
        "Floor" => |n| one(math::floor(n.input(0)?)?),
        "Ceil" => |n| one(math::ceil(n.input(0)?)?),
        "Round" => |n| one(math::round(n.input(0)?)?),
        "Erf" => |n| one(math::erf(n.input(0)?)?),
        "Atan" => |n| one(math::atan(n.input(0)?)?),
        "Asin" => |n| one(math::asin(n.input(0)?)?),
        "Acos" => |n| one(math::acos(n.input(0)?)?),
        "Sinh" => |n| one(math::sinh(n.input(0)?)?),
        "Cosh" => |n| one(math::cosh(n.input(0)?)?),
        "Asinh" => |n| one(math::asinh(n.input(0)?)?),
        "Acosh" => |n| one(math::acosh(n.input(0)?)?),
        "Atanh" => |n| one(math::atanh(n.input(0)?)?),
        "IsNaN" => |n| one(math::isnan(n.input(0)?)?),
        "IsInf" => is_inf,
        "Not" => |n| one(n.input(0)?.logical_not()),
        "BitwiseNot" => bitwise_not,
        "Identity" => |n| one(n.input(0)?.clone()),
        _ => return None,
    })
}

fn binary_lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Add" => |n| one(n.input(0)?.try_add(n.input(1)?)?),
        "Sub" => |n| one(n.input(0)?.try_sub(n.input(1)?)?),
        "Mul" => |n| one(n.input(0)?.try_mul(n.input(1)?)?),
        "Div" => |n| one(n.input(0)?.try_div(n.input(1)?)?),
        "Pow" => pow,
        "Mod" => modulo,
        "Equal" => |n| one(n.input(0)?.try_eq(n.input(1)?)?),
        "Less" => |n| one(n.input(0)?.try_lt(n.input(1)?)?),
        "LessOrEqual" => |n| one(n.input(0)?.try_le(n.input(1)?)?),
        "Greater" => |n| one(n.input(0)?.try_gt(n.input(1)?)?),
        "GreaterOrEqual" => |n| one(n.input(0)?.try_ge(n.input(1)?)?),
        "And" | "BitwiseAnd" => |n| alu2(n, AluOp::And),
        "Or" | "BitwiseOr" => |n| alu2(n, AluOp::Or),
        "Xor" | "BitwiseXor" => |n| alu2(n, AluOp::Xor),
        "BitShift" => bit_shift,
        _ => return None,
    })
}

fn other_lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Where" => |n| one(n.input(0)?.try_where(n.input(1)?, n.input(2)?)?),
        "Sum" => |n| variadic(n, |a, b| a.try_add(b)),
        "Max" => |n| variadic(n, |a, b| a.try_maximum(b)),
        "Min" => |n| variadic(n, |a, b| a.try_minimum(b)),
        "Mean" => mean,
        "Clip" => clip,
        "Cast" => cast,
        "CastLike" => cast_like,
        _ => return None,
    })
}

fn alu2(n: &Node, op: AluOp) -> Result<Vec<Tensor>> {
    one(n.input(0)?.try_alu(op, &[n.input(1)?])?)
}

fn pow(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let y = n.input(1)?;
    one(x.try_pow(y)?.cast(x.dtype()))
}

fn modulo(n: &Node) -> Result<Vec<Tensor>> {
    let (a, b) = (n.input(0)?, n.input(1)?);
    if n.int("fmod", 0) == 1 {
        return one(a.try_alu(AluOp::Mod, &[b])?);
    }
    // Python's modulo: the result takes the divisor's sign.
    let r = a.try_alu(AluOp::Mod, &[b])?;
    let signs_differ = r.try_lt(0.0)?.try_alu(AluOp::Xor, &[&b.try_lt(0.0)?])?;
    let fix = r.try_ne(0.0)?.try_alu(AluOp::And, &[&signs_differ])?;
    one(fix.try_where(&r.try_add(b)?, &r)?)
}

fn bit_shift(n: &Node) -> Result<Vec<Tensor>> {
    let (x, y) = (n.input(0)?, n.input(1)?);
    let left = match n.string("direction", "").as_str() {
        "LEFT" => true,
        "RIGHT" => false,
        d => return Err(bad("BitShift", format!("direction '{d}'"))),
    };
    // Computed on the host: exact for every width (wrapping left, arithmetic right for signed).
    let shape = Tensor::broadcast_shape("BitShift", &x.shape(), &y.shape())?;
    let xs = to_i64s(&x.try_expand(&shape)?)?;
    let ys = to_i64s(&y.try_expand(&shape)?)?;
    let d = x.dtype();
    let bits = (d.itemsize() * 8) as i64;
    let mut bytes = Vec::with_capacity(xs.len() * d.itemsize());
    for (&a, &b) in xs.iter().zip(&ys) {
        let v = match (left, b >= bits || b < 0) {
            (true, true) => 0,
            (true, false) => a.wrapping_shl(b as u32),
            (false, true) if d.is_unsigned() => 0,
            (false, true) => a >> 63,
            (false, false) if d.is_unsigned() => ((a as u64) >> b) as i64,
            (false, false) => a >> b,
        };
        bytes.extend(&v.to_le_bytes()[..d.itemsize()]);
    }
    one(tensor_from_le_bytes(&bytes, &shape, d)?)
}

fn bitwise_not(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let d = x.dtype();
    let ones = if d.is_unsigned() { d.max_value() } else { -1.0 };
    one(x.try_alu(AluOp::Xor, &[&x.const_like(ones)])?)
}

fn is_inf(n: &Node) -> Result<Vec<Tensor>> {
    let pos = n.int("detect_positive", 1) != 0;
    let neg = n.int("detect_negative", 1) != 0;
    one(math::isinf(n.input(0)?, pos, neg)?)
}

fn variadic(n: &Node, f: fn(&Tensor, &Tensor) -> Result<Tensor>) -> Result<Vec<Tensor>> {
    let mut acc = n.input(0)?.clone();
    for i in 1..n.inputs.len() {
        acc = f(&acc, n.input(i)?)?;
    }
    one(acc)
}

fn mean(n: &Node) -> Result<Vec<Tensor>> {
    let s = variadic(n, |a, b| a.try_add(b))?.remove(0);
    one(s.try_div(n.inputs.len() as f64)?)
}

fn clip(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let (lo, hi) = if n.opset < 11 {
        let lo = x.const_like(n.float("min", f32::MIN) as f64);
        let hi = x.const_like(n.float("max", f32::MAX) as f64);
        (Some(lo), Some(hi))
    } else {
        (n.opt(1).cloned(), n.opt(2).cloned())
    };
    let mut y = x.clone();
    if let Some(lo) = lo {
        y = y.try_maximum(lo.cast(x.dtype()))?;
    }
    if let Some(hi) = hi {
        y = y.try_minimum(hi.cast(x.dtype()))?;
    }
    one(y)
}

/// `Cast`: to a dtype, or rounded onto a low-bit type (held in its carrier dtype) under the
/// `saturate` attribute (default 1), as ONNX specifies.
fn cast(n: &Node) -> Result<Vec<Tensor>> {
    let code = n.int("to", 0) as i32;
    let saturate = n.int("saturate", 1) != 0;
    if let Some(kind) = lowbit_of(code) {
        return one(to_lowbit(n, n.input(0)?, kind, saturate)?);
    }
    let d = dtype_of(code).ok_or_else(|| {
        bad(
            "Cast",
            format!("target type {}", super::super::values::onnx_type_name(code)),
        )
    })?;
    one(n.input(0)?.cast(d))
}

/// `x` rounded onto `kind`; float8 e8m0 under the node's `round_mode` (default "up").
fn to_lowbit(n: &Node, x: &Tensor, kind: LowBit, saturate: bool) -> Result<Tensor> {
    if kind != LowBit::F8E8M0 {
        return x.try_to_lowbit(kind, saturate);
    }
    let mode = match n.string("round_mode", "up").as_str() {
        "up" => E8M0Round::Up,
        "nearest" => E8M0Round::Nearest,
        "down" => E8M0Round::Down,
        other => return Err(bad(n.op(), format!("round_mode '{other}'"))),
    };
    x.try_to_e8m0(saturate, mode)
}

/// `CastLike`: `Cast` to the second input's element type, low-bit types included.
fn cast_like(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    match n.lowbit(1) {
        Some(kind) => one(to_lowbit(n, x, kind, n.int("saturate", 1) != 0)?),
        None => one(x.cast(n.input(1)?.dtype())),
    }
}
