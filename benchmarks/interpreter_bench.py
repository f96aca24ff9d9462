"""Interpreter speed against XLA:CPU on the JAX corpus, measured in the same run.

    python3 benchmarks/interpreter_bench.py [--repeat N]

For each jax/<program>/before_optimizations.hlo: interpreter time (best of N), XLA:CPU
time for the same module (`oracle.compile` once, then run, best of N; jax needed,
`nan` when absent) and whether the interpreter's outputs match XLA's recorded ones in
io.npz (`ok`; the tolerances of tests/test_interpreter.py).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlopass
from hlopass import oracle
from hlopass.corpus import corpus_root


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
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
        ok = _matches(got, outs, text)
        print(
            f"{folder.name:24} {t_interp * 1e3:10.1f} {t_xla * 1e3:10.1f} {t_interp / t_xla:7.2f}  {ok}"
        )
    print(f"{'total':24} {total_i * 1e3:10.1f} {total_x * 1e3:10.1f} {total_i / total_x:7.2f}")
    return 0


def _matches(got, want, text) -> str:
    rtol, atol = (
        (2e-2, 2e-2) if "bf16[" in text else (2e-3, 2e-3) if "f16[" in text else (1e-5, 1e-6)
    )
    if len(got) != len(want):
        return f"MISMATCH ({len(got)} outputs, expected {len(want)})"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"MISMATCH out{i} shape/dtype"
        if g.dtype.kind in "iub":
            same = np.array_equal(g, w)
        else:
            kind = np.complex128 if g.dtype.kind == "c" else np.float64
            same = np.allclose(g.astype(kind), w.astype(kind), rtol=rtol, atol=atol, equal_nan=True)
        if not same:
            return f"MISMATCH out{i}"
    return "ok"


if __name__ == "__main__":
    raise SystemExit(main())
