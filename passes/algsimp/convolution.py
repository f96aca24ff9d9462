"""`algsimp` family: convolution."""

from __future__ import annotations

from dataclasses import replace

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import ConvDims, Window, WindowDim
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import add_reducer, array, src
from hlopass.rewriting import (
    const_array,
    owner,
    value_shape,
)


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


def _attrs_with_window(op: HloOp, window: Window) -> dict:
    """`op`'s attributes with `window` in place of its own."""
    out = {k: op.attr(k) for k in ("dim_labels", "feature_group_count", "batch_group_count",
                                    "operand_precision", "algorithm") if op.attr(k) is not None}  # fmt: skip
    out["window"] = window
    return out


def _zero_padded_operand(op: HloOp, i: int):
    """(the pad, window, the operand's spatial dims, its padding) when `op`, a dense
    two-operand convolution, reads as operand `i` (0 the input, 1 the kernel) a zero pad
    of spatial dims only, else None: the padding may then move into the window."""
    from hlopass.rewriting import is_zero

    p = src(op.operands[i], "pad")
    window, labels = op.attr("window"), op.attr("dim_labels")
    if p is None or window is None or labels is None or len(op.operands) != 2:
        return None
    if op.attr("sparsity_config") is not None or not is_zero(p.operands[1]):
        return None
    pads = p.attr("padding")
    n0, n1, spatial = labels.kernel if i else labels.input  # (batch, feature or in, out)
    if any((pads[d].low, pads[d].high, pads[d].interior) != (0, 0, 0) for d in (n0, n1)):
        return None
    return p, window, spatial, pads


