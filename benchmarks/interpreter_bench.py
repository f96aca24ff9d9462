"""Interpreter speed against XLA:CPU on the JAX corpus, measured in the same run.

    python3 benchmarks/interpreter_bench.py [--repeat N] [--loop-only] [--iterations K,..]

First a long `while` loop (LOOP_ITERATIONS iterations of a 10-instruction body; target:
under LOOP_TARGET_S seconds), timed as users get it: `hlopass.evaluate` in a fresh
process (import and parse included), wall and CPU time, median of N runs, XLA:CPU's run
of the same module in the same run; `--iterations` times the same loop at other trip
counts too (e.g. 1000000). Wall time counts whatever else the machine runs; CPU time
is the interpreter's own.

For each jax/<program>/before_optimizations.hlo: interpreter time (best of N), XLA:CPU
time for the same module (`oracle.compile` once, then run, best of N; jax needed,
`nan` when absent) and whether the interpreter's outputs match XLA's recorded ones in
io.npz (`ok`): floats within the bound `hlopass.checking.error_bound` derives from the program and
its inputs (as tests/test_interpreter.py compares them), so the verdict does not depend on
the CPU's summation order; fixed tolerances only for a program it derives no bound for.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlopass
from hlopass.checking.corpus import corpus_root
from hlopass.checking.error_bound import NoBound, error_bounds, within_bound
from hlopass.execution import oracle


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


LOOP_ITERATIONS = 100_000
LOOP_TARGET_S = 5.0
_LOOP_TEXT = """HloModule loop

cond {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(%d)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  y = f32[4] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[4] constant({0.5, 0.25, 0.125, 1})
  xy = f32[4] multiply(x, h)
  x1 = f32[4] subtract(y, xy)
  y1 = f32[4] maximum(x1, y)
  ROOT t = (s32[], f32[4], f32[4]) tuple(i1, x1, y1)
}

ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  z = s32[] constant(0)
  t = (s32[], f32[4], f32[4]) tuple(z, x, y)
  w = (s32[], f32[4], f32[4]) while(t), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}
"""


def loop_text(iterations: int) -> str:
    return _LOOP_TEXT % iterations


LOOP = loop_text(LOOP_ITERATIONS)

_LOOP_CHILD = """
import sys, time
import numpy as np
import hlopass
t, c = time.perf_counter(), time.process_time()
m = hlopass.parse_hlo(sys.stdin.read())
x = np.array([1, 2, 3, 4], np.float32)
out = hlopass.evaluate(m, x, x + 1)[0]
print(time.perf_counter() - t, time.process_time() - c, *out.tolist())
"""


def _loop(repeat: int, iterations: int = LOOP_ITERATIONS) -> None:
    import statistics
    import subprocess
    import sys

    text = loop_text(iterations)
    runs, cpu = [], []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", _LOOP_CHILD], input=text, text=True,
                              capture_output=True, check=True)  # fmt: skip
        secs, cpu_secs, *out = proc.stdout.split()
        runs.append(float(secs))
        cpu.append(float(cpu_secs))
    t_interp = statistics.median(runs)
    t_xla = float("nan")
    same = "no XLA"
    if oracle.available():
        run = oracle.compile(text)
        x = np.array([1, 2, 3, 4], np.float32)
        want = run([x, x + 1])[0]
        same = "ok" if np.array_equal(np.array(out, np.float32), want) else "MISMATCH"
        t_xla = statistics.median(_time(lambda: run([x, x + 1])) for _ in range(repeat))
    verdict = "meets" if t_interp < LOOP_TARGET_S else "MISSES"
    if iterations != LOOP_ITERATIONS:
        verdict = "no target at this count; " + verdict
    print(f"while loop, {iterations} iterations x 10 instructions: interpreter "
          f"{t_interp:.2f} s, CPU {statistics.median(cpu):.2f} s (median of {repeat} fresh "
          f"processes, parse included; {verdict} "
          f"the {LOOP_TARGET_S:.0f} s target), XLA:CPU {t_xla * 1e3:.2f} ms, ratio "
          f"{t_interp / t_xla:.0f}x, outputs {same}")  # fmt: skip


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--loop-only", action="store_true", help="only the while-loop benchmark")
    ap.add_argument("--iterations", default="", help="also time the loop at these trip counts")
    args = ap.parse_args()
    _loop(args.repeat)
    for k in filter(None, args.iterations.split(",")):
        _loop(args.repeat, int(k))
    if args.loop_only:
        return 0
    root = corpus_root()
    if root is None:
        print("corpus not present")
        return 0
    print(f"{'program':24} {'interp ms':>10} {'xla ms':>10} {'ratio':>7}  outputs")
    total_i = total_x = 0.0
    for folder in sorted(p for p in (root / "jax").iterdir() if p.is_dir()):
        text = (folder / "before_optimizations.hlo").read_text()
        with np.load(folder / "io.npz") as d:
            ins = [d[f"in{i}"] for i in range(sum(k.startswith("in") for k in d.files))]
            outs = [d[f"out{i}"] for i in range(sum(k.startswith("out") for k in d.files))]
        module = hlopass.parse_hlo(text)
        got = hlopass.evaluate(module, *ins)
        t_interp = _best(lambda m=module, a=ins: hlopass.evaluate(m, *a), args.repeat)
        # XLA's time is the run of the compiled executable; compilation is not counted.
        run = oracle.compile(text) if oracle.available() else None
        t_xla = _best(lambda a=ins, r=run: r(a), args.repeat) if run else float("nan")
        total_i += t_interp
        total_x += t_xla
        ok = _matches(got, outs, text, module, ins)
        print(
            f"{folder.name:24} {t_interp * 1e3:10.1f} {t_xla * 1e3:10.1f} {t_interp / t_xla:7.2f}  {ok}"
        )
    print(f"{'total':24} {total_i * 1e3:10.1f} {total_x * 1e3:10.1f} {total_i / total_x:7.2f}")
    return 0


def _matches(got, want, text, module, ins) -> str:
    rtol, atol = (
        (2e-2, 2e-2) if "bf16[" in text else (2e-3, 2e-3) if "f16[" in text else (1e-5, 1e-6)
    )
    if len(got) != len(want):
        return f"MISMATCH ({len(got)} outputs, expected {len(want)})"
    try:
        bounds = [e for _, e in error_bounds(module, *ins)]
    except NoBound:
        bounds = None
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"MISMATCH out{i} shape/dtype"
        if g.dtype.kind in "iub":
            same = np.array_equal(g, w)
        elif bounds is not None:
            same = bool(np.all(within_bound(g, w, bounds[i])))
        else:
            kind = np.complex128 if g.dtype.kind == "c" else np.float64
            same = np.allclose(g.astype(kind), w.astype(kind), rtol=rtol, atol=atol, equal_nan=True)
        if not same:
            return f"MISMATCH out{i}"
    return "ok"


if __name__ == "__main__":
    raise SystemExit(main())
