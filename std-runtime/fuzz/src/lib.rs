//! Shared harness for picograd's fuzz targets: the interpreter as the device (no C compiler in
//! the loop), an allocator that refuses single allocations above [`ALLOC_CAP`] (so a reader that
//! would allocate from a declared size fails fast instead of exhausting memory: fallible
//! allocations become errors, an infallible one aborts and libFuzzer reports it), and the
//! bounds an ONNX input must keep to be run ([`small_enough`]): a fuzzed model is only loaded,
//! not run, when its literals could ask for large tensors, so a run stays in milliseconds and
//! megabytes and every report is a bug rather than a big model.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Once;

use picograd_onnx::proto::{AttributeProto, GraphProto, ModelProto, TensorProto};

/// Largest single allocation the harness allows (bytes).
pub const ALLOC_CAP: usize = 256 << 20;

/// The system allocator, refusing (null) any single allocation above [`ALLOC_CAP`].
pub struct Capped;

// SAFETY: forwards to the system allocator unchanged; only refuses some requests, which the
// `GlobalAlloc` contract allows (null means failure).
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOC_CAP {
            return std::ptr::null_mut();
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > ALLOC_CAP {
            return std::ptr::null_mut();
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > ALLOC_CAP {
            return std::ptr::null_mut();
        }
        System.realloc(ptr, layout, new_size)
    }
}

/// Makes the interpreter the default device, once per process.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        picograd_runtime::install::set_default_device(
            picograd_runtime::install::DeviceKind::Interp,
        )
        .expect("the interpreter device needs nothing");
    });
}

/// Most nodes (at any depth of subgraphs) a fuzzed model may have to be run.
pub const MAX_NODES: usize = 64;
/// Largest magnitude of an integer literal (tensor data, attributes) in a model that is run.
pub const MAX_INT: i64 = 16;
/// Largest magnitude of a finite float literal; nonzero ones must also be at least its inverse.
pub const MAX_FLOAT: f64 = 16.0;
/// Most elements of a literal tensor, and of a declared input.
pub const MAX_LITERAL: i64 = 1024;
/// Largest declared input axis (a symbolic axis runs as 1).
pub const MAX_DIM: i64 = 8;
/// Highest declared input rank.
pub const MAX_RANK: usize = 5;

fn int_ok(v: i64) -> bool {
    (-MAX_INT..=MAX_INT).contains(&v)
}

fn float_ok(v: f64) -> bool {
    !v.is_finite() || v == 0.0 || (1.0 / MAX_FLOAT..=MAX_FLOAT).contains(&v.abs())
}

fn tensor_ok(t: &TensorProto) -> bool {
    let numel = t
        .dims
        .iter()
        .try_fold(1i64, |a, &d| a.checked_mul(d.max(0)))
        .unwrap_or(i64::MAX);
    numel <= MAX_LITERAL
        && t.raw_data.len() as i64 <= MAX_LITERAL * 8
        && t.int64_data.iter().all(|&v| int_ok(v))
        && t.int32_data.iter().all(|&v| int_ok(i64::from(v)))
        && t.uint64_data.iter().all(|&v| v <= MAX_INT as u64)
        && t.float_data.iter().all(|&v| float_ok(f64::from(v)))
        && t.double_data.iter().all(|&v| float_ok(v))
        && raw_ok(t)
}

/// Raw little-endian data read as the tensor's type, bounded like the typed fields.
fn raw_ok(t: &TensorProto) -> bool {
    let b = &t.raw_data;
    match t.data_type {
        1 => b
            .chunks_exact(4)
            .all(|c| float_ok(f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))),
        11 => b
            .chunks_exact(8)
            .all(|c| float_ok(f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))),
        6 => b
            .chunks_exact(4)
            .all(|c| int_ok(i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))),
        7 | 13 => b
            .chunks_exact(8)
            .all(|c| int_ok(i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))),
        12 => b
            .chunks_exact(4)
            .all(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64 <= MAX_INT),
        // 8- and 16-bit integers and bools are small by their width; 16-bit floats can hold
        // 65504, so they are refused raw.
        2..=5 | 9 => true,
        _ => b.is_empty(),
    }
}

fn attr_ok(a: &AttributeProto, nodes: &mut usize) -> bool {
    int_ok(a.i)
        && float_ok(f64::from(a.f))
        && a.ints.iter().all(|&v| int_ok(v))
        && a.floats.iter().all(|&v| float_ok(f64::from(v)))
        && a.t.as_ref().is_none_or(tensor_ok)
        && a.tensors.iter().all(tensor_ok)
        && a.g.as_ref().is_none_or(|g| graph_ok(g, nodes))
}

fn graph_ok(g: &GraphProto, nodes: &mut usize) -> bool {
    *nodes += g.node.len();
    *nodes <= MAX_NODES
        && g.initializer.iter().all(tensor_ok)
        && g.node
            .iter()
            .all(|n| n.attribute.iter().all(|a| attr_ok(a, nodes)))
}

/// Can this fuzzed model be run within the harness's bounds? Its literals (initializers,
/// attribute values, constant tensors, at any depth) must be small numbers in small tensors,
/// and its declared inputs small shapes.
pub fn small_enough(m: &ModelProto, inputs: &[picograd_onnx::ValueSpec]) -> bool {
    let Some(g) = &m.graph else { return false };
    let mut nodes = 0;
    graph_ok(g, &mut nodes)
        && inputs.iter().all(|s| {
            s.shape
                .as_ref()
                .is_none_or(|d| d.len() <= MAX_RANK && d.iter().all(|v| v.unwrap_or(1) <= MAX_DIM))
        })
}

/// Zero-valued inputs for a model's declared inputs (f32 where the type is unknown, 1 for a
/// symbolic axis, `[1]` for an unknown rank), or `None` when a type has no picograd dtype.
pub fn zero_inputs(specs: &[picograd_onnx::ValueSpec]) -> Option<Vec<picograd_core::Tensor>> {
    specs
        .iter()
        .map(|s| {
            let dtype = match s.elem_type {
                0 => picograd_core::DType::F32,
                c => picograd_onnx::values::dtype_of(c)?,
            };
            let shape: Vec<usize> = match &s.shape {
                Some(d) => d.iter().map(|v| v.unwrap_or(1) as usize).collect(),
                None => vec![1],
            };
            picograd_core::Tensor::try_zeros(&shape, dtype).ok()
        })
        .collect()
}
