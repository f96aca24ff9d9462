"""`conv-padding-legalization` (XLA's ConvPaddingLegalization): cuDNN pads symmetrically
and cannot base-dilate, so a cuDNN call whose window asks for more gets explicit HLO:

* forward (and bias-activation) calls: asymmetric padding or base dilation -> a `pad` of
  the input holding all of it (interior padding for the dilation), negative padding -> a
  `slice`; window dilation with such padding -> the kernel interior-padded;
* backward-filter calls: asymmetric padding -> the input padded by the difference, the
  call keeping the smaller side on both;
* backward-input calls: asymmetric padding -> the call with the smaller side on both (a
  larger dx) and a `slice` of dx, returned as `tuple(slice, scratch)`.

Differs from XLA's: of the plain convolutions with a `convolution_kind` (the cuDNN graph
path), only forward ones (`fprop`) are legalized.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.ir.attrs import PadDim, SliceDim, Window, WindowDim
from hlopass.ir.shape import ArrayShape, TupleShape, array
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    new_op,
    scalar_constant,
    unfused_computations,
    value_shape,
)

from .labels import (
    BACKWARD_FILTER,
    BACKWARD_INPUT,
    BIAS_ACTIVATION,
    FORWARD,
    has_lhs_dilation,
    has_rhs_dilation,
    symmetric,
)


def _arr(v: SSAValue) -> ArrayShape:
    s = value_shape(v)
    assert isinstance(s, ArrayShape)
    return s


def _pad(rewriter: PatternRewriter, ctx: RewriteContext, v: SSAValue, before: HloOp,
         config: dict[int, PadDim]) -> SSAValue:  # fmt: skip
    """`pad(v, 0)` with `config` on the dims it names (XLA's MakePadHlo)."""
    s = _arr(v)
    dims = [config.get(d, PadDim(0, 0)) for d in range(s.rank)]
    out = [
        n + p.low + p.high + max(0, n - 1) * p.interior for n, p in zip(s.dims, dims, strict=True)
    ]
    zero = scalar_constant(rewriter, ctx, 0, s.element_type, before=before)
    return new_op(rewriter, ctx, "pad", [v, zero.result], array(s.element_type, out),
                  {"padding": tuple(dims)}, before=before).result  # fmt: skip


def _slice(rewriter: PatternRewriter, ctx: RewriteContext, v: SSAValue, before: HloOp,
           bounds: dict[int, tuple[int, int]]) -> SSAValue:  # fmt: skip
    s = _arr(v)
    dims = tuple(SliceDim(*bounds.get(d, (0, n))) for d, n in enumerate(s.dims))
    out = [d.limit - d.start for d in dims]
    return new_op(rewriter, ctx, "slice", [v], array(s.element_type, out), {"slice": dims},
                  before=before).result  # fmt: skip


def _replace_call(rewriter: PatternRewriter, call: HloOp, operands: list[SSAValue],
                  window: Window, shape: TupleShape | None = None) -> HloOp:  # fmt: skip
    """A copy of `call` with these operands and window (and result shape) before it."""
    attrs = {spec.name: v for spec, v in call.hlo_attrs()}
    attrs["window"] = window
    new = create_op(call.opcode, operands, shape or call.shape, call.inst_name + ".legal", attrs)
    rewriter.insert(new, InsertPoint.before(call))
    return new


_KINDS = {"fprop": FORWARD}
"""A plain convolution's `convolution_kind` (the cuDNN graph path) -> the call it stands for
(only forward ones are legalized here)."""


@dataclass
class _Legalize(RewritePattern):
    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)
    CALL_TARGETS: ClassVar[tuple[str, ...]] = ()

    ctx: RewriteContext

    def call_of(self, op: object) -> HloOp | None:
        """`op` when it is one of this pattern's cuDNN calls (or a convolution whose kind
        names one), with a window."""
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return None
        if op.opcode == "convolution":
            target = _KINDS.get(str(op.attr("convolution_kind")))
        else:
            target = op.attr("custom_call_target")
        if target not in self.CALL_TARGETS or op.attr("window") is None:
            return None
        return op

    def swap(self, rewriter: PatternRewriter, old: HloOp, new: HloOp) -> None:
        new.inst_name, old.inst_name = old.inst_name, old.inst_name + ".old"
        rewriter.replace_all_uses_with(old.result, new.result)
        rewriter.erase(old)
        self.ctx.note(self, new)


