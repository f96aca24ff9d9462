"""cuDNN convolution passes (`conv-rewriter`, `conv-padding-legalization`,
`cudnn-fused-convolution-rewriter`) keep values: every section of their lit files (the
ports of XLA's tests in lit_tests/xla_ports and the guard cases in lit_tests/passes), run
through the file's pipeline, computes what the input computed, in the interpreter (which
executes the cuDNN calls) and on XLA:CPU (which runs them lowered back to HLO by
`lower_cudnn_calls`, via `xla_friendly`); the input itself is checked on XLA:CPU too,
where it has no cuDNN calls.

Why bit for bit: the arguments are small integers (|x| <= 2) and every scale in the cases
is a power of two or an integer, so every product and partial sum is an integer far below
2^24: any order of summation gives the exact result, and a difference is a wrong element.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.dialects.hlo import entry_computation
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import run_pipeline
from tests.interp_util import xla_execute_many, xla_friendly

LIT = Path(__file__).resolve().parent.parent / "lit_tests"
FILES = {
    "xla_ports/conv_rewriter_test.hlo": "conv-rewriter{compute-capability=0.0}",
    "xla_ports/conv_padding_legalization_test.hlo": "conv-padding-legalization",
    "xla_ports/cudnn_fused_conv_rewriter_test.hlo": "conv-rewriter,cudnn-fused-convolution-rewriter",
    "passes/conv-rewriter.hlo": "conv-rewriter",
    "passes/conv-padding-legalization.hlo": "conv-padding-legalization",
    "passes/cudnn-fused-convolution-rewriter.hlo": "conv-rewriter,cudnn-fused-convolution-rewriter,dce",
}
MAX_ELEMENTS = 1_000_000
"""Cases with a larger array are left to lit (CPU time: XLA's 8x120x256x256 cases)."""


def _name(chunk: str) -> str:
    m = re.search(r"(?m)^HloModule (\S+)", chunk)
    assert m, chunk[:200]
    return m.group(1).rstrip(",")


def _small(text: str) -> bool:
    code = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    for dims in re.findall(r"\[([0-9,]+)\]", code):
        if int(np.prod([int(d) for d in dims.split(",")])) > MAX_ELEMENTS:
            return False
    return True


NOT_A_VALUE_CASE = {
    "conv_padding_legalization_test.hlo:ForwardConvolveWithWindowDilationAndAsymmetricPadding":
        "XLA's call claims a 1x3x5x5 result where its window gives 1x3x4x4 (custom calls "
        "are not shape-checked); lit checks the rewrite",
}  # fmt: skip
"""Sections whose input has no values to keep, with why."""
NON_INTEGER = {"conv_padding_legalization_test.hlo:BackwardInputConvolve": 36}
"""Sections with a non-integer, non-negative constant filter, and the most products an
output element sums (the filter's element count: each filter element meets one input
element per output): XLA:CPU may sum them in another order (see `_order_bound`)."""
U64 = 2.0**-53  # unit roundoff of f64


def _order_bound(n: int, magnitudes: np.ndarray) -> np.ndarray:
    """How far two summation orders of the same n products may differ: each is within
    gamma_{n-1} * sum|products| of the exact sum (Higham, Accuracy and Stability, 4.2), so
    they differ by at most twice that. The filter is non-negative, so the input run on
    |args| gives sum|products| per output."""
    gamma = (n - 1) * U64 / (1 - (n - 1) * U64)
    return 2 * gamma * magnitudes


ALL = [
    (f"{f.split('/')[-1]}:{_name(chunk)}", chunk, pipeline)
    for f, pipeline in FILES.items()
    for chunk in (LIT / f).read_text().split("\n// -----\n")
    if _small(chunk)
]
CASES = [c for c in ALL if c[0] not in NOT_A_VALUE_CASE]


def test_cases_collected() -> None:
    # conv_rewriter_test: 17 of 20 sections small enough (TestInvalidTypes is in its own
    # file, two hold 1M- and 63M-element arrays); 5 + 12 ports; 14 + 7 + 9 guard sections
    assert len(ALL) == 17 + 5 + 12 + 14 + 7 + 9
    assert set(NOT_A_VALUE_CASE) | set(NON_INTEGER) <= {c[0] for c in ALL}


def _args(module, seed: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for p in entry_computation(module).parameters():
        s = p.shape
        assert isinstance(s, ArrayShape)
        v = rng.integers(1, 3, size=s.dims) * rng.choice([-1, 1], s.dims)
        out.append(v.astype(numpy_dtype(s.element_type)))
    return out


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8)


def _leaves(v) -> list[np.ndarray]:
    return [x for e in v for x in _leaves(e)] if isinstance(v, (tuple, list)) else [np.asarray(v)]


@cache
def _runs() -> dict[str, tuple[list[np.ndarray], str, str]]:
    out = {}
    for name, text, pipeline in CASES:
        before = hlopass.parse_hlo(text, "case.hlo")
        after = hlopass.parse_hlo(text, "case.hlo")
        run_pipeline(after, pipeline, verify_each=True)
        out[name] = (_args(before), hlopass.print_hlo(before), hlopass.print_hlo(after))
    return out


@pytest.mark.parametrize("name,text,pipeline", CASES, ids=[c[0] for c in CASES])
def test_interpreter_values_kept(name, text, pipeline) -> None:
    args, before, after = _runs()[name]
    want = _leaves(hlopass.evaluate(hlopass.parse_hlo(before, "b.hlo"), *args))
    got = _leaves(hlopass.evaluate(hlopass.parse_hlo(after, "a.hlo"), *args))
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and np.array_equal(_bits(g), _bits(w)), f"{name} out {k}\n{after}"


@cache
def _xla() -> list[dict]:
    jobs = []
    for name, _, _ in CASES:
        args, before, after = _runs()[name]
        jobs += [(xla_friendly(before), args), (xla_friendly(after), args)]
    return xla_execute_many(jobs, timeout=900)


@pytest.mark.parametrize("name,text,pipeline", CASES, ids=[c[0] for c in CASES])
def test_xla_cpu_runs_our_output(name, text, pipeline, xla) -> None:
    i = [c[0] for c in CASES].index(name)
    before_run, after_run = _xla()[2 * i], _xla()[2 * i + 1]
    args, before, after = _runs()[name]
    assert "outputs" in after_run, f"XLA:CPU cannot run our output of {name}: {after_run}"
    ours = _leaves(hlopass.evaluate(hlopass.parse_hlo(before, "b.hlo"), *args))
    got = _leaves(after_run["outputs"])
    mags = None
    if name in NON_INTEGER:
        assert "-" not in text.split("constant(", 1)[1].split("\n", 1)[0]  # a non-negative filter
        mags = _leaves(hlopass.evaluate(hlopass.parse_hlo(before, "b.hlo"),
                                        *[np.abs(a) for a in args]))  # fmt: skip
    for k, (g, o) in enumerate(zip(got, ours, strict=True)):
        if mags is not None:
            if o.dtype.kind != "f":  # the scratch buffer
                assert np.array_equal(_bits(g), _bits(o)), f"{name} out {k}"
                continue
            bound = _order_bound(NON_INTEGER[name], mags[k])
            assert np.all(np.abs(np.asarray(g) - o) <= bound), f"{name} out {k}: beyond order"
            continue
        assert np.array_equal(_bits(g), _bits(o)), f"{name} out {k}: XLA:CPU vs interpreter"
    if "outputs" in before_run and name not in NON_INTEGER:  # the input's convolutions
        for k, (w, o) in enumerate(zip(_leaves(before_run["outputs"]), ours, strict=True)):
            assert np.array_equal(_bits(w), _bits(o)), f"{name} out {k}: XLA:CPU on the input"
