"""The full op-level differential grid against XLA-CPU: every element type.

    python3 benchmarks/semantics_vs_xla.py [TYPE,TYPE,...]

Runs `tests.op_grid` (every elementwise, compare, convert and bitcast-convert op on a table
of special values) through XLA-CPU, `hlopass.evaluate` and `constant-folding` + our print +
XLA-CPU, and prints the mismatching elements per (case, op, path) with the reason listed in
tests/test_semantics_vs_xla.py (KNOWN), or UNEXPLAINED. The CI test runs a subset of types.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.op_grid import ALL_TYPES, cases, run_grid  # noqa: E402
from tests.test_semantics_vs_xla import KNOWN  # noqa: E402


def _reason(case: str, op: str, path: str) -> str:
    known = KNOWN.get((case, op, path))
    if known is not None:
        return known
    # the CI list covers c64; the same causes hold for c128 and the other narrow types
    twin = KNOWN.get((case.replace("c128", "c64"), op.replace("c128", "c64"), path))
    if twin is None and case.split("/")[0] in (
        "f8e5m2",
        "f8e4m3",
        "f8e3m4",
        "f8e4m3fnuz",
        "f8e5m2fnuz",
        "f8e4m3b11fnuz",
        "f4e2m1fn",
    ):
        twin = KNOWN.get(("f8e4m3fn/" + case.split("/")[1], op, path))
    return f"(as for c64/f8e4m3fn) {twin}" if twin else "UNEXPLAINED"


def main() -> int:
    types = tuple(sys.argv[1].split(",")) if len(sys.argv) > 1 else ALL_TYPES
    t = time.perf_counter()
    findings, compared = run_grid(cases(types))
    unexplained = 0
    print(f"{'case':22} {'op':28} {'path':12} {'elements':>8}  reason / example")
    for f in findings:
        reason = _reason(f.case, f.op, f.path)
        unexplained += reason == "UNEXPLAINED"
        print(f"{f.case:22} {f.op:28} {f.path:12} {f.count:8}  {reason[:70]}")
        if reason == "UNEXPLAINED":
            print(f"{'':73}{f.detail[:150]}")
    mismatching = sum(f.count for f in findings)
    print(f"\n{len(types)} element types, {compared} elements compared per path, "
          f"{mismatching} mismatching elements in {len(findings)} (case, op, path) findings, "
          f"{unexplained} unexplained; {time.perf_counter() - t:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
