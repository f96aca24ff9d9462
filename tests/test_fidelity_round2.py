"""Issue 34: XLA's own test inputs read without the verifier, MLIR byte escapes in a braced
backend config, and XLA-CPU's two integer powers, each checked against XLA (child process).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import hlopass
from hlopass.errors import HloShapeError
from hlopass.pipeline import run_pipeline
from tests.interp_util import xla_execute_many

# --- integer power ----------------------------------------------------------------------------
#
# XLA-CPU computes an integer power two ways: its compiled code on run-time values, and its
# HloEvaluator where its constant folding replaces a power of constants by its value before
# compiling. The grid runs each integer type both ways in XLA and compares every element with
# the interpreter (on the same two modules) and with our constant folding.

_INT_TYPES = {
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
}  # fmt: skip


def _grid(t: str) -> tuple[np.ndarray, np.ndarray]:
    """Every (base, exponent) pair of a few edge values: 0, 1, small, the extremes, exponents
    past 6 bits and past the width, negatives for the signed types."""
    info = np.iinfo(_INT_TYPES[t])
    bases = [0, 1, 2, 3, 5, 7, 10, 16, 255, info.max, info.max - 1, info.min, info.min + 1]
    exps = [0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 127, 128, 200, 255, 256, 1000]
    exps += [info.max, info.max - 1, info.min]
    if info.min < 0:
        bases += [-1, -2, -3, -7]
        exps += [-1, -2, -3, -64, -65, info.min + 1]

    def fit(xs: list[int]) -> list[int]:
        return sorted({x for x in xs if info.min <= x <= info.max})

    bs, es = fit(bases), fit(exps)
    a = np.array([b for b in bs for _ in es], _INT_TYPES[t])
    b = np.array([e for _ in bs for e in es], _INT_TYPES[t])
    return a, b


def _power_module(t: str, a: np.ndarray, b: np.ndarray, constants: bool) -> str:
    n = len(a)
    if constants:
        ca, cb = (",".join(map(str, x.tolist())) for x in (a, b))
        lhs, rhs = f"constant({{{ca}}})", f"constant({{{cb}}})"
    else:
        lhs, rhs = "parameter(0)", "parameter(1)"
    return (
        f"HloModule pow_{t}\n\nENTRY e {{\n  a = {t}[{n}] {lhs}\n  b = {t}[{n}] {rhs}\n"
        f"  ROOT c = {t}[{n}] power(a, b)\n}}\n"
    )


@pytest.fixture(scope="module")
def power_grid(xla):
    jobs, cases = [], {}
    for t in _INT_TYPES:
        a, b = _grid(t)
        runtime, folded = _power_module(t, a, b, False), _power_module(t, a, b, True)
        ours = hlopass.parse_hlo(folded)
        run_pipeline(ours, "constant-folding")
        ours_text = hlopass.print_hlo(ours)
        jobs += [(runtime, [a, b]), (folded, []), (ours_text, [])]
        cases[t] = (a, b, runtime, folded, ours_text)
    res = xla_execute_many(jobs)
    return {t: (*cases[t], *res[3 * i : 3 * i + 3]) for i, t in enumerate(_INT_TYPES)}


def _mismatches(a, b, got, want) -> list[tuple[int, int, int, int]]:
    bad = np.nonzero(got != want)[0]
    return [(int(a[i]), int(b[i]), int(got[i]), int(want[i])) for i in bad[:8]]


@pytest.mark.parametrize("t", list(_INT_TYPES))
def test_integer_power_matches_xla_cpu(t, power_grid):
    a, b, runtime, folded, ours_text, x_run, x_fold, x_ours = power_grid[t]
    for r in (x_run, x_fold, x_ours):
        assert "outputs" in r, r
    (want_run,), (want_fold,) = x_run["outputs"], x_fold["outputs"]
    assert want_run.dtype == a.dtype and want_fold.dtype == a.dtype
    # the grid does tell the two apart (else the test could not see a mix-up)
    assert (want_run != want_fold).any()
    (got_run,) = hlopass.evaluate(hlopass.parse_hlo(runtime), a, b)
    assert got_run.dtype == a.dtype
    assert (got_run == want_run).all(), _mismatches(a, b, got_run, want_run)
    (got_fold,) = hlopass.evaluate(hlopass.parse_hlo(folded))
    assert (got_fold == want_fold).all(), _mismatches(a, b, got_fold, want_fold)
    # our constant folding folded it (no power left), to XLA's folded value, as XLA reads it
    assert "power(" not in ours_text
    (ours,) = x_ours["outputs"]
    assert (ours == want_fold).all(), _mismatches(a, b, ours, want_fold)


def test_integer_power_hand_values():
    """A few values worked by hand: 3^200 mod 2^8 = 161 and mod 2^32 = 2868424865 (XLA's
    folder); the compiled code reads u8 200 as -56 (so 0) and cuts s32 100 to 36."""
    folded = _power_module("u8", np.array([3], np.uint8), np.array([200], np.uint8), True)
    assert hlopass.evaluate(hlopass.parse_hlo(folded))[0].tolist() == [161]
    folded = _power_module("u32", np.array([3], np.uint32), np.array([200], np.uint32), True)
    assert hlopass.evaluate(hlopass.parse_hlo(folded))[0].tolist() == [pow(3, 200, 1 << 32)]
    a, b = np.array([3, 3], np.uint8), np.array([200, 8], np.uint8)
    runtime = hlopass.parse_hlo(_power_module("u8", a, b, False))
    assert hlopass.evaluate(runtime, a, b)[0].tolist() == [0, 6561 % 256]
    a32, b32 = np.array([3], np.int32), np.array([100], np.int32)
    runtime = hlopass.parse_hlo(_power_module("s32", a32, b32, False))
    assert hlopass.evaluate(runtime, a32, b32)[0].tolist() == [
        np.int32(pow(3, 36, 1 << 32) - (1 << 32))
    ]


# Which powers XLA-CPU folds (evaluator) and which it compiles, in a module that also has
# run-time values: u8 3^200 is 161 folded and 0 compiled, 3^130 9 and 0.
_WHICH_FOLDS = {
    "constant operands": "  b = u8[4] constant({3,3,3,5})\n  e = u8[4] constant({200,200,130,255})",
    "broadcasts of constants": "  k = u8[] constant(3)\n  b = u8[4] broadcast(k), dimensions={}\n"
    "  m = u8[] constant(200)\n  e = u8[4] broadcast(m), dimensions={}",
    "computed from constants": "  a = u8[2,2] constant({{1,1},{1,2}})\n  q = u8[4] reshape(a)\n"
    "  t = u8[4] constant({2,2,2,3})\n  b = u8[4] add(q, t)\n"
    "  w = s32[4] constant({200,200,130,255})\n  e = u8[4] convert(w)",
    "iota exponent": "  b = u8[4] constant({3,3,3,3})\n  i = u8[4] iota(), iota_dimension=0\n"
    "  m = u8[4] constant({200,200,200,200})\n  e = u8[4] add(i, m)",
    "iota base": "  i = u8[4] iota(), iota_dimension=0\n  k = u8[4] constant({1,1,1,1})\n"
    "  b = u8[4] add(i, k)\n  e = u8[4] constant({200,200,130,255})",
    "run-time base": "  k = u8[4] constant({3,3,3,3})\n  b = u8[4] add(p, k)\n"
    "  e = u8[4] constant({200,200,130,255})",
}


def _which_folds_module(body: str) -> str:
    return (
        f"HloModule m\n\nENTRY e {{\n  p = u8[4] parameter(0)\n{body}\n"
        "  c = u8[4] power(b, e)\n  ROOT r = u8[4] add(c, p)\n}\n"
    )


@pytest.fixture(scope="module")
def which_folds(xla):
    zero = np.zeros(4, np.uint8)
    res = xla_execute_many([(_which_folds_module(b), [zero]) for b in _WHICH_FOLDS.values()])
    return dict(zip(_WHICH_FOLDS, res, strict=True))


@pytest.mark.parametrize("case", list(_WHICH_FOLDS))
def test_integer_power_folded_where_xla_folds_it(case, which_folds):
    r = which_folds[case]
    assert "outputs" in r, r
    (want,) = r["outputs"]
    text = _which_folds_module(_WHICH_FOLDS[case])
    (got,) = hlopass.evaluate(hlopass.parse_hlo(text), np.zeros(4, np.uint8))
    assert got.tolist() == want.tolist()


# --- MLIR byte escapes in a braced backend config ----------------------------------------------

_HEX_CONFIG = """HloModule cutedsl

