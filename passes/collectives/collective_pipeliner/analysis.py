"""The loop facts `collective-pipeliner` needs (XLA's `WhileLoopAnalysis::
ComputeLoopStatistics`): the induction variable, its start, step and the trip count, and
whether a dynamic-update-slice index is one XLA's range analysis can follow."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import const_array, owner

INDEX_TYPES = frozenset(("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"))
"""XLA's `IsSupportedLoopIndexType`."""

_MIRROR = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}
_RANGE_OPS = frozenset(("add", "subtract", "multiply", "select", "compare"))


@dataclass(frozen=True)
class Loop:
    """A while with a static trip count: induction variable at tuple `index`."""

    index: int
    start: int
    step: int
    count: int


def scalar_int(value: SSAValue) -> int | None:
    """The value of an integer scalar constant, else None."""
    arr = const_array(value)
    if arr is None or arr.shape != () or arr.dtype.kind not in "iu":
        return None
    return int(arr)


def parameter(comp: ComputationOp) -> HloOp | None:
    """The computation's only parameter."""
    params = [o for o in comp.instructions if o.opcode == "parameter"]
    return params[0] if len(params) == 1 else None


def gte_index(value: SSAValue) -> int | None:
    """The tuple index when `value` is `get-tuple-element(parameter)`."""
    op = owner(value)
    if op is None or op.opcode != "get-tuple-element":
        return None
    src = owner(op.operands[0])
    return op.attr("index") if src is not None and src.opcode == "parameter" else None


def _bound(cond: ComputationOp) -> tuple[int, str, int] | None:
    """(tuple index, direction with the induction variable on the left, bound)."""
    root = cond.root
    if root.opcode != "compare" or len(root.operands) != 2:
        return None
    direction = str(root.attr("direction"))
    lhs, rhs = root.operands
    for var, other, d in ((lhs, rhs, direction), (rhs, lhs, _MIRROR.get(direction))):
        index, bound = gte_index(var), scalar_int(other)
        if d in _MIRROR and index is not None and bound is not None:
            return index, d, bound
    return None


def _step(body: ComputationOp, index: int) -> int | None:
    """The constant the body adds to the induction variable (`i + c`, `c + i`, `i - c`)."""
    root = body.root
    if root.opcode != "tuple" or index >= len(root.operands):
        return None
    nxt = owner(root.operands[index])
    if nxt is None or nxt.opcode not in ("add", "subtract"):
        return None
    a, b = nxt.operands
    if gte_index(a) == index and (c := scalar_int(b)) is not None:
        return c if nxt.opcode == "add" else -c
    if nxt.opcode == "add" and gte_index(b) == index and (c := scalar_int(a)) is not None:
        return c
    return None


def _count(start: int, direction: str, bound: int, step: int) -> int | None:
    """Iterations of `for (i = start; i <direction> bound; i += step)`, None if unbounded."""
    if step > 0 and direction in ("LT", "LE"):
        end = bound + (direction == "LE")
        return max(0, -(-(end - start) // step))
    if step < 0 and direction in ("GT", "GE"):
        end = bound - (direction == "GE")
        return max(0, -(-(start - end) // -step))
    return None


def analyse(op: HloOp, cond: ComputationOp, body: ComputationOp) -> Loop | None:
    """The loop's static trip count (XLA's `PatternMatchParseWhileLoop`, the
    `i = c0; i < N; i += c` form), None when it has none."""
    init = owner(op.operands[0])
    parsed = _bound(cond)
    if init is None or init.opcode != "tuple" or parsed is None:
        return None
    index, direction, bound = parsed
    if index >= len(init.operands):
        return None
    start, step = scalar_int(init.operands[index]), _step(body, index)
    shape = body.root.operands[index].type.data  # type: ignore[attr-defined]
    if start is None or not step or not isinstance(shape, ArrayShape):
        return None
    if shape.element_type not in INDEX_TYPES:
        return None
    count = _count(start, direction, bound, step)
    return None if count is None else Loop(index, start, step, count)


def follows_induction(value: SSAValue) -> bool:
    """XLA's `CheckIndexIsMonotonic`: the index is computed from constants and
    `get-tuple-element(param), index=0` (the only element XLA seeds with the induction
    range) by add, subtract, multiply, select and compare, and uses that element."""
    stack, seen, uses_var = [value], set(), False
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        op = owner(v)
        if op is None:
            return False
        if op.opcode == "constant":
            continue
        if op.opcode == "get-tuple-element":
            if gte_index(v) != 0:
                return False
            uses_var = True
            continue
        if op.opcode not in _RANGE_OPS:
            return False
        stack.extend(op.operands)
    return uses_var
