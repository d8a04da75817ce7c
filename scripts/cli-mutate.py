"""Mutates seed ONNX models and runs the real `picograd` binary on each, counting outcomes.

usage: python cli-mutate.py PICOGRAD SEED_DIR WORK_DIR COUNT [--seed S] [--jobs J] [--timeout T]
                            [--compile-every K]

SEED_DIR holds seed models (`*.onnx` and libFuzzer's `seed-*` files, any depth). Each of COUNT
mutants is one to three mutations of a random seed: structural ones through the onnx Python API
(a dim set to 0, huge or negative, an attribute's value or type changed, a dtype swapped, a node
input renamed or removed, an initializer's data resized, an op type or the opset changed, a node
dropped or duplicated) and byte-level ones (flips, truncation, inserted or repeated bytes). Each
mutant is run with `picograd run MODEL --interp` (zeros for its inputs), and every K-th one
(`--compile-every K`, default 1) with `picograd compile MODEL --out DIR` (host target: a C build
and run per model that loads), under a timeout. Outcomes by exit code: 0 ok, 1-4 the CLI's
documented errors (1 bad model or failed run, 2 usage/shape, 3 unsupported operator, 4 not in
this build); a panic (exit 101 or "panicked at" on stderr), a signal (crash), a timeout, an
`Error::Internal` (exit 1 with "internal error (a bug in picograd" on stderr), or any other
code is a failure: the model, the command and its stderr are kept in WORK_DIR/failures/.
Prints a table of outcomes and exits 1 when any failure was seen.
"""

import argparse
import collections
import concurrent.futures
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import AttributeProto, TensorProto

HUGE = [2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1]
ODD_INTS = [0, -1, 1, 2, 3, -2**31, 2**31, 2**62, -(2**63), 2**63 - 1]
ODD_FLOATS = [0.0, -1.0, 1e30, -1e30, float("nan"), float("inf"), float("-inf"), 1e-45]
DTYPES = list(range(0, 24))
OPS = ["Add", "Mul", "Relu", "MatMul", "Gemm", "Conv", "Reshape", "Transpose", "Concat", "Gather",
       "Slice", "Softmax", "ReduceSum", "Unique", "TopK", "LSTM", "GRU", "Pad", "Resize",
       "Expand", "Where", "Cast", "Split", "Squeeze", "Unsqueeze", "MaxPool", "Einsum",
       "ScatterND", "OneHot", "CumSum", "NonZero", "Range", "Tile", "QuantizeLinear", "Attention",
       "LayerNormalization", "ArgMax", "Sort", "If", "Loop", "Identity", "Or", "Abs"]


def all_value_infos(g):
    return list(g.input) + list(g.output) + list(g.value_info)


def mutate_dim(m, rng):
    vis = [v for v in all_value_infos(m.graph) if v.type.tensor_type.shape.dim]
    if not vis:
        return "dim: none"
    v = rng.choice(vis)
    dims = v.type.tensor_type.shape.dim
    d = rng.choice(dims)
    choice = rng.choice([0, -1, -7, rng.choice(HUGE), "param", "drop", "add"])
    if choice == "param":
        d.dim_param = "n"
    elif choice == "drop":
        del dims[rng.randrange(len(dims))]
    elif choice == "add":
        dims.add().dim_value = rng.choice([0, 1, 3, rng.choice(HUGE)])
    else:
        d.dim_value = choice
    return f"dim {v.name}: {choice}"


def mutate_attribute(m, rng):
    nodes = [n for n in m.graph.node if n.attribute]
    if not nodes:
        n = rng.choice(m.graph.node)
        a = n.attribute.add()
        a.name, a.type, a.i = rng.choice(["axis", "axes", "perm", "group", "kernel_shape"]), AttributeProto.INT, rng.choice(ODD_INTS)
        return f"attr added to {n.op_type}"
    n = rng.choice(nodes)
    a = rng.choice(n.attribute)
    kind = rng.randrange(6)
    if kind == 0:
        n.attribute.remove(a)
        return f"attr {n.op_type}.{a.name} removed"
    if kind == 1:
        a.type = rng.choice([AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.INTS,
                             AttributeProto.STRING, AttributeProto.TENSOR, AttributeProto.GRAPH])
        return f"attr {n.op_type}.{a.name} type {a.type}"
    if kind == 2 or a.type == AttributeProto.INTS:
        del a.ints[:]
        a.ints.extend(rng.choice(ODD_INTS) for _ in range(rng.randrange(0, 6)))
        return f"attr {n.op_type}.{a.name} ints {list(a.ints)}"
    if kind == 3:
        a.i = rng.choice(ODD_INTS)
        return f"attr {n.op_type}.{a.name} i {a.i}"
    if kind == 4:
        a.f = rng.choice(ODD_FLOATS)
        return f"attr {n.op_type}.{a.name} f {a.f}"
    a.s = rng.choice([b"", b"bogus", b"\xff\xfe", b"NOTSET", b"linear"])
    return f"attr {n.op_type}.{a.name} s {a.s!r}"


