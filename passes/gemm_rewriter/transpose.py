"""Transposes folded into a dot's dimension numbers before it becomes a cuBLAS call: XLA's
TransposeFolding with GPU's CanFoldTransposeOperandIntoDot, which XLA's GPU compiler reruns
right before its GEMM rewriting ("GemmRewriter assumes that all transposes are folded")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import RewriteContext, new_op, replace_op

from .calls import owner
from .support import arr

_DOT_ATTRS = ("operand_precision", "algorithm", "frontend_attributes", "sharding")
"""What the folded dot keeps of the old one besides its dimension numbers."""


def matrix_layout_ok(shape: ArrayShape, batch: list[int], rows: list[int],
                     cols: list[int]) -> bool:  # fmt: skip
    """XLA's MatrixLayout::For on an operand: each of the batch, row and column groups lies
    physically together, in its logical order, and the batch is not the most minor."""
    mtm = list(shape.minor_to_major)
    groups = {0: batch, 1: rows, 2: cols}
    order: list[int] = []  # the groups, minor to major
    i = 0
    while i < len(mtm):
        g = next((k for k in (1, 2, 0) if groups[k] and mtm[i] == groups[k][-1]), None)
        if g is None:
            return False
        for d in reversed(groups[g]):
            if i >= len(mtm) or mtm[i] != d:
                return False
            i += 1
        order.append(g)
    order += [k for k in (2, 1, 0) if not groups[k]]
    return order[0] != 0


def can_fold(dot: HloOp, side: int) -> bool:
    """XLA's CanFoldTransposeOperandIntoDot: the non-contracting dimensions keep their
    order through the transpose, and cuBLAS can read the transpose's operand as the
    matrix (`matrix_layout_ok`)."""
    t = owner(dot.operands[side])
    assert t is not None
    perm: list[int] = list(t.attr("dimensions") or ())
    key = "lhs" if side == 0 else "rhs"
    batch: list[int] = list(dot.attr(f"{key}_batch_dims") or ())
    contracting: list[int] = list(dot.attr(f"{key}_contracting_dims") or ())
    rest = [d for d in range(len(perm)) if d not in batch and d not in contracting]
    moved = [perm[d] for d in rest]
    if moved != sorted(moved):
        return False
    src = arr(t.operands[0])
    return matrix_layout_ok(src, [perm[d] for d in batch], [perm[d] for d in contracting], moved)


@dataclass
class FoldTranspose(RewritePattern):
    """`dot(transpose(a), b)` -> `dot(a, b)` with the dimension numbers read through the
    transpose (either operand, both at once).

    Guards: both operands of rank 2 or more; a transpose that permutes; `can_fold`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dot",)

    ctx: RewriteContext

    def fold(self, op: HloOp, rewriter: PatternRewriter) -> HloOp | None:
        """The folded dot that replaced `op`, or None."""
        if any(arr(v).rank < 2 for v in op.operands):
            return None
        sides = []
        for i in (0, 1):
            t = owner(op.operands[i])
            perm = tuple(t.attr("dimensions") or ()) if t is not None else ()
            if t is None or t.opcode != "transpose" or perm == tuple(range(len(perm))):
                continue
            if can_fold(op, i):
                sides.append(i)
        if not sides:
            return None
        attrs = {k: op.attr(k) for k in _DOT_ATTRS if op.attr(k) is not None}
        operands = list(op.operands)
        for i, key in ((0, "lhs"), (1, "rhs")):
            dims = {f"{key}_{w}_dims": tuple(op.attr(f"{key}_{w}_dims") or ())
                    for w in ("batch", "contracting")}  # fmt: skip
            if i in sides:
                t = owner(op.operands[i])
                assert t is not None
                perm = t.attr("dimensions")
                dims = {k: tuple(perm[d] for d in v) for k, v in dims.items()}
                operands[i] = t.operands[0]
            attrs.update(dims)
        new = new_op(rewriter, self.ctx, "dot", operands, op.shape, attrs, like=op, before=op)
        self.ctx.note(self, op, f"operands {sides}")
        replace_op(rewriter, op, new.result)
        return new

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if isinstance(op, HloOp) and op.opcode in self.OPCODES:
            self.fold(op, rewriter)
