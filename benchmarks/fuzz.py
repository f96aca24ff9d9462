"""Long mutation-fuzzing runs over the corpus (hlopass.checking.fuzz), for what CI's short run misses.

Each mutant is parsed, printed and re-read, priced, and run through
fixpoint{passes=algsimp,constant-folding,dce,cse} with verification after each pass, under a
per-case time limit; with --xla the print of every accepted mutant goes to XLA's parser in
a child process. Prints the problems grouped by place, the slow cases, what the cost model
refused, and XLA's disagreements with their reasons; exits 1 when there is a problem.

Usage: python benchmarks/fuzz.py [--seed N] [--count N] [--time SECONDS] [--per-case S]
       [--xla] [--save DIR]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlopass.checking import fuzz  # noqa: E402
from hlopass.checking.corpus import corpus_root  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=2000, help="mutants to run")
    ap.add_argument("--time", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--per-case", type=float, default=10.0, help="time limit of one case (s)")
    ap.add_argument("--slow", type=float, default=2.0, help="report cases slower than this (s)")
    ap.add_argument("--max-chars", type=int, default=6000, help="largest seed module")
    ap.add_argument("--xla", action="store_true", help="check prints with XLA's parser")
    ap.add_argument("--save", type=Path, help="write each problem's mutant here")
    args = ap.parse_args()
    root = corpus_root()
    if root is None:
        print("corpus not found (../shared/corpus or $HLOPASS_CORPUS)", file=sys.stderr)
        return 2
    seeds = fuzz.seed_texts(root, args.max_chars)
    t0 = time.monotonic()
    deadline = t0 + args.time if args.time else None
    report = fuzz.campaign(seeds, args.seed, args.count, args.per_case, deadline, args.slow)
    elapsed = time.monotonic() - t0
    print(f"seeds {len(seeds)}, mutants {report.cases}, accepted {report.accepted}, "
          f"problems {len(report.problems)}, slow {len(report.slow)}, {elapsed:.0f} s "
          f"({report.cases / max(elapsed, 1e-9):.1f} mutants/s)")  # fmt: skip
    groups = collections.Counter(p for _, p, _ in report.problems)
    for problem, n in groups.most_common():
        print(f"  {n:5d}  {problem}")
    for seconds, kinds, _ in sorted(report.slow, reverse=True)[:20]:
        print(f"  slow {seconds:.1f} s ({kinds})")
    if report.cost_refused:
        print("cost model refused (HloError, allowed):")
        for what, n in sorted(report.cost_refused.items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {n:5d}  {what}")
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for i, (kinds, problem, text) in enumerate(report.problems):
            (args.save / f"problem_{i:04d}.hlo").write_text(f"// {kinds}: {problem}\n{text}")
    differences = []
    if args.xla:
        differences = fuzz.xla_differences(report.printed)
        print(f"XLA's parser on {len(report.printed)} prints of accepted mutants: "
              f"{len(differences)} rejected")  # fmt: skip
        reasons = collections.Counter(r[:160] for _, _, r in differences)
        for reason, n in reasons.most_common(30):
            print(f"  {n:5d}  {reason}")
        if args.save:
            for i, (mutant, _, reason) in enumerate(differences):
                (args.save / f"xla_{i:04d}.hlo").write_text(f"// {reason}\n{mutant}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
