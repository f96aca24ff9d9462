"""`splitk-rewriter` on the port of XLA's splitk_rewriter_test.cc
(`lit_tests/xla_ports/splitk_rewriter_test.hlo`) and on the firing guard cases
(`lit_tests/passes/splitk-rewriter.hlo`): per port case the pass changes the module exactly
when XLA's test says XLA's pass does, and every split module computes what the original
did in the interpreter, bit for bit.

Why bit for bit holds: the split dot sums the same products, zeros added, in another
grouping. The arguments are small integers (±1, ±2), so every partial sum is an integer
below 2^24 (at most 4 x 102401 here), exact in f32 (the accumulator: a bf16 dot is summed in
f32 and rounded once, before and after): any difference is a misplaced or mis-paired
element, which changes some sum.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.dialects.hlo import entry_computation
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.xdsl_io import context

ROOT = Path(__file__).resolve().parent.parent / "lit_tests"
PORT = ROOT / "xla_ports" / "splitk_rewriter_test.hlo"
GUARDS = ROOT / "passes" / "splitk-rewriter.hlo"
DEFAULT = "splitk-rewriter"


def _chunks(path: Path) -> list[str]:
    return path.read_text().split("\n// -----\n")


def _port_cases() -> list[tuple[str, str, str, str]]:
    """(XLA's test name, module text, pipeline, XLA's changed: true, false or any)."""
    out = []
    for chunk in _chunks(PORT):
        head = re.search(r"(?m)^// XLA: (\w+):", chunk)
        changed = re.search(r"(?m)^// XLA-CHANGED: (true|false|any)$", chunk)
        assert head and changed, "a section without its XLA header"
        spec = re.search(r"(?m)^// XLA-PASS: (.*)$", chunk)
        out.append((head.group(1), chunk, spec.group(1) if spec else DEFAULT, changed.group(1)))
    return out


PORTS = _port_cases()
FIRING = [(n, t, p) for n, t, p, c in PORTS if c == "true"] + [
    (f"guards#{i}", chunk, DEFAULT)
    for i, chunk in enumerate(_chunks(GUARDS))
    if "// fires" in chunk
]


def _run(text: str, pipeline: str):
    before = hlopass.parse_hlo(text, "case.hlo")
    after = hlopass.parse_hlo(text, "case.hlo")
    changed = False
    for p in parse_pass_pipeline(pipeline):
        changed |= p.run(context(), after)
    return before, after, changed


def test_every_case_is_collected() -> None:
    assert len(PORTS) == 7  # the TEST_Fs of splitk_rewriter_test.cc
    assert len(FIRING) == 7  # four splitting ports and three firing guard cases


@pytest.mark.parametrize("name,text,pipeline,want", PORTS, ids=[p[0] for p in PORTS])
def test_changed_as_xla_says(name, text, pipeline, want) -> None:
    before, after, changed = _run(text, pipeline)
    if want != "any":
        assert changed == (want == "true"), f"{name}: XLA's Run returns {want}"
    assert changed == (hlopass.print_hlo(before) != hlopass.print_hlo(after))


def test_guard_cases_change_exactly_when_marked() -> None:
    for i, chunk in enumerate(_chunks(GUARDS)):
        _, _, changed = _run(chunk, DEFAULT)
        assert changed == ("// fires" in chunk), f"guards#{i}"


def _args(module, seed: int) -> list[np.ndarray]:
    """±1 and ±2 at random, as each parameter's type (see the module docstring)."""
    rng = np.random.default_rng(seed)
    args = []
    for p in entry_computation(module).parameters():
        shape = p.shape
        assert isinstance(shape, ArrayShape)
        values = rng.choice([-1, 1], shape.dims) * rng.integers(1, 3, size=shape.dims)
        args.append(values.astype(numpy_dtype(shape.element_type)))
    return args


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8)


@pytest.mark.parametrize("name,text,pipeline", FIRING, ids=[f[0] for f in FIRING])
def test_interpreter_values_kept(name, text, pipeline) -> None:
    before, after, changed = _run(text, pipeline)
    assert changed
    printed = hlopass.print_hlo(after)
    assert " reduce(" in printed, name
    after = hlopass.parse_hlo(printed, "after.hlo")  # what the printer says
    args = _args(before, 3)
    want, got = hlopass.evaluate(before, *args), hlopass.evaluate(after, *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.asarray(g).shape == np.asarray(w).shape, f"{name} output {k}"
        assert np.array_equal(_bits(g), _bits(w)), f"{name} output {k}"
        assert np.abs(np.asarray(w, np.float64)).max() > 0, f"{name}: an all-zero output"
