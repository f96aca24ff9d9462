"""A variadic scatter whose combiner mixes its operands (`(a0 + a1, u0 + u1)`, as in the
corpus module import_emit_stablehlo.hlo#81) against XLA-CPU.

XLA's semantics: the combiner takes the N current operand values, then the N updates, and
its i-th result goes to output i. With two distinct operands (equal values or not) XLA-CPU
gives exactly the interpreter's result. Given the same instruction as both operands,
XLA-CPU 0.10.2 is wrong: it gives both outputs one buffer (output 1 equals output 0
everywhere, u0 + u1 nowhere) or crashes (small shapes). The test pins both, so the
benchmark's "known XLA-CPU defect" for #81 stays true or shows when XLA changes."""

from __future__ import annotations

import numpy as np
import pytest

import hlopass
from tests.interp_util import xla_execute_many

_TEXT = """HloModule s
region {
  a0 = f32[] parameter(0)
  a1 = f32[] parameter(1)
  add.9 = f32[] add(a0, a1)
  a2 = f32[] parameter(2)
  a3 = f32[] parameter(3)
  add.10 = f32[] add(a2, a3)
  ROOT t = (f32[], f32[]) tuple(add.9, add.10)
}
ENTRY e {
  p0 = f32[%(d)s] parameter(0)
  q0 = f32[%(d)s] parameter(1)
  i = s64[2,2] parameter(2)
  u = f32[2,%(w)d] parameter(3)
  v = f32[2,%(w)d] parameter(4)
  s = (f32[%(d)s], f32[%(d)s]) scatter(%(ops)s), update_window_dims={1}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=region
  g0 = f32[%(d)s] get-tuple-element(s), index=0
  g1 = f32[%(d)s] get-tuple-element(s), index=1
  ROOT r = (f32[%(d)s], f32[%(d)s]) tuple(g0, g1)
}
"""


def _args(dims):
    p = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    u = (np.arange(2 * dims[2], dtype=np.float32).reshape(2, dims[2]) + 1) / 8
    return [p, p + 0.5, np.array([[1, 2], [3, 0]], np.int64), u, u * 4]


_SHAPES = [(5, 4, 3), (20, 10, 30), (200, 100, 300)]


@pytest.mark.parametrize("dims", _SHAPES)
def test_distinct_operands_match_xla_bit_for_bit(xla, dims):
    args = _args(dims)
    texts = [_TEXT % {"d": ",".join(map(str, dims)), "w": dims[2], "ops": ops}
             for ops in ("p0, q0, i, u, v", "p0, q0, i, u, u")]  # fmt: skip
    for text, r in zip(texts, xla_execute_many([(t, args) for t in texts]), strict=True):
        got = hlopass.evaluate(hlopass.parse_hlo(text), *args)
        assert "outputs" in r, r
        for g, w in zip(got, r["outputs"], strict=True):
            assert np.array_equal(g.view(np.uint32), w.view(np.uint32))
        # the meaning, by hand: output 0 = p0 + q0 at the scattered rows, output 1 = u + v
        p, q, _, u, v = args
        second = v if "u, v" in text else u
        assert np.array_equal(got[0][1, 2], p[1, 2] + q[1, 2])
        assert np.array_equal(got[1][1, 2], u[0] + second[0])
        assert np.array_equal(got[1][3, 0], u[1] + second[1])


@pytest.mark.parametrize("dims", _SHAPES)
def test_one_operand_twice_is_an_xla_cpu_defect(xla, dims):
    args = _args(dims)
    text = _TEXT % {"d": ",".join(map(str, dims)), "w": dims[2], "ops": "p0, p0, i, u, u"}
    got = hlopass.evaluate(hlopass.parse_hlo(text), *args)
    p, _, _, u, _ = args
    assert np.array_equal(got[0][1, 2], 2 * p[1, 2]) and np.array_equal(got[1][1, 2], 2 * u[0])
    (r,) = xla_execute_many([(text, args)])
    if "outputs" not in r:  # the crash
        assert "crash" in r, r
        return
    out0, out1 = r["outputs"]
    assert np.array_equal(out0, got[0])  # output 0 is right
    assert np.array_equal(out1, out0)  # output 1 is output 0's buffer
    assert not np.array_equal(out1, got[1])
