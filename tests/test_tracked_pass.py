"""`TrackedPass` writes a tracking pass's `run` and `run_scoped` once; `claim_name` is the
fresh-name loop `NameUniquer` and the fusion builder share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp

from hlopass import parse_hlo
from hlopass.dialects.hlo import computations, hlo_context
from hlopass.passes.cse import CSEPass
from hlopass.passes.dce import DCEPass
from hlopass.rewriting import RewriteContext, Scope, TrackedPass, claim_name
from hlopass.text.exporter import print_hlo

TEXT = """HloModule m

ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] add(p, p)
  b = f32[4] add(p, p)
  ROOT t = (f32[4], f32[4]) tuple(a, b)
}
"""


@dataclass(frozen=True)
class _Recording(TrackedPass):
    """Notes what `run_tracked` was handed."""

    name: ClassVar[str] = "test-recording"
    seen: list = field(default_factory=list)

    def run_tracked(self, module: ModuleOp, scope: Scope, rctx: RewriteContext) -> bool:
        self.seen.append((module, scope, rctx))
        scope.changed.update(scope.select(computations(module)))
        return True


def test_run_and_run_scoped_hand_run_tracked_a_tracked_scope_and_the_runs_context() -> None:
    module = parse_hlo(TEXT)
    p = _Recording()
    assert p.run(hlo_context(), module)
    scope = Scope()
    assert p.run_scoped(hlo_context(), module, scope)
    (m1, s1, r1), (m2, s2, r2) = p.seen
    assert m1 is module and m2 is module and s2 is scope
    assert s1.tracked and s2.tracked and not s2.everything
    assert r1.module is module and r2.module is module and r1 is not r2
    assert scope.changed == set(computations(module))


def test_the_tracked_passes_report_what_they_changed() -> None:
    module = parse_hlo(TEXT)
    scope = Scope()
    assert CSEPass().run_scoped(hlo_context(), module, scope)
    assert scope.tracked and scope.edited() == set(computations(module))
    assert print_hlo(module).count(" add(") == 1
    assert not DCEPass().run(hlo_context(), module)


def test_claim_name_takes_the_root_then_the_first_free_suffix() -> None:
    used = {"add", "add.1", "add.3"}
    counters: dict[str, int] = {}
    assert claim_name("mul", used, counters) == "mul"
    assert claim_name("add", used, counters) == "add.2"
    assert claim_name("add", used, counters) == "add.4"
    assert {"mul", "add.2", "add.4"} <= used
    assert claim_name("add.3", used, counters) == "add.3.1"  # no suffix stripped here
