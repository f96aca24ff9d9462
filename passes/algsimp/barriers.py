"""`algsimp` family: optimization barriers.

Nothing is simplified *through* an `opt-barrier`: no pattern looks past one (a barrier is
neither a tuple nor a constant to the matchers), so `get-tuple-element(opt-barrier(t), i)`
stays. The one rewrite of a barrier itself drops tuple elements nobody reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import TupleShape
from hlopass.passes.algsimp.helpers import src
from hlopass.rewriting import (
    RewriteContext,
    erase_dead,
    has_side_effect,
    is_control_predecessor,
    is_root,
    new_op,
)


@dataclass
class OptBarrierDropUnusedElements(RewritePattern):
    """`gte(opt-barrier(tuple(a, b, c)), {0, 2})` -> `gte(opt-barrier(tuple(a, c)), {0, 1})`:
    tuple elements of a barrier that no `get-tuple-element` reads are dropped (guards: every
    user of the barrier is a get-tuple-element, the barrier is not a root, no sharding and
    no control predecessors on it)."""

    ctx: RewriteContext
    opts: object
    OPCODES: ClassVar[tuple[str, ...]] = ("opt-barrier",)
    """What `OpcodeDispatchApplier` offers it (it does nothing to anything else)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.OPCODE != "opt-barrier":
            return
        t = src(op.operands[0], "tuple")
        if t is None or not isinstance(op.shape, TupleShape) or is_root(op):
            return
        if op.attr("sharding") is not None or is_control_predecessor(op):
            return
        users = [u.operation for u in op.result.uses]
        if not users or any(
            not isinstance(u, HloOp) or u.OPCODE != "get-tuple-element" for u in users
        ):
            return
        used = {u.attr("index") for u in users}  # type: ignore[union-attr]
        for i, v in enumerate(t.operands):  # (as XLA: an element also used elsewhere, the
            o = v.owner  # root, or with a side effect stays in the barrier)
            if not v.has_one_use() or (isinstance(o, HloOp) and (is_root(o) or has_side_effect(o))):
                used.add(i)
        used = sorted(used)
        n = len(op.shape.elements)
        if len(used) == n:
            return
        keep = [t.operands[i] for i in used]
        shape = TupleShape(tuple(op.shape.elements[i] for i in used))
        new_t = new_op(rewriter, self.ctx, "tuple", keep, shape, like=t, before=op)
        new_b = new_op(rewriter, self.ctx, "opt-barrier", [new_t.result], shape, like=op, before=op)
        where = {old: k for k, old in enumerate(used)}
        for u in users:
            assert isinstance(u, HloOp)
            u.set_attr("index", where[u.attr("index")])
        self.ctx.note(self, op, f"kept {len(used)} of {n} elements")
        rewriter.replace_all_uses_with(op.result, new_b.result)
        rewriter.erase(op)
        erase_dead(rewriter, [t.result])
