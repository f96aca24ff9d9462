"""`while-loop-all-reduce-code-motion`: an all-reduce in a while body whose result is only
added into a loop-carried buffer is sunk below the loop (XLA's
`WhileLoopAllReduceCodeMotion`).

Sum is linear: `acc + AR(x1) + ... + AR(xn) = acc + AR(x1 + ... + xn)`. The loop then
accumulates the un-reduced deltas into a buffer that starts at zero, and after the loop
one all-reduce of that buffer is added to the buffer's initial value: n all-reduces
become one. The summation order changes (each device sums its own deltas first), so
floating-point results move within the reassociation bound, as they do in XLA.

Implemented: XLA's add accumulation form, `root[i] = add(gte(param, i), AR(x))` (either
operand order; converts allowed on the all-reduce's result, on the buffer read and on the
sum returned, the sunk all-reduce then converting the buffer to its type and back), for a sum all-reduce of a numeric type, with XLA's guards: the body's
parameter feeds only get-tuple-elements, the buffer feeds only the accumulating add, the
add is returned at the index it was read from, no layout-constrained all-reduce in a body
(the module is then left alone), a while of tuple shape with a `tuple` init. Stricter than
XLA: the body has one caller, and the condition does not read the buffer (XLA leaves the
latter as a TODO; reading it would see the un-reduced partial sums). Not implemented (left
to XLA's fuller matcher): reduce-scatter (`enable_reduce_scatter`), the bitcast, reshape,
transpose, slice, select-with-zero, broadcast and multiply forwarding chains,
dynamic-slice/dynamic-update-slice and scatter accumulations, and the setup passes
(`run_setup_passes`); such loops are left unchanged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.ir.shape import ArrayShape, TupleShape
from hlopass.passes.collectives.all_reduce_folder import (
    computation_kind,
    has_control_deps,
    layout_constrained,
    reducer,
    unique_users,
)
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    is_hlo,
    module_of,
    new_op,
    owner,
    run_patterns,
    scalar_constant,
    value_shape,
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


def _through_converts(value: SSAValue) -> tuple[SSAValue, HloOp | None]:
    """Follow `value`'s sole users while they are converts: the last value and its sole
    user (None when it has several or none)."""
    while True:
        users = unique_users(value)
        if len(users) != 1:
            return value, None
        user = users[0]
        if not is_hlo(user):
            return value, None
        if user.opcode != "convert":
            return value, user
        value = user.result


def _origin(value: SSAValue, param: HloOp) -> int | None:
    """XLA's `get_origin_tuple_index` (convert form): the index when `value` is a chain of
    single-use converts over `get-tuple-element(param)`."""
    op = owner(value)
    while op is not None and op.opcode == "convert" and len(unique_users(op.result)) == 1:
        op = owner(op.operands[0])
    return None if op is None else _gte_index(op.result, param)


def movable(
    ar: HloOp, body: ComputationOp, conds: list[ComputationOp | None]
) -> Accumulation | None:
    """XLA's `IsAllReduceMovable`, add (and convert) accumulation form: the accumulation,
    or None."""
    shape = ar.shape
    if not isinstance(shape, ArrayShape) or shape.element_type not in SUPPORTED_TYPES:
        return None
    if len(ar.operands) != 1 or computation_kind(reducer(ar)) != "sum" or has_control_deps(ar):
        return None
    param, root = _parameter(body), body.root
    value, add = _through_converts(ar.result)
    if param is None or add is None or root.opcode != "tuple":
        return None
    if add.opcode != "add" or add.operands[0] is add.operands[1] or has_control_deps(add):
        return None
    buffer = add.operands[1] if add.operands[0] is value else add.operands[0]
    index = _origin(buffer, param)
    if index is None:
        return None
    # XLA's `get_output_tuple_index`: returned at the index it was read from, only there
    out, user = _through_converts(add.result)
    if user is not root or [o is out for o in root.operands].count(True) != 1:
        return None
    if root.operands[index] is not out:
        return None
    # XLA's `is_buffer_used`: the parameter feeds only get-tuple-elements, the buffer
    # only the accumulating add
    for gte in unique_users(param.result):
        if not isinstance(gte, HloOp) or gte.opcode != "get-tuple-element":
            return None
        if gte.attr("index") == index and _through_converts(gte.result)[1] is not add:
            return None
    if any(c is None or _reads_index(c, index) for c in conds):
        return None
    return Accumulation(ar, add, index)


@dataclass
class SinkAllReduceBelowWhile(RewritePattern):
    """`while(tuple(.., acc, ..))` whose body adds `all-reduce(x)` to `acc` -> the body adds
    `x` to a zero-initialised buffer; after the loop `acc + all-reduce(buffer)`.

    Guards: a tuple-shaped while with a `tuple` init, a body with one caller, and per
    all-reduce `movable`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("while",)
    # matched on the while, it rewrites the all-reduces of its body too
    TARGETS: ClassVar[tuple[str, ...]] = ("while", "all-reduce")

    ctx: RewriteContext
    callers: dict[str, int]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_hlo(op) or op.opcode not in self.OPCODES:
            return
        module = module_of(op)
        comps = {} if module is None else comps_by_name(module)
        body = comps.get(op.attr("body") or "")
        if module is None or body is None:
            return
        # XLA rewrites every while running this body; the body has no other caller
        whiles = [w for c in computations(module) for w in c.instructions
                  if w.opcode == "while" and w.attr("body") == body.comp_name]  # fmt: skip
        if self.callers.get(body.comp_name, 0) != len(whiles):
            return
        conds = [comps.get(w.attr("condition") or "") for w in whiles]
        inits = [owner(w.operands[0]) for w in whiles]
        if any(not isinstance(w.shape, TupleShape) for w in whiles) or None in conds:
            return
        if any(i is None or i.opcode != "tuple" for i in inits):
            return
        moves = [m for ar in list(body.instructions) if ar.opcode == "all-reduce"
                 if (m := movable(ar, body, conds)) is not None]  # fmt: skip
        if not moves:
            return
        for w in whiles:
            self._rewrite(w, moves, rewriter)
        for m in moves:
            self.ctx.note(self, m.all_reduce, f"sunk below {len(whiles)} while(s), index {m.index}")
            rewriter.replace_all_uses_with(m.all_reduce.result, m.all_reduce.operands[0])
            rewriter.erase(m.all_reduce)

    def _rewrite(self, op: HloOp, moves: list[Accumulation], rewriter: PatternRewriter) -> None:
        """Zero the moved buffers in `op`'s init; after `op`, old buffer + all-reduce(delta)."""
        init = owner(op.operands[0])
        assert init is not None
        old = {m.index: init.operands[m.index] for m in moves}
        original = list(op.result.uses)  # before the deltas read the new while
        operands = list(init.operands)
        for m in moves:
            operands[m.index] = self._zero(value_shape(old[m.index]), op, rewriter)  # type: ignore[arg-type]
        new_init = new_op(rewriter, self.ctx, "tuple", operands, init.shape, None, init, op)
        op.operands[0] = new_init.result
        if not init.result.uses:
            rewriter.erase(init)
        after = op.next_op
        assert after is not None  # a while is never a computation's last op (the root is)
        results: dict[int, SSAValue] = {}
        for m in moves:
            ar = m.all_reduce
            shape = op.shape.elements[m.index]  # type: ignore[union-attr]
            delta = new_op(rewriter, self.ctx, "get-tuple-element", [op.result], shape,
                           {"index": m.index}, like=op, before=after).result  # fmt: skip
            delta = self._convert(delta, ar.shape, after, rewriter)  # type: ignore[arg-type]
            attrs = {k: ar.attr(k) for k in ar.attr_specs if ar.attr(k) is not None}
            reduced = new_op(rewriter, self.ctx, "all-reduce", [delta], ar.shape, attrs,
                             like=ar, before=after).result  # fmt: skip
            reduced = self._convert(reduced, shape, after, rewriter)
            total = new_op(rewriter, self.ctx, "add", [old[m.index], reduced], shape,
                           like=m.add, before=after)  # fmt: skip
            results[m.index] = total.result
        rebuilt: SSAValue | None = None
        for use in original:
            user = use.operation
            idx = (
                user.attr("index")
                if isinstance(user, HloOp) and user.opcode == "get-tuple-element"
                else None
            )
            if idx in results:
                rewriter.replace_all_uses_with(user.results[0], results[idx])
                rewriter.erase(user)
                continue
            if rebuilt is None:
                # XLA's `InsertNewWhileResult`: the old while's tuple, moved buffers replaced
                rebuilt = self._result_tuple(op, results, after, rewriter).result
            user.operands[use.index] = rebuilt

    def _zero(self, shape: ArrayShape, before: HloOp, rewriter: PatternRewriter) -> SSAValue:
        """Zeros of `shape`, inserted before `before` (XLA's zero-initialised buffer)."""
        zero = scalar_constant(rewriter, self.ctx, 0, shape.element_type, before)
        if not shape.dims:
            return zero.result
        return new_op(rewriter, self.ctx, "broadcast", [zero.result], shape, {"dimensions": ()},
                      before=before).result  # fmt: skip

    def _convert(self, value: SSAValue, like: ArrayShape, after: Operation,
                 rewriter: PatternRewriter) -> SSAValue:  # fmt: skip
        """`value` converted to `like`'s element type (itself when it has it already)."""
        shape = value_shape(value)
        if not isinstance(shape, ArrayShape) or shape.element_type == like.element_type:
            return value
        target = dataclasses.replace(shape, element_type=like.element_type)
        return new_op(rewriter, self.ctx, "convert", [value], target, before=after).result

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
