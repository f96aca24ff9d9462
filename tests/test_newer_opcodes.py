"""The interpreter on the opcodes newest in XLA's list: `scan` (checked against XLA:CPU,
in a child process) and `mulhi` (which XLA's StableHLO bridge cannot lower, so checked
against products worked out by hand)."""

from __future__ import annotations

import numpy as np
import pytest

import hlopass
from hlopass.execution import oracle
from tests.conftest import ORACLE_MISSING
from tests.interp_util import assert_same, xla_execute_many

_SCAN = """HloModule scan
step {
  x = f32[] parameter(0)
  c = f32[] parameter(1)
  s = f32[] subtract(x, c)
  m = f32[] multiply(x, c)
  ROOT r = (f32[], f32[]) tuple(m, s)
}

ENTRY main {
  p = f32[5] parameter(0)
  z = f32[] constant(100)
  ROOT s = (f32[5], f32[]) scan(p, z), dimensions={0}, num_carries=1REV, to_apply=step
}
"""
_SCAN_2D = """HloModule scan2d
step {
  x = s32[3] parameter(0)
  c = s32[3] parameter(1)
  s = s32[3] add(x, c)
  ROOT r = (s32[3], s32[3]) tuple(s, s)
}

ENTRY main {
  p = s32[4,3] parameter(0)
  z = s32[3] constant({1, 2, 3})
  ROOT s = scan(p, z), dimensions={0}, num_carries=1, to_apply=step
}
"""


_SCANS = {
    "forward": (_SCAN.replace("REV", ""), np.array([1, 2, 3, 4, 5], np.float32)),
    "reverse": (
        _SCAN.replace("REV", ", is_reverse=true"),
        np.array([1, -2, 3, 0.5, 5], np.float32),
    ),
    "rows": (_SCAN_2D, np.arange(12, dtype=np.int32).reshape(4, 3)),
}


@pytest.fixture(scope="module")
def xla_scans():
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    answers = xla_execute_many([(t, [a]) for t, a in _SCANS.values()])
    return dict(zip(_SCANS, answers, strict=True))


@pytest.mark.parametrize("key", list(_SCANS))
def test_scan_matches_xla(xla_scans, key):
    text, arg = _SCANS[key]
    answer = xla_scans[key]
    assert "outputs" in answer, answer
    got = hlopass.evaluate(hlopass.parse_hlo(text), arg)
    assert len(got) == len(answer["outputs"])
    for g, w in zip(got, answer["outputs"], strict=True):
        assert_same(g, w)  # a few exact float products and differences: bit-exact


_MULHI = """HloModule m
ENTRY e {
  p = ELT[4] parameter(0)
  q = ELT[4] parameter(1)
  ROOT s = ELT[4] mulhi(p, q)
}
"""


@pytest.mark.parametrize(
    ("t", "a", "b", "want"),
    [
        # 2^30 * 8 = 2^33 -> 2; -15 -> -1; -63 -> -1; (-2^31)^2 = 2^62 -> 2^30
        ("s32", [1 << 30, -5, 7, -(1 << 31)], [8, 3, -9, -(1 << 31)], [2, -1, -1, 1 << 30]),
        # 2^34 -> 4; 15 -> 0; (2^32 - 1)^2 = 2^64 - 2^33 + 1 -> 2^32 - 2
        ("u32", [1 << 31, 5, 7, 2**32 - 1], [8, 3, 9, 2**32 - 1], [4, 0, 0, 2**32 - 2]),
        # (2^63 - 1) * 2 = 2^64 - 2 -> 0; -1 * 1 -> -1; 2^62 * 4 = 2^64 -> 1; 0
        ("s64", [2**63 - 1, -1, 1 << 62, 0], [2, 1, 4, -7], [0, -1, 1, 0]),
        # 200 * 200 = 40000 = 156 * 256 + 64 -> 156; 255 * 255 = 65025 -> 254
        ("u8", [200, 255, 1, 16], [200, 255, 255, 16], [156, 254, 0, 1]),
    ],
)
def test_mulhi_by_hand(t, a, b, want):
    dt = {"s32": np.int32, "u32": np.uint32, "s64": np.int64, "u8": np.uint8}[t]
    module = hlopass.parse_hlo(_MULHI.replace("ELT", t))
    (got,) = hlopass.evaluate(module, np.array(a, dt), np.array(b, dt))
    assert_same(got, np.array(want, dt))


def test_async_update_passes_the_async_value_through():
    text = """HloModule a
wrapped {
  x = f32[3] parameter(0)
  n = f32[3] negate(x)
  ROOT e = f32[3] multiply(n, x)
}

ENTRY main {
  p = f32[3] parameter(0)
  s = ((f32[3]), f32[3], u32[]) async-start(p), calls=wrapped
  u = ((f32[3]), f32[3], u32[]) async-update(s)
  ROOT d = f32[3] async-done(u)
}
"""
    x = np.array([1.5, -2, 0], np.float32)
    (got,) = hlopass.evaluate(hlopass.parse_hlo(text), x)
    assert_same(got, -x * x)  # one rounding per element: exact in float32
