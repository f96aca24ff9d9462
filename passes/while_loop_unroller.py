"""`while-loop-unroller`: fully unroll while loops with a small known trip count (XLA's
`WhileLoopUnroller` in full-unroll mode, which XLA's GPU pipeline runs before fusion).

A loop `while(tuple(..., i0, ...))` whose condition is `i < N` (or `i <= N`, or the
mirrored `N > i` / `N >= i`) on a tuple element `i` that starts at the constant `i0` and
that the body only ever increments by the constant 1 runs exactly `max(0, N - i0)` times;
the loop is replaced by that many copies of the body chained on the initial tuple, each
with `i` replaced by its constant value (later `constant-folding`/`algsimp` clean up).
Without the loop, the fusion passes see one straight-line computation and the per-iteration
kernel launches (and the loop's own condition kernel) go away.

XLA's soft limits are kept, with its reason texts: at most 800 instructions in the body,
a trip count of at most 64, and at most 10000 instructions added (trip count x body size).
Like XLA, loops with send/recv, a side-effecting condition, or control edges are left
alone. Unlike XLA we
do not flatten the call graph, so a body that holds a nested `while`/`conditional` is left
alone too (the copies would share the inner loop's computations).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.passes.defuse import remove_uncalled
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    constant_from_numpy,
    gte_index,
    has_side_effect,
    is_control_predecessor,
    owner,
    scalar_int,
)

TRIP_COUNT_THRESHOLD = 64
"""XLA's `kUnrollTripCountThreshold`."""
INSTRUCTION_COUNT_THRESHOLD = 800
"""XLA's `kUnrollInstructionCountThreshold` (instructions in the body)."""
EXPAND_FACTOR_THRESHOLD = 10000
"""XLA's `kUnrollExpandFactorThreshold` (trip count x body instructions)."""

_SEND_RECV = {"send", "send-done", "recv", "recv-done"}
_NESTED = {"while", "conditional"}
# `i < N` runs N - i0 times; `i <= N` runs N - i0 + 1; the mirrored forms the same.
_EXTRA = {("LT", False): 0, ("LE", False): 1, ("GT", True): 0, ("GE", True): 1}


@dataclass(frozen=True)
class Trip:
    """A loop's induction variable (tuple index), its first value and its trip count."""

    index: int
    init: int
    count: int


def _condition_bound(cond: ComputationOp) -> tuple[int, int] | None:
    """(tuple index, last exclusive value) for a condition `i < N` and its variants."""
    root = cond.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    lhs, rhs = root.operands
    for idx_side, mirrored in ((lhs, False), (rhs, True)):
        extra = _EXTRA.get((str(root.attr("direction")), mirrored))
        index = gte_index(idx_side)
        bound = scalar_int(rhs if not mirrored else lhs)
        if extra is not None and index is not None and bound is not None:
            return index, bound + extra
    return None


