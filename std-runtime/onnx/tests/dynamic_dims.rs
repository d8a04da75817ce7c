//! ONNX dynamic dimensions stay symbolic in `Model::run`: a model whose input axis is the
//! `dim_param` `batch` (MatMul + Add + Relu, Gemm + Softmax, ReduceSum and ReduceMean over the
//! batch) runs at several batch sizes with one capture, scheduling and compiling each kernel
//! once (counted), and every output equals a naive f64 reference. So does a CNN over the batch
//! (Conv, Relu, MaxPool, AveragePool, Flatten, Gemm, GlobalAveragePool, Reshape `[0, 4]` and
//! `[-1, 16]`). Sizes above a maximum set
//! with `with_max_dim` are errors; above the default one the axis stays concrete.
//!
//! The work counters are process-wide: one test function measures.

#[allow(dead_code)] // the shared builders; this test uses two
mod common;

use picograd_core::realize::{counters, Counters};
use picograd_core::Tensor;
use picograd_onnx::proto::*;
use picograd_onnx::Model;

use common::{attr_ints, batch_cnn, batch_cnn_weights, weight};

const IN: usize = 4;
const HID: usize = 8;
const OUT: usize = 3;

fn node(op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: output.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute: attrs,
        ..Default::default()
    }
}

/// A float value whose `None` dims are the `dim_param` `batch`.
fn value(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            dim_value: *d,
            dim_param: d.is_none().then(|| "batch".to_string()),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type: 1,
                shape: Some(TensorShapeProto { dim }),
            }),
            ..Default::default()
        }),
    }
}

fn ramp(n: usize, scale: f32, shift: f32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * scale + shift)
        .collect()
}

fn keepdims0() -> AttributeProto {
    AttributeProto {
        name: "keepdims".into(),
        r#type: attr_type::INT,
        i: 0,
        ..Default::default()
    }
}

/// x[batch,4] → MatMul(w1) → Add(b1) → Relu = r; y = Softmax(Gemm(r, w2, b2));
/// s = ReduceSum(r, axis 0); m = ReduceMean(r, axis 0).
fn model() -> Model {
    let graph = GraphProto {
        name: "dyn".into(),
        node: vec![
            node("MatMul", &["x", "w1"], "h", vec![]),
            node("Add", &["h", "b1"], "a", vec![]),
            node("Relu", &["a"], "r", vec![]),
            node("Gemm", &["r", "w2", "b2"], "l", vec![]),
            node("Softmax", &["l"], "y", vec![]),
            node("ReduceSum", &["r", "axes"], "s", vec![keepdims0()]),
            node(
                "ReduceMean",
                &["r"],
                "m",
                vec![attr_ints("axes", &[0]), keepdims0()],
            ),
        ],
        initializer: vec![
            weight("w1", &[IN as i64, HID as i64], &ramp(IN * HID, 0.1, 0.0)),
            weight("b1", &[HID as i64], &ramp(HID, 0.05, 0.1)),
            weight("w2", &[HID as i64, OUT as i64], &ramp(HID * OUT, 0.2, -0.1)),
            weight("b2", &[OUT as i64], &[0.1, 0.0, -0.1]),
            TensorProto {
                name: "axes".into(),
                dims: vec![1],
                data_type: 7,
                int64_data: vec![0],
                ..Default::default()
            },
        ],
        input: vec![value("x", &[None, Some(IN as i64)])],
        output: vec![
            value("y", &[None, Some(OUT as i64)]),
            value("s", &[Some(HID as i64)]),
            value("m", &[Some(HID as i64)]),
        ],
        ..Default::default()
    };
    let proto = ModelProto {
        ir_version: 8,
        // ReduceSum takes its axes as an input from opset 13, ReduceMean as an attribute
        // until 18.
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 17,
        }],
        graph: Some(graph),
        ..Default::default()
    };
    Model::from_proto(proto, "dynamic batch model").unwrap()
}

