"""Per-computation dirty tracking in `fixpoint` (issue 14): a pass reruns only on the
computations changed since its last run (and those depending on them), `--verify-each`
checks only what changed; the module it ends with is the one full reruns give (that part
is `test_fixpoint_skip.py`'s test over the jax programs)."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from hlopass import parse_hlo
from hlopass.checking.verifier import verify_module
from hlopass.dialects.hlo import computations
from hlopass.driver.dirty import CallGraph
from hlopass.pipeline import FixpointPass, Runner, parse_pass_pipeline
from hlopass.rewriting import HloModulePass, Scope
from hlopass.text.exporter import print_hlo

SPEC = "fixpoint{passes=algsimp,constant-folding,dce,cse}"

# `helper` is called from the entry and changes in round 1 only (its add of 0 goes);
# `other` never changes; the entry changes in rounds 1 and 2 (algsimp's x*1 -> x, then
# constant folding of the negate, then algsimp again on what folding left).
TEXT = """HloModule m

helper {
  hp = f32[4]{0} parameter(0)
  hz = f32[] constant(0)
  hb = f32[4]{0} broadcast(hz), dimensions={}
  ROOT ha = f32[4]{0} add(hp, hb)
}

other {
  op = f32[4]{0} parameter(0)
  ROOT on = f32[4]{0} negate(op)
}

ENTRY main {
  p0 = f32[4]{0} parameter(0)
  c = f32[] constant(2)
  n = f32[] negate(c)
  nb = f32[4]{0} broadcast(n), dimensions={}
  m = f32[4]{0} multiply(p0, nb)
  h = f32[4]{0} call(m), to_apply=helper
  o = f32[4]{0} call(h), to_apply=other
  ROOT r = f32[4]{0} add(o, p0)
}
"""


def _scopes(text: str, **options: object) -> tuple[list[tuple[str, frozenset[str] | None]], str]:
    """(pass, names of the computations it was told to visit) of every run, and the output."""
    seen: list[tuple[str, frozenset[str] | None]] = []
    original = Runner.run_one

    def spy(self: Runner, p: HloModulePass, module: ModuleOp, scope: Scope | None = None) -> bool:
        if scope is not None:
            only = None if scope.only is None else frozenset(c.comp_name for c in scope.only)
            seen.append((p.name, only))
        return original(self, p, module, scope)

    module = parse_hlo(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Runner, "run_one", spy)
        Runner(**options).run(parse_pass_pipeline(SPEC), module)  # type: ignore[arg-type]
    return seen, print_hlo(module)


def test_passes_rerun_only_on_changed_computations_and_their_callers() -> None:
    seen, _ = _scopes(TEXT)
    first = seen[:4]
    assert all(only is None for _, only in first)  # round 1: everything
    later = [only for _, only in seen[4:]]
    assert later and all(only is not None for only in later)
    # `other` never changed and its call site never moved: no pass visits it again
    assert all("other" not in only for only in later if only is not None)
    assert any("main" in only for only in later if only is not None)


def test_scoped_output_is_the_unscoped_one() -> None:
    _, scoped = _scopes(TEXT)
    module = parse_hlo(TEXT)
    (fix,) = parse_pass_pipeline(SPEC)
    assert isinstance(fix, FixpointPass)
    runner = Runner()
    for _ in range(fix.max_iterations):  # every pass on everything, every round
        if not any([runner.run_one(p, module) for p in fix.inner()]):
            break
    assert scoped == print_hlo(module)


def test_verify_each_verifies_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[frozenset[str] | None] = []

    def spy(module: ModuleOp, when: str, only: object = None, touched: object = None) -> None:
        checked.append(None if only is None else frozenset(c.comp_name for c in only))  # type: ignore[attr-defined]
        verify_module(module, only, touched)  # type: ignore[arg-type]

    monkeypatch.setattr(Runner, "_verify", staticmethod(spy))
    _, with_checks = _scopes(TEXT, verify_each=True)
    assert checked[0] is None  # the pipeline-start check: the whole module
    assert all(c is not None and "other" not in c for c in checked[1:])
    assert with_checks == _scopes(TEXT)[1]


def test_verify_module_checks_the_listed_computations_and_the_module() -> None:
    module = parse_hlo(TEXT)
    comps = {c.comp_name: c for c in computations(module)}
    verify_module(module, {comps["main"]})
    # a value of `helper` used inside `other`: caught when `other` is listed
    other_root = comps["other"].root
    other_root.operands = [comps["helper"].root.result]
    with pytest.raises(VerifyException, match="defined outside"):
        verify_module(module, {comps["other"]})
    verify_module(module, {comps["main"]})  # `other` is not looked at
    # an instruction broken in a listed computation: its own check runs
    root = comps["main"].root
    root.operands = [root.operands[0]]
    with pytest.raises(VerifyException, match="takes 2 operand"):
        verify_module(module, {comps["main"]})
    # with the touched instructions named: only those are checked
    others = [op for op in comps["main"].instructions if op is not root]
    verify_module(module, {comps["main"]}, {comps["main"]: others})
    with pytest.raises(VerifyException, match="takes 2 operand"):
        verify_module(module, {comps["main"]}, {comps["main"]: [root]})


def test_call_graph_marks_callers_and_moved_callees() -> None:
    module = parse_hlo(TEXT)
    comps = {c.comp_name: c for c in computations(module)}
    graph = CallGraph(module)
    now, _ = graph.settle(Scope(tracked=True, changed={comps["helper"]}))
    assert now is not None and set(now) == {comps["helper"], comps["main"]}
    # main stops calling `other`: `other` is dirty too (its call sites moved)
    call = next(op for op in comps["main"].instructions if op.inst_name == "o")
    call.set_attr("to_apply", "helper")
    # (`helper` was called from main before as well: its call sites did not move)
    now, _ = graph.settle(Scope(tracked=True, changed={comps["main"]}))
    assert now is not None and set(now) == {comps["main"], comps["other"]}
    assert now[comps["other"]] is None  # as a whole
    assert graph.settle(Scope(everything=True)) == (None, None)


# A reduce whose input algsimp rewrites (a touched instruction that calls); a dead
# instruction with control predecessors, which dce keeps (XLA's IsSafelyRemovable: its pin
# of `p` stays); a get-tuple-element of a two-output fusion with one output unused, which
# dce replaces by the shrunken fusion: the names `g` held and was held by move to `f`.
PINNED = """HloModule pinned

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