def mutate_dtype(m, rng):
    g = m.graph
    targets = [("vi", v) for v in g.input] + [("vi", v) for v in g.output] + [("init", t) for t in g.initializer]
    kind, t = rng.choice(targets)
    dt = rng.choice(DTYPES)
    if kind == "vi":
        t.type.tensor_type.elem_type = dt
    else:
        t.data_type = dt
    return f"dtype {t.name}: {dt}"


def mutate_input(m, rng):
    nodes = [n for n in m.graph.node if n.input]
    if not nodes:
        return "input: none"
    n = rng.choice(nodes)
    k = rng.randrange(len(n.input))
    kind = rng.randrange(5)
    if kind == 0:
        n.input[k] = "no_such_tensor"
    elif kind == 1:
        del n.input[k]
    elif kind == 2:
        n.input[k] = ""
    elif kind == 3:
        n.input.append(rng.choice(list(n.input)))
    else:
        names = [i.name for i in m.graph.input] + [o for x in m.graph.node for o in x.output]
        n.input[k] = rng.choice(names)
    return f"input {n.op_type}[{k}] kind {kind}"


def mutate_initializer(m, rng):
    inits = list(m.graph.initializer)
    if not inits:
        return mutate_dim(m, rng)
    t = rng.choice(inits)
    kind = rng.randrange(5)
    if kind == 0 and t.dims:
        t.dims[rng.randrange(len(t.dims))] = rng.choice([0, -1, 5, rng.choice(HUGE)])
    elif kind == 1:
        t.dims.append(rng.choice([0, 2, rng.choice(HUGE)]))
    elif kind == 2 and t.raw_data:
        t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
    elif kind == 3:
        t.raw_data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    elif t.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE):
        t.float_data.extend(rng.choice(ODD_FLOATS) for _ in range(rng.randint(1, 5)))
    else:
        t.int64_data.extend(rng.choice(ODD_INTS) for _ in range(rng.randint(1, 5)))
    return f"initializer {t.name} kind {kind}"


def mutate_graph(m, rng):
    g = m.graph
    kind = rng.randrange(6)
    if kind == 0 and g.node:
        n = rng.choice(g.node)
        n.op_type = rng.choice(OPS)
        return f"op -> {n.op_type}"
    if kind == 1:
        op = m.opset_import[0] if m.opset_import else m.opset_import.add()
        op.version = rng.choice([1, 6, 7, 9, 11, 13, 17, 21, 99, -1])
        return f"opset {op.version}"
    if kind == 2 and len(g.node) > 1:
        del g.node[rng.randrange(len(g.node))]
        return "node dropped"
    if kind == 3 and g.node:
        g.node.append(g.node[rng.randrange(len(g.node))])
        return "node duplicated"
    if kind == 4 and g.output:
        o = rng.choice(g.output)
        o.name = rng.choice(["", "zzz", g.input[0].name if g.input else "x"])
        return "output renamed"
    if g.input:
        del g.input[rng.randrange(len(g.input))]
        return "graph input removed"
    return "graph: none"


STRUCTURAL = [mutate_dim, mutate_attribute, mutate_dtype, mutate_input, mutate_initializer, mutate_graph]


def mutate_bytes(data, rng):
    data = bytearray(data)
    kind = rng.randrange(4)
    if not data:
        return bytes(rng.randrange(256) for _ in range(8)), "bytes: random"
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data), "bytes: flips"
    if kind == 1:
        return bytes(data[: rng.randrange(len(data))]), "bytes: truncated"
    if kind == 2:
        at = rng.randrange(len(data) + 1)
        return bytes(data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[at:]), "bytes: inserted"
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, 64))
    return bytes(data[:b] + data[a:b] * rng.randint(1, 4) + data[b:]), "bytes: repeated"


def mutant(seed_bytes, rng):
    """One mutant of a seed: (bytes, what was done)."""
    done = []
    data = seed_bytes
    try:
        m = onnx.load_from_string(seed_bytes)
        parsed = len(m.graph.node) > 0
    except Exception:
        parsed = False
    if parsed and rng.random() < 0.8:
        # Mostly one mutation, so more mutants stay loadable and reach the handlers.
        for _ in range(rng.choice([1, 1, 1, 1, 1, 1, 2, 2, 2, 3])):
            try:
                done.append(rng.choice(STRUCTURAL)(m, rng))
            except Exception as e:  # a mutation the proto refuses (a value out of range)
                done.append(f"skipped: {type(e).__name__}")
        data = m.SerializeToString()
    if not parsed or not done or rng.random() < 0.15:
        data, what = mutate_bytes(data, rng)
        done.append(what)
    return data, "; ".join(done)