/// The model in f64, naively: (softmax rows, column sums of r, column means of r).
fn reference(x: &[f32], batch: usize) -> [Vec<f64>; 3] {
    let (w1, b1) = (ramp(IN * HID, 0.1, 0.0), ramp(HID, 0.05, 0.1));
    let (w2, b2) = (ramp(HID * OUT, 0.2, -0.1), [0.1f32, 0.0, -0.1]);
    let (mut y, mut s) = (Vec::new(), vec![0.0f64; HID]);
    for row in x.chunks(IN) {
        let r: Vec<f64> = (0..HID)
            .map(|j| {
                let dot: f64 = (0..IN)
                    .map(|k| row[k] as f64 * w1[k * HID + j] as f64)
                    .sum();
                (dot + b1[j] as f64).max(0.0)
            })
            .collect();
        r.iter().zip(&mut s).for_each(|(v, acc)| *acc += v);
        let l: Vec<f64> = (0..OUT)
            .map(|o| (0..HID).map(|j| r[j] * w2[j * OUT + o] as f64).sum::<f64>() + b2[o] as f64)
            .collect();
        let mx = l.iter().cloned().fold(f64::MIN, f64::max);
        let e: Vec<f64> = l.iter().map(|v| (v - mx).exp()).collect();
        let z: f64 = e.iter().sum();
        y.extend(e.iter().map(|v| v / z));
    }
    let m = s.iter().map(|v| v / batch as f64).collect();
    [y, s, m]
}

/// One call of a size sweep: each output against its reference, and — on every call after the
/// first (`first` remembers it) — nothing scheduled, lowered or compiled between `before` and
/// `after`.
fn check_call(
    what: &str,
    names: &[&str],
    outs: &[Tensor],
    want: &[Vec<f64>],
    (before, after): (Counters, Counters),
    first: &mut bool,
) {
    for (name, (o, w)) in names.iter().zip(outs.iter().zip(want)) {
        assert_close(&format!("{name} at {what}"), &o.to_f64_vec().unwrap(), w);
    }
    if std::mem::replace(first, false) {
        return;
    }
    assert_eq!(after.scheduled, before.scheduled, "{what}: scheduled");
    assert_eq!(after.lowered, before.lowered, "{what}: lowered");
    assert_eq!(after.compiled, before.compiled, "{what}: compiled");
}

fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn a_dim_param_batch_runs_every_size_with_one_capture() {
    let m = model();
    assert_eq!(m.dim_params(), vec!["batch".to_string()]);
    assert_eq!(
        m.dim_bounds("batch"),
        (1, picograd_onnx::dims::DEFAULT_MAX_DIM)
    );
    let mut first = true;
    for (k, batch) in [3usize, 1, 8, 5, 2, 8].into_iter().enumerate() {
        let xs = ramp(batch * IN, 0.3, k as f32 * 0.1);
        let x = Tensor::from_slice(&xs, &[batch, IN]);
        let before = counters();
        let outs = m.run(&[x]).unwrap();
        let after = counters();
        assert_eq!(outs[0].shape(), vec![batch, OUT], "batch {batch}");
        let want = reference(&xs, batch);
        let what = format!("batch {batch}");
        check_call(
            &what,
            &["softmax", "sum", "mean"],
            &outs,
            &want,
            (before, after),
            &mut first,
        );
    }
    let s = m.cache_stats();
    assert_eq!(
        (s.captures, s.replays, s.reruns),
        (1, 5, 0),
        "one capture for every batch"
    );
    // Above the default maximum (none set): the axis stays concrete, a capture of its own.
    let big = ramp(65 * IN, 0.3, 0.0);
    let outs = m.run(&[Tensor::from_slice(&big, &[65, IN])]).unwrap();
    assert_close(
        "softmax above the default maximum",
        &outs[0].to_f64_vec().unwrap(),
        &reference(&big, 65)[0],
    );
    assert_eq!(m.cache_stats().captures, 2, "a concrete capture for 65");
    // Above a maximum the caller set: an error naming the dimension and how to raise it.
    let m = model().with_max_dim("batch", 8).unwrap();
    assert_eq!(m.dim_bounds("batch"), (1, 8));
    let e = m.run(&[Tensor::from_slice(&ramp(9 * IN, 0.3, 0.0), &[9, IN])]);
    let e = e.unwrap_err().to_string();
    assert!(e.contains("'batch'") && e.contains("maximum 8"), "{e}");
    let outs = m
        .run(&[Tensor::from_slice(&ramp(8 * IN, 0.3, 0.0), &[8, IN])])
        .unwrap();
    assert_close(
        "softmax at max",
        &outs[0].to_f64_vec().unwrap(),
        &reference(&ramp(8 * IN, 0.3, 0.0), 8)[0],
    );
    assert!(
        model().with_max_dim("seq", 8).is_err(),
        "an unknown name is refused"
    );
    // In this function: the counters are process-wide.
    cnn_batches();
}