fused {
  fp = f32[4]{0} parameter(0)
  fn = f32[4]{0} negate(fp)
  fa = f32[4]{0} abs(fp)
  ROOT ft = (f32[4]{0}, f32[4]{0}) tuple(fn, fa)
}

ENTRY main {
  p = f32[4,2]{1,0} parameter(0)
  one = f32[] constant(1)
  ones = f32[4,2]{1,0} broadcast(one), dimensions={}
  m = f32[4,2]{1,0} multiply(p, ones)
  z = f32[] constant(0)
  r = f32[4]{0} reduce(m, z), dimensions={1}, to_apply=add
  dead = f32[4]{0} negate(r), control-predecessors={p}
  kept = f32[4]{0} abs(r), control-predecessors={r}
  f = (f32[4]{0}, f32[4]{0}) fusion(kept), kind=kLoop, calls=fused
  g = f32[4]{0} get-tuple-element(f), index=0, control-predecessors={kept}
  w = f32[4]{0} sqrt(g), control-predecessors={g}
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(r, w)
}
"""


def _corpus_texts() -> list[tuple[str, str]]:
    from tests.pipeline_cases import source_modules

    return [("pinned", PINNED), ("text", TEXT), *source_modules()]


def test_call_index_updates_equal_a_fresh_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """After every pass run of the pipeline, the call index `settle` updated from what the
    run touched (`CallIndex.updated`) is the one a walk over each computation gives: the
    same calls in the same order, pinned names and call sites."""
    from hlopass.rewriting import CallIndex

    def state(index: CallIndex) -> tuple[object, ...]:
        return ([(id(op), names) for op, names in index.calls], index.pinned, index.sites)

    checked: list[int] = []
    original = CallGraph.settle

    def settle(self: CallGraph, scope: Scope, exact: bool = True):  # type: ignore[no-untyped-def]
        out = original(self, scope, exact)
        for comp, index in self.index.items():
            assert state(index) == state(CallIndex(comp)), comp.comp_name
        checked.append(len(scope.touched))
        return out

    monkeypatch.setattr(CallGraph, "settle", settle)
    pinned_before = None
    for name, text in _corpus_texts():
        module = parse_hlo(text, name)
        if name == "pinned":
            pinned_before = CallGraph(module).index[computations(module)[-1]].pinned
        Runner().run(parse_pass_pipeline(SPEC), module)
        if name == "pinned":
            entry = CallGraph(module).index[computations(module)[-1]]
            assert pinned_before == {"p", "r", "kept", "g"}
            assert entry.pinned == {"p", "r", "kept", "f"}  # `g` went, `dead` stayed
    assert sum(1 for n in checked if n) >= 20  # updates from touched instructions were checked