ENTRY %main (a: f32[4], b: f32[4]) -> f32[4] {
  %a = f32[4]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  ROOT %cc = f32[4]{0} custom-call(%a, %b), custom_call_target="__cutedsl$vector_add", ATTR
}
"""

# (attribute text, XLA's parser accepts it): checked against XLA in the test
_ESCAPE_CASES = [
    ('backend_config={kernel = "\\7F\\A4\\F6\\00ab\\22q\\\\z", n = 3 : i64}', True),
    ('backend_config=  /* c */ {k = "\\A", j = {x = "\\ZZ"}}', True),
    ('backend_config={k = "a\\"}\\q"}', True),
    ('backend_config="\\A"', False),  # a quoted config is unescaped: refused
    ('frontend_attributes={k="\\A"}', False),
    ('backend_config={k = "\\A"}, frontend_attributes={k="\\A"}', False),
    ('backend_config={k = "\\A"}, metadata={op_name="backend_config={\\q"}', False),
]


@pytest.mark.parametrize("attr,accepted", _ESCAPE_CASES)
def test_braced_backend_config_escapes_like_xla(attr, accepted, xla):
    text = _HEX_CONFIG.replace("ATTR", attr)
    ok, why = xla.accepts(text)
    assert ok == accepted, why
    if not accepted:
        with pytest.raises(hlopass.HloParseError, match=r"^x:6:\d+: error: invalid escape"):
            hlopass.parse_hlo(text, "x")
        return
    got = hlopass.print_hlo(hlopass.parse_hlo(text, "x"))
    assert got == xla.reprint(text)
    assert hlopass.print_hlo(hlopass.parse_hlo(got)) == got


# --- reading without the verifier --------------------------------------------------------------

_CALL_MISMATCH = """HloModule m

callee {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}

ENTRY main {
  p = f32[4] parameter(0)
  ROOT c = f32[] call(p), to_apply=callee
}
"""


def test_parse_hlo_verify_false_reads_what_xla_reads(xla):
    with pytest.raises(HloShapeError, match=r"^m.hlo:10:8: error: c: operand 0 f32\[4\]"):
        hlopass.parse_hlo(_CALL_MISMATCH, "m.hlo")
    assert xla.accepts(_CALL_MISMATCH)[0]
    got = hlopass.print_hlo(hlopass.parse_hlo(_CALL_MISMATCH, "m.hlo", verify=False))
    assert got == xla.reprint(_CALL_MISMATCH)


def test_cli_no_verify(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(_CALL_MISMATCH)
    cmd = [sys.executable, "-m", "hlopass.commands.cli"]  # (hlopass-opt)
    refused = subprocess.run([*cmd, str(path)], capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and f"{path}:10:8: error: c:" in refused.stderr
    read = subprocess.run([*cmd, "--no-verify", str(path)], capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    assert "ROOT %c = f32[] call(%p), to_apply=%callee" in read.stdout
