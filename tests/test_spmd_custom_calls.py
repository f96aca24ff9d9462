"""`SPMDFullToShardShape` / `SPMDShardToFullShape` custom-calls (and `Sharding`): on one
device a shard is the whole array, so each passes its operand through unchanged. XLA-CPU
runs them (checked here, bit for bit, against the interpreter); with shapes that differ
(a real partitioning over several devices) the interpreter reports them unsupported."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlopass
from tests.interp_util import _enable_x64

_CASES = [  # (element type, dims, numpy dtype)
    ("f32", (4, 6), np.float32),
    ("bf16", (3,), ml_dtypes.bfloat16),
    ("s8", (2, 3, 4), np.int8),
    ("u64", (), np.uint64),
    ("c64", (5, 2), np.complex64),
    ("pred", (7,), np.bool_),
    ("f64", (0, 3), np.float64),
]


def _module(ty: str, dims: tuple, sharded: bool) -> str:
    s = f"{ty}[{','.join(map(str, dims))}]"
    repl, manual = (", sharding={replicated}", ", sharding={manual}") if sharded else ("", "")
    return f"""HloModule spmd
ENTRY e {{
  p = {s} parameter(0){repl}
  a = {s} custom-call(p), custom_call_target="SPMDFullToShardShape"{manual}
  c = {s} copy(a){manual}
  b = {s} custom-call(c), custom_call_target="SPMDShardToFullShape"{repl}
  ROOT t = ({s}, {s}) tuple(a, b)
}}"""


def _input(dims: tuple, dt) -> np.ndarray:
    rng = np.random.default_rng(len(dims))
    if np.dtype(dt).kind == "b":
        return rng.integers(0, 2, dims).astype(dt)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, dims, dtype=dt, endpoint=True)
    x = rng.standard_normal(dims) * 1e3
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(dims)
    x = np.asarray(x).astype(dt)
    if x.size:  # special values pass through unchanged too
        flat = x.reshape(-1)
        flat[0] = -0.0 if np.dtype(dt).kind != "c" else complex(-0.0, np.nan)
    return x


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8) if a.dtype.itemsize and a.size else a.astype(np.uint8)


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharding-attrs"])
@pytest.mark.parametrize(("ty", "dims", "dt"), _CASES, ids=[c[0] for c in _CASES])
def test_spmd_shard_conversions_are_identity_like_xla_cpu(xla, ty, dims, dt, sharded):
    _enable_x64()
    text = _module(ty, dims, sharded)
    x = _input(dims, dt)
    got = hlopass.evaluate(hlopass.parse_hlo(text), x)
    want = xla.execute(text, [x])
    assert len(got) == len(want) == 2
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape == dims and g.dtype == w.dtype
        assert np.array_equal(_bits(g), _bits(w))
        assert np.array_equal(_bits(g), _bits(x))  # and both are the operand itself


def test_spmd_shard_shape_of_several_devices_is_unsupported():
    """A shard smaller than the full array means several devices: no one-device meaning."""
    text = """HloModule spmd
ENTRY e {
  p = f32[8,6] parameter(0), sharding={devices=[2,1]0,1}
  ROOT a = f32[4,6] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
}"""
    with pytest.raises(hlopass.UnsupportedOpError, match="shapes differ"):
        hlopass.evaluate(hlopass.parse_hlo(text), np.zeros((8, 6), np.float32))
