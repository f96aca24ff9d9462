"""`dot-dimension-merger` on the port of XLA's dot_dimension_merger_test.cc
(`lit_tests/xla_ports/dot_dimension_merger_test.hlo`) and on the firing guard cases
(`lit_tests/passes/dot-dimension-merger.hlo`): per port case the pass changes the module
exactly when XLA's test says XLA's pass does, and every merged module computes what the
original did in the interpreter, bit for bit.

Why bit for bit holds: a merged dot sums the same products as the original, maybe in another
order. The arguments are small integers (±1, ±2), so every product and partial sum is an
integer far below 2^24, exact in the f32 accumulator (the interpreter accumulates bf16 dots
in f32 and rounds once): no summation order rounds, and any difference is a misplaced
element, which changes some sum (the values are random in sign, size and place).
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
PORT = ROOT / "xla_ports" / "dot_dimension_merger_test.hlo"
GUARDS = ROOT / "passes" / "dot-dimension-merger.hlo"


def _chunks(path: Path) -> list[str]:
    return path.read_text().split("\n// -----\n")


def _port_cases() -> list[tuple[str, str, bool]]:
    """(XLA's test name, module text, XLA's changed) per section."""
    out = []
    for chunk in _chunks(PORT):
        head = re.search(r"(?m)^// XLA: (\w+):", chunk)
        changed = re.search(r"(?m)^// XLA-CHANGED: (true|false)$", chunk)
        assert head and changed, "a section without its XLA header"
        out.append((head.group(1), chunk, changed.group(1) == "true"))
    return out


PORTS = _port_cases()
FIRING = [(n, t) for n, t, c in PORTS if c] + [
    (f"guards#{i}", chunk) for i, chunk in enumerate(_chunks(GUARDS)) if "// fires" in chunk
]


def _run(text: str):
    before = hlopass.parse_hlo(text, "case.hlo")
    after = hlopass.parse_hlo(text, "case.hlo")
    changed = False
    for p in parse_pass_pipeline("dot-dimension-merger"):
        changed |= p.run(context(), after)
    return before, after, changed


def test_every_case_is_collected() -> None:
    assert len(PORTS) == 5  # the TEST_Fs of dot_dimension_merger_test.cc
    assert len(FIRING) == 6  # the two merging ports and four firing guard cases


@pytest.mark.parametrize("name,text,want", PORTS, ids=[p[0] for p in PORTS])
def test_changed_as_xla_says(name, text, want) -> None:
    before, after, changed = _run(text)
    assert changed == want, f"{name}: XLA's Run returns {want}"
    assert changed == (hlopass.print_hlo(before) != hlopass.print_hlo(after))


def test_guard_cases_change_exactly_when_marked() -> None:
    for i, chunk in enumerate(_chunks(GUARDS)):
        _, _, changed = _run(chunk)
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


@pytest.mark.parametrize("name,text", FIRING, ids=[f[0] for f in FIRING])
def test_interpreter_values_kept(name, text) -> None:
    before, after, changed = _run(text)
    assert changed
    after = hlopass.parse_hlo(hlopass.print_hlo(after), "after.hlo")  # what the printer says
    assert "dot(" in hlopass.print_hlo(after)
    args = _args(before, 3)
    want, got = hlopass.evaluate(before, *args), hlopass.evaluate(after, *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.asarray(g).shape == np.asarray(w).shape, f"{name} output {k}"
        assert np.array_equal(_bits(g), _bits(w)), f"{name} output {k}"
        assert np.abs(np.asarray(w, np.float64)).max() > 0, f"{name}: an all-zero output"
