"""A SliceToDynamic result against XLA-CPU: its defined values are the interpreter's
`x[:s0, :s1, ...]` (sizes noted beside the bounded array), and XLA-CPU returns them packed
at the front of the bounded buffer in row-major order, the rest uninitialised; this is the
rule benchmarks/corpus_coverage.py compares dynamic outputs by."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hlopass
from hlopass.interpreter.dynamic import sizes_of
from tests.interp_util import xla_execute_many

_TEXT = """HloModule m
ENTRY e {
  p = s32[%(dims)s] parameter(0)
%(sizes)s
  ROOT c = s32[%(bounded)s] custom-call(p, %(names)s), custom_call_target="SliceToDynamic"
}"""


def _module(dims: tuple[int, ...], sizes: tuple[int, ...]) -> str:
    lines = "\n".join(f"  n{k} = s32[] constant({s})" for k, s in enumerate(sizes))
    bounded = ",".join(f"<={d}" if s != d else str(d) for d, s in zip(dims, sizes, strict=True))
    return _TEXT % {"dims": ",".join(map(str, dims)), "sizes": lines, "bounded": bounded,
                    "names": ", ".join(f"n{k}" for k in range(len(sizes)))}  # fmt: skip


_CASES = [((2, 2, 2), (2, 1, 2)), ((3, 4), (3, 2)), ((3, 4), (1, 4)), ((5,), (3,)),
          ((2, 3, 4), (1, 2, 3))]  # fmt: skip


@pytest.mark.parametrize(("dims", "sizes"), _CASES)
def test_slice_to_dynamic_defined_values_are_xla_packed_prefix(xla, dims, sizes):
    text = _module(dims, sizes)
    p = (np.arange(math.prod(dims), dtype=np.int32) * 7 - 11).reshape(dims)
    (got,) = hlopass.evaluate(hlopass.parse_hlo(text), p)
    assert sizes_of(got) == sizes
    (res,) = xla_execute_many([(text, [p])])
    (want,) = res["outputs"]
    assert want.shape == dims
    defined = got[tuple(slice(0, s) for s in sizes)].reshape(-1)
    assert np.array_equal(defined, p[tuple(slice(0, s) for s in sizes)].reshape(-1))
    assert np.array_equal(want.reshape(-1)[: math.prod(sizes)], defined)
