"""Writes the ONNX model and data for tests/onnx_device.rs: a small CNN classifier built with
onnx.helper (Conv, Relu, MaxPool, Flatten, Gemm, Softmax; seeded random weights) for 1x1x8x8
inputs, a few test inputs as .npy, and onnxruntime's outputs for each.

usage: python onnx-device-model.py OUT_DIR
writes OUT_DIR/cnn.onnx, OUT_DIR/input_<k>.npy and OUT_DIR/expected_<k>.npy (k = 0, 1, ...).
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

CASES = 4
CLASSES = 10


def initializer(name, array):
    return numpy_helper.from_array(array.astype(np.float32), name)


def build_model(rng):
    weights = [
        initializer("conv_w", rng.standard_normal((4, 1, 3, 3)) * 0.5),
        initializer("conv_b", rng.standard_normal(4) * 0.1),
        initializer("fc_w", rng.standard_normal((CLASSES, 4 * 4 * 4)) * 0.3),
        initializer("fc_b", rng.standard_normal(CLASSES) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn_classifier",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, CLASSES])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(1234)
    model = build_model(rng)
    path = os.path.join(out, "cnn.onnx")
    onnx.save(model, path)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    for k in range(CASES):
        x = rng.standard_normal((1, 1, 8, 8)).astype(np.float32)
        (probs,) = session.run(None, {"image": x})
        np.save(os.path.join(out, f"input_{k}.npy"), x)
        np.save(os.path.join(out, f"expected_{k}.npy"), probs.astype(np.float32))
    print(f"wrote {path} and {CASES} cases")


if __name__ == "__main__":
    main()
