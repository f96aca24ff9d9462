"""How often each rewrite family of the core passes fires over the corpus, how many
instructions each pass removes, and how long it takes per instruction.

Every corpus module (seeds, XLA's test inputs, the parser cases, the JAX programs) is parsed
afresh for each pass, and each of `algsimp`, `constant-folding`, `cse` and `dce` runs on it
alone (not in a pipeline, so the counts are each pass's own). Rewrites are counted with the
passes' trace hook: algsimp's by family (its package module: `slice`, `reduce`, ...), the
others' by pattern. Time is the median of `-n` runs (fresh parse each, not timed; default
GC), summed over modules, divided by their instruction count.

XLA's individual passes are not reachable through jaxlib (no hlo-opt in the wheel), so no
XLA time is printed next to ours.

    python benchmarks/core_passes.py            # every module, median of 3
    python benchmarks/core_passes.py -n 1 --max-instructions 5000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter

from hlopass.checking.corpus import corpus_root, modules
from hlopass.dialects.hlo import computations
from hlopass.errors import HloError
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context

PASSES = ("algsimp", "constant-folding", "cse", "dce")


def _count(module) -> int:
    return sum(1 for c in computations(module) for _ in c.instructions)


def _families() -> dict[str, str]:
    """algsimp pattern class name -> its family (the module it lives in)."""
    from hlopass.passes import algsimp
    from hlopass.passes.algsimp import barriers

    out = {c.__name__: c.__module__.rsplit(".", 1)[1] for c in algsimp.PATTERNS}
    out[barriers.OptBarrierDropUnusedElements.__name__] = "barriers"
    return out


class _Hits(Counter):
    """Rewrites by pattern name, filled by the passes' trace hook."""

    def update_pattern(self, pattern: str, what: str) -> None:
        self[pattern] += 1


def measure(text: str, name: str, spec: str, repeats: int) -> tuple[float, int, int, Counter]:
    """(median seconds, instructions before, after, rewrites by pattern) of one pass."""
    times: list[float] = []
    fired: Counter = Counter()
    n0 = n1 = 0
    for k in range(repeats):
        module = parse_hlo(text, name)
        (p,) = parse_pass_pipeline(spec)
        hits = _Hits()
        n0 = _count(module)
        t0 = time.perf_counter()
        p.run(context(), module, hits.update_pattern)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - t0)
        n1 = _count(module)
        if k == 0:
            fired = hits
    return statistics.median(times), n0, n1, fired


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=3, help="runs per (module, pass); the median")
    ap.add_argument("--max-instructions", type=int, default=0, help="skip larger modules")
    args = ap.parse_args()
    root = corpus_root()
    if root is None:
        print("error: the corpus (../shared/corpus or $HLOPASS_CORPUS) is not present")
        return 1
    families = _families()
    total_time: Counter = Counter()
    removed: Counter = Counter()
    changed_modules: Counter = Counter()
    fired: dict[str, Counter] = {p: Counter() for p in PASSES}
    modules_with: dict[str, Counter] = {p: Counter() for p in PASSES}
    failures: list[str] = []
    n_modules = n_instr = skipped = 0
    for cm in modules(root):
        try:
            probe = parse_hlo(cm.text, cm.id)
        except HloError:
            skipped += 1
            continue
        n = _count(probe)
        if args.max_instructions and n > args.max_instructions:
            skipped += 1
            continue
        n_modules += 1
        n_instr += n
        for spec in PASSES:
            try:
                secs, n0, n1, hits = measure(cm.text, cm.id, spec, args.n)
            except Exception as e:  # a pass failing on a module: listed, not fatal
                first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
                failures.append(f"{cm.id}: {spec}: {type(e).__name__}: {first}")
                continue
            total_time[spec] += secs
            removed[spec] += n0 - n1
            if hits:
                changed_modules[spec] += 1
            for pattern, k in hits.items():
                key = families.get(pattern, pattern) if spec == "algsimp" else pattern
                fired[spec][key] += k
            for key in {families.get(p, p) if spec == "algsimp" else p for p in hits}:
                modules_with[spec][key] += 1
    print(f"{n_modules} modules, {n_instr} instructions ({skipped} skipped: unparsed or "
          f"over --max-instructions); median of {args.n} runs per (module, pass)\n")  # fmt: skip
    print(f"{'pass':18} {'modules changed':>16} {'instr removed':>14} {'total s':>9} "
          f"{'us/instr':>9}")  # fmt: skip
    for spec in PASSES:
        us = 1e6 * total_time[spec] / max(n_instr, 1)
        print(f"{spec:18} {changed_modules[spec]:>16} {removed[spec]:>14} "
              f"{total_time[spec]:>9.2f} {us:>9.1f}")  # fmt: skip
    for spec in PASSES:
        print(f"\n{spec}: rewrites by {'family' if spec == 'algsimp' else 'pattern'} "
              "(fired, modules)")  # fmt: skip
        for key, k in fired[spec].most_common():
            print(f"  {key:36} {k:>8} {modules_with[spec][key]:>6}")
    print(f"\n{len(failures)} (module, pass) runs failed:")
    for line in failures:
        print("  " + line)
    print("\nNote: XLA's passes cannot be timed from jaxlib; counts are per pass run alone.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
