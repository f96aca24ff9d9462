"""algsimp's `OPERAND_FROM` (the opcodes one of which must define some operand of an
instruction a pattern rewrites) is a necessary condition only, never a guard that changes
what fires.

With the applier's prefilter turned off, every rewrite of every pattern is recorded with
the opcodes of its instruction's operands, over every case of the algsimp family files
(each pattern fires in at least one: `test_algsimp_families`), the seed modules and the
JAX programs of the corpus, with and without `enable-floats-are-real`: each recorded
rewrite's opcodes meet its pattern's `OPERAND_FROM`. And with the prefilter on, the same
modules print byte for byte the same."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from hlopass.dialects.opcodes import OPCODES
from hlopass.passes.algsimp import PATTERNS, base
from tests.pipeline_cases import pipeline_text as _run
from tests.pipeline_cases import source_modules
from tests.test_algsimp_families import CASES

SPECS = ("algsimp", "algsimp{enable-floats-are-real=true}")


def _modules() -> list[tuple[str, str]]:
    return [(cid, text) for cid, _spec, text in CASES] + source_modules()


@contextmanager
def _prefilter_off(fired: list[tuple[type, frozenset[str]]]) -> Iterator[None]:
    real_sources, real_apply = base.operand_sources, base.Simplification.apply

    def apply(self: base.Simplification, op: Any, rewriter: Any) -> None:
        sources = real_sources(op)  # before the rewrite (which may erase op)
        real_apply(self, op, rewriter)
        if rewriter.has_done_action:
            fired.append((type(self), sources))

    every = frozenset(OPCODES)  # meets every OPERAND_FROM: every pattern is offered everything
    base.operand_sources = lambda op: every  # type: ignore[assignment]
    base.Simplification.apply = apply  # type: ignore[method-assign]
    try:
        yield
    finally:
        base.operand_sources = real_sources  # type: ignore[assignment]
        base.Simplification.apply = real_apply  # type: ignore[method-assign]


@pytest.mark.parametrize("spec", SPECS)
def test_operand_from_is_only_a_necessary_condition(spec: str) -> None:
    fired: list[tuple[type, frozenset[str]]] = []
    annotated = {cls for cls in PATTERNS if cls.OPERAND_FROM}
    assert len(annotated) >= 50  # the prefilter covers the common opcodes' patterns
    seen: set[type] = set()
    for name, text in _modules():
        with _prefilter_off(fired):
            unfiltered = _run(text, name, spec)
        assert _run(text, name, spec) == unfiltered, f"{name}: the prefilter changed the result"
        for cls, sources in fired:
            assert not cls.OPERAND_FROM or cls.OPERAND_FROM & sources, (
                f"{name}: {cls.__name__} rewrote an instruction whose operands come from "
                f"{sorted(sources)}, none of its OPERAND_FROM {sorted(cls.OPERAND_FROM)}"
            )
            seen.add(cls)
        fired.clear()
    # the check above saw most annotated patterns fire (the rest fire only in the other spec)
    assert len(seen & annotated) >= len(annotated) // 2
