"""The int8 row of the device bench: the MLPerf Tiny keyword-spotting DS-CNN (the architecture of
scripts/device-bench-models.py on branch h15meas: conv 10x4 stride 2 -> 64, ReLU, 4 x [depthwise
3x3, ReLU, pointwise 64->64, ReLU], average pool 24x5, linear 64->12; seeded random weights),
quantized with onnxruntime's `quantize_static` as issue 17 asks: QDQ format, int8 activations
and weights, weights per channel, calibrated (min/max) on CALIB seeded standard-normal inputs.

usage: python device-bench-int8.py OUT_DIR [CALIB=300] [TESTS=100]
writes OUT_DIR/kws_fp32.onnx, kws_int8.onnx (batch axis symbolic, `N`), kws_input.npy (one
input, 1x1x49x10, for `picograd compile -i`), kws_tests.npy (TESTS inputs) and kws_ort.npy
(onnxruntime's default-session outputs on them), and prints the quantization step of the logits.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


def init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def relu(x, y):
    return helper.make_node("Relu", [x], [y])


def kws_dscnn(rng):
    """scripts/device-bench-models.py's kws_dscnn (h15meas), with a symbolic batch axis."""
    inits = [init("cw", rng.standard_normal((64, 1, 10, 4)) * 0.1),
             init("cb", rng.standard_normal(64) * 0.1)]
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
            helper.make_node("Conv", [f"dr{i}", f"pw{i}", f"pb{i}"], [f"p{i}"],
                             kernel_shape=[1, 1]),
            relu(f"p{i}", f"pr{i}"),
        ]
        x = f"pr{i}"
    inits += [init("fw", rng.standard_normal((12, 64)) * 0.1),
              init("fb", rng.standard_normal(12) * 0.1)]
    nodes += [
        helper.make_node("AveragePool", [x], ["a"], kernel_shape=[24, 5], strides=[24, 5]),
        helper.make_node("Flatten", ["a"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "kws_dscnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 49, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


class Reader(CalibrationDataReader):
    def __init__(self, xs):
        self.it = iter([{"x": x[None]} for x in xs])

    def get_next(self):
        return next(self.it, None)


def main():
    out = sys.argv[1]
    calib = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    tests = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(15)
    fp32, pre, q = (os.path.join(out, n) for n in ["kws_fp32.onnx", "kws_pre.onnx",
                                                   "kws_int8.onnx"])
    onnx.save(kws_dscnn(rng), fp32)
    quant_pre_process(fp32, pre)
    xs = rng.standard_normal((calib, 1, 49, 10)).astype(np.float32)
    quantize_static(pre, q, Reader(xs), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    xt = rng.standard_normal((tests, 1, 49, 10)).astype(np.float32)
    np.save(os.path.join(out, "kws_tests.npy"), xt)
    np.save(os.path.join(out, "kws_input.npy"), xt[:1])
    sess = ort.InferenceSession(q, providers=["CPUExecutionProvider"])
    np.save(os.path.join(out, "kws_ort.npy"), sess.run(None, {"x": xt})[0])
    m = onnx.load(q)
    scale = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == "y"]
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    lsb = float(inits[scale[0].input[1]]) if scale else float("nan")
    np.save(os.path.join(out, "kws_lsb.npy"), np.array([lsb]))
    print(f"kws int8: {calib} calibration inputs, {tests} test inputs, logit step {lsb:g}")


if __name__ == "__main__":
    main()
