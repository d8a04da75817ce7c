//! Which values of a graph hold an ONNX low-bit type (float8, float4, int4/uint4, int2/uint2).
//! A low-bit value is a tensor of its carrier dtype at run time, so the type itself is known
//! only here: statically, from the declared types (inputs, outputs, `value_info`,
//! initializers, `Constant` tensors), from the nodes that make such values (`Cast`,
//! `CastLike`, `QuantizeLinear`) and through the nodes that only move data (`Reshape`,
//! `Transpose`, `Gather`, ...), as ONNX element types are static.
//!
//! Invariant: a name is in the map only if the graph gives it a low-bit type; handlers that
//! choose an output type from an input's (`CastLike`, `QuantizeLinear`'s zero point) read it
//! through [`Node::lowbit`](super::node::Node::lowbit).

use std::collections::HashMap;

use picograd_core::lowbit::LowBit;

use super::proto::{GraphProto, NodeProto, ValueInfoProto};
use super::values::lowbit_of;

/// The low-bit type of every value of `graph` that has one, nodes visited in `order`.
pub fn infer(graph: &GraphProto, order: &[usize]) -> HashMap<String, LowBit> {
    let mut map = HashMap::new();
    let declared = graph
        .input
        .iter()
        .chain(&graph.output)
        .chain(&graph.value_info)
        .filter_map(|v| Some((v.name.clone(), lowbit_of(elem_type(v)?)?)));
    map.extend(declared);
    let inits = graph
        .initializer
        .iter()
        .filter_map(|t| Some((t.name.clone(), lowbit_of(t.data_type)?)));
    map.extend(inits);
    for n in order.iter().filter_map(|&i| graph.node.get(i)) {
        if let (Some(kind), Some(out)) = (made_by(n, &map), n.output.first()) {
            map.insert(out.clone(), kind);
        } else if let Some(kind) = moved_from(n, &map) {
            for out in n.output.iter().filter(|o| !o.is_empty()) {
                map.insert(out.clone(), kind);
            }
        }
    }
    map
}

/// The low-bit type of the data a type-preserving node (a view, a copy, a selection) passes
/// through, when its data input has one: its outputs keep that type.
fn moved_from(n: &NodeProto, map: &HashMap<String, LowBit>) -> Option<LowBit> {
    let keeps_type = matches!(
        n.op_type.as_str(),
        "Identity"
            | "Reshape"
            | "Transpose"
            | "Squeeze"
            | "Unsqueeze"
            | "Flatten"
            | "Expand"
            | "Slice"
            | "Gather"
            | "GatherElements"
            | "GatherND"
            | "Concat"
            | "Split"
            | "Tile"
            | "DepthToSpace"
            | "SpaceToDepth"
    );
    if !keeps_type {
        return None;
    }
    n.input.first().and_then(|i| map.get(i)).copied()
}

fn elem_type(v: &ValueInfoProto) -> Option<i32> {
    v.r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .map(|t| t.elem_type)
}

/// The low-bit type of node `n`'s first output, when `n` makes one.
fn made_by(n: &NodeProto, map: &HashMap<String, LowBit>) -> Option<LowBit> {
    let attr = |name: &str| n.attribute.iter().find(|a| a.name == name);
    let input = |i: usize| n.input.get(i).and_then(|s| map.get(s)).copied();
    match n.op_type.as_str() {
        "Cast" => lowbit_of(attr("to")?.i as i32),
        "CastLike" => input(1),
        "QuantizeLinear" => input(2).or_else(|| lowbit_of(attr("output_dtype")?.i as i32)),
        "Constant" => lowbit_of(attr("value")?.t.as_ref()?.data_type),
        _ => None,
    }
}