@dataclass
class LegalizeForward(_Legalize):
    """`conv(x, w)` with padding cuDNN cannot take -> `conv(slice(pad(x)), pad(w))`, the
    padding and base dilation in the `pad`, negative padding in the `slice`.

    Guards: a forward or bias-activation call (or a convolution of kind fprop);
    asymmetric, negative or base-dilated."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call", "convolution")
    CALL_TARGETS: ClassVar[tuple[str, ...]] = (FORWARD, BIAS_ACTIVATION)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        call = self.call_of(op)
        if call is None:
            return
        w: Window = call.attr("window")
        negative = any(d.pad_low < 0 or d.pad_high < 0 for d in w.dims)
        if symmetric(w) and not negative and not has_lhs_dilation(w):
            return
        labels = call.attr("dim_labels")
        isp, ksp = labels.input[2], labels.kernel[2]
        dims = list(w.dims)
        x = call.operands[0]
        if not symmetric(w) or has_lhs_dilation(w):
            config = {}
            for i, d in enumerate(dims):
                config[isp[i]] = PadDim(max(0, d.pad_low), max(0, d.pad_high), d.lhs_dilation - 1)
                dims[i] = replace(d, pad_low=min(0, d.pad_low), pad_high=min(0, d.pad_high),
                                  lhs_dilation=1)  # fmt: skip
            x = _pad(rewriter, self.ctx, x, call, config)
        if any(d.pad_low < 0 or d.pad_high < 0 for d in dims):
            n = _arr(x).dims
            bounds = {isp[i]: (-min(0, d.pad_low), n[isp[i]] + min(0, d.pad_high))
                      for i, d in enumerate(dims)}  # fmt: skip
            x = _slice(rewriter, self.ctx, x, call, bounds)
            dims = [
                replace(d, pad_low=max(0, d.pad_low), pad_high=max(0, d.pad_high)) for d in dims
            ]
        k = call.operands[1]
        keep_dilation = (
            has_rhs_dilation(w) and symmetric(w) and not negative and not has_lhs_dilation(w)
        )
        if has_rhs_dilation(w) and not keep_dilation:
            k = _pad(rewriter, self.ctx, k, call,
                     {ksp[i]: PadDim(0, 0, d.rhs_dilation - 1) for i, d in enumerate(dims)})  # fmt: skip
        ks = _arr(k).dims
        dims = [replace(d, size=ks[ksp[i]], rhs_dilation=d.rhs_dilation if keep_dilation else 1)
                for i, d in enumerate(dims)]  # fmt: skip
        new = _replace_call(rewriter, call, [x, k, *call.operands[2:]], Window(tuple(dims)))
        self.swap(rewriter, call, new)


@dataclass
class LegalizeBackwardFilter(_Legalize):
    """`bw_filter(x, dy)` with asymmetric padding -> `bw_filter(pad(x), dy)`, the call
    padding min(low, high) on both sides.

    Guards: a backward-filter call; asymmetric, non-negative padding."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)
    CALL_TARGETS: ClassVar[tuple[str, ...]] = (BACKWARD_FILTER,)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        call = self.call_of(op)
        if call is None:
            return
        w: Window = call.attr("window")
        if symmetric(w) or any(d.pad_low < 0 or d.pad_high < 0 for d in w.dims):
            return
        isp = call.attr("dim_labels").input[2]
        config, dims = {}, []
        for i, d in enumerate(w.dims):
            keep = min(d.pad_low, d.pad_high)
            config[isp[i]] = PadDim(d.pad_low - keep, d.pad_high - keep)
            dims.append(replace(d, pad_low=keep, pad_high=keep))
        x = _pad(rewriter, self.ctx, call.operands[0], call, config)
        new = _replace_call(rewriter, call, [x, call.operands[1]], Window(tuple(dims)))
        self.swap(rewriter, call, new)


@dataclass
class LegalizeBackwardInput(_Legalize):
    """`bw_input(dy, w)` with asymmetric padding -> `tuple(slice(gte(bw_input'(dy, w), 0)),
    gte(bw_input', 1))`, the call padding min(low, high) on both sides (a larger dx).

    Guards: a backward-input call; asymmetric, non-negative padding."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)
    CALL_TARGETS: ClassVar[tuple[str, ...]] = (BACKWARD_INPUT,)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        call = self.call_of(op)
        if call is None or not isinstance(call.shape, TupleShape):
            return
        w: Window = call.attr("window")
        if symmetric(w) or any(d.pad_low < 0 or d.pad_high < 0 for d in w.dims):
            return
        isp = call.attr("dim_labels").input[2]  # dx's spatial dims
        dx = call.shape.elements[0]
        assert isinstance(dx, ArrayShape)
        big = list(dx.dims)
        dims: list[WindowDim] = []
        bounds = {}
        for i, d in enumerate(w.dims):
            keep, extra = min(d.pad_low, d.pad_high), abs(d.pad_low - d.pad_high)
            dims.append(replace(d, pad_low=keep, pad_high=keep))
            big[isp[i]] += extra
            start = extra if d.pad_low > d.pad_high else 0
            bounds[isp[i]] = (start, start + dx.dims[isp[i]])
        big_shape = replace(dx, dims=tuple(big))
        scratch = call.shape.elements[1]
        new = _replace_call(rewriter, call, list(call.operands), Window(tuple(dims)),
                            TupleShape((big_shape, scratch)))  # fmt: skip
        r = new_op(rewriter, self.ctx, "get-tuple-element", [new.result], big_shape, {"index": 0},
                   before=call)  # fmt: skip
        s = new_op(rewriter, self.ctx, "get-tuple-element", [new.result], scratch, {"index": 1},
                   before=call)  # fmt: skip
        sliced = _slice(rewriter, self.ctx, r.result, call, bounds)
        t = new_op(rewriter, self.ctx, "tuple", [sliced, s.result], call.shape, before=call)
        new.inst_name, call.inst_name = call.inst_name, call.inst_name + ".old"
        rewriter.replace_all_uses_with(call.result, t.result)
        rewriter.erase(call)
        self.ctx.note(self, new)


@dataclass(frozen=True)
class ConvPaddingLegalizationPass(HloModulePass):
    """Make explicit the padding and dilation cuDNN calls cannot do themselves."""

    name: ClassVar[str] = "conv-padding-legalization"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        patterns = (
            LegalizeForward(rctx),
            LegalizeBackwardFilter(rctx),
            LegalizeBackwardInput(rctx),
        )
        changed = False
        for comp in unfused_computations(module):
            rewriter = PatternRewriter(comp)
            for op in [o for o in comp.instructions if o.opcode in ("custom-call", "convolution")]:
                for p in patterns:
                    p.match_and_rewrite(op, rewriter)
                    if op.parent is None:
                        break
            changed |= rewriter.has_done_action
        return changed
