"""Writes the ONNX models the Rust tests build with the onnx helper API (and skl2onnx), in the
forms today's exporters write, with test inputs and onnxruntime's outputs for them.

usage: python onnx-test-models.py CASE OUT_DIR
writes OUT_DIR/model.onnx (plus what the case adds), OUT_DIR/input_<k>.npy for each model input
and OUT_DIR/expected_<k>.npy with onnxruntime's value of each tensor output, in graph order.

cases:
  numeric_outputs    legacy-exporter names: outputs `191` and `7` (and `/fc/Gemm:0`)
  external_data      weights in `model.onnx.data`, as torch >= 2.9 saves them
  gru_<dir>, lstm_<dir>
                     one GRU / LSTM layer, dir = forward | reverse | bidirectional; outputs Y, Y_h
                     (and Y_c for LSTM)
  lstm2_<dir>_<steps>
                     two stacked LSTM layers 16 -> 32 over <steps> steps, batch 1, no initial
                     state, Squeeze between the layers (the torch exporter's form of
                     nn.LSTM(16, 32, num_layers=2)); dir = forward | bidirectional
  logreg, mlp        scikit-learn LogisticRegression / MLPClassifier exported by skl2onnx with
                     its default options (integer class labels, ZipMap output); the ZipMap
                     output's probabilities are written as expected_<k>.npy too (one row of
                     class probabilities per sample, classes in `classes.npy`)
  logreg_binary      LogisticRegression on two classes
  logreg_strings     LogisticRegression with string class labels (model only)
  linear_regressor, linear_classifier_binary, scaler_normalizer
                     ai.onnx.ml LinearRegressor; LinearClassifier with one coefficient row
                     (post_transform NONE and LOGISTIC); Scaler then Normalizer (L1, L2, MAX)
  qdq_cnn, qop_cnn   a small conv net (Conv+Relu, MaxPool, Conv+Relu and a 1x1 Conv branch,
                     Add, AveragePool times GlobalAveragePool, Flatten, Gemm) quantized by
                     onnxruntime's
                     `quantize_static` (uint8 activations, int8 weights per channel, calibrated on
                     20 seeded inputs) in QDQ / QOperator format, run on 32 test inputs; `lsb.npy`
                     holds the output's quantization step
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(13)


def f32(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def save_io(out, model_path, inputs):
    """Runs the model with onnxruntime on `inputs` and saves inputs and tensor outputs."""
    sess = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for k, x in enumerate(inputs):
        np.save(os.path.join(out, f"input_{k}.npy"), x)
    results = sess.run(None, dict(zip(names, inputs)))
    for k, r in enumerate(results):
        if isinstance(r, list):  # ZipMap: a list of {label: probability} maps
            labels = sorted(r[0].keys())
            np.save(os.path.join(out, "classes.npy"), np.array(labels, dtype=np.int64))
            r = np.array([[m[c] for c in labels] for m in r], dtype=np.float32)
        np.save(os.path.join(out, f"expected_{k}.npy"), np.asarray(r))


def finish(model, out, inputs, **save_args):
    onnx.checker.check_model(model)
    path = os.path.join(out, "model.onnx")
    onnx.save_model(model, path, **save_args)
    save_io(out, path, inputs)


def make(nodes, inputs, outputs, weights, opset=17, ml=False):
    graph = helper.make_graph(nodes, "test", inputs, outputs, weights)
    opsets = [helper.make_opsetid("", opset)]
    if ml:
        opsets.append(helper.make_opsetid("ai.onnx.ml", 3))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def mlp_nodes(out_names):
    weights = [
        numpy_helper.from_array(f32(6, 16), "fc1.weight"),
        numpy_helper.from_array(f32(16), "fc1.bias"),
        numpy_helper.from_array(f32(16, 3), "fc2.weight"),
        numpy_helper.from_array(f32(3), "fc2.bias"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["/fc1/MatMul:0"]),
        helper.make_node("Add", ["/fc1/MatMul:0", "fc1.bias"], ["/fc1/Add:0"]),
        helper.make_node("Relu", ["/fc1/Add:0"], [out_names[0]]),
        helper.make_node("MatMul", [out_names[0], "fc2.weight"], ["/fc2/MatMul:0"]),
        helper.make_node("Add", ["/fc2/MatMul:0", "fc2.bias"], [out_names[1]]),
        helper.make_node("Softmax", [out_names[1]], [out_names[2]], axis=-1),
    ]
    return nodes, weights


def numeric_outputs(out):
    names = ["7", "/fc/Gemm:0", "191"]
    nodes, weights = mlp_nodes(names)
    model = make(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
        [helper.make_tensor_value_info("191", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("7", TensorProto.FLOAT, [2, 16]),
         helper.make_tensor_value_info("/fc/Gemm:0", TensorProto.FLOAT, [2, 3])],
        weights,
    )
    finish(model, out, [f32(2, 6, scale=1.0)])


def external_data(out):
    nodes, weights = mlp_nodes(["h", "logits", "probs"])
    model = make(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])],
        weights,
    )
    # size_threshold=0: every initializer goes to the data file, as torch's exporter does.
    finish(model, out, [f32(4, 6, scale=1.0)], save_as_external_data=True,
           all_tensors_to_one_file=True, location="model.onnx.data", size_threshold=0)


def rnn(out, op, direction):
    seq, batch, inp, hidden = 5, 2, 3, 8
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"GRU": 3, "LSTM": 4}[op]
    weights = [
        numpy_helper.from_array(f32(dirs, gates * hidden, inp), "W"),
        numpy_helper.from_array(f32(dirs, gates * hidden, hidden), "R"),
        numpy_helper.from_array(f32(dirs, 2 * gates * hidden, scale=0.1), "B"),
    ]
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    # torch's exporter passes the initial state as a graph input (`h0`, and `c0` for LSTM).
    states = ["h0"] + (["c0"] if op == "LSTM" else [])
    node = helper.make_node(op, ["x", "W", "R", "B", ""] + states, outs, hidden_size=hidden,
                            direction=direction)
    infos = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [seq, dirs, batch, hidden])]
    infos += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [dirs, batch, hidden])
              for n in outs[1:]]
    model = make(
        [node],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp])]
        + [helper.make_tensor_value_info(s, TensorProto.FLOAT, [dirs, batch, hidden])
           for s in states],
        infos,
        weights,
    )
    finish(model, out, [f32(seq, batch, inp, scale=1.0)]
           + [f32(dirs, batch, hidden) for _ in states])


def lstm2(out, direction, steps):
    inp, hidden = 16, 32
    dirs = 2 if direction == "bidirectional" else 1
    nodes, weights, x = [], [], "x"
    for layer, width in enumerate([inp, hidden * dirs]):
        w, r, b = (f"W{layer}", f"R{layer}", f"B{layer}")
        weights += [
            numpy_helper.from_array(f32(dirs, 4 * hidden, width, scale=0.2), w),
            numpy_helper.from_array(f32(dirs, 4 * hidden, hidden, scale=0.2), r),
            numpy_helper.from_array(f32(dirs, 8 * hidden, scale=0.1), b),
        ]
        y = f"Y{layer}"
        nodes.append(helper.make_node("LSTM", [x, w, r, b], [y], hidden_size=hidden,
                                      direction=direction))
        # [seq, dirs, 1, hidden] -> [seq, 1, dirs * hidden], as the exporter does.
        nodes.append(helper.make_node("Transpose", [y], [f"T{layer}"], perm=[0, 2, 1, 3]))
        shape = f"shape{layer}"
        weights.append(numpy_helper.from_array(np.array([steps, 1, dirs * hidden], np.int64),
                                               shape))
        x = f"H{layer}"
        nodes.append(helper.make_node("Reshape", [f"T{layer}", shape], [x]))
    model = make(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, inp])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [steps, 1, dirs * hidden])],
        weights,
    )
    finish(model, out, [f32(steps, 1, inp, scale=1.0)])


def sklearn_data():
    x = RNG.standard_normal((80, 5)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 0.4).astype(np.int64)
    return x, y


def sklearn_case(out, kind):
    import warnings

    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    warnings.filterwarnings("ignore")
    x, y = sklearn_data()
    if kind == "logreg":
        est = LogisticRegression().fit(x, y)
    elif kind == "logreg_binary":
        est = LogisticRegression().fit(x, (y > 0).astype(np.int64))
    elif kind == "logreg_strings":
        est = LogisticRegression().fit(x, np.array(["a", "b", "c"])[y])
    else:
        est = MLPClassifier(hidden_layer_sizes=(12,), max_iter=400, random_state=0).fit(x, y)
    model = to_onnx(est, x[:1])
    path = os.path.join(out, "model.onnx")
    onnx.save_model(model, path)
    if kind != "logreg_strings":
        save_io(out, path, [x[:7]])


def linear_regressor(out):
    node = helper.make_node("LinearRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            coefficients=f32(2 * 4).tolist(), intercepts=[0.5, -1.0],
                            targets=2)
    model = make([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [], ml=True)
    finish(model, out, [f32(3, 4, scale=1.0)])


def linear_classifier_binary(out):
    """One coefficient row and two labels: onnxruntime's binary form, with and without the
    logistic function."""
    nodes, outs = [], []
    for k, post in enumerate(["NONE", "LOGISTIC"]):
        nodes.append(helper.make_node("LinearClassifier", ["x"], [f"label{k}", f"scores{k}"],
                                      domain="ai.onnx.ml", coefficients=f32(4).tolist(),
                                      intercepts=[0.1], classlabels_ints=[3, 8],
                                      post_transform=post))
        outs += [helper.make_tensor_value_info(f"label{k}", TensorProto.INT64, [6]),
                 helper.make_tensor_value_info(f"scores{k}", TensorProto.FLOAT, [6, 2])]
    model = make(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4])], outs,
                 [], ml=True)
    finish(model, out, [f32(6, 4, scale=1.0)])


def scaler_normalizer(out):
    nodes = [helper.make_node("Scaler", ["x"], ["s"], domain="ai.onnx.ml",
                              offset=[0.5, -0.25, 1.0, 0.0], scale=[2.0, 0.5, -1.0, 3.0])]
    outs = []
    for norm in ["L1", "L2", "MAX"]:
        nodes.append(helper.make_node("Normalizer", ["s"], [norm.lower()], domain="ai.onnx.ml",
                                      norm=norm))
        outs.append(helper.make_tensor_value_info(norm.lower(), TensorProto.FLOAT, [3, 4]))
    model = make(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], outs, [],
                 ml=True)
    finish(model, out, [f32(3, 4, scale=1.0)])


def float_cnn():
    """x[N,3,12,12] -> the conv net of the qdq/qop cases, as an fp32 model (reduce_range below:
    onnxruntime's AVX2 u8 x s8 kernels saturate pairs of products in 16 bits otherwise)."""
    w = {
        "w1": f32(8, 3, 3, 3), "b1": f32(8, scale=0.1),
        "w2": f32(16, 8, 3, 3, scale=0.2), "b2": f32(16, scale=0.1),
        "w3": f32(16, 8, 1, 1), "b3": f32(16, scale=0.1),
        "wf": f32(10, 144, scale=0.1), "bf": f32(10, scale=0.1),
    }
    pad = {"pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], **pad),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], **pad),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["p1", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["r2", "c3"], ["s"]),
        helper.make_node("AveragePool", ["s"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["s"], ["g"]),
        helper.make_node("Mul", ["p2", "g"], ["m"]),
        helper.make_node("Flatten", ["m"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    weights = [numpy_helper.from_array(v, k) for k, v in w.items()]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 12, 12])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    return make(nodes, [x], [y], weights, opset=13)


def quantized_cnn(out, fmt):
    """The conv net quantized by onnxruntime's tool, calibrated on 20 seeded inputs."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quant_pre_process, quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(7)
            self.data = iter([{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)}
                              for _ in range(20)])

        def get_next(self):
            return next(self.data, None)

    fp32 = os.path.join(out, "fp32.onnx")
    pre = os.path.join(out, "pre.onnx")
    path = os.path.join(out, "model.onnx")
    onnx.save_model(float_cnn(), fp32)
    quant_pre_process(fp32, pre)
    quantize_static(pre, path, Reader(),
                    quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, reduce_range=True)
    model = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    np.save(os.path.join(out, "lsb.npy"), np.asarray(inits[last.input[1]], dtype=np.float32))
    x = np.random.default_rng(99).standard_normal((32, 3, 12, 12)).astype(np.float32)
    save_io(out, path, [x])


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if case == "numeric_outputs":
        numeric_outputs(out)
    elif case == "external_data":
        external_data(out)
    elif case.startswith("lstm2_"):
        _, direction, steps = case.split("_")
        lstm2(out, direction, int(steps))
    elif case.startswith(("gru_", "lstm_")):
        op, direction = case.split("_", 1)
        rnn(out, op.upper(), direction)
    elif case in ("logreg", "logreg_binary", "mlp", "logreg_strings"):
        sklearn_case(out, case)
    elif case == "linear_regressor":
        linear_regressor(out)
    elif case == "linear_classifier_binary":
        linear_classifier_binary(out)
    elif case == "scaler_normalizer":
        scaler_normalizer(out)
    elif case in ("qdq_cnn", "qop_cnn"):
        quantized_cnn(out, case[:3])
    else:
        sys.exit(f"unknown case {case!r}")


if __name__ == "__main__":
    main()
