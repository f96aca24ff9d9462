"""`algsimp` family: convolution."""

from __future__ import annotations

from hlopass.attrs import ConvDims, Window, WindowDim
from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import add_reducer, array
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


class ConvolutionOperandSwap(Simplification):
    """`convolution(x, k) -> convolution(reverse(k), x)` with the roles swapped (k's output
    features become the batch, x's batch the output features, x the reversed window) when
    the window is larger than the input it slides over: the product of the swapped window
    sizes is smaller (XLA's `SwapConvolutionOperandsIfBeneficial`; no groups, no sparsity;
    dims where the window covers the whole input stay; the sum's order changes, so floats
    need `enable-floats-are-real`)."""

    OPCODES = ("convolution",)
    OPTION = "enable_conv_operand_swap"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or len(op.operands) != 2:
            return None
        if op.attr("sparsity_config") is not None or op.attr("convolution_kind") is not None:
            return None
        if (op.attr("feature_group_count") or 1) != 1 or (op.attr("batch_group_count") or 1) != 1:
            return None
        x, k = op.operands
        sx, sk = array(value_shape(x)), array(value_shape(k))
        window, labels = op.attr("window"), op.attr("dim_labels")
        if sx is None or sk is None or sx.is_dynamic or sk.is_dynamic or window is None:
            return None
        _b, _f, x_spatial = labels.input
        _i, _o, k_spatial = labels.kernel
        new_dims, reverse = [], []
        product, swapped_product = 1, 1
        for w, xd, kd in zip(window.dims, x_spatial, k_spatial, strict=True):
            n = sx.dims[xd]
            plain = not w.reversal and w.pad_low == 0 and w.pad_high == 0 and w.rhs_dilation == 1
            if plain and w.size == n and w.lhs_dilation == 1 and w.stride == 1:
                new_dims.append(w)  # the window covers the input: a plain contraction
                continue
            if plain and w.lhs_dilation == w.size and w.stride == w.size - 1:
                return None  # (XLA keeps such "group" dims as they are; we do not swap)
            k_dilated = 1 + (w.size - 1) * w.rhs_dilation
            n_dilated = 1 + (n - 1) * w.lhs_dilation
            product *= w.size
            full = (n == 1 and w.stride == 1 and w.rhs_dilation == 1
                    and w.pad_low == w.size - 1 and w.pad_high == w.size - 1)  # fmt: skip
            swapped_product *= w.size if full else n
            if not w.reversal:
                reverse.append(kd)
            low, high = n_dilated + w.pad_low - k_dilated, n_dilated + w.pad_high - k_dilated
            if low < 0 or high < 0:
                return None  # (a negative window padding: we do not build one)
            new_dims.append(WindowDim(size=n, stride=w.stride, pad_low=low, pad_high=high,
                                      lhs_dilation=w.rhs_dilation, rhs_dilation=w.lhs_dilation,
                                      reversal=True))  # fmt: skip
        if product <= swapped_product:
            return None
        lhs, rhs, out = str(labels).replace("->", "_").split("_")
        swap = str.maketrans({"o": "b", "i": "f"}), str.maketrans({"b": "o", "f": "i"})
        out_swap = str.maketrans({"b": "f", "f": "b"})
        new_labels = f"{rhs.translate(swap[0])}_{lhs.translate(swap[1])}->{out.translate(out_swap)}"
        attrs = {"window": Window(tuple(new_dims)), "dim_labels": ConvDims(new_labels)}
        p = op.attr("operand_precision")
        if p is not None:
            attrs["operand_precision"] = tuple(reversed(tuple(p)))
        kernel = k
        if reverse:
            kernel = self.new("reverse", [k], sk, {"dimensions": tuple(reverse)}, like=op).result
        return self.new("convolution", [kernel, x], op.shape, attrs, like=op)


