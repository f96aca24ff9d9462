"""`dot-merger` on the port of XLA's dot_merger_test.cc (`lit_tests/xla_ports/
dot_merger_test.hlo`): per case, the pass changes the module exactly when XLA's test says
XLA's pass does, and a merged module computes what the original did: in the interpreter
before and after, and on XLA-CPU (which must parse and run our output).

Why the values are compared bit for bit: a merged dot computes each output element with
the same products as before, but a dot kernel (numpy's BLAS in the interpreter, Eigen on
XLA-CPU) may sum them in another order for another shape, so with random floats the last
bits may differ (they do, in the interpreter). The arguments here are small integers
(|x| <= 2, |x| <= 1 for 16-bit floats), so every product and partial sum is an integer
below 2^mantissa bits (at most 20000 * 4 = 80000 < 2^24 for f32, 32 < 2^8 for bf16): each
order of summation gives the exact result, and any difference is a wrong element (a
misplaced or mis-paired element changes some sum: the values are random signs and sizes).
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
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.xdsl_io import context
from tests.interp_util import xla_execute_many

PORT = Path(__file__).resolve().parent.parent / "lit_tests" / "xla_ports" / "dot_merger_test.hlo"
DEFAULT = "dot-merger{max-size-to-merge=9223372036854775807}"
"""XLA's fixture: DotMerger(std::numeric_limits<int64_t>::max())."""
MAX_ELEMENTS = 1_000_000
"""Cases with a larger array are left out of the value checks (CPU time: three of XLA's
cases hold 6M- and 33M-element operands); lit checks their text."""


def _cases() -> list[tuple[str, str, list[tuple[str, bool]]]]:
    """(name, module text, [(pipeline, XLA's changed)]) per section."""
    out = []
    for chunk in PORT.read_text().split("\n// -----\n"):
        head = re.search(r"(?m)^// XLA: (\w+):", chunk)
        changed = re.search(r"(?m)^// XLA-CHANGED: (true|false)$", chunk)
        assert head and changed, "a section without its XLA header"
        spec = re.search(r"(?m)^// XLA-PASS: (.*)$", chunk)
        runs = [(spec.group(1) if spec else DEFAULT, changed.group(1) == "true")]
        second = re.search(r"(?m)^// XLA-PASS-2: (.*)$\n// XLA-CHANGED-2: (true|false)$", chunk)
        if second:
            runs.append((second.group(1), second.group(2) == "true"))
        out.append((head.group(1), chunk, runs))
    return out


CASES = _cases()
RUNS = [(f"{n}[{i}]", text, p, want) for n, text, runs in CASES for i, (p, want) in enumerate(runs)]


def _run(text: str, pipeline: str):
    before = hlopass.parse_hlo(text, "case.hlo")
    after = hlopass.parse_hlo(text, "case.hlo")
    changed = False
    for p in parse_pass_pipeline(pipeline):
        changed |= p.run(context(), after)
    return before, after, changed


def test_every_case_is_collected() -> None:
    assert len(CASES) == 70  # the TEST_Fs of dot_merger_test.cc
    assert len(RUNS) == 71  # MergeRespectsMaxSizeThreshold runs the pass twice


@pytest.mark.parametrize("cid,text,pipeline,want", RUNS, ids=[r[0] for r in RUNS])
def test_changed_as_xla_says(cid, text, pipeline, want) -> None:
    before, after, changed = _run(text, pipeline)
    assert changed == want, f"{cid}: XLA's Run returns {want}"
    # the pass's contract: changed exactly when the printed module differs
    assert changed == (hlopass.print_hlo(before) != hlopass.print_hlo(after))


def _small(text: str) -> bool:
    for dims in re.findall(r"\[([0-9,]+)\]", text):
        if int(np.prod([int(d) for d in dims.split(",")])) > MAX_ELEMENTS:
            return False
    return True


def _integer_args(module, seed: int) -> list[np.ndarray]:
    """Small non-zero integers as each parameter's type (see the module docstring; no
    product is then -0, whose sign XLA-CPU's kernels, starting from +0, would drop)."""
    rng = np.random.default_rng(seed)
    args = []
    for p in entry_computation(module).parameters():
        shape = p.shape
        assert isinstance(shape, ArrayShape)
        bound = 1 if shape.element_type in ("bf16", "f16") else 2
        values = rng.integers(1, bound + 1, size=shape.dims) * rng.choice([-1, 1], shape.dims)
        args.append(values.astype(numpy_dtype(shape.element_type)))
    return args


def _bits(a) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(np.uint8)


MERGED = [(n, text, runs[0][0]) for n, text, runs in CASES if runs[0][1] and _small(text)]
GUARDS = PORT.parent.parent / "passes" / "dot-merger.hlo"
MERGED += [
    (f"guards#{i}", chunk, "dot-merger")
    for i, chunk in enumerate(GUARDS.read_text().split("\n// -----\n"))
    if "// fires" in chunk
]
"""The merging cases of the guard tests (lit_tests/passes/dot-merger.hlo) are run too."""


@cache
def _merged() -> dict[str, tuple[list[np.ndarray], str, str]]:
    """Per merged case: (integer arguments, text before, text after)."""
    out = {}
    for name, text, pipeline in MERGED:
        before, after, _ = _run(text, pipeline)
        out[name] = (_integer_args(before, 5), hlopass.print_hlo(before), hlopass.print_hlo(after))
    return out


@pytest.mark.parametrize("name,text,pipeline", MERGED, ids=[m[0] for m in MERGED])
def test_interpreter_values_kept(name, text, pipeline) -> None:
    args, before_text, after_text = _merged()[name]
    before = hlopass.parse_hlo(before_text, "before.hlo")
    after = hlopass.parse_hlo(after_text, "after.hlo")
    want, got = hlopass.evaluate(before, *args), hlopass.evaluate(after, *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.asarray(g).shape == np.asarray(w).shape, f"{name} output {k}"
        assert np.array_equal(_bits(g), _bits(w)), f"{name} output {k}\n{after_text}"


@cache
def _xla_results() -> list[dict]:
    jobs = []
    for name, _, _ in MERGED:
        args, before_text, after_text = _merged()[name]
        jobs += [(before_text, args), (after_text, args)]
    return xla_execute_many(jobs, timeout=600)


@pytest.mark.parametrize("name,text,pipeline", MERGED, ids=[m[0] for m in MERGED])
def test_xla_runs_our_output(name, text, pipeline, xla) -> None:
    i = [m[0] for m in MERGED].index(name)
    want, got = _xla_results()[2 * i], _xla_results()[2 * i + 1]
    args, before_text, after_text = _merged()[name]
    assert "outputs" in want, f"XLA-CPU cannot run the input of {name}: {want}"
    assert "outputs" in got, f"XLA-CPU cannot run our output of {name}: {got}\n{after_text}"
    ours = hlopass.evaluate(hlopass.parse_hlo(before_text, "before.hlo"), *args)
    for k, (g, w, o) in enumerate(zip(got["outputs"], want["outputs"], ours, strict=True)):
        assert np.array_equal(_bits(g), _bits(w)), f"{name} output {k}: XLA before vs after"
        assert np.array_equal(_bits(g), _bits(o)), f"{name} output {k}: XLA vs interpreter"
