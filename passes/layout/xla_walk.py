"""The order in which `layout-normalization` visits instructions: XLA's
`DfsHloRewriteVisitor` walk, replayed step by step so the pass builds the module XLA's
`LayoutNormalization` builds, bitcasts included.

Why replay the walk rather than rewrite to a fixed point: XLA's output depends on it.
Each rewritten instruction hands its users a `bitcast` back to its logical shape, and that
bitcast is a new instruction the walk has not seen. A user the walk expands (pushes the
operands of) only after the rewrite finds the bitcast among its operands and visits it;
having a non-default layout and no handler, it gets XLA's default action, one more
`bitcast` pair. XLA's own tests pin that pair (`ConstantAvoidRevisitOfUser`,
`BitcastConvertFromNonContiguousDimensionIsNotNormalized`); its layout-sensitive algsimp,
which runs next in every XLA pipeline, folds it away, and so does ours.

The walk (xla/hlo/ir/hlo_instruction.cc `PostOrderDFS`): a stack seeded with the root;
a node popped the first time is marked visiting and its current operands and control
predecessors that are not yet visited are pushed so that operand 0 is expanded first;
popped again, it is visited. Unreachable roots (unused instructions) are walked first, in
program order (`HloComputation::Accept`). Instructions a handler creates are marked
visited, except the bitcast that stands in for the rewritten instruction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import ComputationOp, HloOp, create_op
from hlopass.rewriting import RewriteContext

from .layouts import is_default, value_shape
from .physical import physical, plain_array

_VISITING, _VISITED = 1, 2

Handler = Callable[[HloOp, PatternRewriter], bool]
"""Rewrites one instruction (True) or declines it (False), as XLA's `HandleX` does."""


def _default_layout(v: SSAValue) -> bool:
    """XLA's `HasDefaultLayout`: an array (of any kind) in the descending layout."""
    s = value_shape(v)
    return plain_array(s) and is_default(s)  # type: ignore[arg-type]


def skipped(op: HloOp) -> bool:
    """XLA's `ShouldProcessNode` is false: the result and every operand already default."""
    return _default_layout(op.result) and all(_default_layout(v) for v in op.operands)


class XlaWalk:
    """One computation's walk; `changed` says whether any instruction was rewritten."""

    def __init__(self, ctx: RewriteContext, handle: Handler, no_default: frozenset[str]):
        self.ctx = ctx
        self.handle = handle
        self.no_default = no_default
        """Opcodes whose handler, when it declines, leaves the instruction as it is (XLA's
        `HandleConstant` and `HandleReduceWindow` return early; `HandleScatter` we lack)."""
        self.state: dict[Operation, int] = {}
        self.changed = False

    # --- the walk ------------------------------------------------------------------------

    def run(self, comp: ComputationOp) -> bool:
        by_name = {op.inst_name: op for op in comp.instructions}
        root = comp.root
        unreachable = [op for op in comp.instructions
                       if op is not root and op.result.first_use is None]  # fmt: skip
        for start in [*unreachable, root]:
            self._dfs(start, by_name)
        return self.changed

    def _dfs(self, start: HloOp, by_name: dict[str, HloOp]) -> None:
        stack: list[HloOp] = [start]
        while stack:
            op = stack[-1]
            state = self.state.get(op, 0)
            if state == _VISITED or op.parent is None:
                stack.pop()
                continue
            if state == _VISITING:
                stack.pop()
                self.state[op] = _VISITED
                if not skipped(op):
                    self._visit(op)
                continue
            self.state[op] = _VISITING
            children = [v.owner for v in op.operands if isinstance(v.owner, HloOp)]
            children += [by_name[n] for n in op.attr("control-predecessors") or () if n in by_name]
            stack.extend(reversed([c for c in children if self.state.get(c, 0) == 0]))

    # --- one instruction ---------------------------------------------------------------

    def _visit(self, op: HloOp) -> None:
        created: list[Operation] = []
        slots = [(use.operation, use.index) for use in op.result.uses]
        rewriter = PatternRewriter(op)
        rewriter.operation_insertion_handler.append(created.append)
        if self.handle(op, rewriter) or rewriter.has_done_action:
            self.changed = True
            self._mark_created(created, [user.operands[i] for user, i in slots])
        elif op.opcode not in self.no_default:
            self.default_action(op)

    def _mark_created(self, created: Iterable[Operation], stand_in: list[SSAValue]) -> None:
        """New instructions are visited, but for the bitcast now read in the old one's place."""
        back = {v.owner for v in stand_in}
        for new in created:
            if not (new in back and isinstance(new, HloOp) and new.opcode == "bitcast"):
                self.state[new] = _VISITED

    def default_action(self, op: HloOp) -> None:
        """XLA's `DefaultAction`: the users of a non-default array read it through a bitcast
        to its physical form and one back (a later handler reads the physical one)."""
        uses = list(op.result.uses)
        shape = op.shape
        if not uses or not plain_array(shape):
            return
        want = physical(shape)  # type: ignore[arg-type]
        if want == shape:
            return
        to_phys = create_op("bitcast", [op.result], want, self.ctx.names.fresh("bitcast"), {})
        back = create_op("bitcast", [to_phys.result], shape, self.ctx.names.fresh("bitcast"), {})
        rewriter = PatternRewriter(op)
        rewriter.insert([to_phys, back], InsertPoint.after(op))
        self.state[to_phys] = _VISITED
        for use in uses:
            use.operation.operands[use.index] = back.result
        self.changed = True