/// [`batch_cnn`] in f64, naively: `(y [b,3], g [b,4], q [b·4,16])`.
fn cnn_reference(x: &[f32], b: usize) -> [Vec<f64>; 3] {
    let [w, bias, fw, fb] =
        batch_cnn_weights().map(|v| v.iter().map(|&f| f as f64).collect::<Vec<f64>>());
    let xv = |n: usize, i: isize, j: isize| -> f64 {
        match (0..8).contains(&i) && (0..8).contains(&j) {
            true => x[n * 64 + i as usize * 8 + j as usize] as f64,
            false => 0.0,
        }
    };
    let (mut y, mut g, mut q) = (vec![], vec![], vec![]);
    for n in 0..b {
        // conv + relu [4,8,8], then 2×2 max pool [4,4,4].
        let mut p = vec![0.0f64; 64];
        for o in 0..4 {
            let conv = |i: usize, j: usize| -> f64 {
                let mut s = bias[o];
                for (di, dj) in (0..3).flat_map(|a| (0..3).map(move |c| (a, c))) {
                    let v = xv(n, (i + di) as isize - 1, (j + dj) as isize - 1);
                    s += v * w[o * 9 + di * 3 + dj];
                }
                s.max(0.0)
            };
            for (i, j) in (0..4).flat_map(|a| (0..4).map(move |c| (a, c))) {
                p[o * 16 + i * 4 + j] = (0..4)
                    .map(|t| conv(2 * i + t / 2, 2 * j + t % 2))
                    .fold(f64::MIN, f64::max);
            }
        }
        // 3×3 average, padding 1 not counted.
        let mut a = vec![0.0f64; 64];
        for (o, i, j) in (0..4).flat_map(|o| (0..16).map(move |t| (o, t / 4, t % 4))) {
            let (mut s, mut cnt) = (0.0, 0.0);
            for (di, dj) in (-1..=1).flat_map(|u| (-1..=1).map(move |v| (u, v))) {
                let (r, c) = (i as isize + di, j as isize + dj);
                if (0..4).contains(&r) && (0..4).contains(&c) {
                    s += p[o * 16 + r as usize * 4 + c as usize];
                    cnt += 1.0;
                }
            }
            a[o * 16 + i * 4 + j] = s / cnt;
        }
        for k in 0..3 {
            y.push(fb[k] + (0..64).map(|t| a[t] * fw[t * 3 + k]).sum::<f64>());
        }
        g.extend((0..4).map(|o| p[o * 16..o * 16 + 16].iter().sum::<f64>() / 16.0));
        q.extend(a);
    }
    [y, g, q]
}

/// The CNN over a `dim_param` batch: one capture, nothing scheduled, lowered or compiled after
/// the first size, outputs equal the naive reference at every size.
fn cnn_batches() {
    let m = Model::from_proto(batch_cnn(), "batch cnn").unwrap();
    assert_eq!(m.dim_params(), vec!["batch".to_string()]);
    let mut first = true;
    for (k, b) in [3usize, 1, 8, 5].into_iter().enumerate() {
        let xs = ramp(b * 64, 0.2, k as f32 * 0.05);
        let before = counters();
        let outs = m.run(&[Tensor::from_slice(&xs, &[b, 1, 8, 8])]).unwrap();
        let after = counters();
        let shapes: Vec<Vec<usize>> = outs.iter().map(|o| o.shape()).collect();
        assert_eq!(shapes, vec![vec![b, 3], vec![b, 4], vec![b * 4, 16]]);
        let want = cnn_reference(&xs, b);
        let what = format!("cnn batch {b}");
        check_call(
            &what,
            &["y", "g", "q"],
            &outs,
            &want,
            (before, after),
            &mut first,
        );
    }
    let s = m.cache_stats();
    assert_eq!(
        (s.captures, s.replays, s.reruns),
        (1, 3, 0),
        "one capture of the CNN for every batch"
    );
}
