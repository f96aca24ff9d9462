"""Check a search win on a module whose text elides a constant (seed 001): the best plan of
`--space SPACE` parses in XLA and keeps the module's outputs on random inputs, with the
elided constants filled with random values (`hlopass.search.elided`).

Usage: python benchmarks/search_check_seed.py [--seed-file PATH] [--space pipeline]
       [--budget N] [-o DIR] [--from DIR] [--xla]
The interpreter runs the module twice (seed 001: about 6 minutes each on an idle 2-core
machine, over an hour at load 12), which is why the search itself does not check such
modules' plans. `--xla` compares the two modules' outputs run by XLA:CPU instead (the
oracle, in a child process); `--from DIR` checks the `filled.hlo` and `best.hlo` an earlier
`-o DIR` wrote, without searching again.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import hlopass
from hlopass.checking.corpus import corpus_root
from hlopass.checking.equivalence import check_equivalent, execute_on_xla
from hlopass.execution.inputs import random_inputs
from hlopass.search.combined import SPACES
from hlopass.search.elided import fill_elided

SEED_PIPELINE = "priority-fusion,multi-output-fusion"


def _xla_accepts(text: str) -> tuple[bool, str]:
    """XLA's parser on `text`, in a child process (XLA may abort)."""
    code = ("import sys\nfrom hlopass.execution import oracle\n"
            "ok, why = oracle.accepts(sys.stdin.read())\nprint(ok, why.splitlines()[:1])")  # fmt: skip
    child = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    out = child.stdout.strip()
    return out.startswith("True"), out or child.stderr[-300:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seed-file")
    ap.add_argument("--space", choices=sorted(SPACES), default="pipeline")
    ap.add_argument("--budget", type=int, default=500)
    ap.add_argument("-o", help="write the filled module and the best plan here")
    ap.add_argument("--from", dest="source", help="check DIR/filled.hlo against DIR/best.hlo")
    ap.add_argument("--xla", action="store_true", help="run both on XLA:CPU, not the interpreter")
    args = ap.parse_args(argv)
    if args.source:
        filled = hlopass.parse_hlo((Path(args.source) / "filled.hlo").read_text())
        best = hlopass.parse_hlo((Path(args.source) / "best.hlo").read_text())
        return _check(filled, best, args.xla)
    root = corpus_root()
    if args.seed_file:
        path = Path(args.seed_file)
    elif root is not None:
        path = next((root / "seeds").glob("001_*.hlo"))
    else:
        print("the corpus (../shared/corpus) is not present", file=sys.stderr)
        return 2
    module = hlopass.parse_hlo(path.read_text(), str(path))
    filled, names = fill_elided(module)
    print(f"{path.name}: constants filled with random values: {', '.join(names) or 'none'}")
    t = time.perf_counter()
    r = SPACES[args.space](filled, SEED_PIPELINE, budget=args.budget, top=1, check=False)
    best = r.best
    print(f"search {time.perf_counter() - t:.1f} s: greedy {r.greedy.time_us:.2f} us, best "
          f"{best.time_us:.2f} us ({best.time_us / r.greedy.time_us:.3f}x), "
          f"{'; '.join(best.decisions) or 'the greedy plan'}", flush=True)  # fmt: skip
    if args.o:
        Path(args.o).mkdir(parents=True, exist_ok=True)
        (Path(args.o) / "filled.hlo").write_text(hlopass.print_hlo(filled))
        (Path(args.o) / "best.hlo").write_text(hlopass.print_hlo(best.module))
    return _check(filled, best.module, args.xla)


def _check(filled: Any, best: Any, xla: bool) -> int:
    """The best plan parses in XLA and gives the filled module's outputs on random inputs."""
    ok, why = _xla_accepts(hlopass.print_hlo(best))
    print(f"XLA parses the best plan: {ok} {why}", flush=True)
    t = time.perf_counter()
    inputs = random_inputs(filled, 0)
    if xla:
        want = execute_on_xla(hlopass.print_hlo(filled), inputs)
        got = execute_on_xla(hlopass.print_hlo(best), inputs)
        worst = max((float(np.max(np.abs(np.asarray(w, np.float64) - np.asarray(g, np.float64))))
                     for w, g in zip(want, got, strict=True) if np.size(w)), default=0.0)  # fmt: skip
        same = len(want) == len(got) and all(
            np.shape(w) == np.shape(g) and np.allclose(np.asarray(w, np.float64),
                                                       np.asarray(g, np.float64),
                                                       rtol=1e-3, atol=1e-3, equal_nan=True)
            for w, g in zip(want, got, strict=True)
        )  # fmt: skip
        print(f"XLA:CPU outputs ({time.perf_counter() - t:.0f} s): {len(want)} outputs, "
              f"{'agree' if same else 'DIFFER'}, largest difference {worst:.3g}")  # fmt: skip
        return 0 if ok and same else 1
    eq = check_equivalent(filled, best, inputs)
    print(f"check_equivalent ({time.perf_counter() - t:.0f} s): {'ok' if eq.ok else 'FAILS'} "
          f"{eq}")  # fmt: skip
    return 0 if ok and eq.ok else 1


if __name__ == "__main__":
    sys.exit(main())
