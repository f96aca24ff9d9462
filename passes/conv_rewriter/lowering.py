"""cuDNN convolution calls back to plain HLO, for backends that cannot run them (XLA:CPU
checks a GPU-optimized module's values this way): `lower_cudnn_calls(module)`.

A call becomes `tuple(value, constant u8[0])`, its users' `get-tuple-element`s unchanged:
* forward: `convolution(x, w)` with the call's window and labels;
* backward-input `(dy, w)`: `convolution(dy, reverse(w))`, base-dilated by the forward
  stride, padded so the result has dx's size (the adjoint of the forward convolution);
* backward-filter `(x, dy)`: `convolution(x, dy)` contracting the batch, dy window-dilated
  by the forward stride;
* bias-activation `(x, w, bias[, side])`: `act(scale * conv + side_scale * side + bias)`.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.attrs import ConvDims, Window, WindowDim, backend_config
from hlopass.ir.shape import ArrayShape, TupleShape, array
from hlopass.rewriting import RewriteContext, new_op, scalar_constant, value_shape

from .labels import BACKWARD_FILTER, BACKWARD_INPUT, BIAS_ACTIVATION, FORWARD, conv_dims


class Lowering:
    """Builds one call's HLO before it in its computation."""

    def __init__(self, rewriter: PatternRewriter, ctx: RewriteContext, call: HloOp):
        self.rewriter, self.ctx, self.call = rewriter, ctx, call
        shape = call.shape
        first = shape.elements[0] if isinstance(shape, TupleShape) else shape
        assert isinstance(first, ArrayShape)
        self.shape = first
        self.labels: ConvDims = call.attr("dim_labels")
        self.window: Window = call.attr("window") or Window(())
        if any(d.reversal for d in self.window.dims):
            raise NotImplementedError(f"{call.inst_name}: reversed window")

    def op(
        self, opcode: str, operands: list[SSAValue], shape: Any, attrs: dict | None = None
    ) -> SSAValue:
        return new_op(self.rewriter, self.ctx, opcode, operands, shape, attrs, like=self.call,
                      before=self.call).result  # fmt: skip

    def conv(self, lhs: SSAValue, rhs: SSAValue, window: Window, labels: ConvDims, shape: ArrayShape,
             groups: int = 1, batch_groups: int = 1) -> SSAValue:  # fmt: skip
        attrs: dict = {"window": window, "dim_labels": labels}
        if groups != 1:
            attrs["feature_group_count"] = groups
        if batch_groups != 1:
            attrs["batch_group_count"] = batch_groups
        if self.call.attr("operand_precision") is not None:
            attrs["operand_precision"] = self.call.attr("operand_precision")
        return self.op("convolution", [lhs, rhs], shape, attrs)

    def forward(self) -> SSAValue:
        a, b = self.call.operands[0], self.call.operands[1]
        groups = self.call.attr("feature_group_count") or 1
        return self.conv(a, b, self.window, self.labels, self.shape, groups)

    def backward_input(self) -> SSAValue:
        if (self.call.attr("feature_group_count") or 1) != 1:
            raise NotImplementedError(f"{self.call.inst_name}: grouped backward input")
        dy, w = self.call.operands[0], self.call.operands[1]
        (ib, if_, isp), (ki, ko, ksp), (ob, of, osp) = (
            self.labels.input,
            self.labels.kernel,
            self.labels.output,
        )
        dys = value_shape(dy)
        assert isinstance(dys, ArrayShape)
        dims = []
        for i, d in enumerate(self.window.dims):
            if d.lhs_dilation != 1:
                raise NotImplementedError(f"{self.call.inst_name}: base-dilated backward input")
            span = (d.size - 1) * d.rhs_dilation + 1
            n, m = self.shape.dims[isp[i]], dys.dims[osp[i]]
            dims.append(WindowDim(size=d.size, pad_low=span - 1 - d.pad_low,
                                  pad_high=n - 1 - (m - 1) * d.stride + d.pad_low,
                                  lhs_dilation=d.stride, rhs_dilation=d.rhs_dilation))  # fmt: skip
        rw = self.op("reverse", [w], value_shape(w), {"dimensions": tuple(ksp)})
        wrank = len(value_shape(w).dims)  # type: ignore[attr-defined]
        labels = conv_dims(
            (dys.rank, wrank, self.shape.rank), (ob, of, osp), (ko, ki, ksp), (ib, if_, isp)
        )
        return self.conv(dy, rw, Window(tuple(dims)), labels, self.shape)

    def backward_filter(self) -> SSAValue:
        x, dy = self.call.operands[0], self.call.operands[1]
        (ib, if_, isp), (ki, ko, ksp), (ob, of, osp) = (
            self.labels.input,
            self.labels.kernel,
            self.labels.output,
        )
        xs, dys = value_shape(x), value_shape(dy)
        assert isinstance(xs, ArrayShape) and isinstance(dys, ArrayShape)
        dims = []
        for i, d in enumerate(self.window.dims):
            if d.lhs_dilation != 1:
                raise NotImplementedError(f"{self.call.inst_name}: base-dilated backward filter")
            n, m, k = xs.dims[isp[i]], dys.dims[osp[i]], self.shape.dims[ksp[i]]
            high = (k - 1) * d.rhs_dilation + (m - 1) * d.stride + 1 - n - d.pad_low
            dims.append(WindowDim(size=m, stride=d.rhs_dilation, pad_low=d.pad_low,
                                  pad_high=high, rhs_dilation=d.stride))  # fmt: skip
        labels = conv_dims(
            (xs.rank, dys.rank, self.shape.rank), (if_, ib, isp), (ob, of, osp), (ki, ko, ksp)
        )
        groups = self.call.attr("feature_group_count") or 1
        return self.conv(x, dy, Window(tuple(dims)), labels, self.shape, batch_groups=groups)

    def splat(self, value: float, like: SSAValue) -> SSAValue:
        s = value_shape(like)
        assert isinstance(s, ArrayShape)
        c = scalar_constant(self.rewriter, self.ctx, value, s.element_type, before=self.call)
        return self.op("broadcast", [c.result], array(s.element_type, s.dims), {"dimensions": ()})

    def epilogue(self, y: SSAValue) -> SSAValue:
        """Scale, side input, bias and activation of a fused call on its convolution `y`."""
        cfg = backend_config(self.call).get("cudnn_conv_backend_config", {})
        et, shape = self.shape.element_type, array(self.shape.element_type, self.shape.dims)
        scale = float(cfg.get("conv_result_scale", 1))
        if scale != 1:
            y = self.op("multiply", [y, self.splat(scale, y)], shape)
        ops = self.call.operands
        if self.call.attr("custom_call_target") == BIAS_ACTIVATION:
            side_scale = float(cfg.get("side_input_scale", 0))
            if len(ops) > 3 and side_scale:
                side = self.cast(ops[3], et)
                if side_scale != 1:
                    side = self.op("multiply", [side, self.splat(side_scale, side)], shape)
                y = self.op("add", [y, side], shape)
            bias = self.cast(ops[2], et)
            b = self.op("broadcast", [bias], shape, {"dimensions": (self.labels.output[1],)})
            y = self.op("add", [y, b], shape)
        return self.activation(
            y, str(cfg.get("activation_mode", "kNone")), float(cfg.get("leakyrelu_alpha", 0))
        )

    def cast(self, v: SSAValue, et: str) -> SSAValue:
        s = value_shape(v)
        assert isinstance(s, ArrayShape)
        return v if s.element_type == et else self.op("convert", [v], array(et, s.dims))

    def activation(self, y: SSAValue, mode: str, alpha: float) -> SSAValue:
        shape = array(self.shape.element_type, self.shape.dims)
        if mode == "kNone":
            return y
        if mode in ("kRelu", "kRelu6"):
            y = self.op("maximum", [y, self.splat(0, y)], shape)
            return self.op("minimum", [y, self.splat(6, y)], shape) if mode == "kRelu6" else y
        if mode in ("kElu", "kLeakyRelu"):
            positive = self.op("compare", [y, self.splat(0, y)], array("pred", self.shape.dims),
                               {"direction": "GT"})  # fmt: skip
            if mode == "kElu":
                neg = self.op("exponential-minus-one", [y], shape)
            else:
                neg = self.op("multiply", [y, self.splat(alpha, y)], shape)
            return self.op("select", [positive, y, neg], shape)
        raise NotImplementedError(f"{self.call.inst_name}: activation {mode}")

    def lower(self) -> None:
        target = self.call.attr("custom_call_target")
        if target == BACKWARD_INPUT:
            y = self.epilogue(self.backward_input())
        elif target == BACKWARD_FILTER:
            y = self.epilogue(self.backward_filter())
        else:
            y = self.epilogue(self.forward())
        values = [y]
        shape = self.call.shape
        if isinstance(shape, TupleShape):
            for e in shape.elements[1:]:  # the scratch buffer: zeros, as it is never read
                assert isinstance(e, ArrayShape)
                c = scalar_constant(self.rewriter, self.ctx, 0, e.element_type, before=self.call)
                values.append(
                    self.op("broadcast", [c.result], e, {"dimensions": ()}) if e.dims else c.result
                )
            t = self.op("tuple", values, shape)
        else:
            t = y
        self.rewriter.replace_all_uses_with(self.call.result, t)
        self.rewriter.erase(self.call)


CONV_TARGETS = (FORWARD, BACKWARD_INPUT, BACKWARD_FILTER, BIAS_ACTIVATION)


def lower_cudnn_calls(module: ModuleOp) -> bool:
    """Replace every cuDNN convolution call of `module` by the HLO computing it."""
    ctx = RewriteContext.of(module)
    changed = False
    for comp in computations(module):
        rewriter = PatternRewriter(comp)
        for op in list(comp.instructions):
            if op.opcode == "custom-call" and op.attr("custom_call_target") in CONV_TARGETS:
                Lowering(rewriter, ctx, op).lower()
                changed = True
    return changed


__all__ = ["lower_cudnn_calls"]
