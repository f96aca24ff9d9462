"""Constant folding's first-operand filter (`FoldConstantInstruction.wants`/`select`: an
instruction whose first operand is not a constant, iota or broadcast is never visited) is
a necessary condition only: with the opcode-only filter it replaced, the corpus's seed
modules and JAX programs and the lit cases of the pass fold to the same text, in the pass
alone and in the fixpoint pipeline; and an instruction whose first operand becomes a
constant during the walk is still folded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hlopass.passes import constant_folding as cf
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.pipeline_cases import pipeline_text as _run
from tests.pipeline_cases import source_modules

LIT = Path(__file__).resolve().parents[1] / "lit_tests" / "passes"
SPECS = ("constant-folding", "fixpoint{passes=algsimp,constant-folding,dce,cse}")


def _lit_modules() -> list[tuple[str, str]]:
    out = []
    for path in sorted(LIT.glob("constant-folding*.hlo")):
        for i, chunk in enumerate(path.read_text().split("\n// -----\n")):
            body = "\n".join(ln for ln in chunk.splitlines() if not ln.startswith("//"))
            if "HloModule" in body:
                out.append((f"{path.name}#{i}", body))
    return out


def _modules() -> list[tuple[str, str]]:
    return [("broadcast-first", BROADCAST_FIRST), *_lit_modules(), *source_modules()]


@contextmanager
def _opcode_filter_only() -> Iterator[None]:
    """The filter before the first-operand test: every instruction of a folding opcode
    with operands is visited."""
    pattern = cf.FoldConstantInstruction
    real_wants, real_select = pattern.wants, pattern.select
    pattern.wants = lambda self, op: cf._FOLDS(op) and bool(op._operands)  # type: ignore[method-assign]
    pattern.select = lambda self, ops: [op for op in cf._FOLDS.ops(ops) if op._operands]  # type: ignore[method-assign]
    try:
        yield
    finally:
        pattern.wants, pattern.select = real_wants, real_select  # type: ignore[method-assign]


@pytest.mark.parametrize("spec", SPECS)
def test_first_operand_filter_changes_no_fold(spec: str) -> None:
    cases = _modules()
    assert len(cases) >= 3
    folded = 0
    for name, text in cases:
        with _opcode_filter_only():
            unfiltered = _run(text, name, spec)
        filtered = _run(text, name, spec)
        assert filtered == unfiltered, f"{name}: the first-operand filter changed the result"
        folded += filtered != print_hlo(parse_hlo(text, name))
    assert folded >= 2  # (the comparison saw folds, not only untouched modules)


BROADCAST_FIRST = """HloModule broadcast_first

ENTRY main {
  c = f32[] constant(2)
  b = f32[4] broadcast(c), dimensions={}
  v = f32[4] constant({1, 2, 3, 4})
  ROOT m = f32[4] multiply(b, v)
}
"""


def test_a_broadcast_first_operand_folds() -> None:
    """The filter lets a broadcast of a constant through: 2 * {1, 2, 3, 4}, by hand."""
    text = _run(BROADCAST_FIRST, "broadcast_first", "constant-folding")
    assert "ROOT %constant = f32[4]{0} constant({2, 4, 6, 8})" in text, text


CHAIN = """HloModule chain

ENTRY main {
  p = f32[4] parameter(0)
  c1 = f32[] constant(1)
  c2 = f32[] constant(2)
  s = f32[] add(c1, c2)
  n = f32[] negate(s)
  m = f32[] multiply(n, c2)
  b = f32[4] broadcast(m), dimensions={}
  ROOT r = f32[4] add(p, b)
}
"""


def test_an_operand_folded_during_the_walk_is_seen() -> None:
    """Only `s` has a constant first operand when the walk starts; negate(s) and
    multiply(n, c2) fold after the instruction before them does: -(1 + 2) * 2, by hand
    (XLA leaves the broadcast of a scalar constant alone)."""
    module = parse_hlo(CHAIN, "chain")
    ops = [op for op in cf.computations(module)[0].block.ops if op._operands]  # pyright: ignore[reportPrivateUsage]
    pattern = cf.FoldConstantInstruction.__new__(cf.FoldConstantInstruction)
    assert [op.inst_name for op in pattern.select(ops)] == ["s"]  # type: ignore[attr-defined]
    run_pipeline(module, "constant-folding")
    text = print_hlo(module)
    assert "f32[] constant(-6)" in text, text
    assert "negate" not in text and "multiply" not in text and " add(%p, %b)" in text
    with _opcode_filter_only():
        assert _run(CHAIN, "chain", "constant-folding") == text
