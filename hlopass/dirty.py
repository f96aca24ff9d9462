"""Per-computation dirty tracking for `fixpoint`: which computations each pass must revisit.

A pass run reports the computations it changed (`rewriting.Scope`); everything that may
now rewrite differently is marked dirty for every pass: the changed computations, the
computations added, the computations whose call sites changed (an instruction calling one
of them, by its opcode, came or went: e.g. a removed `fusion` changes whether its
computation counts as fused, a removed caller lets `dce` shrink a fusion elsewhere) and all
callers of those, transitively (what a caller may do depends on what its callees hold:
`constant-folding` folds a call only when nothing inside it, however deep, has side
effects; `cse` compares called computations by structure). Edits a pass makes to a
computation through its call sites (constant propagation, dropped call parameters, a
shrunk fusion) are reported by the pass itself. A pass then reruns only on what is dirty
for it; on the rest it would change nothing, as nothing it reads changed since its last run.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ComputationOp, computations
from hlopass.rewriting import instructions


def callee_names(comp: ComputationOp) -> set[str]:
    """Names of the computations `comp`'s instructions call."""
    return {name for _, name in call_sites(comp)}


def call_sites(comp: ComputationOp) -> set[tuple[str, str]]:
    """(opcode, callee name) of each call `comp`'s instructions make."""
    out: set[tuple[str, str]] = set()
    for op in instructions(comp):
        if op.spec.computations:
            opcode = op.opcode
            out.update((opcode, name) for name in op.callees())
    return out


class CallGraph:
    """Who calls whom in `module` (and by which opcode), updated after each pass."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.calls = {c: call_sites(c) for c in computations(module)}

    def settle(
        self, changed: set[ComputationOp], everything: bool, settled: set[ComputationOp]
    ) -> tuple[set[ComputationOp] | None, set[ComputationOp] | None]:
        """Update the graph after a pass that changed `changed` (or, with `everything`,
        anything); the computations dirty now for the other passes and for the pass itself
        (None: all of them). A computation of `settled` (the pass left it at its own fixed
        point: its last walk over it changed nothing) is not dirty for the pass itself,
        unless something it calls changed too."""
        comps = computations(self.module)
        old = self.calls
        if everything:
            self.calls = {c: call_sites(c) for c in comps}
            return None, None
        new = {c: old[c] if c in old and c not in changed else call_sites(c) for c in comps}
        self.calls = new
        seeds = {c for c in changed if c in new} | {c for c in new if c not in old}
        moved: set[str] = set()  # computations some call site of which came or went
        for c in seeds:
            moved.update(name for _, name in old.get(c, set()) ^ new[c])
        for c, sites in old.items():
            if c not in new:  # removed, with its call sites
                moved.update(name for _, name in sites)
        by_name = {c.comp_name: c for c in new}
        seeds.update(by_name[n] for n in moved if n in by_name)
        callers: dict[str, list[ComputationOp]] = {}
        for c, sites in new.items():
            for _, name in sites:
                callers.setdefault(name, []).append(c)
        fixed = seeds & settled
        own = _with_callers(seeds - fixed, callers) | _with_callers(fixed, callers, False)
        return _with_callers(seeds, callers), own


def _with_callers(
    start: set[ComputationOp], callers: dict[str, list[ComputationOp]], keep_start: bool = True
) -> set[ComputationOp]:
    """`start` (or, without `keep_start`, only what it reaches) and every caller of those,
    transitively."""
    out = set(start) if keep_start else set()
    stack = list(start)
    while stack:
        for caller in callers.get(stack.pop().comp_name, ()):
            if caller not in out:
                out.add(caller)
                stack.append(caller)
    return out
