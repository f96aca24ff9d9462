"""`while-loop-all-reduce-code-motion`: an all-reduce in a while body whose result is only
added into a loop-carried buffer is sunk below the loop (XLA's
`WhileLoopAllReduceCodeMotion`).

Sum is linear: `acc + AR(x1) + ... + AR(xn) = acc + AR(x1 + ... + xn)`. The loop then
accumulates the un-reduced deltas into a buffer that starts at zero, and after the loop
one all-reduce of that buffer is added to the buffer's initial value: n all-reduces
become one. The summation order changes (each device sums its own deltas first), so
floating-point results move within the reassociation bound, as they do in XLA.

Implemented: XLA's direct accumulation form, `root[i] = add(gte(param, i), AR(x))` (either
operand order), for a sum all-reduce of a numeric type, with XLA's guards: the body's
parameter feeds only get-tuple-elements, the buffer feeds only the accumulating add, the
add is returned at the index it was read from, no layout-constrained all-reduce in a body
(the module is then left alone), a while of tuple shape with a `tuple` init. Stricter than
XLA: the body has one caller, and the condition does not read the buffer (XLA leaves the
latter as a TODO; reading it would see the un-reduced partial sums). Not implemented (left
to XLA's fuller matcher): reduce-scatter (`enable_reduce_scatter`), the convert, bitcast,
reshape, transpose, slice, select-with-zero, broadcast and multiply forwarding chains,
dynamic-slice/dynamic-update-slice and scatter accumulations, and the setup passes
(`run_setup_passes`); such loops are left unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    module_of,
    new_op,
    owner,
    run_patterns,
    splat,
)
from hlopass.shape import ArrayShape, TupleShape
from hlopass.passes.collectives.all_reduce_folder import (
    computation_kind,
    has_control_deps,
    layout_constrained,
    reducer,
    unique_users,
)

SUPPORTED_TYPES = frozenset(
    ("bf16", "f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
)
"""XLA's `kSupportedTypes` for accumulation."""


def _gte_index(value: SSAValue, param: HloOp) -> int | None:
    """The tuple index when `value` is `get-tuple-element(param)`."""
    op = owner(value)
    if op is None or op.opcode != "get-tuple-element" or owner(op.operands[0]) is not param:
        return None
    return op.attr("index")


def _parameter(comp: ComputationOp) -> HloOp | None:
    params = [o for o in comp.instructions if o.opcode == "parameter"]
    return params[0] if len(params) == 1 else None


def _reads_index(comp: ComputationOp, index: int) -> bool:
    """`comp`'s parameter is used other than by get-tuple-elements of other indices."""
    param = _parameter(comp)
    if param is None:
        return True
    for user in unique_users(param.result):
        if not isinstance(user, HloOp) or user.opcode != "get-tuple-element":
            return True
        if user.attr("index") == index:
            return True
    return False


@dataclass
class Accumulation:
    """One movable all-reduce: `root[index] = add(gte(param, index), all_reduce)`."""

    all_reduce: HloOp
    add: HloOp
    index: int


def movable(ar: HloOp, body: ComputationOp, cond: ComputationOp) -> Accumulation | None:
    """XLA's `IsAllReduceMovable`, direct accumulation form: the accumulation, or None."""
    shape = ar.shape
    if not isinstance(shape, ArrayShape) or shape.element_type not in SUPPORTED_TYPES:
        return None
    if len(ar.operands) != 1 or computation_kind(reducer(ar)) != "sum" or has_control_deps(ar):
        return None
    param, root = _parameter(body), body.root
    users = unique_users(ar.result)
    if param is None or root.opcode != "tuple" or len(users) != 1:
        return None
    add = users[0]
    if not isinstance(add, HloOp) or add.opcode != "add" or add.operands[0] is add.operands[1]:
        return None
    buffer = add.operands[1] if add.operands[0] is ar.result else add.operands[0]
    index = _gte_index(buffer, param)
    if index is None or has_control_deps(add):
        return None
    # returned at the index it was read from, and only there
    if unique_users(add.result) != [root] or [o is add.result for o in root.operands].count(True) != 1:
        return None
    if root.operands[index] is not add.result:
        return None
    # XLA's `is_buffer_used`: the parameter feeds only get-tuple-elements, the buffer
    # only the accumulating add
    for user in unique_users(param.result):
        if not isinstance(user, HloOp) or user.opcode != "get-tuple-element":
            return None
        if user.attr("index") == index and unique_users(user.result) != [add]:
            return None
    if _reads_index(cond, index):
        return None
    return Accumulation(ar, add, index)


