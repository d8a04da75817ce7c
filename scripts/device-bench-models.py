"""Writes the ONNX models the device benchmark (scripts/device-bench.sh) compiles with
`picograd compile`, built with onnx.helper (no training framework), and one seeded non-zero input
for each:

  sine.onnx        sine MLP 1-16-16-1 (Gemm, Relu)
  digits_mlp.onnx  digits MLP 64-128-10 (Gemm, Relu, Gemm)
  digits_cnn.onnx  digits CNN: conv3x3 1->8 pad 1, ReLU, maxpool 2, conv3x3 8->16 pad 1, ReLU,
                   maxpool 2, flatten, linear 64->10
  kws_dscnn.onnx   MLPerf Tiny keyword-spotting DS-CNN as issue 15 gives it: input 1x1x49x10,
                   conv 10x4 stride 2 -> 64 (padding "same": 25x5), ReLU, 4 x [depthwise 3x3 pad 1,
                   ReLU, pointwise 64->64, ReLU], average pool 24x5 (stride 24x5, so one output),
                   linear 64->12 (batch norm folded into the convolutions: nothing left of it)

The digits models take the weights `cargo run --release --example train_digits` saved
(out/digits_mlp.safetensors, out/digits_cnn.safetensors) when they exist; every other weight is
seeded random (instruction counts do not depend on weight values). Inputs: seeded standard normal.

usage: python device-bench-models.py OUT_DIR [TRAINED_DIR]
writes OUT_DIR/<name>.onnx and OUT_DIR/<name>_input.npy for each model; prints each name and
whether its weights were trained.
"""

import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def read_safetensors(path):
    """The f32 tensors of a safetensors file, by name (the format: u64 header length, JSON
    header, raw little-endian data)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        assert meta["dtype"] == "F32", (path, name, meta["dtype"])
        lo, hi = meta["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype="<f4").reshape(meta["shape"])
    return out


def model(name, nodes, inits, x_shape, y_shape):
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def gemm(x, w, b, y):
    return helper.make_node("Gemm", [x, w, b], [y], transB=1)


def relu(x, y):
    return helper.make_node("Relu", [x], [y])


def sine(rng, _trained):
    w = [rng.standard_normal((16, 1)), rng.standard_normal((16, 16)) * 0.3,
         rng.standard_normal((1, 16)) * 0.3]
    b = [rng.standard_normal(16) * 0.1, rng.standard_normal(16) * 0.1, rng.standard_normal(1) * 0.1]
    inits = [init(f"w{i}", w[i]) for i in range(3)] + [init(f"b{i}", b[i]) for i in range(3)]
    nodes = [gemm("x", "w0", "b0", "h0"), relu("h0", "r0"), gemm("r0", "w1", "b1", "h1"),
             relu("h1", "r1"), gemm("r1", "w2", "b2", "y")]
    return model("sine_mlp", nodes, inits, [1, 1], [1, 1]), [1, 1], False


def digits_mlp(rng, trained):
    path = os.path.join(trained, "digits_mlp.safetensors") if trained else ""
    if path and os.path.exists(path):
        t = read_safetensors(path)
        p = [t["l1.weight"], t["l1.bias"], t["l2.weight"], t["l2.bias"]]
    else:
        p = [rng.standard_normal((128, 64)) * 0.1, rng.standard_normal(128) * 0.1,
             rng.standard_normal((10, 128)) * 0.1, rng.standard_normal(10) * 0.1]
    inits = [init(n, a) for n, a in zip(["w1", "b1", "w2", "b2"], p)]
    nodes = [gemm("x", "w1", "b1", "h"), relu("h", "r"), gemm("r", "w2", "b2", "y")]
    return model("digits_mlp", nodes, inits, [1, 64], [1, 10]), [1, 64], bool(path and os.path.exists(path))


def digits_cnn(rng, trained):
    path = os.path.join(trained, "digits_cnn.safetensors") if trained else ""
    if path and os.path.exists(path):
        t = read_safetensors(path)
        p = [t["c1.weight"], t["c1.bias"], t["c2.weight"], t["c2.bias"], t["fc.weight"], t["fc.bias"]]
    else:
        p = [rng.standard_normal((8, 1, 3, 3)) * 0.3, rng.standard_normal(8) * 0.1,
             rng.standard_normal((16, 8, 3, 3)) * 0.1, rng.standard_normal(16) * 0.1,
             rng.standard_normal((10, 64)) * 0.1, rng.standard_normal(10) * 0.1]
    inits = [init(n, a) for n, a in zip(["c1w", "c1b", "c2w", "c2b", "fcw", "fcb"], p)]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], **conv), relu("c1", "r1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], **pool),
        helper.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], **conv), relu("c2", "r2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], **pool),
        helper.make_node("Flatten", ["p2"], ["f"], axis=1),
        gemm("f", "fcw", "fcb", "y"),
    ]
    used = bool(path and os.path.exists(path))
    return model("digits_cnn", nodes, inits, [1, 1, 8, 8], [1, 10]), [1, 1, 8, 8], used


def kws_dscnn(rng, _trained, batch=1):
    inits = [init("cw", rng.standard_normal((64, 1, 10, 4)) * 0.1),
             init("cb", rng.standard_normal(64) * 0.1)]
    # "same" padding of a 10x4 kernel at stride 2 on 49x10: 25x5 out; ONNX pads are
    # [top, left, bottom, right].
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[10, 4],
                              strides=[2, 2], pads=[4, 1, 5, 1]), relu("c", "r")]
    x = "r"
    for i in range(4):
        inits += [init(f"dw{i}", rng.standard_normal((64, 1, 3, 3)) * 0.3),
                  init(f"db{i}", rng.standard_normal(64) * 0.1),
                  init(f"pw{i}", rng.standard_normal((64, 64, 1, 1)) * 0.1),
                  init(f"pb{i}", rng.standard_normal(64) * 0.1)]
        nodes += [
            helper.make_node("Conv", [x, f"dw{i}", f"db{i}"], [f"d{i}"], kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1], group=64),
            relu(f"d{i}", f"dr{i}"),
            helper.make_node("Conv", [f"dr{i}", f"pw{i}", f"pb{i}"], [f"p{i}"], kernel_shape=[1, 1]),
            relu(f"p{i}", f"pr{i}"),
        ]
        x = f"pr{i}"
    inits += [init("fw", rng.standard_normal((12, 64)) * 0.1), init("fb", rng.standard_normal(12) * 0.1)]
    nodes += [
        helper.make_node("AveragePool", [x], ["a"], kernel_shape=[24, 5], strides=[24, 5]),
        helper.make_node("Flatten", ["a"], ["f"], axis=1),
        gemm("f", "fw", "fb", "y"),
    ]
    return model("kws_dscnn", nodes, inits, [batch, 1, 49, 10], [batch, 12]), [1, 1, 49, 10], False


def main():
    out = sys.argv[1]
    trained = sys.argv[2] if len(sys.argv) > 2 else ""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(15)
    for name, build in [("sine", sine), ("digits_mlp", digits_mlp), ("digits_cnn", digits_cnn),
                        ("kws_dscnn", kws_dscnn)]:
        m, shape, used = build(rng, trained)
        onnx.save(m, os.path.join(out, f"{name}.onnx"))
        x = rng.standard_normal(shape).astype(np.float32)
        np.save(os.path.join(out, f"{name}_input.npy"), x)
        print(f"{name} {'trained' if used else 'seeded'}")


if __name__ == "__main__":
    main()