def _increments_by_one(body: ComputationOp, index: int) -> bool:
    """The body's root tuple carries `i + 1` (either order) at `index`."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return False
    nxt = owner(root.operands[index])
    if nxt is None or nxt.opcode != "add":
        return False
    a, b = nxt.operands
    return any(gte_index(x) == index and scalar_int(y) == 1 for x, y in ((a, b), (b, a)))


def trip_count(op: HloOp, comps: dict[str, ComputationOp]) -> Trip | str:
    """The loop's `Trip`, or the reason (XLA's text where XLA has one) it is not unrolled."""
    cond, body = comps.get(op.attr("condition") or ""), comps.get(op.attr("body") or "")
    if cond is None or body is None:
        return "Cannot unroll while loop: condition or body not found"
    init = owner(op.operands[0])
    if init is None or init.opcode != "tuple":
        return "Cannot unroll while loop: the while loop's operand is not a tuple"
    if op.attr("control-predecessors") or is_control_predecessor(op):
        return f"Not attempting to unroll {op.inst_name} due to control dependency"
    if any(has_side_effect(i) for i in cond.instructions):
        return (
            "Not attempting to remove while loop whose condition contains "
            "side-effecting instructions"
        )
    for comp in (cond, body):
        if any(i.opcode in _SEND_RECV for i in comp.instructions):
            return f"Not attempting to unroll {op.inst_name} because it contains a send/recv node"
    if any(i.opcode in _NESTED for i in body.instructions):
        return f"Not attempting to unroll {op.inst_name}: the body holds nested control flow"
    bound = _condition_bound(cond)
    if bound is None:
        return "Cannot unroll while loop: the condition is not `i < N` on a constant N"
    index, end = bound
    start = scalar_int(init.operands[index]) if index < len(init.operands) else None
    if start is None or not _increments_by_one(body, index):
        return "Cannot unroll while loop: no induction variable from a constant, step 1"
    count = max(0, end - start)
    size = sum(1 for _ in body.instructions)
    if size > INSTRUCTION_COUNT_THRESHOLD:
        return f"Cannot unroll while loop. Too many instructions in the body: {size}"
    if count > TRIP_COUNT_THRESHOLD:
        return (
            "Cannot unroll while loop. The trip count is greater than the threshold: "
            f"{count} vs {TRIP_COUNT_THRESHOLD}"
        )
    if count * size > EXPAND_FACTOR_THRESHOLD:
        return (
            "Not attempting to unroll due to instruction count increase explosion. "
            f"New instruction count: {count * size} vs {EXPAND_FACTOR_THRESHOLD}"
        )
    return Trip(index, start, count)


@dataclass
class FullyUnrollWhile(RewritePattern):
    """`while(init)` running N times -> N copies of the body chained on `init`, the
    induction variable a constant in each.

    Guards: `trip_count` finds the trip count and XLA's limits allow the unrolling.
    """

    OPCODES: ClassVar[tuple[str, ...]] = ("while",)

    ctx: RewriteContext
    comps: dict[str, ComputationOp]
    unrolled: set[str]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        trip = trip_count(op, self.comps)
        if isinstance(trip, str):
            self.ctx.note(self, op, f"kept: {trip}")
            return
        body = self.comps[op.attr("body")]
        state = op.operands[0]
        for k in range(trip.count):
            state = self._copy_body(op, body, state, trip.init + k, trip.index, rewriter)
        self.ctx.note(self, op, f"unrolled {trip.count} iterations")
        self.unrolled.update((op.attr("body"), op.attr("condition")))
        op.result.replace_all_uses_with(state)
        rewriter.erase(op)

    def _copy_body(
        self, op: HloOp, body: ComputationOp, state: SSAValue, value: int, index: int,
        rewriter: PatternRewriter,
    ) -> SSAValue:  # fmt: skip
        """Clone `body` before `op` on `state`, `get-tuple-element(param, index)` -> value."""
        indvar_shape = body.root.operands[index].type.data  # type: ignore[attr-defined]
        const = constant_from_numpy(rewriter, self.ctx, np.asarray(value), indvar_shape, op)
        mapping: dict[SSAValue, SSAValue] = {}
        for inner in body.instructions:
            if inner.opcode == "parameter":
                mapping[inner.result] = state
            elif gte_index(inner.result) == index:
                mapping[inner.result] = const.result
            else:
                clone = inner.clone(value_mapper=mapping)
                clone.inst_name = self.ctx.names.fresh(inner.inst_name)
                rewriter.insert(clone, InsertPoint.before(op))
                mapping[inner.result] = clone.result
        return mapping[body.root.result]


@dataclass(frozen=True)
class WhileLoopUnrollerPass(HloModulePass):
    """Fully unroll while loops with a known trip count within XLA's limits."""

    name: ClassVar[str] = "while-loop-unroller"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        comps = comps_by_name(module)
        unrolled: set[str] = set()
        pattern = FullyUnrollWhile(rctx, comps, unrolled)
        for comp in list(computations(module)):
            for op in list(comp.instructions):
                if op.opcode == "while" and op.parent is not None:
                    pattern.match_and_rewrite(op, PatternRewriter(op))
        remove_uncalled(module, unrolled)
        return bool(unrolled)
