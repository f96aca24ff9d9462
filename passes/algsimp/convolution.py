"""`algsimp` family: convolution."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
)
from hlopass.rewriting import (
    value_shape,
)
from hlopass.shape import array as shape_array


class ConvolutionOfEmpty(Simplification):
    """`convolution(x, k)` with a zero-element input or kernel -> `broadcast(0)`."""

    OPCODES = ("convolution",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        shapes = [array(value_shape(v)) for v in op.operands]
        if shape is None or any(s is None for s in shapes):
            return None
        if not any(s.num_elements == 0 for s in shapes):  # type: ignore[union-attr]
            return None
        return self.const(0, shape)


def _trivial_window(op: HloOp) -> bool:
    window = op.attr("window")
    return window is None or all(
        (w.size, w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation, w.reversal)
        == (1, 1, 0, 0, 1, 1, False)
        for w in window.dims
    )


class ConvolutionToDot(Simplification):
    """`convolution(x, k)` with a 1x..x1 window -> `transpose(reshape(dot(x, k)))`
    contracting the input features (no stride, padding, dilation or groups; plain
    precision, one element type; for floats it needs `enable-floats-are-real`: XLA-CPU's
    convolution adds its products to +0.0, so a -0.0 product reads back as +0.0, and with
    several input features the order of the sum may change)."""

    OPCODES = ("convolution",)
    OPTION = "enable_conv_simplification"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        from hlopass.passes.algsimp.dot import plain_precision

        if self.opts.is_layout_sensitive or not plain_precision(op) or not _trivial_window(op):
            return None
        if (op.attr("feature_group_count") or 1) != 1 or (op.attr("batch_group_count") or 1) != 1:
            return None
        x, k = op.operands
        sx, sk, shape = array(value_shape(x)), array(value_shape(k)), array(op.shape)
        if sx is None or sk is None or shape is None or shape.is_dynamic or sx.is_dynamic:
            return None
        t = shape.element_type
        if sx.element_type != t or sk.element_type != t or t == "pred":
            return None
        labels = op.attr("dim_labels")
        _b, f_in, _sp = labels.input
        k_in, _k_out, k_sp = labels.kernel
        if any(sk.dims[d] != 1 for d in k_sp):
            return None
        lhs, rhs, out = str(labels).replace("->", "_").split("_")
        d_dims = [n for i, n in enumerate(sx.dims) if i != f_in]
        d_dims += [n for i, n in enumerate(sk.dims) if i != k_in]
        attrs = {"lhs_contracting_dims": (f_in,), "rhs_contracting_dims": (k_in,)}
        if op.attr("operand_precision") is not None:
            attrs["operand_precision"] = op.attr("operand_precision")
        d = self.new("dot", [x, k], shape_array(t, d_dims), attrs, like=op)
        e_labels = [c for c in lhs if c != "f"] + ["f"]
        e_dims = [n for i, n in enumerate(sx.dims) if i != f_in] + [sk.dims[rhs.index("o")]]
        e = self.new("reshape", [d.result], shape_array(t, e_dims), like=op)
        perm = tuple(e_labels.index(c) for c in out)
        if perm == tuple(range(len(perm))):
            return e  # (the shape check of the base class compares it with the result's)
        return self.new("transpose", [e.result], shape, {"dimensions": perm}, like=op)
