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

# Types outside the CI test's list: their differences with the reason.
EXTRA_KNOWN = {
    ("f8e3m4/unary", "sqrt", path): "XLA-CPU computes f8e3m4 in f16, then rounds again "
    "(double rounding: sqrt(15.5) = 4, correctly rounded 3.875)"
    for path in ("interpreter", "folding")
} | {
    ("c128/unary", op, path): "XLA-CPU's complex formula is reproduced; its f64 atan2 on "
    "a denormal part is not: arg(-1.5 + 5e-324i) = -pi"
    for op in ("rsqrt", "log-plus-one")
    for path in ("interpreter", "folding")
}


def _reason(case: str, op: str, path: str) -> str:
    """The reason listed for this finding, or for the same finding of the type standing for
    it in the CI list (c64 for c128, u8 for unsigned, f8e4m3fn for 8/4-bit floats)."""
    et, family = case.split("/")
    if (case, op, path) in KNOWN:
        return KNOWN[(case, op, path)]
    if (case, op, path) in EXTRA_KNOWN:
        return EXTRA_KNOWN[(case, op, path)]
    stand_in = "c64" if et == "c128" else "u8" if et[0] == "u" else "f8e4m3fn" if (
        et.startswith(("f8", "f4"))) else None  # fmt: skip
    if stand_in is not None:
        key = (f"{stand_in}/{family}", op.replace("c128", "c64"), path)
        if key in KNOWN:
            return f"(as for {stand_in}) {KNOWN[key]}"
    return "UNEXPLAINED"


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