class ConvolutionOfPaddedInput(Simplification):
    """`convolution(pad(x, 0), k) -> convolution(x, k)` with the pad's spatial edges added to
    the window's padding and its interior as base dilation (both zeros, as the pad's; the
    batch and feature dims unpadded; XLA's `FoldConvInputPad`; floats need
    `enable-floats-are-real`: XLA-CPU multiplies the pad's zeros (0 * inf is nan) but skips
    the window's padding and dilation holes)."""

    OPCODES = ("convolution",)
    OPERAND_FROM = frozenset({"pad"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        found = _zero_padded_operand(op, 0)
        if found is None:
            return None
        p, window, spatial, pads = found
        dims = []
        for w, d in zip(window.dims, spatial, strict=True):
            q = pads[d]
            if q.low < 0 or q.high < 0:
                return None
            if q.interior and (w.pad_low or w.pad_high or w.lhs_dilation != 1):
                return None
            if w.lhs_dilation != 1 and (q.low or q.high or q.interior):
                return None
            dims.append(replace(w, pad_low=w.pad_low + q.low, pad_high=w.pad_high + q.high,
                                lhs_dilation=q.interior + 1 if q.interior else w.lhs_dilation))  # fmt: skip
        return self.new("convolution", [p.operands[0], op.operands[1]], op.shape,
                        _attrs_with_window(op, Window(tuple(dims))), like=op)  # fmt: skip


class ConvolutionOfInteriorPaddedKernel(Simplification):
    """`convolution(x, pad(k, 0)) -> convolution(x, k)` where the pad only adds interior
    zeros to k's spatial dims: they become the window's (kernel) dilation (XLA's
    `FoldConvFilterPad`; floats need `enable-floats-are-real`: the padded zeros were
    multiplied, 0 * inf is nan, a dilation skips them)."""

    OPCODES = ("convolution",)
    OPERAND_FROM = frozenset({"pad"})
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        found = _zero_padded_operand(op, 1)
        if found is None:
            return None
        p, window, spatial, pads = found
        k = array(value_shape(p.operands[0]))
        if k is None:
            return None
        dims = []
        for w, d in zip(window.dims, spatial, strict=True):
            q = pads[d]
            if q.low or q.high:
                return None
            if not q.interior:
                dims.append(w)
                continue
            if w.rhs_dilation > 1:
                return None
            dims.append(replace(w, rhs_dilation=q.interior + 1, size=k.dims[d]))
        return self.new("convolution", [op.operands[0], p.operands[0]], op.shape,
                        _attrs_with_window(op, Window(tuple(dims))), like=op)  # fmt: skip


class ConvolutionToBitcastDot(Simplification):
    """`convolution(x, k) -> bitcast(dot(bitcast(x) [n, c], bitcast(k) [c, o]))` with
    layouts fixed, for a 1x..x1 kernel (no stride, padding or base dilation, no groups),
    when the input features are x's most minor dim, the output features the result's, x
    and the result share a layout, and k's input features are more major than its output
    features (then both bitcasts only rename memory; XLA's `SimplifyConvToDot`; floats
    need `enable-floats-are-real`, as for `ConvolutionToDot`)."""

    OPCODES = ("convolution",)
    OPTION = "enable_conv_simplification"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        if not self.opts.is_layout_sensitive or len(op.operands) != 2:
            return None
        x, k = op.operands
        sx, sk, shape = array(value_shape(x)), array(value_shape(k)), array(op.shape)
        window, labels = op.attr("window"), op.attr("dim_labels")
        if sx is None or sk is None or shape is None or window is None or labels is None:
            return None
        if sx.is_dynamic or sk.is_dynamic or op.attr("sparsity_config") is not None:
            return None
        _, f_in, _ = labels.input
        k_in, k_out, k_sp = labels.kernel
        _, f_out, _ = labels.output
        if any(sk.dims[d] != 1 for d in k_sp):
            return None
        if any(w.stride != 1 or w.pad_low or w.pad_high or w.lhs_dilation != 1
               for w in window.dims):  # fmt: skip
            return None
        lx, lk, lo = sx.layout, sk.layout, shape.layout
        if lx is None or lk is None or lo is None:
            return None
        xm, km, om = lx.minor_to_major, lk.minor_to_major, lo.minor_to_major
        if sx.layout != shape.layout or xm[0] != f_in or om[0] != f_out:
            return None
        if km.index(k_in) < km.index(k_out):
            return None  # input features more minor than output features
        if (op.attr("feature_group_count") or 1) != 1 or (op.attr("batch_group_count") or 1) != 1:
            return None
        c, o = sx.dims[f_in], sk.dims[k_out]
        n = sx.num_elements // c if c else 0
        lhs = self.new("bitcast", [x], shape_array(sx.element_type, [n, c]))
        rhs = self.new("bitcast", [k], shape_array(sk.element_type, [c, o]))
        attrs = {"lhs_contracting_dims": (1,), "rhs_contracting_dims": (0,)}
        for key in ("operand_precision", "algorithm"):
            if op.attr(key) is not None:
                attrs[key] = op.attr(key)
        d = self.new("dot", [lhs.result, rhs.result], shape_array(shape.element_type, [n, o]),
                     attrs, like=op)  # fmt: skip
        return self.new("bitcast", [d.result], shape, like=op)


class ConvolutionAddMultiplyReorder(Simplification):
    """`multiply(add(convolution(x, k), bias), broadcast(c)) -> add(convolution(x, k *
    broadcast(c)), bias * broadcast(c))` (k and the rank-1 c constants, c broadcast along the
    output feature dim; the convolution, bias and broadcast used only here: the scaling
    folds into the kernel; XLA's `enable_conv_add_multiply_reorder`)."""

    OPCODES = ("multiply",)
    OPERAND_FROM = frozenset({"add"})
    OPTION = "enable_conv_add_multiply_reorder"
    FLOAT_UNSAFE = True  # (each product of the sum is scaled before it is summed)

    def rewrite(self, op: HloOp):
        for add_v, b_v in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
            add, bc = src(add_v, "add"), src(b_v, "broadcast")
            if add is None or bc is None or not b_v.has_one_use():
                continue
            c = bc.operands[0]
            sc = array(value_shape(c))
            if src(c, "constant") is None or sc is None or sc.rank != 1:
                continue
            for conv_v, bias in ((add.operands[0], add.operands[1]),
                                 (add.operands[1], add.operands[0])):  # fmt: skip
                conv = src(conv_v, "convolution")
                if conv is None or not conv_v.has_one_use() or not bias.has_one_use():
                    continue
                x, k = conv.operands
                sk = array(value_shape(k))
                labels = conv.attr("dim_labels")
                if src(k, "constant") is None or sk is None or labels is None:
                    continue
                if tuple(bc.attr("dimensions") or ()) != (labels.output[1],):
                    continue
                kb = self.new("broadcast", [c], sk, {"dimensions": (labels.kernel[1],)}, like=op)
                k2 = self.new("multiply", [k, kb.result], sk, like=op)
                attrs = {s.name: v for s, v in conv.hlo_attrs()
                         if s.name not in ("metadata", "sharding")}  # fmt: skip
                conv2 = self.new("convolution", [x, k2.result], conv.shape, attrs, like=conv)
                bias2 = self.new("multiply", [bias, b_v], value_shape(bias), like=op)
                return self.new("add", [conv2.result, bias2.result], op.shape, like=add)
        return None


class ConvolutionScalarMultiplyReduction(Simplification):
    """`convolution(... multiply(a, broadcast(c)) ..., ...) -> multiply(convolution(... a
    ..., ...), broadcast(c * ...))`: the scalar factors found down single-use chains of
    multiply, transpose and reshape under an operand move to the smallest of the output and
    the operands (f32, bf16; `enable-scalar-multiply-reduction`; the products round in
    another order: it needs `enable-floats-are-real`)."""

    OPCODES = ("convolution",)
    OPTION = "enable_scalar_multiply_reduction"
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or shape.element_type not in ("f32", "bf16") or len(op.operands) != 2:
            return None
        sizes = [array(value_shape(v)) for v in op.operands]
        if sizes[0] is None or sizes[1] is None:
            return None
        n_out, n_lhs, n_rhs = shape.num_elements, sizes[0].num_elements, sizes[1].num_elements
        if n_out <= min(n_lhs, n_rhs):
            target, sides = -1, [k for k, n in enumerate((n_lhs, n_rhs)) if n_out < n]
        elif n_lhs <= n_rhs:
            target, sides = 0, [1] if n_lhs < n_rhs else []
        else:
            target, sides = 1, [0]
        factors: list[float] = []
        operands = list(op.operands)
        for k in sides:
            operands[k] = self._stripped(operands[k], factors)
        if not factors:
            return None
        c = 1.0
        for f in factors:
            c *= f
        if target == -1:
            conv = self.new("convolution", operands, shape, _conv_attrs(op), like=op)
            return self.new("multiply", [conv.result, self.const(c, shape).result], shape, like=op)
        st = array(value_shape(operands[target]))
        assert st is not None
        scaled = self.new("multiply", [operands[target], self.const(c, st).result], st, like=op)
        operands[target] = scaled.result
        return self.new("convolution", operands, shape, _conv_attrs(op), like=op)

    def _stripped(self, v: SSAValue, factors: list[float]) -> SSAValue:
        """`v` with the scalar multiplies of its single-use chain removed (their constants
        appended to `factors`); `v` itself when there are none."""
        o = owner(v)
        if o is None or not v.has_one_use():
            return v  # (another user needs the unscaled value: nothing moves)
        if o.OPCODE == "multiply":
            a, b = o.operands
            for x, c in ((a, b), (b, a)):
                bc = src(c, "broadcast")
                if bc is None:
                    continue
                k = const_array(bc.operands[0])
                if k is not None and k.size == 1 and not bc.attr("dimensions"):
                    factors.append(float(k.reshape(-1)[0]))
                    return self._stripped(x, factors)
            na, nb = self._stripped(a, factors), self._stripped(b, factors)
            if na is a and nb is b:
                return v
            return self.new("multiply", [na, nb], o.shape, like=o).result
        if o.OPCODE in ("transpose", "reshape"):
            inner = self._stripped(o.operands[0], factors)
            if inner is o.operands[0]:
                return v
            attrs = {"dimensions": o.attr("dimensions")} if o.OPCODE == "transpose" else None
            return self.new(o.OPCODE, [inner], o.shape, attrs, like=o).result
        return v


def _conv_attrs(op: HloOp) -> dict:
    return {s.name: v for s, v in op.hlo_attrs() if s.name not in ("metadata", "sharding")}


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
CONVOLUTIONS: tuple[type[Simplification], ...] = (
    ConvolutionOfEmpty, ConvolutionToDot, ConvolutionOperandSwap, ConvolutionToMultiply,
    ConvolutionOfPaddedInput, ConvolutionOfInteriorPaddedKernel, ConvolutionToBitcastDot,
    ConvolutionScalarMultiplyReduction,
)  # fmt: skip
"""Empty convolutions, convolutions made dots or multiplies, padding folded."""

ADD_MULTIPLY: tuple[type[Simplification], ...] = (ConvolutionAddMultiplyReorder,)
"""`(conv + bias) * c` folded into the kernel (after the multiply reassociations)."""

PATTERNS: tuple[type[Simplification], ...] = (*CONVOLUTIONS, *ADD_MULTIPLY)
"""This family's rewrites, in the order they fire."""