def classify(proc_rc, stderr, timed_out):
    if timed_out:
        return "timeout"
    if proc_rc < 0:
        return f"signal {-proc_rc}"
    if proc_rc == 101 or "panicked at" in stderr:
        return "panic"
    if "memory allocation of" in stderr:
        return "alloc-abort"
    if "internal error (a bug in picograd" in stderr:
        return "internal error"
    if proc_rc in (0, 1, 2, 3, 4):
        return f"exit {proc_rc}"
    return f"exit {proc_rc} (undocumented)"


def run_one(picograd, work, k, model_path, what, timeout, compile_too):
    """Runs `run --interp` (and `compile` when `compile_too`) on one mutant; returns
    [(command, outcome, stderr, seconds)]."""
    results = []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        cmds = [("run", [picograd, "run", model_path, "--interp", "-o", os.path.join(tmp, "run")])]
        if compile_too:
            cmds.append(("compile", [picograd, "compile", model_path, "--out", os.path.join(tmp, "bundle")]))
        for cmd_name, cmd in cmds:
            t0 = time.monotonic()
            try:
                p = subprocess.run(cmd, capture_output=True, timeout=timeout, cwd=tmp)
                rc, err, to = p.returncode, p.stderr.decode("utf-8", "replace"), False
            except subprocess.TimeoutExpired as e:
                rc, err, to = None, (e.stderr or b"").decode("utf-8", "replace"), True
            results.append((cmd_name, classify(rc, err, to), err, time.monotonic() - t0))
    return k, model_path, what, results


FAILURE_OK = {"exit 0", "exit 1", "exit 2", "exit 3", "exit 4"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("picograd")
    ap.add_argument("seed_dir")
    ap.add_argument("work_dir")
    ap.add_argument("count", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--compile-every", type=int, default=1,
                    help="also run `compile` on every K-th mutant (a host build each: slow)")
    a = ap.parse_args()

    seeds = []
    for root, _, files in os.walk(a.seed_dir):
        for f in sorted(files):
            if f.endswith(".onnx") or f.startswith("seed-"):
                with open(os.path.join(root, f), "rb") as fh:
                    seeds.append((f, fh.read()))
    if not seeds:
        sys.exit(f"cli-mutate: no seed models under {a.seed_dir}")
    models = os.path.join(a.work_dir, "models")
    failures = os.path.join(a.work_dir, "failures")
    os.makedirs(models, exist_ok=True)
    os.makedirs(failures, exist_ok=True)
    rng = random.Random(a.seed)
    jobs = []
    for k in range(a.count):
        name, data = rng.choice(seeds)
        mdata, what = mutant(data, rng)
        path = os.path.join(models, f"m{k:05d}.onnx")
        with open(path, "wb") as fh:
            fh.write(mdata)
        jobs.append((k, path, f"{name}: {what}"))
    print(f"cli-mutate: {len(seeds)} seeds, {a.count} mutants (seed {a.seed}), {a.jobs} jobs, timeout {a.timeout:.0f} s", flush=True)

    counts = {"run": collections.Counter(), "compile": collections.Counter()}
    slowest = {"run": 0.0, "compile": 0.0}
    failed = 0
    t0 = time.monotonic()
    log = open(os.path.join(a.work_dir, "outcomes.tsv"), "w")
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(run_one, a.picograd, a.work_dir, k, p, w, a.timeout, k % a.compile_every == 0)
                for k, p, w in jobs]
        for n, fut in enumerate(concurrent.futures.as_completed(futs), 1):
            k, path, what, results = fut.result()
            for cmd_name, outcome, err, secs in results:
                counts[cmd_name][outcome] += 1
                slowest[cmd_name] = max(slowest[cmd_name], secs)
                log.write(f"{k}\t{cmd_name}\t{outcome}\t{secs:.2f}\t{what}\n")
                if outcome not in FAILURE_OK:
                    failed += 1
                    stem = os.path.join(failures, f"m{k:05d}-{cmd_name}")
                    shutil.copy(path, stem + ".onnx")
                    with open(stem + ".txt", "w") as fh:
                        fh.write(f"command: picograd {cmd_name} (see cli-mutate.py)\noutcome: {outcome}\nmutation: {what}\n\n{err}")
                    print(f"!! m{k:05d} {cmd_name}: {outcome} ({what}); kept in {stem}.onnx", flush=True)
            os.remove(path)
            if n % 500 == 0:
                el = time.monotonic() - t0
                print(f"cli-mutate: {n}/{a.count} models in {el:.0f} s ({n / el:.1f} models/s), {failed} failures", flush=True)
    log.close()
    el = time.monotonic() - t0
    runs = sum(sum(c.values()) for c in counts.values())
    print(f"\n== cli-mutate: {a.count} mutated models, {runs} CLI runs in {el:.0f} s ({a.count / el:.2f} models/s)")
    for cmd_name in ("run", "compile"):
        print(f"  {cmd_name} (slowest {slowest[cmd_name]:.1f} s):")
        for outcome, c in sorted(counts[cmd_name].items()):
            mark = "" if outcome in FAILURE_OK else "   <- failure"
            print(f"    {outcome:<28} {c:>6}{mark}")
    print(f"  failures: {failed} (inputs in {failures})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
