"""Interpreter speed against XLA:CPU on the JAX corpus, measured in the same run.

    python3 benchmarks/interpreter_bench.py [--repeat N]

For each jax/<program>/before_optimizations.hlo: interpreter time (best of N) and XLA:CPU
execute time including compilation (jax needed; omitted when absent).
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
    print(f"{'program':24} {'interp ms':>10} {'xla ms':>10}")
    for folder in sorted(p for p in (root / "jax").iterdir() if p.is_dir()):
        text = (folder / "before_optimizations.hlo").read_text()
        with np.load(folder / "io.npz") as d:
            ins = [d[f"in{i}"] for i in range(sum(k.startswith("in") for k in d.files))]
        module = hlopass.parse_hlo(text)
        t_interp = _best(lambda: hlopass.evaluate(module, *ins), args.repeat)
        t_xla = _best(lambda: oracle.execute(text, ins), args.repeat) if oracle.available() else float("nan")
        print(f"{folder.name:24} {t_interp * 1e3:10.1f} {t_xla * 1e3:10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
