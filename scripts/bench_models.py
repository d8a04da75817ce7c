"""The real-model bench's driver (`scripts/bench.sh models`): times each exported model
(scripts/bench-models.py) through picograd's ONNX path and through onnxruntime, in one run, pair
by pair, and prints a table of ratios.

picograd's side is `examples/bench_models.rs`, kept alive as a child process (one per thread count,
`PICOGRAD_THREADS`) and commanded over stdin/stdout; onnxruntime runs in this process with default
session options (graph optimizations on), `intra_op_num_threads` = the thread count and
`inter_op_num_threads` = 1. Each pair times picograd (a `Jit` replay of `Model::run`, and plain
`Model::run` as a second row) and onnxruntime back to back, the side that goes first alternating;
each timing is the mean over enough calls to last about BUDGET seconds, after a short pause
(SETTLE) so neither side's idle-spinning threads run into the other's timing. A ratio is the median over
the pairs of (onnxruntime time / picograd time): above 1 means picograd is faster.

Before timing, `picograd run` checks each model in a new process with an empty `$PICOGRAD_CACHE`
(its wall time is the cold first result) and its output is compared with onnxruntime's on the same
input (max abs diff, and that diff over the largest |reference|).

Usage: bench_models.py MODELDIR PICOGRAD_CLI BENCH_EXAMPLE [--threads 1,2] [--batches 1,8]
                       [--pairs 5] [--models a,b] [--budget 0.3] [--no-plain] [--no-cold]"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

MODELS = ["resnet18", "mobilenet_v2", "lstm", "transformer", "oddnet"]


def stem(name, batch):
    return name if batch == 1 else f"{name}_b{batch}"


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


class Picograd:
    """The long-lived `bench_models` example at one thread count."""

    def __init__(self, exe, threads):
        env = dict(os.environ, PICOGRAD_THREADS=str(threads))
        self.proc = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        if not reply.startswith("ok"):
            raise RuntimeError(f"picograd: '{line}' -> {reply or 'no answer (the process ended)'}")
        return [float(w) for w in reply.split()[1:]]

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait()


# Seconds of quiet before each timed measurement: onnxruntime's pool threads spin for a while
# after a run (`session.intra_op.allow_spinning`, on by default), and at 2 threads on 2 cores a
# measurement started in that while lost a core to them (oddnet batch 8, 2 threads: picograd
# 5.0-5.9 ms right after onnxruntime against 4.0-4.2 after a pause, 2026-11-28). The pause goes
# before both sides' measurements, so neither inherits the other's threads.
SETTLE = 0.05


def calls_for(seconds_per_call, budget):
    return max(1, min(10000, int(budget / max(seconds_per_call, 1e-7))))


def ort_time(sess, feed, n):
    t = time.perf_counter()
    for _ in range(n):
        sess.run(None, feed)
    return (time.perf_counter() - t) / n


def cold_check(cli, modeldir, name, threads):
    """`picograd run` in a new process with an empty cache: wall seconds and the max abs diff of
    its output against onnxruntime's on the same input."""
    path = os.path.join(modeldir, f"{name}.onnx")
    x = os.path.join(modeldir, f"{name}.input.npy")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PICOGRAD_CACHE=os.path.join(tmp, "cache"), PICOGRAD_THREADS=str(threads))
        t = time.perf_counter()
        r = subprocess.run([cli, "run", path, "-i", x, "--out", os.path.join(tmp, "out")], env=env,
                           capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode != 0:
            return wall, None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        ours = np.load(os.path.join(tmp, "out", "y.npy"))
    t = time.perf_counter()
    sess = ort_session(path, threads)
    ref = sess.run(None, {"x": np.load(x)})[0]
    ort_cold = time.perf_counter() - t
    if ours.shape != ref.shape:
        return wall, None, f"shape {ours.shape} against onnxruntime's {ref.shape}"
    diff = float(np.max(np.abs(ours.astype(np.float64) - ref)))
    scale = float(np.max(np.abs(ref)))
    return wall, (diff, scale, ort_cold), None


def time_model(pg, modeldir, name, batch, threads, args):
    """Rows for one model at one batch and thread count: (kind, pg s, ort s, ratio) per kind."""
    s = stem(name, batch)
    path = os.path.join(modeldir, f"{s}.onnx")
    xpath = os.path.join(modeldir, f"{s}.input.npy")
    first, capture, kernels = pg.ask(f"load {path} {xpath}")
    sess = ort_session(path, threads)
    feed = {"x": np.load(xpath)}
    sess.run(None, feed)
    # Calibrate the call counts so each timing lasts about the budget.
    n_ort = calls_for(ort_time(sess, feed, 3), args.budget)
    n_jit = calls_for(pg.ask("jit 3")[0], args.budget)
    kinds = [("jit", n_jit)]
    if not args.no_plain:
        n_run = calls_for(pg.ask("run 1")[0], args.budget)
        kinds.append(("run", n_run))
    pairs = {k: [] for k, _ in kinds}

    def ours(kind, n):
        time.sleep(SETTLE)
        return pg.ask(f"{kind} {n}")[0]

    def theirs():
        time.sleep(SETTLE)
        return ort_time(sess, feed, n_ort)

    for i in range(args.pairs):
        for kind, n in kinds:
            if i % 2 == 0:
                o = ours(kind, n)
                t = theirs()
            else:
                t = theirs()
                o = ours(kind, n)
            pairs[kind].append((o, t))
    rows = []
    for kind, _ in kinds:
        p = pairs[kind]
        ratio = statistics.median(t / o for o, t in p)
        rows.append((kind, statistics.median(o for o, _ in p), statistics.median(t for _, t in p), ratio))
    info = f"first Model::run {first:.2f} s, capture {capture:.2f} s, {int(kernels)} kernels"
    return rows, info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("modeldir")
    ap.add_argument("cli")
    ap.add_argument("example")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--budget", type=float, default=0.3)
    ap.add_argument("--no-plain", action="store_true", help="skip the plain Model::run rows")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold `picograd run` check")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    batches = [int(b) for b in args.batches.split(",")]
    models = args.models.split(",")
    print(f"onnxruntime {ort.__version__}, numpy {np.__version__}; {os.cpu_count()} CPUs; load {os.getloadavg()}",
          flush=True)

    failed = set()
    if not args.no_cold:
        print("\ncold first result: `picograd run -i x.npy` in a new process, empty PICOGRAD_CACHE, "
              f"PICOGRAD_THREADS={max(threads)}; output against onnxruntime's (batch 1)", flush=True)
        for name in models:
            wall, check, err = cold_check(args.cli, args.modeldir, name, max(threads))
            if err:
                failed.add(name)
                print(f"  {name:13} FAILED after {wall:.2f} s: {err}", flush=True)
            else:
                diff, scale, ort_cold = check
                print(f"  {name:13} {wall:6.2f} s  (onnxruntime session + first run in-process "
                      f"{ort_cold:.3f} s); max abs diff {diff:.2e} (max |y| {scale:.2e})", flush=True)

    table = []
    for t in threads:
        pg = Picograd(args.example, t)
        try:
            for name in models:
                if name in failed:
                    continue
                for b in batches:
                    try:
                        rows, info = time_model(pg, args.modeldir, name, b, t, args)
                    except RuntimeError as e:
                        print(f"  {name} batch {b}, {t} thread(s): {e}", flush=True)
                        pg.close()
                        pg = Picograd(args.example, t)
                        continue
                    print(f"  {name} batch {b}, {t} thread(s): {info}", flush=True)
                    for kind, ours, theirs, ratio in rows:
                        table.append((name, b, t, kind, ours, theirs, ratio))
                        print(f"    {kind:4} picograd {ours * 1e3:9.3f} ms  onnxruntime {theirs * 1e3:9.3f} ms"
                              f"  ratio {ratio:.3f}", flush=True)
        finally:
            pg.close()

    label = {"jit": "Jit replay", "run": "Model::run"}
    print("\n| model | batch | threads | picograd path | picograd ms | onnxruntime ms | ratio (ort ÷ picograd) |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for name, b, t, kind, ours, theirs, ratio in table:
        print(f"| {name} | {b} | {t} | {label[kind]} | {ours * 1e3:.3f} | {theirs * 1e3:.3f} | {ratio:.3g}× |")
    for kind in ("jit", "run"):
        rs = [r for *_, k, _, _, r in table if k == kind]
        if rs:
            g = math.exp(sum(math.log(r) for r in rs) / len(rs))
            print(f"geometric mean, {label[kind]}: {g:.3f}× over {len(rs)} rows; "
                  f"{sum(r >= 0.8 for r in rs)} of {len(rs)} rows at ≥ 0.8×")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
