"""The int8 row of the device bench: the MLPerf Tiny keyword-spotting DS-CNN (built by
scripts/device-bench-models.py, with a symbolic batch axis: conv 10x4 stride 2 -> 64, ReLU, 4 x [depthwise
3x3, ReLU, pointwise 64->64, ReLU], average pool 24x5, linear 64->12; seeded random weights),
quantized with onnxruntime's `quantize_static` as issue 17 asks: QDQ format, int8 activations
and weights, weights per channel, calibrated (min/max) on CALIB seeded standard-normal inputs.

usage: python device-bench-int8.py OUT_DIR [CALIB=300] [TESTS=100]
writes OUT_DIR/kws_fp32.onnx, kws_int8.onnx (batch axis symbolic, `N`), kws_input.npy (one
input, 1x1x49x10, for `picograd compile -i`), kws_tests.npy (TESTS inputs), kws_ort.npy
(onnxruntime's default-session outputs on them), kws_ort_s8.npy (the outputs of a session with
`session.qdqisint8allowed`, whose int8 kernels sum exactly; see below) and kws_lsb.npy (the
quantization step of the logits), kws_int8_convs.onnx (the model cut after its last conv) with
kws_ort_s8_convs.npy (that session's int8 outputs of it), and prints that step.
"""

import importlib.util
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process


def kws_dscnn(rng):
    """scripts/device-bench-models.py's KWS DS-CNN, with a symbolic batch axis `N`."""
    spec = importlib.util.spec_from_file_location(
        "device_bench_models", os.path.join(os.path.dirname(__file__), "device-bench-models.py"))
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    return models.kws_dscnn(rng, False, batch="N")[0]


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
    # The same session with its int8 kernels kept (no conversion of int8 activations to uint8):
    # on x86 without VNNI the default session's u8 x s8 kernels sum pairs of products with int16
    # saturation (vpmaddubsw), so its outputs depend on the host; the int8 kernels sum exactly.
    so = ort.SessionOptions()
    so.add_session_config_entry("session.qdqisint8allowed", "1")
    s8 = ort.InferenceSession(q, so, providers=["CPUExecutionProvider"])
    np.save(os.path.join(out, "kws_ort_s8.npy"), s8.run(None, {"x": xt})[0])
    # The conv stack alone (cut at the last conv's QuantizeLinear, before the average pool that
    # onnxruntime computes in f32): its int8 output by the same int8-kernel session.
    last = [n for n in onnx.load(q).graph.node if n.op_type == "QuantizeLinear"][-4].output[0]
    convs = os.path.join(out, "kws_int8_convs.onnx")
    onnx.utils.extract_model(q, convs, ["x"], [last])
    s8c = ort.InferenceSession(convs, so, providers=["CPUExecutionProvider"])
    np.save(os.path.join(out, "kws_ort_s8_convs.npy"), s8c.run(None, {"x": xt})[0])
    m = onnx.load(q)
    scale = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == "y"]
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    lsb = float(inits[scale[0].input[1]]) if scale else float("nan")
    np.save(os.path.join(out, "kws_lsb.npy"), np.array([lsb]))
    print(f"kws int8: {calib} calibration inputs, {tests} test inputs, logit step {lsb:g}")


if __name__ == "__main__":
    main()
