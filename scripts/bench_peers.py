"""Peers for picograd's bench (examples/bench.rs): numpy/OpenBLAS, onnxruntime and tinygrad run
the same workloads, each timing its own loop (best of several runs), and print one JSON object.

Usage: bench_peers.py THREADS [cold]   -- THREADS sets OpenBLAS / onnxruntime threads. `cold`
measures only tinygrad's time to the first MLP result in this fresh process.
A peer that is not installed is skipped (its keys are absent)."""
import json
import os
import sys
import time

THREADS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(THREADS)
os.environ.setdefault("DEV", "CPU")

out = {"threads": THREADS}


def best(fn, reps=5, warm=1):
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def numpy_rows(np):
    a = np.random.rand(1024, 1024).astype(np.float32)
    b = np.random.rand(1024, 1024).astype(np.float32)
    out["numpy_matmul_s"] = best(lambda: a @ b)
    a2 = np.random.rand(2048, 2048).astype(np.float32)
    b2 = np.random.rand(2048, 2048).astype(np.float32)
    out["numpy_matmul2048_s"] = best(lambda: a2 @ b2, reps=3)
    x = np.random.rand(1 << 24).astype(np.float32)
    y = np.empty_like(x)
    out["numpy_copy_s"] = best(lambda: np.copyto(y, x))
    out["numpy_elementwise_s"] = best(lambda: np.maximum(2 * x + 1, 0) * (1 / (1 + np.exp(-x))), reps=3)


def ort_session(model, np):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def onnx_conv(np):
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.rand(64, 64, 3, 3).astype(np.float32) - 0.5, "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def onnx_mlp(np, batch):
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes, prev = [], [], "x"
    for i, (fi, fo) in enumerate([(784, 512), (512, 512), (512, 10)]):
        inits.append(numpy_helper.from_array((np.random.rand(fi, fo).astype(np.float32) - 0.5) * 0.1, f"w{i}"))
        inits.append(numpy_helper.from_array(np.zeros(fo, np.float32), f"b{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]))
        prev = f"a{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [prev], [f"r{i}"]))
            prev = f"r{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 784])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def ort_rows(np):
    conv = ort_session(onnx_conv(np), np)
    x = np.random.rand(16, 64, 56, 56).astype(np.float32)
    out["ort_conv_s"] = best(lambda: conv.run(None, {"x": x}), reps=3)
    for batch in (1, 128):
        s = ort_session(onnx_mlp(np, batch), np)
        xb = np.random.rand(batch, 784).astype(np.float32)
        out[f"ort_mlp{batch}_s"] = best(lambda: s.run(None, {"x": xb}), reps=50 if batch == 1 else 10, warm=5)


def tiny_mlp_cold():
    t0 = time.perf_counter()
    from tinygrad import Tensor

    x = Tensor.rand(1, 784)
    ws = [Tensor.rand(784, 512), Tensor.rand(512, 512), Tensor.rand(512, 10)]
    h = x
    for i, w in enumerate(ws):
        h = h @ w
        if i < 2:
            h = h.relu()
    h.numpy()
    out["tiny_cold_s"] = time.perf_counter() - t0


def tiny_rows(np):
    from tinygrad import Context, Tensor, TinyJit, nn

    a = Tensor(np.random.rand(1024, 1024).astype(np.float32)).realize()
    b = Tensor(np.random.rand(1024, 1024).astype(np.float32)).realize()
    out["tiny_matmul_s"] = best(lambda: (a @ b).realize(), reps=3)

    l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
    params = nn.state.get_parameters([l1, l2])
    opt = nn.optim.Adam(params, lr=1e-3)

    @TinyJit
    def step(x, y):
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y).backward()
            opt.step()
            return loss.realize()

    xs = [Tensor(np.random.rand(32, 64).astype(np.float32)).realize() for _ in range(4)]
    ys = [Tensor(np.random.randint(0, 10, 32).astype(np.int32)).realize() for _ in range(4)]
    for i in range(5):
        step(xs[i % 4], ys[i % 4])
    n = 100
    t = time.perf_counter()
    for i in range(n):
        step(xs[i % 4], ys[i % 4]).numpy()
    out["tiny_train_steps_per_s"] = n / (time.perf_counter() - t)


def main():
    if len(sys.argv) > 2 and sys.argv[2] == "cold":
        try:
            tiny_mlp_cold()
        except Exception as e:  # noqa: BLE001 - report, never crash the bench
            out["tiny_error"] = repr(e)
        print(json.dumps(out))
        return
    import numpy as np

    np.random.seed(0)
    for name, rows in (("numpy", numpy_rows), ("ort", ort_rows), ("tiny", tiny_rows)):
        try:
            rows(np)
        except Exception as e:  # noqa: BLE001
            out[f"{name}_error"] = repr(e)
    print(json.dumps(out))


main()