@dataclass
class SinkAllReduceBelowWhile(RewritePattern):
    """`while(tuple(.., acc, ..))` whose body adds `all-reduce(x)` to `acc` -> the body adds
    `x` to a zero-initialised buffer; after the loop `acc + all-reduce(buffer)`.

    Guards: a tuple-shaped while with a `tuple` init, a body with one caller, and per
    all-reduce `movable`."""

    ctx: RewriteContext
    callers: dict[str, int]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode != "while" or not isinstance(op.shape, TupleShape):
            return
        init = owner(op.operands[0])
        module = module_of(op)
        if init is None or init.opcode != "tuple" or module is None:
            return
        comps = comps_by_name(module)
        body, cond = comps.get(op.attr("body") or ""), comps.get(op.attr("condition") or "")
        if body is None or cond is None or self.callers.get(body.comp_name, 0) != 1:
            return
        moves = [m for ar in list(body.instructions) if ar.opcode == "all-reduce"
                 if (m := movable(ar, body, cond)) is not None]  # fmt: skip
        if not moves:
            return
        self._rewrite(op, init, moves, rewriter)

    def _rewrite(self, op: HloOp, init: HloOp, moves: list[Accumulation],
                 rewriter: PatternRewriter) -> None:  # fmt: skip
        old = {m.index: init.operands[m.index] for m in moves}
        original = list(op.result.uses)  # before the deltas read the new while
        operands = list(init.operands)
        for m in moves:
            # inserted before the while, the rewriter's insertion point
            zero = splat(rewriter, self.ctx, 0, m.all_reduce.shape, like=init)  # type: ignore[arg-type]
            operands[m.index] = zero.result
        new_init = new_op(rewriter, self.ctx, "tuple", operands, init.shape, None, init, op)
        rewriter.replace_uses_with_if(
            init.result, new_init.result, lambda use: use.operation is op
        )
        if not init.result.uses:
            rewriter.erase_op(init)
        after = op.next_op
        assert after is not None  # a while is never a computation's last op (the root is)
        results: dict[int, SSAValue] = {}
        for m in moves:
            ar = m.all_reduce
            shape = ar.shape
            delta = new_op(rewriter, self.ctx, "get-tuple-element", [op.result], shape,
                           {"index": m.index}, like=op, before=after)  # fmt: skip
            attrs = {k: ar.attr(k) for k in ar.attr_specs if ar.attr(k) is not None}
            reduced = new_op(rewriter, self.ctx, "all-reduce", [delta.result], shape, attrs,
                             like=ar, before=after)  # fmt: skip
            total = new_op(rewriter, self.ctx, "add", [old[m.index], reduced.result], shape,
                           like=m.add, before=after)  # fmt: skip
            results[m.index] = total.result
            self.ctx.note(self, ar, f"sunk below {op.inst_name} (tuple index {m.index})")
            rewriter.replace_all_uses_with(ar.result, ar.operands[0])
            rewriter.erase_op(ar)
        rebuilt: HloOp | None = None
        for use in original:
            user = use.operation
            idx = user.attr("index") if isinstance(user, HloOp) and user.opcode == "get-tuple-element" else None
            if idx in results:
                rewriter.replace_all_uses_with(user.results[0], results[idx])
                rewriter.erase_op(user)
                continue
            if rebuilt is None:
                # XLA's `InsertNewWhileResult`: the old while's tuple, moved buffers replaced
                rebuilt = self._result_tuple(op, results, after, rewriter)
            user.operands[use.index] = rebuilt.result

    def _result_tuple(self, op: HloOp, results: dict[int, SSAValue], after: Operation,
                      rewriter: PatternRewriter) -> HloOp:  # fmt: skip
        elems = []
        for i, s in enumerate(op.shape.elements):  # type: ignore[union-attr]
            if i not in results:
                results[i] = new_op(rewriter, self.ctx, "get-tuple-element", [op.result], s,
                                    {"index": i}, like=op, before=after).result  # fmt: skip
            elems.append(results[i])
        return new_op(rewriter, self.ctx, "tuple", elems, op.shape, like=op, before=after)


def body_callers(module: ModuleOp) -> dict[str, int]:
    """How many instructions name each computation as a while body (or call it otherwise)."""
    counts: dict[str, int] = {}
    for comp in computations(module):
        for inst in comp.instructions:
            for key in ("body", "condition", "to_apply", "calls"):
                name = inst.attr(key) if key in inst.attr_specs else None
                if isinstance(name, str):
                    counts[name] = counts.get(name, 0) + 1
    return counts


@dataclass(frozen=True)
class WhileLoopAllReduceCodeMotionPass(HloModulePass):
    """Sink all-reduces whose results are only accumulated in a while loop below it."""

    name: ClassVar[str] = "while-loop-all-reduce-code-motion"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if layout_constrained(module, ("all-reduce",)):
            return False  # XLA returns unchanged on a layout-constrained all-reduce in a body
        rctx = RewriteContext.of(module, trace)
        return run_patterns(module, [SinkAllReduceBelowWhile(rctx, body_callers(module))])
