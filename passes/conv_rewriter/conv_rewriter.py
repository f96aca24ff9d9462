"""`conv-rewriter` (XLA's ConvRewriter): every convolution of a non-fusion computation ->
`get-tuple-element(custom-call(...), 0)` of a cuDNN call returning (result, u8[0]
scratch), `cudnn_conv_backend_config` in its backend config.

A convolution is tried, in XLA's order, as the gradient of a forward convolution's input
(`__cudnn$convBackwardInput`), of its filter (`__cudnn$convBackwardFilter`), then as a
forward convolution (`__cudnn$convForward`); `match` holds the three matchers. A
convolution none of them takes stays. Types are checked first, as XLA does: complex
convolutions and FP8 ones the device or type does not allow make the pass fail.

Differs from XLA's: a forward convolution with batch_group_count > 1 is left alone (XLA
first rewrites it to a feature-grouped one); ROCm (MIOpen) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.errors import HloError
from hlopass.ir.shape import ArrayShape, TupleShape, array
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    new_op,
    unfused_computations,
    value_shape,
)

from .labels import BACKWARD_FILTER, BACKWARD_INPUT, CALL_NAMES, FORWARD, backend_config
from .match import Match, can_run_forward, match_backward_filter, match_backward_input

_FP8_OK = ("f8e4m3fn", "f8e5m2")


def type_refusal(conv: HloOp, cc: tuple[int, int], cudnn: tuple[int, ...]) -> str | None:
    """XLA's CheckTypes: why cuDNN cannot take the convolution's element types (None: it can)."""
    for s in (conv.shape, value_shape(conv.operands[0]), value_shape(conv.operands[1])):
        t = s.element_type if isinstance(s, ArrayShape) else "tuple"
        if t.startswith("c") or t in ("pred", "tuple", "token"):
            return ("Convolutions must have floating-point or integral operands/outputs, "
                    f"but got convolution with type {t}: {conv.inst_name}")  # fmt: skip
        if t.startswith("f8"):
            if t not in _FP8_OK:
                return ("The only FP8 types supported in convolutions are f8e5m2 and f8e4m3, "
                        f"but got convolution with FP8 type {t}: {conv.inst_name}")  # fmt: skip
            need = (8, 9) if cudnn >= (9, 8, 0) else (9, 0)
            if cc < need:
                return ("FP8 convolutions are only supported on CUDA GPUs with compute "
                        f"capability at least {need[0]}.{need[1]}, but got FP8 convolution "
                        f"on GPU with compute capability {cc[0]}.{cc[1]}: {conv.inst_name}")  # fmt: skip
    return None


def install_call(rewriter: PatternRewriter, ctx: RewriteContext, conv: HloOp, target: str,
                 operands: list[SSAValue], m: Match | None, groups: int) -> HloOp:  # fmt: skip
    """XLA's CreateGpuConv: the call (window, labels of `m` or the convolution's own,
    `groups` feature groups, the convolution's precision and metadata) and its element 0
    in place of `conv`."""
    shape = conv.shape
    assert isinstance(shape, ArrayShape)
    attrs: dict = {
        "window": m.window if m is not None else conv.attr("window"),
        "dim_labels": m.labels if m is not None else conv.attr("dim_labels"),
        "custom_call_target": target,
        "backend_config": backend_config(),
    }
    if groups != 1:
        attrs["feature_group_count"] = groups
    for key in ("operand_precision", "metadata"):
        if conv.attr(key) is not None:
            attrs[key] = conv.attr(key)
    call_shape = TupleShape((shape, array("u8", [0])))
    call = create_op(
        "custom-call", operands, call_shape, ctx.names.fresh(CALL_NAMES[target]), attrs
    )
    rewriter.insert(call, InsertPoint.before(conv))
    gte = new_op(
        rewriter, ctx, "get-tuple-element", [call.result], shape, {"index": 0}, before=conv
    )
    rewriter.replace_all_uses_with(conv.result, gte.result)
    rewriter.erase(conv)
    return call


@dataclass
class _ConvPattern(RewritePattern):
    OPCODES: ClassVar[tuple[str, ...]] = ("convolution",)

    ctx: RewriteContext

    def applies(self, op: object) -> bool:
        """Guards every rewrite shares: a convolution with dim labels and no kind assigned
        (XLA leaves convolutions whose kind is set to the cuDNN graph rewriters)."""
        return (
            isinstance(op, HloOp)
            and op.opcode in self.OPCODES
            and op.attr("dim_labels") is not None
            and op.attr("convolution_kind") is None
        )


@dataclass
class RewriteBackwardInput(_ConvPattern):
    """`convolution(dy, reverse(w))` with base dilation -> `__cudnn$convBackwardInput(dy, w)`,
    the forward convolution's stride and padding in its window.

    Guards: no feature groups; the filter reversed in its spatial dims (or a conv1d
    `reshape(reverse(w))`, or a 1x1 / constant filter with base dilation); stride 1, no
    window dilation or reversal; the recovered low and high paddings not negative."""

    OPCODES: ClassVar[tuple[str, ...]] = ("convolution",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not self.applies(op):
            return
        m = match_backward_input(op)
        if m is None:
            return
        rhs = m.operand if m.operand is not None else op.operands[1]
        labels = m.labels
        if m.reverse_constant:  # the call absorbs one half of a double reverse
            rhs = new_op(rewriter, self.ctx, "reverse", [rhs], value_shape(rhs),
                         {"dimensions": labels.kernel[2]}, before=op).result  # fmt: skip
        elif m.unreverse_1d:  # reshape(reverse(f)) -> reshape(f)
            f = rhs.owner
            assert isinstance(f, HloOp)
            src = f.operands[0].owner
            assert isinstance(src, HloOp)
            rhs = new_op(rewriter, self.ctx, "reshape", [src.operands[0]], value_shape(rhs),
                         before=op).result  # fmt: skip
        self.ctx.note(self, op, BACKWARD_INPUT)
        install_call(rewriter, self.ctx, op, BACKWARD_INPUT, [op.operands[0], rhs], m, 1)


@dataclass
class RewriteBackwardFilter(_ConvPattern):
    """`convolution(x, dy)` contracting the batch -> `__cudnn$convBackwardFilter(x, dy)`, the
    forward convolution's window (stride = the window dilation) in its window.

    Guards: no feature groups; not forward-looking (batch and feature counts swapped or a
    kernel larger than the output); stride 1, no base dilation, no reversal, low padding
    >= 0; large kernels or window dilation; the recovered high padding not negative."""

    OPCODES: ClassVar[tuple[str, ...]] = ("convolution",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not self.applies(op):
            return
        m = match_backward_filter(op)
        if m is None:
            return
        groups = op.attr("batch_group_count") or 1
        self.ctx.note(self, op, BACKWARD_FILTER)
        install_call(rewriter, self.ctx, op, BACKWARD_FILTER, list(op.operands), m, groups)


@dataclass
class RewriteForward(_ConvPattern):
    """`convolution(x, w)` -> `__cudnn$convForward(x, w)`, window and labels unchanged.

    Guards: at most 3 spatial dims; no empty operand; no reversal (2-D: all or none);
    batch_group_count 1."""

    OPCODES: ClassVar[tuple[str, ...]] = ("convolution",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not self.applies(op) or not can_run_forward(op):
            return
        if (op.attr("batch_group_count") or 1) != 1:
            return
        groups = op.attr("feature_group_count") or 1
        self.ctx.note(self, op, FORWARD)
        install_call(rewriter, self.ctx, op, FORWARD, list(op.operands), None, groups)


@dataclass(frozen=True)
class ConvRewriterPass(HloModulePass):
    """Rewrite each convolution into the cuDNN call that computes it."""

    name: ClassVar[str] = "conv-rewriter"

    compute_capability: float = 9.0
    """The device's CUDA compute capability, major.minor (9.0: H100); FP8 convolutions
    need 9.0 (8.9 from cuDNN 9.8)."""
    cudnn_version: float = 9.8
    """The cuDNN version, major.minor (XLA's dnn_version): from 9.8 FP8 convolutions run
    on 8.9 (Ada) too."""

    def capability(self) -> tuple[int, int]:
        major = int(self.compute_capability)
        return major, round((self.compute_capability - major) * 10)

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        major = int(self.cudnn_version)
        cudnn = (major, round((self.cudnn_version - major) * 10), 0)
        patterns = (RewriteBackwardInput(rctx), RewriteBackwardFilter(rctx), RewriteForward(rctx))
        changed = False
        for comp in unfused_computations(module):
            rewriter = PatternRewriter(comp)
            for op in [o for o in comp.instructions if o.opcode == "convolution"]:
                if op.attr("convolution_kind") is not None:
                    continue  # (XLA: the cuDNN graph rewriters' convolution)
                why = type_refusal(op, self.capability(), cudnn)
                if why is not None:
                    raise HloError(f"error: conv-rewriter: {why}")
                for p in patterns:  # the first that takes the convolution rewrites it
                    p.match_and_rewrite(op, rewriter)
                    if op.parent is None:
                        break
            changed |= rewriter.has_done_action
        return changed
