"""Matching: offering an instruction only to the patterns of its opcode
(`OpcodeDispatchApplier`), and the questions a pattern asks of its operands (constants,
splats, shapes, the root)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, ReturnOp
from hlopass.ir.shape import ArrayShape, Shape, TupleShape
from hlopass.rewriting.lookup import ByClass, hlo_class, is_hlo, owner


class OpcodeDispatchApplier(RewritePattern):
    """xDSL's `GreedyRewritePatternApplier` (patterns tried in order until one acts, no
    DCE), offering an instruction only to the patterns that can match its opcode.

    A pattern whose class has a non-empty `OPCODES` tuple promises that its
    `match_and_rewrite` does nothing to any other operation (algsimp's `Simplification`
    checks that first); every other pattern is offered everything. The result is the same
    as trying all of them, without calling a hundred patterns per instruction.
    """

    def __init__(self, patterns: Sequence[RewritePattern]):
        self.patterns = list(patterns)
        self._by_opcode: dict[str | None, list[RewritePattern]] = {}
        self._wanted = ByClass(self._wants_class)
        """Whether some pattern may match an op's instructions (`wants`)."""

    def _for(self, opcode: str | None) -> list[RewritePattern]:
        found = self._by_opcode.get(opcode)
        if found is None:
            found = self._by_opcode[opcode] = self._select(opcode)
        return found

    def _select(self, opcode: str | None) -> list[RewritePattern]:
        """The patterns an instruction of `opcode` is offered, in order (asked once per
        opcode; a subclass may build its patterns here, on first need)."""
        return [
            p
            for p in self.patterns
            if not getattr(type(p), "OPCODES", ()) or opcode in type(p).OPCODES  # type: ignore[attr-defined]
        ]

    def wants(self, op: Operation) -> bool:
        """Some pattern may match `op` (the driver does not visit the others); asked of
        every instruction a walk starts from, so answered per op class."""
        return self._wanted(op)

    def select(self, ops: list[Operation]) -> list[Operation]:
        """`[op for op in ops if self.wants(op)]`, a test per op class."""
        return self._wanted.ops(ops)

    def _wants_class(self, t: type) -> bool:
        return bool(self._for(t.OPCODE if hlo_class(t) else None))  # type: ignore[attr-defined]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        """Offer `op` to the patterns for its opcode, in order, until one acts on it."""
        for pattern in self._for(op.OPCODE if is_hlo(op) else None):  # type: ignore[attr-defined]
            pattern.match_and_rewrite(op, rewriter)
            if rewriter.has_done_action:
                return


def const_array(value: SSAValue) -> np.ndarray | None:
    """The ndarray of a `constant` array value (None when not a constant or elided)."""
    o = owner(value)
    # (`OPCODE`, the class attribute, first: `opcode` and `shape` are property calls, and
    # the algsimp patterns ask of every constant-like operand they look at)
    if o is None or o.OPCODE != "constant" or not isinstance(o.shape, ArrayShape):
        return None
    lit = o.attr("value")
    return None if lit is None else lit.literal.array


def scalar_int(value: SSAValue) -> int | None:
    """The value of an integer scalar constant (a loop bound, a step), else None."""
    arr = const_array(value)
    if arr is None or arr.shape != () or arr.dtype.kind not in "iu":
        return None
    return int(arr)


def gte_index(value: SSAValue) -> int | None:
    """The tuple index when `value` is `get-tuple-element(parameter)` (a loop's carried
    element, in a while body or condition), else None."""
    op = owner(value)
    if op is None or op.opcode != "get-tuple-element":
        return None
    src = owner(op.operands[0])
    return op.attr("index") if src is not None and src.opcode == "parameter" else None


def splat_value(value: SSAValue) -> Any:
    """The single element value of a splat constant or `broadcast(scalar constant)`, else None."""
    o = owner(value)
    if o is None:
        return None
    opcode = o.OPCODE
    if opcode == "broadcast" and o.operands:
        inner = const_array(o.operands[0])
        if inner is not None and inner.size == 1:
            return inner.reshape(()).item() if inner.dtype.kind in "biuf" else inner.reshape(())[()]
        return None
    if opcode != "constant" or not isinstance(o.shape, ArrayShape):
        return None
    lit = o.attr("value")
    return None if lit is None else lit.literal.splat()


def _is_value(value: SSAValue, target: float) -> bool:
    v = splat_value(value)
    if v is None:
        return False
    try:
        return bool(v == target) and not (isinstance(v, float) and v != v)
    except (TypeError, ValueError):
        return False


def is_zero(value: SSAValue) -> bool:
    """`value` is a splat constant (or broadcast scalar constant) equal to 0 (-0.0 too)."""
    return _is_value(value, 0)


def is_one(value: SSAValue) -> bool:
    """`value` is a splat constant (or broadcast scalar constant) equal to 1."""
    return _is_value(value, 1)


def is_constant_like(value: SSAValue) -> bool:
    """A constant, or a broadcast of one."""
    o = owner(value)
    if o is None:
        return False
    if o.opcode == "constant":
        return True
    return (
        o.opcode == "broadcast"
        and owner(o.operands[0]) is not None
        and (
            owner(o.operands[0]).opcode == "constant"  # type: ignore[union-attr]
        )
    )


def same_shape(a: Shape, b: Shape) -> bool:
    """Equal including layouts (a missing layout equals the default one)."""
    if a == b:
        return True
    if isinstance(a, ArrayShape) and isinstance(b, ArrayShape):
        return (
            a.compatible(b)
            and a.minor_to_major == b.minor_to_major
            and not (a.layout and a.layout.has_extras())
            and not (b.layout and b.layout.has_extras())
        )
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            same_shape(x, y) for x, y in zip(a.elements, b.elements, strict=False)
        )
    return False


def value_shape(value: SSAValue) -> Shape:
    """The HLO shape (with layout) of an SSA value: its type's `Shape`."""
    return value.type.data  # type: ignore[attr-defined]


def is_root(op: HloOp) -> bool:
    """`op` is its computation's ROOT (the `hlo.return` uses it)."""
    return any(isinstance(u.operation, ReturnOp) for u in op.result.uses)
