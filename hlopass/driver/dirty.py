"""Dirty tracking for `fixpoint`: where each pass must look again, per computation and,
inside one, per instruction.

A pass run reports what it changed (`rewriting.Scope`): computations changed as a whole,
and computations edited only through a tracking rewriter (`hlopass.driver.worklist`), with the
instructions it touched. Everything that may now rewrite differently is marked dirty for
every pass:
* as a whole: the computations changed as a whole, those added, and those whose call
  sites changed (an instruction calling one of them, by its opcode, came or went: e.g. a
  removed `fusion` changes whether its computation counts as fused, a removed caller lets
  `dce` shrink a fusion elsewhere);
* at the instructions touched: the computations edited through a tracking rewriter;
* at the call sites: in every caller of any of these, transitively, the instructions
  calling them (what a caller may do depends on what its callees hold: `constant-folding`
  folds a call only when nothing inside it, however deep, has side effects; `cse`
  compares called computations by structure).
Edits a pass makes to a computation through its call sites (constant propagation, dropped
call parameters, a shrunk fusion) are reported by the pass itself. A pass then reruns only
on what is dirty for it, starting from the dirty instructions: elsewhere it would change
nothing, as nothing it reads changed since its last run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ComputationOp, computations
from hlopass.driver.worklist import Touches
from hlopass.rewriting import CallIndex

if TYPE_CHECKING:
    from hlopass.rewriting import Scope


Dirt = dict[ComputationOp, "Touches | None"]
"""What a pass must revisit, per computation: the instructions to start from, or None for
the whole computation."""


def add_dirt(into: Dirt | None, more: Dirt | None) -> Dirt | None:
    """`into` with `more` added (None: everything)."""
    if into is None or more is None:
        return None
    for comp, ops in more.items():
        if ops is None:
            into[comp] = None
        elif comp not in into:
            into[comp] = ops.copy()
        else:
            have = into[comp]
            if have is not None:
                have.update(ops)
    return into


class CallGraph:
    """Who calls whom in `module` (and by which opcode), updated after each pass."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.index = {c: CallIndex(c) for c in computations(module)}
        """Per computation: its calls and pinned names, as of the last `settle`."""

    def settle(self, scope: Scope, exact: bool = True) -> tuple[Dirt | None, Dirt | None]:
        """Update the graph after a pass run that reported its edits in `scope` (or, with
        `scope.everything`, may have changed anything); what is dirty now for the other
        passes and for the pass itself (None: everything).

        Dirty as a whole: the computations the run changed without itemizing, the new
        ones and those some call site of which came or went. Dirty at the instructions
        the run touched: the computations it edited only through a tracking rewriter.
        And in every caller of any of these, transitively, the instructions calling them.
        A computation of `scope.settled` (the pass left it at its own fixed point) is not
        dirty for the pass itself, but its callers' call sites are. Without `exact`
        (`fixpoint{exhaustive=true}`), whatever is dirty is dirty as a whole."""
        comps = computations(self.module)
        old = self.index
        if scope.everything:
            self.index = {c: CallIndex(c) for c in comps}
            return None, None
        edited = scope.edited()
        new: dict[ComputationOp, CallIndex] = {}
        for c in comps:
            known = old.get(c)
            if known is None or c in scope.changed:
                new[c] = CallIndex(c)
            elif c in scope.touched:  # edited through a tracking rewriter only
                new[c] = known.updated(c, scope.touched[c].content)
            else:
                new[c] = known
        self.index = new
        whole = {c for c in scope.changed if c in new} | {c for c in new if c not in old}
        moved: set[str] = set()  # computations some call site of which came or went
        for c in edited | whole:
            if c in new:
                before = old[c].sites if c in old else set()
                moved.update(name for _, name in before ^ new[c].sites)
        for c, idx in old.items():
            if c not in new:  # removed, with its call sites
                moved.update(name for _, name in idx.sites)
        by_name = {c.comp_name: c for c in new}
        whole.update(by_name[n] for n in moved if n in by_name)
        itemized = {c: ops for c, ops in scope.touched.items() if c in new and c not in whole}
        sites = _call_sites_above(whole | itemized.keys(), new)
        others: Dirt = {}
        own: Dirt = {}
        for c in whole:
            others[c] = None
            if c not in scope.settled:
                own[c] = None
        for c, ops in itemized.items():
            others[c] = ops.copy()
            if c not in scope.settled:
                own[c] = ops.copy()
        add_dirt(others, sites)
        add_dirt(own, sites)
        if not exact:
            others = dict.fromkeys(others)
            own = dict.fromkeys(own)
        return others, own


def _call_sites_above(start: set[ComputationOp], index: dict[ComputationOp, CallIndex]) -> Dirt:
    """In every caller of `start`, transitively, the instructions calling them (what a
    caller may do depends on what its callees hold)."""
    callers: dict[str, list[ComputationOp]] = {}
    for c, idx in index.items():
        for _, name in idx.sites:
            callers.setdefault(name, []).append(c)
    reached: dict[str, ComputationOp] = {c.comp_name: c for c in start}
    stack = list(reached)
    out: Dirt = {}
    while stack:
        name = stack.pop()
        for caller in callers.get(name, ()):
            ops = out.setdefault(caller, Touches())
            assert ops is not None
            ops.content.update(op for op, names in index[caller].calls if name in names)
            if caller.comp_name not in reached:
                reached[caller.comp_name] = caller
                stack.append(caller.comp_name)
    return out
