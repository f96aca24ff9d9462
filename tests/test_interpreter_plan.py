"""The interpreter's plans (hlopass/interpreter/plan.py): the fast steps give the bits of
the handlers they stand for, and a `while` loop whose second plan skips re-flushing the
state gives XLA-CPU's bits (denormals, signed zeros, a state part passed through)."""

from __future__ import annotations

import numpy as np
import pytest

import hlopass
from hlopass.interpreter.numeric import daz, float_max_min
from hlopass.interpreter.plan import _daz, _max_min, covers

_SPECIAL = {
    np.float32: [0.0, -0.0, 1e-40, -1e-40, 1.4e-45, 1.1754942e-38, 1.1754944e-38, -2.5,
                 np.inf, -np.inf, np.nan, 3.4e38],
    np.float64: [0.0, -0.0, 1e-310, -1e-310, 5e-324, 2.2250738585072009e-308,
                 2.2250738585072014e-308, -2.5, np.inf, -np.inf, np.nan, 1.7e308],
}  # fmt: skip


def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_plan_daz_is_numeric_daz(dt):
    vals = np.array(_SPECIAL[dt], dt)
    for x in [vals, vals[:1], np.array(vals[2]), np.array([1.5, 2.0], dt), vals[::-1]]:
        assert np.array_equal(_bits(_daz(x)), _bits(daz(x)))
    assert _daz(np.array([1.0, 2.0], dt)).dtype == dt


@pytest.mark.parametrize("code", ["maximum", "minimum"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_plan_max_min_is_float_max_min(code, dt):
    vals = np.array(_SPECIAL[dt], dt)
    a, b = np.meshgrid(vals, vals)
    fast = _max_min(np.maximum if code == "maximum" else np.minimum, code)
    assert np.array_equal(_bits(fast(a, b)), _bits(float_max_min(code, a, b)))
    for x, y in [(np.array(-0.0, dt), np.array(0.0, dt)), (np.array(1.0, dt), np.array(2.0, dt))]:
        assert np.array_equal(_bits(fast(x, y)), _bits(np.asarray(float_max_min(code, x, y))))


def test_covers():
    assert covers((True, (True, False)), (True, (False, False)))
    assert not covers((True, False), (True, True))
    assert covers(False, (False, False)) and not covers(False, (False, True))


# State: counter, x (arithmetic each iteration: flushed by the body), p (passed through:
# its denormals must survive), m (max/min with signed zeros of x).
_LOOP = """HloModule plan_loop

cond {
  s = (s32[], f32[6], f32[6], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(%d)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[6], f32[6], f32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[6] get-tuple-element(s), index=1
  p = f32[6] get-tuple-element(s), index=2
  m = f32[6] get-tuple-element(s), index=3
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[6] constant({0.5, 0.5, -0.5, 0.5, 1, 0.25})
  x1 = f32[6] multiply(x, h)
  mx = f32[6] maximum(m, x1)
  m1 = f32[6] minimum(mx, p)
  ROOT t = (s32[], f32[6], f32[6], f32[6]) tuple(i1, x1, p, m1)
}

ENTRY e {
  x = f32[6] parameter(0)
  p = f32[6] parameter(1)
  m = f32[6] parameter(2)
  z = s32[] constant(0)
  t = (s32[], f32[6], f32[6], f32[6]) tuple(z, x, p, m)
  ROOT w = (s32[], f32[6], f32[6], f32[6]) while(t), condition=cond, body=body
}
"""


@pytest.mark.parametrize("trips", [0, 1, 2, 5, 200])
def test_while_plan_flushing_matches_xla_bits(xla, trips):
    text = _LOOP % trips
    x = np.array([1e-37, -1e-37, 3e-38, 0.0, -0.0, 2.0], np.float32)  # reach denormals
    p = np.array([1e-40, -1e-40, -0.0, 0.0, 5.0, -3.0], np.float32)  # denormals kept
    m = np.array([-0.0, 0.0, -0.0, 0.0, -1e-39, 1.0], np.float32)
    got = hlopass.evaluate(hlopass.parse_hlo(text), x, p, m)
    want = xla.execute(text, [x, p, m])
    assert len(got) == len(want) == 4
    assert int(got[0]) == int(want[0]) == trips
    for k in (1, 2, 3):
        assert np.array_equal(_bits(got[k]), _bits(want[k])), (k, got[k], want[k])
    if trips == 0:  # nothing ran: every bit of the input comes back
        assert np.array_equal(_bits(got[2]), _bits(p))
