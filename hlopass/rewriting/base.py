"""The pass base: `HloModulePass` (XLA's `Run -> changed`), the `Scope` a run works in and
reports its changes to, and `run_patterns`, the greedy driver a pass runs its patterns with."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, RewritePattern

from hlopass.dialects.hlo import ComputationOp, computations
from hlopass.rewriting.effects import forget_effects

if TYPE_CHECKING:
    from hlopass.driver.worklist import Touches, WalkResult
    from hlopass.rewriting.calls import CallIndex


@dataclass(frozen=True)
class HloModulePass(ModulePass):
    """A module pass over HLO that reports whether it changed the module.

    Every subclass's `run` is wrapped so that, once it returns, state derived from the
    module and cached elsewhere (the interpreter `hlopass.evaluate` keeps per module) is
    dropped: a pass may have edited a computation that cache has already walked.
    """

    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("run", "run_scoped"):
            run = cls.__dict__.get(name)
            if run is not None and not getattr(run, "_forgets_caches", False):
                setattr(cls, name, _forgetting_caches(run))

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        """Transform `module` in place; True when it changed."""
        raise NotImplementedError

    def run_scoped(self, ctx: Context, module: ModuleOp, scope: Scope,
                   trace: TraceHook | None = None) -> bool:  # fmt: skip
        """`run`, visiting only `scope.only` and noting in `scope` what changed.

        This default runs on the whole module and, when it changed, reports every
        computation as changed: a pass that tracks its changes subclasses `TrackedPass`."""
        changed = self.run(ctx, module, trace)
        scope.everything |= changed
        return changed

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """xDSL's entry point (`xdsl-opt -p NAME`): `run` on the module (on each inner
        module where `op` wraps several), its changed flag dropped."""
        # xdsl-opt wraps several top-level modules (`hlopass-opt --split-input-file --emit
        # xdsl` output read without --split-input-file) in an outer module: each inner one
        # is an HLO module of its own, and the outer one has no computations to rewrite.
        inner = [o for o in op.body.ops if isinstance(o, ModuleOp)]
        for module in inner or [op]:
            self.run(ctx, module)


def _forgetting_caches(run: Callable[..., bool]) -> Callable[..., bool]:
    @functools.wraps(run)
    def wrapped(self: HloModulePass, ctx: Context, module: ModuleOp, *args: Any) -> bool:
        try:
            return run(self, ctx, module, *args)
        finally:
            forget_cached_state(module)

    wrapped._forgets_caches = True  # type: ignore[attr-defined]
    return wrapped


def forget_cached_state(module: ModuleOp) -> None:
    """Drop what other parts of hlopass cached about `module` (after it was edited).

    Today: the interpreter `hlopass.interpreter.interpreter_for(module)` keeps, whose
    computation table and per-computation schedules go stale when a pass edits the module.
    """
    forget_effects(module)
    core = sys.modules.get("hlopass.interpreter.core")  # never imported just for this
    if core is not None:
        core.forget(module)


TraceHook = Callable[[str, str], None]
"""Called as `trace(pattern_name, description)` after each rewrite."""


@dataclass
class Scope:
    """Where one pass run works, and what it reports having changed: the fixpoint's
    per-computation dirty tracking (a pass reruns only where something changed since)."""

    only: set[ComputationOp] | None = None
    """Visit only these computations (None: every one)."""

    changed: set[ComputationOp] = field(default_factory=set)
    """Computations the run edited: instructions added, removed, or changed."""

    everything: bool = False
    """The run may have changed any computation (it does not say which)."""

    settled: set[ComputationOp] = field(default_factory=set)
    """Computations the run left at its own fixed point: its last walk over one changed
    nothing, and nothing else it reads changed after (its walk to a fixed point and
    nothing module-wide): running it again there would change nothing."""

    tracked: bool = False
    """The run reported its changes in `changed` and `touched` (set by passes that track
    them; a run that changed the module without doing so counts as having changed
    everything)."""

    seeds: dict[ComputationOp, Touches] = field(default_factory=dict)
    """For a computation of `only` listed here: the instructions something changed since
    the pass's last run there (or that depend on a changed callee); the run may start
    from them instead of the whole computation (`hlopass.driver.worklist`)."""

    touched: dict[ComputationOp, Touches] = field(default_factory=dict)
    """Computations the run edited only through a tracking rewriter, with the instructions
    it touched (created, modified, whose uses changed). A computation also in `changed`
    counts as changed as a whole."""

    exhaustive: bool = False
    """Walk whole computations (no seeds, whole-computation confirming walks): the slow
    reference the shortcuts of `hlopass.driver.worklist` are tested against."""

    index: dict[ComputationOp, CallIndex] | None = None
    """The fixpoint's per-computation call index, current when the run starts (None: scan
    the module): a run's module-wide questions (which computations are fused, called,
    reachable, which instructions are pinned) then cost a look per computation, not a
    scan of every instruction."""

    def select(self, comps: Iterable[ComputationOp]) -> list[ComputationOp]:
        """`comps` this run visits, in order."""
        only = self.only
        return list(comps) if only is None else [c for c in comps if c in only]

    def seeds_of(self, comp: ComputationOp) -> Touches | None:
        """Where the run may start in `comp` (None: everywhere)."""
        return None if self.exhaustive else self.seeds.get(comp)

    def record(self, comp: ComputationOp, walk: WalkResult) -> bool:
        """Note what a tracking walk over `comp` did; whether it changed anything."""
        if walk.changed:
            have = self.touched.get(comp)
            if have is None:
                self.touched[comp] = walk.touched
            else:
                have.update(walk.touched)
        return walk.changed

    def edited(self) -> set[ComputationOp]:
        """Every computation the run edited, whichever way."""
        return self.changed | self.touched.keys()


def expand_in_post_order(module: ModuleOp, patterns: Mapping[str, RewritePattern]) -> bool:
    """Offer each instruction of every unfused computation, in post order, once, to the
    pattern of its opcode (XLA's OpExpanderPass: one sweep, no fixed point; what a pattern
    builds is not offered again). True when any pattern rewrote."""
    from xdsl.pattern_rewriter import PatternRewriter

    from hlopass.rewriting.calls import unfused_computations
    from hlopass.text.exporter import instruction_post_order

    changed = False
    for comp in unfused_computations(module):
        rewriter = PatternRewriter(comp)
        for op in instruction_post_order(comp):
            pattern = patterns.get(op.opcode)  # type: ignore[attr-defined]
            if pattern is not None:
                pattern.match_and_rewrite(op, rewriter)
        changed |= rewriter.has_done_action
    return changed


def run_patterns(
    module: ModuleOp,
    patterns: Sequence[RewritePattern],
    comps: Iterable[ComputationOp] | None = None,
    scope: Scope | None = None,
    radius: int | None = None,
    start: Callable[[list[Operation]], list[Operation]] | None = None,
) -> bool:
    """Apply `patterns` greedily to a fixed point over `comps` (all computations by
    default); what changed goes into `scope.touched`. With `radius` (how far from a change
    the patterns' decisions look, see `hlopass.driver.worklist`), the walks start from `scope`'s
    seeds and confirm around what changed; without, they are whole-computation walks.
    `start`: see `worklist.Driver`."""
    from hlopass.driver.worklist import Driver

    applier = (
        patterns[0]
        if len(patterns) == 1
        else GreedyRewritePatternApplier(list(patterns), dce_enabled=False)
    )
    scope = scope if scope is not None else Scope()
    driver = Driver(applier, True, radius or 0, radius is None or scope.exhaustive, start)
    changed = False
    for comp in list(comps) if comps is not None else computations(module):
        walk = driver.rewrite(comp.block, scope.seeds_of(comp))
        changed |= scope.record(comp, walk)
    return changed
