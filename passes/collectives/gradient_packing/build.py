"""Instruction building shared by the rewrites: flattening a gradient to 1-D and back, and
collectives over explicit device groups that keep the original's channel mode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import PadDim, SliceDim
from hlopass.ir.shape import ArrayShape, array
from hlopass.passes.collectives.all_reduce_folder import ChannelIds, groups_text
from hlopass.rewriting import RewriteContext, new_op, scalar_constant

from .spec import Band


@dataclass
class Lowering:
    """State of one run: the band still to apply to each all-reduce (the rewrites hand
    the all-reduces they make to the next rewrite through it), fresh channel ids."""

    ctx: RewriteContext
    channels: ChannelIds
    gpus_per_host: int
    todo: dict[HloOp, Band] = field(default_factory=dict)


@dataclass
class Builder:
    """Emits instructions before the all-reduce `op` being rewritten."""

    state: Lowering
    rewriter: PatternRewriter
    op: HloOp

    @property
    def et(self) -> str:
        return self.op.shape.element_type  # type: ignore[attr-defined]

    def emit(self, opcode: str, operands: list[SSAValue], shape: Any,
             attrs: dict[str, Any] | None = None) -> HloOp:  # fmt: skip
        return new_op(self.rewriter, self.state.ctx, opcode, operands, shape, attrs, self.op)

    def flat(self, x: SSAValue) -> SSAValue:
        shape = x.type.data  # type: ignore[attr-defined]
        if len(shape.dims) == 1:
            return x
        return self.emit("reshape", [x], array(self.et, (shape.num_elements,))).result

    def back(self, x: SSAValue, shape: ArrayShape) -> SSAValue:
        if x.type.data == shape:  # type: ignore[attr-defined]
            return x
        return self.emit("reshape", [x], shape).result

    def slice(self, x: SSAValue, start: int, limit: int) -> SSAValue:
        n = x.type.data.dims[0]  # type: ignore[attr-defined]
        if (start, limit) == (0, n):
            return x
        sl = {"slice": (SliceDim(start, limit, 1),)}
        return self.emit("slice", [x], array(self.et, (limit - start,)), sl).result

    def pad(self, x: SSAValue, multiple: int) -> SSAValue:
        """`x` (1-D) padded with zeros, the sum's identity, to a multiple of `multiple`."""
        n = x.type.data.dims[0]  # type: ignore[attr-defined]
        extra = -n % multiple
        if not extra:
            return x
        zero = scalar_constant(self.rewriter, self.state.ctx, 0, self.et).result
        shape = array(self.et, (n + extra,))
        return self.emit("pad", [x, zero], shape, {"padding": (PadDim(0, extra),)}).result

    def collective(self, opcode: str, x: SSAValue, shape: ArrayShape,
                   groups: list[list[int]]) -> HloOp:  # fmt: skip
        """`opcode` over `groups` (dimension 0 for a reduce-scatter or all-gather), with
        the original's reduction, frontend attributes, global ids and, when it had a
        channel, a fresh one."""
        op = self.op
        attrs: dict[str, Any] = {"replica_groups": groups_text(groups)}
        if op.attr("channel_id") is not None:
            attrs["channel_id"] = self.state.channels.take()
        if op.attr("use_global_device_ids"):
            attrs["use_global_device_ids"] = True
        if opcode != "all-gather":
            attrs["to_apply"] = op.attr("to_apply")
        if opcode != "all-reduce":
            attrs["dimensions"] = (0,)
        if op.attr("frontend_attributes") is not None:
            attrs["frontend_attributes"] = op.attr("frontend_attributes")
        return self.emit(opcode, [x], shape, attrs)

    def ring(self, x: SSAValue, groups: list[list[int]]) -> SSAValue:
        """Sum of 1-D `x` over `groups` as reduce-scatter then all-gather, through zero
        padding to a multiple of the group size."""
        n = x.type.data.dims[0]  # type: ignore[attr-defined]
        size = len(groups[0])
        padded = self.pad(x, size)
        total = padded.type.data.dims[0]  # type: ignore[attr-defined]
        rs = self.collective("reduce-scatter", padded, array(self.et, (total // size,)), groups)
        ag = self.collective("all-gather", rs.result, array(self.et, (total,)), groups)
        return self.slice(ag.result, 0, n)
