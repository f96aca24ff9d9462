"""The rewrite driver (`hlopass.driver.worklist`) and instruction-level dirty tracking (issue 14):
starting from what changed and confirming around it gives the module that whole walks
give (`fixpoint{exhaustive=true}`), on hand-made cases where the enabling change is
several uses away from the rewrite it enables, and on every corpus module."""

from __future__ import annotations

from pathlib import Path

import pytest

from hlopass import parse_hlo
from hlopass.checking.corpus import modules
from hlopass.checking.verifier import verify_module
from hlopass.dialects.hlo import computations
from hlopass.driver.dirty import CallGraph
from hlopass.driver.worklist import Touches, stale
from hlopass.errors import HloError
from hlopass.pipeline import Runner, parse_pass_pipeline
from hlopass.rewriting import Scope
from hlopass.text.exporter import print_hlo

SPEC = "fixpoint{passes=algsimp,constant-folding,dce,cse%s}"


def _run(text: str, exhaustive: bool, spec: str = SPEC) -> str:
    module = parse_hlo(text)
    Runner().run(parse_pass_pipeline(spec % (" exhaustive=true" if exhaustive else "")), module)
    return print_hlo(module)


# constant folding turns `n` into a constant; the multiply two uses away then reads
# broadcast(constant 1) and algsimp's `x * 1 -> x` fires in round 2
FAR = """HloModule far

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  c = f32[] constant(-1)
  n = f32[] negate(c)
  nb = f32[4]{0} broadcast(n), dimensions={}
  m = f32[4]{0} multiply(p0, nb)
  ROOT r = f32[4]{0} add(m, p0)
}
"""

# cse merges the two negates; then `subtract(a, b)` reads the same value twice
CSE_THEN_ALGSIMP = """HloModule cse_then

ENTRY main {
  p0 = s32[4]{0} parameter(0)
  a = s32[4]{0} negate(p0)
  b = s32[4]{0} negate(p0)
  s = s32[4]{0} subtract(a, b)
  ROOT r = s32[4]{0} add(s, p0)
}
"""


@pytest.mark.parametrize(
    ("text", "root"),
    [
        (FAR, "ROOT r = f32[4]{0} add(p0, p0)"),  # -(-1) = 1, p0 * 1 = p0
        (CSE_THEN_ALGSIMP, "ROOT p0 = s32[4]{0} parameter(0)"),  # a - a = 0, 0 + p0 = p0
    ],
    ids=["far", "cse_then_algsimp"],
)
def test_rewrites_enabled_by_other_passes_happen(text: str, root: str) -> None:
    fast = _run(text, False)
    assert fast == _run(text, True)
    assert root in fast.replace("%", "")


def test_stale_reaches_users_up_to_the_radius_and_skips_later_visits() -> None:
    module = parse_hlo(FAR)
    (comp,) = computations(module)
    block = comp.body.block
    by = {op.inst_name: op for op in comp.instructions}
    content = {by["n"]: 5}
    near = stale(block, content, {}, {}, 1)
    assert {op.inst_name for op in near} == {"c", "n", "nb"}  # operand definition too
    far = stale(block, content, {}, {}, 3)
    assert [op.inst_name for op in far] == ["c", "n", "nb", "m", "r"]  # program order
    # `m` was visited after the touch (clock 5): it saw the change already
    visited = {id(by["m"]): 6, id(by["nb"]): 4}  # by id, as the driver keeps them
    assert {op.inst_name for op in stale(block, content, {}, visited, 3)} == {"c", "n", "nb", "r"}
    # a change of users reaches the instruction and its users, one level
    assert {op.inst_name for op in stale(block, {}, {by["c"]: 1}, {}, 3)} == {"c", "n"}


def test_call_graph_marks_touched_instructions_and_call_sites() -> None:
    text = """HloModule m

helper {
  hp = f32[4]{0} parameter(0)
  ROOT hn = f32[4]{0} negate(hp)
}

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  h = f32[4]{0} call(p0), to_apply=helper
  ROOT r = f32[4]{0} add(h, p0)
}
"""
    module = parse_hlo(text)
    comps = {c.comp_name: c for c in computations(module)}
    graph = CallGraph(module)
    root = comps["helper"].root
    scope = Scope(tracked=True)
    scope.touched[comps["helper"]] = Touches([root])
    others, own = graph.settle(scope)
    assert others is not None and own is not None
    helper, main = others[comps["helper"]], others[comps["main"]]
    assert helper is not None and helper.content == {root}
    call = next(op for op in comps["main"].instructions if op.inst_name == "h")
    assert main is not None and main.content == {call}  # the call site, not all of main
    scope.settled.add(comps["helper"])
    _, own = graph.settle(scope)
    assert own is not None and comps["helper"] not in own and comps["main"] in own
    whole = Scope(tracked=True, changed={comps["helper"]})
    others, _ = graph.settle(whole)
    assert others is not None and others[comps["helper"]] is None  # changed as a whole
    others, _ = graph.settle(scope, exact=False)
    assert others is not None and all(v is None for v in others.values())
    assert graph.settle(Scope(everything=True)) == (None, None)


def test_every_corpus_module_ends_as_with_whole_walks(corpus: Path) -> None:
    """The fast driver against whole walks on every corpus module our parser reads (the
    LLM-sized ones aside: minutes of exhaustive walks; `benchmarks/fixpoint_bench.py
    --compare` checks those); and a module that verified before verifies after, in full
    (`--verify-each` checks only the instructions the passes say they touched)."""
    compared = verified = 0
    for m in modules(corpus):
        if m.text.count("\n") > 20000:
            continue
        try:
            module = parse_hlo(m.text)
        except HloError:
            continue  # an input the parser rejects: nothing to compare
        try:
            verify_module(module)
            valid = True
        except Exception:
            valid = False  # (one of the modules XLA's verifier rejects too)
        fast = _outcome(m.text, False, check=valid)
        assert fast == _outcome(m.text, True), m.id
        compared += 1
        verified += valid
    assert compared > 600 and verified > 600


def _outcome(text: str, exhaustive: bool, check: bool = False) -> str:
    module = parse_hlo(text)
    spec = SPEC % (" exhaustive=true" if exhaustive else "")
    try:
        Runner(verify_each=check).run(parse_pass_pipeline(spec), module)
    except HloError as e:  # the same error either way
        return f"error: {e}"
    if check:
        verify_module(module)
    return print_hlo(module)
