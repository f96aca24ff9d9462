"""`splitk-rewriter` (XLA's SplitkRewriter): a dot whose contraction is long against its
output split into pieces summed by a reduce, which XLA's GPU compiler runs right before
`gemm-fusion` (so each piece is a batch of the Triton GEMM, and the sum a kernel of its own).

`dot(a, b)` contracting dimension i of `a` and j of `b` (size K) ->
`reduce(dot(reshape(pad(a)), reshape(pad(b))), add)` (then `convert` where the result type
is not the accumulator's): K is padded with zeros to a multiple of S pieces of 16 bytes
(`choose.padded_k`), split into [S, K'/S] (S a new batch dimension, just before the rest of
K in memory), the dot computes S partial sums in the accumulator type (f32 for floats) and
the reduce adds them. Adding zeros and regrouping a sum: exact in real arithmetic, and the
same bits where the sums are exact (float rounding may differ otherwise, as in XLA).

Guards (XLA's): one contracting dimension on each side, no s32 operand, and a split
`choose.choose_split` finds cheaper than none. Differs from XLA's: a dot with dynamic
dimensions or control edges is left alone; XLA's `xla_gpu_experimental_force_split_k` is the
`force-split-k` option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import PadDim
from hlopass.ir.shape import ArrayShape, Layout, default_layout
from hlopass.passes.collectives.decomposers import binary_computation
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    control_predecessor_names,
    expand_in_post_order,
    new_op,
    scalar_constant,
)

from .choose import accumulator_type, choose_split, padded_k


def _arr(value: SSAValue) -> ArrayShape:
    return value.type.data  # type: ignore[attr-defined]


def split_shape(shape: ArrayShape, k: int, split: int) -> ArrayShape:
    """`shape` with dimension k as [split, size/split]; in memory the split dimension sits
    right above the rest of k (XLA's SplitKOperand layout)."""
    dims = (*shape.dims[:k], split, shape.dims[k] // split, *shape.dims[k + 1 :])
    m2m: list[int] = []
    for d in (shape.layout or default_layout(shape.rank)).minor_to_major:
        if d >= k:
            m2m.append(d + 1)
        if d <= k:
            m2m.append(d)
    return ArrayShape(shape.element_type, dims, (), Layout(tuple(m2m)))


@dataclass
class SplitDotK(RewritePattern):
    """`dot(a, b)` -> `reduce(dot(reshape(pad(a)), reshape(pad(b))), add)` with the
    contraction split into S pieces along a new batch dimension.

    Guards: one contracting dimension per side; no s32 operand; no dynamic dimensions or
    layout extras; no control edges; the cost model's split S > 1."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dot",)

    ctx: RewriteContext
    cores: int
    cc: tuple[int, int]
    force: int = 0
    pinned: frozenset[str] = frozenset()

    def _operand(self, rw: PatternRewriter, dot: HloOp, side: int, split: int, k: int) -> SSAValue:
        key = "lhs" if side == 0 else "rhs"
        c: int = dot.attr(f"{key}_contracting_dims")[0]
        v = dot.operands[side]
        s = _arr(v)
        if s.dims[c] != k:  # pad K with zeros up to the split's multiple
            zero = scalar_constant(rw, self.ctx, 0, s.element_type, before=dot)
            pads = tuple(PadDim(0, k - s.dims[c] if d == c else 0) for d in range(s.rank))
            padded = ArrayShape(s.element_type, tuple(k if d == c else n for d, n in enumerate(s.dims)),
                                (), s.layout)  # fmt: skip
            v = new_op(
                rw, self.ctx, "pad", [v, zero.result], padded, {"padding": pads}, before=dot
            ).result
            s = padded
        return new_op(rw, self.ctx, "reshape", [v], split_shape(s, c, split), before=dot).result

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        lc, rc = op.attr("lhs_contracting_dims") or (), op.attr("rhs_contracting_dims") or ()
        if len(lc) != 1 or len(rc) != 1:
            return
        shapes = [_arr(op.operands[0]), _arr(op.operands[1]), op.shape]
        if any(not isinstance(s, ArrayShape) or s.is_dynamic for s in shapes):
            return
        if any(s.layout is not None and s.layout.has_extras() for s in shapes):  # type: ignore[union-attr]
            return
        if any(s.element_type == "s32" for s in shapes[:2]):  # type: ignore[union-attr]
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        split = self.force or choose_split(op, self.cores, self.cc)
        if split == 1:
            return
        self.rewrite(op, rewriter, split, lc[0], rc[0])

    def rewrite(self, op: HloOp, rw: PatternRewriter, split: int, lk: int, rk: int) -> None:
        k = padded_k(op, split)
        lhs, rhs = self._operand(rw, op, 0, split, k), self._operand(rw, op, 1, split, k)
        lb: list[int] = list(op.attr("lhs_batch_dims") or ())
        rb: list[int] = list(op.attr("rhs_batch_dims") or ())
        at = next((i for i, d in enumerate(lb) if d >= lk), len(lb))  # keeps lhs's list sorted
        lb = [d + 1 if d >= lk else d for d in lb]
        rb = [d + 1 if d >= rk else d for d in rb]
        lb.insert(at, lk)
        rb.insert(at, rk)
        attrs = {
            "lhs_batch_dims": tuple(lb), "rhs_batch_dims": tuple(rb),
            "lhs_contracting_dims": (lk + 1,), "rhs_contracting_dims": (rk + 1,),
        }  # fmt: skip
        for name in ("operand_precision", "algorithm"):  # XLA's precision_config
            if op.attr(name) is not None:
                attrs[name] = op.attr(name)
        acc = accumulator_type(op)
        out: ArrayShape = op.shape  # type: ignore[assignment]
        dims = (*out.dims[:at], split, *out.dims[at:])
        dot = new_op(rw, self.ctx, "dot", [lhs, rhs], ArrayShape(acc, dims, (), default_layout(len(dims))),
                     attrs, like=op, before=op)  # fmt: skip
        zero = scalar_constant(rw, self.ctx, 0, acc, before=op)
        add = binary_computation(self.ctx, op, "add", acc)
        summed = ArrayShape(acc, out.dims, (), out.layout)
        root = new_op(rw, self.ctx, "reduce", [dot.result, zero.result], summed,
                      {"dimensions": (at,), "to_apply": add}, like=op, before=op)  # fmt: skip
        if acc != out.element_type:
            root = new_op(rw, self.ctx, "convert", [root.result], out, like=op, before=op)
        op.result.replace_all_uses_with(root.result)
        rw.erase(op)


@dataclass(frozen=True)
class SplitkRewriterPass(HloModulePass):
    """Split each dot's contraction where XLA's cost model finds the pieces cheaper."""

    name: ClassVar[str] = "splitk-rewriter"

    device: str = "h100_sxm"
    """The GPU the split is chosen for (its SM count and generation's cost weights)."""
    force_split_k: int = 0
    """XLA's `xla_gpu_experimental_force_split_k`: split every dot it can into this many
    pieces (0: the cost model chooses)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        from hlopass.cost.devices import DEVICES
        from hlopass.cost.profiles import compute_capability

        rctx = RewriteContext.of(module, trace)
        pattern = SplitDotK(rctx, DEVICES[self.device].sm_count, compute_capability(self.device),
                            self.force_split_k, frozenset(control_predecessor_names(module)))  # fmt: skip
        return expand_in_post_order(module, {"dot": pattern})
