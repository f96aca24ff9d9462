"""Rewrites that carry out a layout plan (`engine.Plan`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, ReturnOp, create_op
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.ir.shape import ArrayShape, Shape, TupleShape
from hlopass.rewriting import RewriteContext

from .engine import CHEAP, Plan
from .layouts import same_layout, set_shape, value_shape


@dataclass
class AssignPlannedLayout(RewritePattern):
    """`x: T{old}` -> `x: T{planned}`: give an instruction the layout its plan chose.

    Guards: the instruction is in the plan and its layout differs; dims never change."""

    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    ctx: RewriteContext
    plan: Plan
    done: int = 0

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp):
            return
        shape = self.plan.shapes.get(op)
        if (
            shape is None
            or shape == op.shape
            or shape.without_layout() != op.shape.without_layout()
        ):
            return
        set_shape(op, shape)
        self.done += 1
        rewriter.handle_operation_modification(op)
        self.ctx.note(self, op, f"layout {shape.text()}")


@dataclass
class CopyOperandIfLayoutsDiffer(RewritePattern):
    """`user(x{a})` where `user` needs `{b}` -> `user(copy(x){b})` (XLA's
    CopyOperandIfLayoutsDiffer); a broadcast, iota or constant is re-created with `{b}`
    instead, a tuple is copied element by element.

    Guards: the plan names a needed layout for that operand and it differs."""

    # it also matches the ROOT (a `ReturnOp`), which `OPCODES` would exclude under
    # `OpcodeDispatchApplier`; the grammar page reads this instead
    TARGETS: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    ctx: RewriteContext
    plan: Plan
    done: int = 0

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, (HloOp, ReturnOp)):
            return
        for i, v in enumerate(op.operands):
            need = self.plan.needs.get((op, i))
            if need is None or same_layout(value_shape(v), need):
                continue
            new = self.converted(v, need, op)
            op.operands[i] = new
            self.done += 1
            rewriter.handle_operation_modification(op)
            label = op.inst_name if isinstance(op, HloOp) else "ROOT"
            if self.ctx.trace:
                self.ctx.trace(type(self).__name__, f"{label} operand {i} -> {need.text()}")

    def converted(self, v: SSAValue, need: Shape, before: Operation) -> SSAValue:
        if isinstance(need, TupleShape):
            elems = []
            src = value_shape(v)
            assert isinstance(src, TupleShape)
            for k, e in enumerate(need.elements):
                gte = self.insert("get-tuple-element", [v], src.elements[k], before, {"index": k})
                elems.append(
                    gte.result
                    if same_layout(src.elements[k], e)
                    else self.converted(gte.result, e, before)
                )
            return self.insert("tuple", elems, need, before).result
        owner = v.owner
        if isinstance(owner, HloOp) and owner.opcode in CHEAP and isinstance(need, ArrayShape):
            attrs = {s.name: val for s, val in owner.hlo_attrs() if s.name != "name"}
            clone = create_op(owner.opcode, list(owner.operands), need,
                              self.ctx.names.fresh(owner.inst_name), attrs)  # fmt: skip
            Rewriter_insert_after(clone, owner)
            return clone.result
        return self.insert("copy", [v], need, before).result

    def insert(self, opcode: str, operands: list[SSAValue], shape: Shape, before: Operation,
               attrs: dict | None = None) -> HloOp:  # fmt: skip
        owner = operands[0].owner
        md = owner.attr("metadata") if isinstance(owner, HloOp) else None
        a = dict(attrs or {})
        if md is not None and opcode == "copy":
            a["metadata"] = md
        new = create_op(opcode, operands, shape, self.ctx.names.fresh(opcode), a)
        block = before.parent_block()
        assert block is not None
        block.insert_op_before(new, before)
        return new


def Rewriter_insert_after(new: Operation, anchor: Operation) -> None:  # noqa: N802
    block = anchor.parent_block()
    assert block is not None
    block.insert_ops_after([new], anchor)


__all__ = ["AssignPlannedLayout", "CopyOperandIfLayoutsDiffer", "InsertPoint"]
