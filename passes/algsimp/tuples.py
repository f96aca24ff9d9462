"""`algsimp` family: tuple / get-tuple-element."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    src,
)


class GetTupleElementOfTuple(Simplification):
    """`get-tuple-element(tuple(a0, ..., an), i) -> ai`."""

    OPCODES = ("get-tuple-element",)

    def rewrite(self, op: HloOp):
        t = src(op.operands[0], "tuple")
        if t is None:
            return None
        return t.operands[op.attr("index")]


PATTERNS: tuple[type[Simplification], ...] = (GetTupleElementOfTuple,)
"""This family's rewrites, in the order they fire."""
