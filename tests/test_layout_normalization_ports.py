"""The ports of XLA's layout_normalization_test.cc keep values: every section of
lit_tests/xla_ports/layout_normalization_test.hlo runs through the interpreter before and
after `layout-normalization` (and after the layout-sensitive algsimp XLA runs next) on
seeded random inputs, and the outputs agree bit for bit. The lit file checks the text."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hlopass.dialects.hlo import computations
from hlopass.execution.inputs import random_inputs
from hlopass.interpreter import evaluate
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo

PORTS = Path(__file__).parent.parent / "lit_tests" / "xla_ports" / "layout_normalization_test.hlo"
AFTER_ALGSIMP = "layout-normalization,algsimp{is-layout-sensitive=true}"


def _sections() -> list[tuple[str, str]]:
    out = []
    for chunk in PORTS.read_text().split("\n// -----\n"):
        m = re.search(r"^// XLA: (\w+)$", chunk, re.M)
        assert m, f"a section without `// XLA:` in {PORTS.name}"
        out.append((m.group(1), chunk))
    return out


SECTIONS = _sections()

OPAQUE = {"CustomCallTransformerModifiesInPlaceAndReturnsNullopt"}
"""Cases the interpreter cannot run (a custom call to `foo`): the module must come back
unchanged instead."""

REORDERS_WINDOW = {"ReduceWindow"}
"""Cases whose rewrite combines each window's elements in another order (the window's dims
are permuted with the array's): rounding then differs, in XLA as here, so these run on
powers of two, whose products are exact in any order."""


def _leaves(value: object) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _bits(a: np.ndarray) -> bytes:
    """The elements' bytes in logical order (so -0.0 and 0.0, or NaN payloads, differ)."""
    return np.ascontiguousarray(a).tobytes()


def test_every_xla_case_is_ported() -> None:
    """56 TEST_F cases in XLA's file, each once."""
    names = [n for n, _ in SECTIONS]
    assert len(names) == len(set(names)) == 56


@pytest.mark.parametrize("spec", ["layout-normalization", AFTER_ALGSIMP])
@pytest.mark.parametrize(("name", "text"), SECTIONS, ids=[n for n, _ in SECTIONS])
def test_ported_case_keeps_values(name: str, text: str, spec: str) -> None:
    before = parse_hlo(text, name)
    after = parse_hlo(text, name)
    run_pipeline(after, spec, verify_each=True)
    if name in OPAQUE:
        assert print_hlo(after) == print_hlo(before), name
        return
    args = random_inputs(before, seed=7)
    if name in REORDERS_WINDOW:
        rng = np.random.default_rng(7)
        args = [np.exp2(rng.integers(-2, 3, np.shape(a))).astype(np.asarray(a).dtype) for a in args]
    want = _leaves(evaluate(before, *args))
    got = _leaves(evaluate(parse_hlo(print_hlo(after), name), *args))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, name
        assert _bits(g) == _bits(w), f"{name}: values changed\n{print_hlo(after)}"


def _layout_free_transposes(module) -> list[str]:
    """Transposes that keep every offset, and bitcasts of bitcasts: what algsimp removes."""
    from hlopass.passes.layout.layouts import transpose_is_bitcast, value_shape

    found = []
    for comp in computations(module):
        for op in comp.instructions:
            if op.opcode == "transpose":
                a, b = value_shape(op.operands[0]), op.shape
                assert isinstance(a, ArrayShape) and isinstance(b, ArrayShape)
                if transpose_is_bitcast(a, b, op.attr("dimensions")):
                    found.append(op.inst_name)
            elif op.opcode == "bitcast":
                src = op.operands[0].owner
                if getattr(src, "opcode", None) == "bitcast":
                    found.append(op.inst_name)
    return found


def test_layout_sensitive_algsimp_cleans_the_ports() -> None:
    """After normalization no transpose that is a bitcast and no bitcast chain is left once
    algsimp{is-layout-sensitive=true} ran; CopyDegenerate's transpose (5 and 3 swap) moves
    data and stays, PhysicalTransposeDegenerate's became a bitcast already."""
    for name, text in SECTIONS:
        module = parse_hlo(text, name)
        run_pipeline(module, AFTER_ALGSIMP, verify_each=True)
        assert not _layout_free_transposes(module), (name, print_hlo(module))
    # the check itself finds what it should: a degenerate-dim transpose is a bitcast
    probe = parse_hlo(
        "HloModule m\nENTRY e {\n  p = f32[4,1]{1,0} parameter(0)\n"
        "  ROOT t = f32[1,4]{1,0} transpose(p), dimensions={1,0}\n}\n"
    )
    assert _layout_free_transposes(probe) == ["t"]
    run_pipeline(probe, "algsimp{is-layout-sensitive=true}")
    assert _layout_free_transposes(probe) == []
