"""The loop facts `collective-pipeliner` needs (XLA's `WhileLoopAnalysis::
ComputeLoopStatistics`): the induction variable, its start, step and the trip count, and
whether a dynamic-update-slice index is one XLA's range analysis can follow."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import gte_index, owner, scalar_int

INDEX_TYPES = frozenset(("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"))
"""XLA's `IsSupportedLoopIndexType`."""

_MIRROR = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}


@dataclass(frozen=True)
class Loop:
    """A while with a static trip count: induction variable at tuple `index`."""

    index: int
    start: int
    step: int
    count: int


_FOLD = {"add": lambda a, b: a + b, "subtract": lambda a, b: a - b,
         "multiply": lambda a, b: a * b}  # fmt: skip


def folded_int(value: SSAValue, depth: int = 16) -> int | None:
    """An integer scalar computed from constants (through add, subtract, multiply and
    get-tuple-element of a tuple): the loop's start as XLA's loop parser evaluates it."""
    op = owner(value)
    if op is None or depth == 0:
        return None
    if op.opcode == "constant":
        return scalar_int(value)
    if op.opcode == "get-tuple-element":
        src = owner(op.operands[0])
        if src is None or src.opcode != "tuple":
            return None
        return folded_int(src.operands[op.attr("index")], depth - 1)
    fold = _FOLD.get(op.opcode)
    if fold is None:
        return None
    a, b = (folded_int(v, depth - 1) for v in op.operands)
    return None if a is None or b is None else fold(a, b)


def parameter(comp: ComputationOp) -> HloOp | None:
    """The computation's only parameter."""
    params = [o for o in comp.instructions if o.opcode == "parameter"]
    return params[0] if len(params) == 1 else None


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
    start, step = folded_int(init.operands[index]), _step(body, index)
    shape = body.root.operands[index].type.data  # type: ignore[attr-defined]
    if start is None or not step or not isinstance(shape, ArrayShape):
        return None
    if shape.element_type not in INDEX_TYPES:
        return None
    count = _count(start, direction, bound, step)
    return None if count is None else Loop(index, start, step, count)


@dataclass(frozen=True)
class Range:
    """An interval of index values; `linear` when it moves with the induction variable."""

    lo: int
    hi: int
    linear: bool = True


_COMPARE = {
    "LT": lambda a, b: True if a.hi < b.lo else False if a.lo >= b.hi else None,
    "LE": lambda a, b: True if a.hi <= b.lo else False if a.lo > b.hi else None,
    "GT": lambda a, b: True if a.lo > b.hi else False if a.hi <= b.lo else None,
    "GE": lambda a, b: True if a.lo >= b.hi else False if a.hi < b.lo else None,
}


def index_range(value: SSAValue, loop: Loop) -> Range | None:
    """XLA's `RecursivelyIdentifyRange` as the pipeliner seeds it: element 0 of the loop
    tuple ranges over the induction values, constants are points, add and subtract combine
    intervals, a select whose compare is decided over the ranges is its chosen side;
    anything else has no range."""
    op = owner(value)
    if op is None:
        return None
    if op.opcode == "constant":
        c = scalar_int(value)
        return None if c is None else Range(c, c)
    if op.opcode == "get-tuple-element":
        if gte_index(value) != 0:
            return None
        last = loop.start + (loop.count - 1) * loop.step
        return Range(min(loop.start, last), max(loop.start, last))
    if op.opcode in ("add", "subtract"):
        a, b = (index_range(v, loop) for v in op.operands)
        if a is None or b is None:
            return None
        if op.opcode == "add":
            return Range(a.lo + b.lo, a.hi + b.hi, a.linear and b.linear)
        return Range(a.lo - b.hi, a.hi - b.lo, a.linear and b.linear)
    if op.opcode == "select":
        pred = owner(op.operands[0])
        if pred is None or pred.opcode != "compare":
            return None
        a, b = (index_range(v, loop) for v in pred.operands)
        decide = _COMPARE.get(str(pred.attr("direction")))
        taken = None if a is None or b is None or decide is None else decide(a, b)
        return None if taken is None else index_range(op.operands[1 if taken else 2], loop)
    return None


def is_monotonic(value: SSAValue, loop: Loop) -> bool:
    """XLA's `CheckIndexIsMonotonic`: a bounded, linear range."""
    r = index_range(value, loop)
    return r is not None and r.linear
