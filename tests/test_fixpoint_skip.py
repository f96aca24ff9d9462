"""`fixpoint` does not re-run a pass that changed nothing until some pass changes the module
(issue 14): the module it ends with is the one every pass run every round gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from hlopass import parse_hlo
from hlopass.pipeline import FixpointPass, Runner, parse_pass_pipeline
from hlopass.rewriting import HloModulePass, Scope
from hlopass.text.exporter import print_hlo

SPEC = "fixpoint{passes=algsimp,constant-folding,dce,cse}"


def _every_pass_every_round(text: str) -> tuple[str, int]:
    """The module and the number of rounds with no pass skipped (XLA's `HloPassFix`)."""
    module = parse_hlo(text)
    runner = Runner()
    (fix,) = parse_pass_pipeline(SPEC)
    assert isinstance(fix, FixpointPass)
    passes = fix.inner()
    for n in range(1, fix.max_iterations + 1):
        if not any([runner.run_one(p, module) for p in passes]):
            return print_hlo(module), n
    return print_hlo(module), fix.max_iterations


def _jax_inputs(corpus: Path) -> list[Path]:
    return sorted((corpus / "jax").glob("*/before_optimizations.hlo"))


def test_same_module_and_rounds_as_without_skipping(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = _jax_inputs(corpus)
    if not inputs:
        pytest.skip("no jax/*/before_optimizations.hlo in the corpus")
    ran: list[str] = []
    original = Runner.run_one

    def counting(
        self: Runner, p: HloModulePass, module: ModuleOp, scope: Scope | None = None
    ) -> bool:
        if not isinstance(p, FixpointPass):
            ran.append(p.name)
        return original(self, p, module, scope)

    logged = 0
    for path in inputs:
        text = path.read_text()
        expected, rounds = _every_pass_every_round(text)
        module = parse_hlo(text)
        runner = Runner()
        with monkeypatch.context() as m:
            m.setattr(Runner, "run_one", counting)
            runner.run(parse_pass_pipeline(SPEC), module)
        assert print_hlo(module) == expected, path
        assert len(runner.log) == 4 * rounds, path  # skipped passes logged as unchanged
        logged += len(runner.log)
    assert len(ran) < logged  # some pass runs were skipped


def test_a_pass_that_changed_nothing_is_not_rerun_until_another_changes() -> None:
    runs: list[str] = []
    results = {"a": [True, False], "b": [False], "c": [False]}

    class Fake:
        def __init__(self, name: str) -> None:
            self.name = name

    fakes = [Fake(n) for n in "abc"]

    class OfFakes(FixpointPass):
        def inner(self) -> list[HloModulePass]:
            return fakes  # type: ignore[return-value]

    fix = OfFakes()

    def run_one(p: Fake, scope: Scope) -> bool:
        runs.append(p.name)
        return results[p.name].pop(0)  # reports no computations: "changed everything"

    skipped: list[str] = []
    empty = ModuleOp([])
    assert fix.iterate(empty, run_one, on_skip=lambda p: skipped.append(p.name))  # type: ignore[arg-type]
    # round 1: a changes, b and c not; round 2: a not, b and c skipped (nothing changed
    # since they ran); round 3 would skip all three: it ends after round 2
    assert runs == ["a", "b", "c", "a"]
    assert skipped == ["b", "c"]