class ConvolutionToMultiply(Simplification):
    """`convolution(x, k) -> multiply(x', broadcast(k'))`, then `reduce(add)` over the
    spatial dims the window covers, for one feature per group (depthwise, multiplier 1) and a
    window that is 1 or the whole input in each spatial dim; x' and k' transposed to the
    output's dim order (no stride, padding, dilation or reversal; XLA's
    `SimplifyConvToMultiply`; floats need `enable-floats-are-real`: the convolution adds its
    products to +0.0)."""

    OPCODES = ("convolution",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if self.opts.is_layout_sensitive or len(op.operands) != 2:
            return None
        if op.attr("sparsity_config") is not None or (op.attr("batch_group_count") or 1) != 1:
            return None
        x, k = op.operands
        sx, sk, shape = array(value_shape(x)), array(value_shape(k)), array(op.shape)
        window, labels = op.attr("window"), op.attr("dim_labels")
        if sx is None or sk is None or shape is None or window is None:
            return None
        if sx.is_dynamic or sk.is_dynamic or shape.is_dynamic:
            return None
        (xb, xf, x_sp), (ki, ko, k_sp), (ob, of, o_sp) = labels.input, labels.kernel, labels.output
        if any((w.stride, w.pad_low, w.pad_high, w.lhs_dilation, w.rhs_dilation) != (1, 0, 0, 1, 1)
               for w in window.dims):  # fmt: skip
            return None
        groups = op.attr("feature_group_count") or 1
        if sk.dims[ki] != 1 or sx.dims[xf] != groups or shape.dims[of] != groups:
            return None
        x_perm, k_perm = [0] * shape.rank, [0] * shape.rank
        x_perm[ob], x_perm[of], k_perm[ob], k_perm[of] = xb, xf, ki, ko
        reduced = []
        for w, xd, kd, od in zip(window.dims, x_sp, k_sp, o_sp, strict=True):
            if sk.dims[kd] != 1 and shape.dims[od] != 1:
                return None
            x_perm[od], k_perm[od] = xd, kd
            if sk.dims[kd] != 1:
                if w.reversal:
                    return None  # (a reversed window pairs x[j] with k[K-1-j])
                reduced.append(od)
        t = shape.element_type
        xt = self._arranged(x, sx, x_perm, t)
        kt = self._arranged(k, sk, k_perm, t)
        full = shape_array(t, [sx.dims[p] for p in x_perm])
        kb = self._broadcast_degenerate(kt, full)
        product = self.new("multiply", [xt, kb], full, like=op)
        if not reduced:
            return product
        zero = self.const(0, shape_array(t, []))
        reducer = add_reducer(self.ctx, op, t)
        kept = shape_array(t, [n for d, n in enumerate(full.dims) if d not in reduced])
        r = self.new("reduce", [product.result, zero.result], kept,
                     {"dimensions": tuple(reduced), "to_apply": reducer}, like=op)  # fmt: skip
        return self.new("reshape", [r.result], shape, like=op)

    def _arranged(self, v, s, perm: list[int], t: str):
        """`v` transposed by `perm` (when that moves anything) and converted to `t`."""
        if perm != sorted(perm):
            v = self.new("transpose", [v], shape_array(s.element_type, [s.dims[p] for p in perm]),
                         {"dimensions": tuple(perm)}).result  # fmt: skip
        if s.element_type != t:
            v = self.new("convert", [v], shape_array(t, [s.dims[p] for p in perm])).result
        return v

    def _broadcast_degenerate(self, v, full):
        """`v` (of `full`'s rank, size 1 where it differs) broadcast to `full`."""
        s = array(value_shape(v))
        keep = [d for d in range(full.rank) if s.dims[d] == full.dims[d] and s.dims[d] != 1]  # type: ignore[union-attr]
        if len(keep) == full.rank:
            return v
        small = shape_array(full.element_type, [full.dims[d] for d in keep])
        r = self.new("reshape", [v], small).result
        return self.new("broadcast", [r], full, {"dimensions": tuple(keep)}).result
