"""Writes core/tests/data/lowbit_reference.txt: the ONNX reference for picograd's low-bit storage
types, from the onnx package in the shared environment (scripts/python-env.sh).

Decode rows (`dec FORMAT CODE F32BITS`): every code of each type, decoded by
onnx.numpy_helper.to_array from a TensorProto holding it. Cast rows (`cast FORMAT SATURATE
IN_F32BITS OUT_F32BITS`): the onnx.reference evaluator's Cast (opset 24) of every decoded
value, the midpoints between neighbours and values just beside them, zeros, infinities, NaN and
values out of range, to the type and back to float (float8 e8m0 with ONNX's default round_mode
"up"; `e8m0 MODE SATURATE IN OUT` rows add every round_mode and subnormal probes). Run: `.venv/bin/python
scripts/lowbit-reference.py > core/tests/data/lowbit_reference.txt`.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

FORMATS = {
    "F8E4M3FN": (TensorProto.FLOAT8E4M3FN, 8),
    "F8E4M3FNUZ": (TensorProto.FLOAT8E4M3FNUZ, 8),
    "F8E5M2": (TensorProto.FLOAT8E5M2, 8),
    "F8E5M2FNUZ": (TensorProto.FLOAT8E5M2FNUZ, 8),
    "F8E8M0": (TensorProto.FLOAT8E8M0, 8),
    "F4E2M1": (TensorProto.FLOAT4E2M1, 4),
    "I4": (TensorProto.INT4, 4),
    "U4": (TensorProto.UINT4, 4),
    "I2": (TensorProto.INT2, 2),
    "U2": (TensorProto.UINT2, 2),
}


def bits(v):
    return "%08x" % np.float32(v).view(np.uint32)


def decode_all(code_type, width):
    codes = np.arange(1 << width, dtype=np.uint8)
    per = 8 // width
    packed = np.zeros(len(codes) // per if len(codes) >= per else 1, dtype=np.uint8)
    for i, c in enumerate(codes):
        packed[i // per] |= c << (width * (i % per))
    t = TensorProto()
    t.data_type = code_type
    t.dims.append(len(codes))
    t.raw_data = packed.tobytes()
    return numpy_helper.to_array(t).astype(np.float32)


def cast(x, code_type, saturate, round_mode=None):
    mode = {} if round_mode is None else {"round_mode": round_mode}
    y = helper.make_tensor_value_info("y", code_type, None)
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Cast", ["x"], ["y"], to=code_type, saturate=saturate, **mode),
        helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(nodes, "g", [xi], [z], value_info=[y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
    return ReferenceEvaluator(m).run(None, {"x": x})[0]


def probes(vals):
    fin = np.unique(vals[np.isfinite(vals)].astype(np.float64))
    mids = (fin[:-1] + fin[1:]) / 2
    out = list(fin) + list(mids)
    for m in mids:
        out += [np.nextafter(np.float32(m), np.float32(np.inf)), np.nextafter(np.float32(m), np.float32(-np.inf))]
    top = fin.max()
    out += [top * 1.03, top * 1.5, top * 2, top * 1e6, -top * 1.5, 3e38, -3e38, 1e-30, -1e-30]
    out += [0.0, -0.0, np.inf, -np.inf, np.nan, 0.3, -2.7, 1.2345, 100.5, -77.25]
    return np.array(out, dtype=np.float32)


def main():
    for name, (code_type, width) in FORMATS.items():
        vals = decode_all(code_type, width)
        for code, v in enumerate(vals):
            print("dec", name, code, bits(v))
        x = probes(vals)
        for sat in (1, 0):
            got = cast(x, code_type, sat)
            for a, b in zip(x, got):
                print("cast", name, sat, bits(a), bits(b))
            if code_type != TensorProto.FLOAT8E8M0:
                continue
            extra = np.array([1e-45, 2**-127 * 1.25, 2**-127 * 0.75, 2**-126 * 1.5, 2**-126 * 1.25,
                              -3.0, -0.7, 1.4, 1.6, 2**127 * 1.2, 2**127 * 1.6], dtype=np.float32)
            x2 = np.concatenate([x, extra])
            for mode in ("up", "nearest", "down"):
                got = cast(x2, code_type, sat, mode)
                for a, b in zip(x2, got):
                    print("e8m0", mode, sat, bits(a), bits(b))


main()
