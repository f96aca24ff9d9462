"""`layout-normalization` of cuDNN convolution calls (XLA's NormalizeLayoutForGpuCustomCalls):
the call reads and writes physical shapes, its dim labels read in each one's physical order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import ConvDims
from hlopass.ir.shape import ArrayShape, TupleShape
from hlopass.rewriting import RewriteContext, new_op

from .layouts import value_shape
from .physical import is_physical, order, other_attrs, physical, physical_input, plain_array
from .rules import CUDNN_CONV_ROLES

_SIDES = ("input", "filter", "output")


@dataclass
class NormalizeCudnnConvCall(RewritePattern):
    """`call(a{La}, b{Lb}, ...) -> (r{Lr}, scratch)` -> `tuple(bitcast(gte(call'(a', b', ...),
    0)), gte(call', 1))`: each side's labels read in the physical order of the value that
    plays it (input, filter, output by the call's kind).

    Guards: a cuDNN convolution call with parsable labels, plain array operands and a
    (result, scratch) tuple; something not yet physical."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        roles = CUDNN_CONV_ROLES.get(op.attr("custom_call_target") or "")
        labels = op.attr("dim_labels")
        shape = op.shape
        if roles is None or not isinstance(labels, ConvDims) or not isinstance(shape, TupleShape):
            return
        first = shape.elements[0]
        shapes = [value_shape(v) for v in op.operands]
        if not plain_array(first) or not all(plain_array(s) for s in shapes):
            return
        if is_physical(first) and all(is_physical(s) for s in shapes):
            return
        assert isinstance(first, ArrayShape)
        lhs, rest = labels.labels.split("_", 1)
        rhs, out = rest.split("->")
        text = dict(zip(_SIDES, (lhs, rhs, out), strict=True))
        played = dict(zip(roles, (shapes[0], shapes[1], first), strict=True))
        sides = []
        for side in _SIDES:
            s = played[side]
            assert isinstance(s, ArrayShape)
            if len(text[side]) != s.rank:
                return
            sides.append("".join(text[side][d] for d in order(s)))
        attrs = other_attrs(op, "dim_labels")
        attrs["dim_labels"] = ConvDims(f"{sides[0]}_{sides[1]}->{sides[2]}")
        ins = [physical_input(rewriter, self.ctx, v) for v in op.operands]
        phys = physical(first)
        new_shape = TupleShape((phys, *shape.elements[1:]))
        call = new_op(rewriter, self.ctx, "custom-call", ins, new_shape, attrs, like=op, before=op)
        call.inst_name, op.inst_name = op.inst_name, call.inst_name
        parts = [new_op(rewriter, self.ctx, "get-tuple-element", [call.result], e, {"index": i},
                        before=op).result for i, e in enumerate(new_shape.elements)]  # fmt: skip
        if phys != first:
            parts[0] = new_op(rewriter, self.ctx, "bitcast", [parts[0]], first, before=op).result
        t = new_op(rewriter, self.ctx, "tuple", parts, shape, before=op)
        rewriter.replace_all_uses_with(op.result, t.result)
        rewriter.erase(op)
        self.ctx.note(self, call, f"labels {attrs['dim_labels']}")
