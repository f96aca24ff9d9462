"""The importer checks each instruction's shape rule once per parse for each combination
of inputs the rule reads (issue 14): a pass is remembered under the result and operand
shapes and the attributes that rule read. An instruction with the same shapes as one that
passed, but attributes that break the rule, must still be rejected at its own line, as
XLA:CPU rejects it (its verifier, run in a child process); the module with the valid
instruction twice runs on XLA:CPU and in our interpreter with the same values."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlopass
from hlopass.ir.literal import numpy_dtype
from tests.interp_util import assert_same, xla_execute_many

ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"


def _m(params: list[str], first: str, second: str, extra: str = "") -> str:
    lines = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(params)]
    return (
        "HloModule m\n\n" + extra + "ENTRY e {\n" + "\n".join(lines)
        + f"\n  a = {first}\n  b = {second}\n  ROOT t = tuple(a, b)\n}}\n"
    )  # fmt: skip


# (params, a valid instruction, the same shapes with attributes that break the rule,
# a part of our message, the computations it calls)
CASES = {
    "broadcast": (
        ["f32[4]"], "f32[4,4] broadcast(p0), dimensions={0}",
        "f32[4,4] broadcast(p0), dimensions={2}", "out of range", "",
    ),
    "transpose": (
        ["f32[4,4]"], "f32[4,4] transpose(p0), dimensions={1,0}",
        "f32[4,4] transpose(p0), dimensions={1,1}", "are not a permutation", "",
    ),
    "slice": (
        ["f32[8]"], "f32[4] slice(p0), slice={[0:4]}",
        "f32[4] slice(p0), slice={[6:10]}", "out of bounds", "",
    ),
    "reduce": (
        ["f32[4,4]", "f32[]"], "f32[4] reduce(p0, p1), dimensions={0}, to_apply=add",
        "f32[4] reduce(p0, p1), dimensions={0,1}, to_apply=add", "gives dimensions []", ADD,
    ),
    "dot": (
        ["f32[4,4]", "f32[4,4]"],
        "f32[4,4] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        "f32[4,4] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={}",
        "dot has 1 lhs but 0 rhs contracting dimensions", "",
    ),
    "pad": (
        ["f32[4]", "f32[]"], "f32[6] pad(p0, p1), padding=1_1",
        "f32[6] pad(p0, p1), padding=1_2", "gives f32[7], not f32[6]", "",
    ),
    "concatenate": (
        ["f32[4,2]", "f32[4,2]"], "f32[4,4] concatenate(p0, p1), dimensions={1}",
        "f32[4,4] concatenate(p0, p1), dimensions={0}",
        "concatenate of f32[4,2] and f32[4,2] gives dimensions [8, 2], not f32[4,4]", "",
    ),
    "dynamic-slice": (
        ["f32[8]", "s32[]"], "f32[4] dynamic-slice(p0, p1), dynamic_slice_sizes={4}",
        "f32[4] dynamic-slice(p0, p1), dynamic_slice_sizes={9}", "do not fit", "",
    ),
}  # fmt: skip


def _texts(case: str) -> tuple[str, str]:
    """(the module with the breaking instruction, the module with the valid one twice)"""
    params, good, bad, _, extra = CASES[case]
    return _m(params, good, bad, extra), _m(params, good, good, extra)


@pytest.mark.parametrize("case", list(CASES))
def test_same_shapes_other_attributes_still_checked(case: str):
    bad, good = _texts(case)
    with pytest.raises(hlopass.HloShapeError, match=re.escape(CASES[case][3])) as info:
        hlopass.parse_hlo(bad, "bad.hlo")
    assert info.value.line == bad.splitlines().index(f"  b = {CASES[case][2]}") + 1
    hlopass.parse_hlo(good, "good.hlo")


def _args(params: list[str]) -> list[np.ndarray]:
    out = []
    for s in params:
        et, dims = s.split("[")
        sizes = [int(d) for d in dims.rstrip("]").split(",") if d]
        n = int(np.prod(sizes))
        out.append((np.arange(n) % 5).reshape(sizes).astype(numpy_dtype(et)))
    return out


def test_xla_agrees(xla):
    cases = []
    for case in CASES:
        args = _args(CASES[case][0])
        cases += [(t, args) for t in _texts(case)]
    results = xla_execute_many(cases)
    for i, case in enumerate(CASES):
        bad, good = results[2 * i], results[2 * i + 1]
        assert "outputs" not in bad, f"XLA:CPU runs the bad module of {case}"
        assert "outputs" in good, f"XLA:CPU rejects the good module of {case}: {good}"
        got = hlopass.evaluate(hlopass.parse_hlo(_texts(case)[1]), *_args(CASES[case][0]))
        for g, w in zip(got, good["outputs"], strict=True):
            assert_same(g, w, what=case)  # small integers: exact in any summation order
