"""`TrackedPass`: the base of a pass that reports, computation by computation, what it
changed, so the fixpoint reruns it only where something changed since (`Scope`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.rewriting.base import HloModulePass, Scope, TraceHook
from hlopass.rewriting.context import RewriteContext


@dataclass(frozen=True)
class TrackedPass(HloModulePass):
    """A pass that notes in its `Scope` every computation it edits: subclass this, not
    `HloModulePass`, when the pass can say where it changed the module.

    Write `run_tracked(module, scope, rctx)` instead of `run`: visit the computations
    `scope.select(...)` keeps, start each walk from `scope.seeds_of(comp)` where the pass
    can, and report what changed: `run_patterns` and `scope.record` put what a tracking
    walk touched into `scope.touched`; a computation edited any other way goes into
    `scope.changed` (a computation the pass adds, too). `run` (a whole-module run) and
    `run_scoped` (the fixpoint's) are written here once: both mark the scope as tracked
    and hand `run_tracked` the run's `RewriteContext`, made with the scope's call index.
    """

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        """`run_scoped` over the whole module, its report dropped."""
        return self.run_scoped(ctx, module, Scope(), trace)

    def run_scoped(self, ctx: Context, module: ModuleOp, scope: Scope,
                   trace: TraceHook | None = None) -> bool:  # fmt: skip
        """`run_tracked` with this run's `RewriteContext`, `scope` marked as tracked (the
        fixpoint then trusts its `changed` and `touched` over `everything`)."""
        scope.tracked = True
        return self.run_tracked(module, scope, RewriteContext.of(module, trace, scope))

    def run_tracked(self, module: ModuleOp, scope: Scope, rctx: RewriteContext) -> bool:
        """Transform `module` in place where `scope` says, noting in `scope` what changed;
        True when anything did."""
        raise NotImplementedError
