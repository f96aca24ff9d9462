"""`algsimp` family: custom-calls XLA knows (`SliceToDynamic` of `PadToStatic`,
`LayoutConstraint`)."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import src
from hlopass.rewriting import same_shape, value_shape


def _target(op: HloOp | None) -> str | None:
    if op is None or op.OPCODE != "custom-call":
        return None
    t = op.attr("custom_call_target")
    return None if t is None else str(getattr(t, "data", t)).strip('"')


class SliceToDynamicOfPadToStatic(Simplification):
    """`SliceToDynamic(gte(PadToStatic(x), 0), gte(PadToStatic(x), 1)) -> x` (one
    PadToStatic call, the result x's own shape)."""

    OPCODES = ("custom-call",)
    OPERAND_FROM = frozenset({"get-tuple-element"})

    def rewrite(self, op: HloOp):
        if _target(op) != "SliceToDynamic" or len(op.operands) != 2:
            return None
        data, size = (src(v, "get-tuple-element") for v in op.operands)
        if data is None or size is None or data.attr("index") != 0 or size.attr("index") != 1:
            return None
        pad = src(data.operands[0], "custom-call")
        if pad is None or _target(pad) != "PadToStatic" or size.operands[0] is not pad.result:
            return None
        x = pad.operands[0]
        return x if same_shape(value_shape(x), op.shape) else None


class LayoutConstraintToCopy(Simplification):
    """`custom-call(x), custom_call_target="LayoutConstraint" -> x` with fixed layouts when
    the layouts agree, else a copy of x to the constrained layout (as XLA)."""

    OPCODES = ("custom-call",)

    def rewrite(self, op: HloOp):
        if not self.opts.is_layout_sensitive or _target(op) != "LayoutConstraint":
            return None
        if len(op.operands) != 1:
            return None
        x = op.operands[0]
        if same_shape(value_shape(x), op.shape):
            return x
        return self.new("copy", [x], op.shape, like=op)


PATTERNS: tuple[type[Simplification], ...] = (SliceToDynamicOfPadToStatic, LayoutConstraintToCopy)
"""This family's rewrites, in the order they fire."""
