"""`cudnn-fused-convolution-rewriter` (XLA's CudnnFusedConvRewriter): the elementwise work
around a forward cuDNN convolution that cuDNN's fused kernel does for free, folded into
`__cudnn$convBiasActivationForward(x, w, bias[, side_input])`, which computes
`act(conv_result_scale * conv(x, w) + side_input_scale * side_input + bias)`.

XLA's order, innermost first: a constant scale (`FuseConvAlpha`), then bias or side
input twice (`FuseBiasOrSideInput`: a broadcast along the output features is the bias,
anything else the side input), the side input's constant scale (`FuseSideInputAlpha`),
then relu (`FuseRelu`). A convolution joins only through
its one `get-tuple-element`, used once; depthwise convolutions (feature groups = input
features) stay unfused, where cuDNN's fused kernels are slower.

Not here (XLA's, left out): elu, relu6 and leaky relu (XLA fuses them only with
`xla_gpu_use_runtime_fusion`, off by default, and for f16), FP8 graph convolutions and
the int8 / f16 convert fusions (and the second round XLA runs after them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.ir.attrs import ConvDims
from hlopass.ir.shape import ArrayShape, array
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    const_array,
    erase_dead,
    new_op,
    owner,
    unfused_computations,
    value_shape,
)

from .labels import BIAS_ACTIVATION, CALL_NAMES, FORWARD, backend_config


def _one_use(v: SSAValue) -> bool:
    return len(list(v.uses)) == 1


def effective_scalar(v: SSAValue) -> float | None:
    """The value of `broadcast(c)` where every element of constant `c` is the same."""
    b = owner(v)
    if b is None or b.opcode != "broadcast":
        return None
    a = const_array(b.operands[0])
    if a is None or a.size == 0 or a.dtype.kind not in "biuf" or not np.all(a == a.flat[0]):
        return None
    return float(a.flat[0])


def depthwise(call: HloOp) -> bool:
    """XLA's IsConvDepthwise: feature groups, as many as the input's features."""
    groups = call.attr("feature_group_count") or 1
    labels: ConvDims = call.attr("dim_labels")
    x = value_shape(call.operands[0])
    return groups != 1 and isinstance(x, ArrayShape) and x.dims[labels.input[1]] == groups


def conv_of(v: SSAValue, call_one_use: bool = True) -> HloOp | None:
    """The forward cuDNN call (plain or fused, not depthwise) whose element 0 `v` is, read
    once; with `call_one_use`, the call read only by that `get-tuple-element`."""
    gte = owner(v)
    if gte is None or gte.opcode != "get-tuple-element" or gte.attr("index") != 0:
        return None
    call = owner(gte.operands[0])
    if call is None or call.opcode != "custom-call" or not _one_use(v):
        return None
    if call.attr("custom_call_target") not in (FORWARD, BIAS_ACTIVATION) or depthwise(call):
        return None
    return call if not call_one_use or _one_use(call.result) else None


def config_of(call: HloOp) -> dict:
    from hlopass.ir.attrs import backend_config as parse

    cfg = parse(call).get("cudnn_conv_backend_config", {})
    return {
        "activation": str(cfg.get("activation_mode", "kNone")),
        "scale": float(cfg.get("conv_result_scale", 1)),
        "side_scale": float(cfg.get("side_input_scale", 0)),
        "alpha": float(cfg.get("leakyrelu_alpha", 0)),
    }


def lossless(v: SSAValue, et: str) -> bool:
    """XLA's IsLosslesslyConvertibleTo, for float `et`: `v` is of type `et`, a widening
    convert from it, a constant that survives the round trip, or a broadcast, reshape or
    transpose of one of those."""
    s = value_shape(v)
    if not isinstance(s, ArrayShape):
        return False
    if s.element_type == et:
        return True
    o = owner(v)
    if o is None:
        return False
    if o.opcode == "convert":
        src = value_shape(o.operands[0])
        return (
            isinstance(src, ArrayShape) and src.element_type == et and _widens(et, s.element_type)
        )
    if o.opcode == "constant":
        a = const_array(v)
        from hlopass.ir.literal import numpy_dtype

        return a is not None and bool(np.all(a.astype(numpy_dtype(et)).astype(a.dtype) == a))
    if o.opcode in ("broadcast", "reshape", "transpose"):
        return lossless(o.operands[0], et)
    return False


_FLOAT_BITS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def _widens(src: str, dst: str) -> bool:
    """Every `src` value is exactly a `dst` value (float to float)."""
    a, b = _FLOAT_BITS.get(src), _FLOAT_BITS.get(dst)
    return a is not None and b is not None and a[0] <= b[0] and a[1] <= b[1]


@dataclass
class _Fuse(RewritePattern):
    ctx: RewriteContext

    def rebuild(self, rewriter: PatternRewriter, call: HloOp, operands: list[SSAValue],
                cfg: dict, replaced: HloOp) -> None:  # fmt: skip
        """A bias-activation call on `operands` with `cfg` (a forward call gets a zero bias
        first, XLA's EnsureIsConvBiasActivation); its element 0 replaces `replaced`."""
        ops = list(operands)
        shape = call.shape.elements[0]  # type: ignore[attr-defined]
        if call.attr("custom_call_target") == FORWARD and len(ops) == 2:
            et = shape.element_type if shape.element_type.startswith(("f", "bf")) else "f32"
            n = shape.dims[call.attr("dim_labels").output[1]]
            zero = create_op("constant", [], array(et, []), self.ctx.names.fresh("constant"),
                             {"value": _scalar_literal(0, et)})  # fmt: skip
            rewriter.insert(zero, InsertPoint.before(call))
            ops.append(new_op(rewriter, self.ctx, "broadcast", [zero.result], array(et, [n]),
                              {"dimensions": ()}, before=call).result)  # fmt: skip
        attrs = {s.name: v for s, v in call.hlo_attrs() if s.name != "name"}
        attrs["custom_call_target"] = BIAS_ACTIVATION
        attrs["backend_config"] = backend_config(**cfg)
        name = self.ctx.names.fresh(CALL_NAMES[BIAS_ACTIVATION])
        new = create_op("custom-call", ops, call.shape, name, attrs)
        rewriter.insert(new, InsertPoint.before(replaced))
        gte = new_op(rewriter, self.ctx, "get-tuple-element", [new.result], shape, {"index": 0},
                     before=replaced)  # fmt: skip
        operands_before = list(replaced.operands)
        rewriter.replace_all_uses_with(replaced.result, gte.result)
        rewriter.erase(replaced)
        erase_dead(rewriter, operands_before)
        self.ctx.note(self, new)


def _scalar_literal(value: float, et: str):
    from hlopass.ir.attrs import ShapedLiteral
    from hlopass.ir.literal import Literal, numpy_dtype

    return ShapedLiteral(array(et, []), Literal(np.asarray(value, numpy_dtype(et))))


def _binary(op: object, opcode: str) -> HloOp | None:
    return op if isinstance(op, HloOp) and op.opcode == opcode and len(op.operands) == 2 else None


@dataclass
class FuseConvAlpha(_Fuse):
    """`multiply(gte(conv), broadcast(alpha))` -> `gte(conv_bias_act(...))` with
    conv_result_scale = alpha.

    Guards: a forward, non-depthwise call read once; alpha a constant splat exact in f32
    (f64 for f64 convolutions); no scale yet."""

    OPCODES: ClassVar[tuple[str, ...]] = ("multiply",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        mul = _binary(op, "multiply")
        if mul is None:
            return
        for a, b in ((0, 1), (1, 0)):
            call = conv_of(mul.operands[a], call_one_use=False)
            alpha = effective_scalar(mul.operands[b])
            if call is None or alpha is None:
                continue
            et = "f64" if value_shape(mul.operands[a]).element_type == "f64" else "f32"  # type: ignore[attr-defined]
            if not lossless(owner(mul.operands[b]).operands[0], et):  # type: ignore[union-attr]
                continue
            cfg = config_of(call)
            if cfg["scale"] != 1:
                continue
            cfg["scale"] = alpha
            self.rebuild(rewriter, call, list(call.operands), cfg, mul)
            return


@dataclass
class FuseBiasOrSideInput(_Fuse):
    """`add(gte(conv), broadcast(b))` -> `gte(conv_bias_act(x, w, b))` (a broadcast along
    the output features, or of a scalar: the bias); `add(gte(conv), s)` ->
    `gte(conv_bias_act(x, w, bias, s))` with side_input_scale = 1 (anything else).

    Guards: a forward, non-depthwise call read once through one use; no activation yet;
    a bias only where the call has none (or a zero one), exact in the convolution's type;
    a side input only where it has none."""

    OPCODES: ClassVar[tuple[str, ...]] = ("add",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        add = _binary(op, "add")
        if add is None:
            return
        for a, b in ((0, 1), (1, 0)):
            call = conv_of(add.operands[a])
            if call is not None and self.fuse(rewriter, add, call, add.operands[b]):
                return

    def fuse(self, rewriter: PatternRewriter, add: HloOp, call: HloOp, addend: SSAValue) -> bool:
        cfg = config_of(call)
        if cfg["activation"] != "kNone":
            return False
        ops = list(call.operands)
        can_bias = len(ops) < 3 or effective_scalar(ops[2]) == 0
        can_side = len(ops) < 4
        y = value_shape(add.operands[0])
        assert isinstance(y, ArrayShape)
        et = y.element_type
        bias_et = et if et.startswith(("f", "bf")) else "f32"
        feature = call.attr("dim_labels").output[1]
        br = owner(addend)
        dims = br.attr("dimensions") if br is not None and br.opcode == "broadcast" else None
        rank1 = dims is not None and tuple(dims) == (feature,) and lossless(addend, bias_et)
        rank0 = dims is not None and tuple(dims) == () and lossless(addend, bias_et)
        if can_bias and (rank1 or rank0):
            assert br is not None
            bias = self.convert(rewriter, br.operands[0], bias_et, call)
            if rank0:
                bias = new_op(rewriter, self.ctx, "broadcast", [bias], array(bias_et, [y.dims[feature]]),
                              {"dimensions": ()}, before=call).result  # fmt: skip
            ops = [*ops[:2], bias, *ops[3:]] if len(ops) >= 3 else [*ops, bias]
        elif can_side:
            if len(ops) == 2:
                self.rebuild_side(rewriter, call, ops, cfg, add, addend)
                return True
            ops = [*ops, addend]
            cfg["side_scale"] = 1
        else:
            return False
        self.rebuild(rewriter, call, ops, cfg, add)
        return True

    def rebuild_side(self, rewriter: PatternRewriter, call: HloOp, ops: list[SSAValue], cfg: dict,
                     add: HloOp, side: SSAValue) -> None:  # fmt: skip
        """A forward call gets its zero bias, then the side input after it."""
        shape = call.shape.elements[0]  # type: ignore[attr-defined]
        n = shape.dims[call.attr("dim_labels").output[1]]
        et = shape.element_type
        zero = create_op("constant", [], array(et, []), self.ctx.names.fresh("constant"),
                         {"value": _scalar_literal(0, et)})  # fmt: skip
        rewriter.insert(zero, InsertPoint.before(call))
        bias = new_op(rewriter, self.ctx, "broadcast", [zero.result], array(et, [n]),
                      {"dimensions": ()}, before=call).result  # fmt: skip
        cfg["side_scale"] = 1
        self.rebuild(rewriter, call, [*ops, bias, side], cfg, add)

    def convert(self, rewriter: PatternRewriter, v: SSAValue, et: str, before: HloOp) -> SSAValue:
        s = value_shape(v)
        assert isinstance(s, ArrayShape)
        if s.element_type == et:
            return v
        return new_op(rewriter, self.ctx, "convert", [v], array(et, s.dims), before=before).result


@dataclass
class FuseSideInputAlpha(_Fuse):
    """`conv_bias_act(x, w, b, t(multiply(s, broadcast(alpha))))` -> `conv_bias_act(x, w, b,
    t(s))` with side_input_scale = alpha, `t` a chain of reshapes and transposes.

    Guards: a cuDNN forward call with a side input at scale 1; alpha a constant splat
    exact in f32 (f64 for f64 convolutions)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES or len(op.operands) != 4:
            return
        if op.attr("custom_call_target") not in (FORWARD, BIAS_ACTIVATION):
            return
        cfg = config_of(op)
        if cfg["side_scale"] != 1:
            return
        chain: list[HloOp] = []
        v = op.operands[3]
        while (o := owner(v)) is not None and o.opcode in ("reshape", "transpose"):
            chain.append(o)
            v = o.operands[0]
        mul = _binary(owner(v), "multiply")
        if mul is None:
            return
        et = "f64" if op.shape.elements[0].element_type == "f64" else "f32"  # type: ignore[attr-defined]
        for a, b in ((0, 1), (1, 0)):
            alpha = effective_scalar(mul.operands[b])
            if alpha is None or not lossless(owner(mul.operands[b]).operands[0], et):  # type: ignore[union-attr]
                continue
            side = mul.operands[a]
            for t in reversed(chain):  # the reshapes and transposes again, on the unscaled input
                side = new_op(rewriter, self.ctx, t.opcode, [side], t.shape,
                              {s.name: val for s, val in t.hlo_attrs() if s.name != "name"},
                              before=op).result  # fmt: skip
            cfg["side_scale"] = alpha
            attrs = {s.name: val for s, val in op.hlo_attrs() if s.name != "name"}
            attrs["backend_config"] = backend_config(**cfg)
            new = create_op("custom-call", [*op.operands[:3], side], op.shape, op.inst_name, attrs)
            op.inst_name = op.inst_name + ".old"
            rewriter.insert(new, InsertPoint.before(op))
            old_side = op.operands[3]
            rewriter.replace_all_uses_with(op.result, new.result)
            rewriter.erase(op)
            erase_dead(rewriter, [old_side])
            self.ctx.note(self, new)
            return


@dataclass
class FuseRelu(_Fuse):
    """`maximum(gte(conv), broadcast(0))` -> `gte(conv_bias_act(...))` with activation relu.

    Guards: a forward, non-depthwise call read once through one use; no activation yet."""

    OPCODES: ClassVar[tuple[str, ...]] = ("maximum",)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        mx = _binary(op, "maximum")
        if mx is None:
            return
        for a, b in ((0, 1), (1, 0)):
            call = conv_of(mx.operands[a])
            if call is None or effective_scalar(mx.operands[b]) != 0:
                continue
            cfg = config_of(call)
            if cfg["activation"] != "kNone":
                continue
            cfg["activation"] = "kRelu"
            self.rebuild(rewriter, call, list(call.operands), cfg, mx)
            return


@dataclass(frozen=True)
class CudnnFusedConvRewriterPass(HloModulePass):
    """Fold scale, bias, side input and relu into cuDNN's fused forward convolution."""

    name: ClassVar[str] = "cudnn-fused-convolution-rewriter"

    compute_capability: float = 9.0
    """The device's CUDA compute capability, major.minor (9.0: H100)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        # XLA's order, innermost first: the scale, bias or side input twice, the side input's
        # scale, then relu
        steps: list[RewritePattern] = [FuseConvAlpha(rctx), FuseBiasOrSideInput(rctx),
                                       FuseBiasOrSideInput(rctx), FuseSideInputAlpha(rctx),
                                       FuseRelu(rctx)]  # fmt: skip
        changed = False
        for comp in unfused_computations(module):
            rewriter = PatternRewriter(comp)
            for step in steps:
                for op in list(comp.instructions):
                    if op.parent is not None:
                        step.match_and_rewrite(op, rewriter)
            changed |= rewriter.has_done_action
        return changed
