"""The per-instruction rewrites of `layout-normalization`: each instruction kind moves onto
the physical shapes of its operands and result (`physical.physical`), its dimension
attributes renumbered to match, between bitcasts (as XLA's LayoutNormalization).

Notation in the docstrings: `x{L}` is an array whose layout is not the default, `x'` its
physical form, `P` the result's major-to-minor order (`physical.order`), and `P^-1` its
inverse: logical dim d is physical dim `P^-1[d]`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.ir.attrs import ConvDims, ShapedLiteral, Window
from hlopass.ir.literal import Literal
from hlopass.ir.opcode_sets import with_trait
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import RewriteContext, new_op

from .layouts import m2m_of, reshape_is_bitcast, same_layout, value_shape
from .physical import (
    all_physical,
    finish,
    inverse,
    order,
    other_attrs,
    physical,
    physical_input,
    plain_array,
)


@dataclass
class _PhysicalRewrite(RewritePattern):
    """Shared guards: one of `OPCODES`, a plain array result, and something (result or an
    operand) not yet physical. Subclasses add their own guards in `rewrite`."""

    ctx: RewriteContext
    OPCODES: ClassVar[tuple[str, ...]] = ()

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or not self.wants(op):
            return
        if not plain_array(op.shape) or all_physical(op):
            return
        if not all(plain_array(value_shape(v)) for v in op.operands):
            return
        self.rewrite(op, rewriter)

    def wants(self, op: HloOp) -> bool:
        return op.opcode in self.OPCODES

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        raise NotImplementedError

    def inputs(self, rewriter: PatternRewriter, values: list[SSAValue]) -> list[SSAValue]:
        return [physical_input(rewriter, self.ctx, v) for v in values]

    def emit(self, rewriter: PatternRewriter, op: HloOp, operands: list[SSAValue],
             shape: ArrayShape, attrs: dict[str, Any], what: str) -> None:  # fmt: skip
        new = new_op(rewriter, self.ctx, op.opcode, operands, shape, attrs, like=op, before=op)
        finish(rewriter, self.ctx, op, new.result)
        self.ctx.note(self, new, what)


def _same_order(a: ArrayShape, b: ArrayShape) -> bool:
    return m2m_of(a) == m2m_of(b)


@dataclass
class NormalizeElementwise(_PhysicalRewrite):
    """`op{L}(x{L}, y{L}, s)` -> `bitcast(op(x', y', s))`: an elementwise instruction (and
    a bitcast-convert that keeps the rank) on the physical shape; scalar operands of select
    and clamp stay as they are.

    Guards: every array operand has the result's dims and layout."""

    OPCODES: ClassVar[tuple[str, ...]] = (*with_trait("elementwise"), "bitcast-convert")

    def wants(self, op: HloOp) -> bool:
        return op.opcode in self.OPCODES

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        if shape.rank == 0:
            return
        for v in op.operands:
            s = value_shape(v)
            assert isinstance(s, ArrayShape)
            if s.rank == 0 and op.opcode in ("select", "clamp"):
                continue
            if s.dims != shape.dims or not _same_order(s, shape):
                return
        ins = [v if value_shape(v).rank == 0 else physical_input(rewriter, self.ctx, v)  # type: ignore[attr-defined]
               for v in op.operands]  # fmt: skip
        self.emit(rewriter, op, ins, physical(shape), other_attrs(op), f"on {physical(shape)}")


@dataclass
class NormalizeBitcastConvertRank(_PhysicalRewrite):
    """`bitcast-convert(x{L})` that adds or drops the minor-most dim -> `bitcast(
    bitcast-convert(x'))`: the extra dim stays minor-most in the physical forms.

    Guards: the ranks differ by one; the extra (last) dim is the minor-most one; the other
    dims keep their order."""

    OPCODES: ClassVar[tuple[str, ...]] = ("bitcast-convert",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        src, dst = value_shape(op.operands[0]), op.shape
        assert isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)
        if abs(src.rank - dst.rank) != 1:
            return
        wide, narrow = (src, dst) if src.rank > dst.rank else (dst, src)
        if m2m_of(wide)[0] != wide.rank - 1 or m2m_of(wide)[1:] != m2m_of(narrow):
            return
        ins = self.inputs(rewriter, [op.operands[0]])
        self.emit(rewriter, op, ins, physical(dst), other_attrs(op), "extra dim kept minor")


@dataclass
class NormalizeBroadcast(_PhysicalRewrite):
    """`broadcast(x{L0}){L}, dimensions=D` -> `bitcast(broadcast(x'), dimensions=D')` with
    `D'[j] = P^-1[D[P0[j]]]` (the operand's physical dim j lands on the result's physical
    dim; D' need not be sorted)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("broadcast",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        src, dst = value_shape(op.operands[0]), op.shape
        assert isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)
        dims = tuple(op.attr("dimensions"))
        at = inverse(order(dst))
        new_dims = tuple(at[dims[d]] for d in order(src))
        ins = self.inputs(rewriter, [op.operands[0]])
        self.emit(rewriter, op, ins, physical(dst), {"dimensions": new_dims}, f"dims {new_dims}")


@dataclass
class NormalizeIota(_PhysicalRewrite):
    """`iota(){L}, iota_dimension=d` -> `bitcast(iota(), iota_dimension=P^-1[d])`."""

    OPCODES: ClassVar[tuple[str, ...]] = ("iota",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        d = inverse(order(shape))[op.attr("iota_dimension")]
        self.emit(rewriter, op, [], physical(shape), {"iota_dimension": d}, f"iota dim {d}")


@dataclass
class NormalizeConcatenate(_PhysicalRewrite):
    """`concatenate(x{L}, y{L}){L}, dimensions={d}` -> `bitcast(concatenate(x', y'),
    dimensions={P^-1[d]})`.

    Guards: every operand has the result's layout."""

    OPCODES: ClassVar[tuple[str, ...]] = ("concatenate",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        if not all(_same_order(value_shape(v), shape) for v in op.operands):  # type: ignore[arg-type]
            return
        (d,) = op.attr("dimensions")
        new_d = inverse(order(shape))[d]
        ins = self.inputs(rewriter, list(op.operands))
        self.emit(rewriter, op, ins, physical(shape), {"dimensions": (new_d,)}, f"dim {new_d}")


@dataclass
class NormalizeReverse(_PhysicalRewrite):
    """`reverse(x{L}){L}, dimensions=D` -> `bitcast(reverse(x'), dimensions=sorted(P^-1[D]))`.

    Guards: the operand has the result's layout (a reverse that also changes the layout
    moves data twice; it is left alone)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("reverse",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        if not _same_order(value_shape(op.operands[0]), shape):  # type: ignore[arg-type]
            return
        at = inverse(order(shape))
        dims = tuple(sorted(at[d] for d in op.attr("dimensions")))
        ins = self.inputs(rewriter, [op.operands[0]])
        self.emit(rewriter, op, ins, physical(shape), {"dimensions": dims}, f"dims {dims}")


@dataclass
class NormalizePad(_PhysicalRewrite):
    """`pad(x{L}, v){L}, padding=C` -> `bitcast(pad(x', v), padding=C')` with
    `C'[j] = C[P[j]]`.

    Guards: the operand has the result's layout."""

    OPCODES: ClassVar[tuple[str, ...]] = ("pad",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        if not _same_order(value_shape(op.operands[0]), shape):  # type: ignore[arg-type]
            return
        cfg = op.attr("padding")
        new_cfg = tuple(cfg[d] for d in order(shape))
        ins = [*self.inputs(rewriter, [op.operands[0]]), op.operands[1]]
        self.emit(rewriter, op, ins, physical(shape), {"padding": new_cfg}, "padding permuted")


@dataclass
class NormalizeSlice(_PhysicalRewrite):
    """`slice(x{L}){L}, slice=S` -> `bitcast(slice(x'), slice=S')` with `S'[j] = S[P[j]]`.

    Guards: the operand has the result's layout."""

    OPCODES: ClassVar[tuple[str, ...]] = ("slice",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        if not _same_order(value_shape(op.operands[0]), shape):  # type: ignore[arg-type]
            return
        s = op.attr("slice")
        attrs = {"slice": tuple(s[d] for d in order(shape))}
        ins = self.inputs(rewriter, [op.operands[0]])
        self.emit(rewriter, op, ins, physical(shape), attrs, "slice permuted")


@dataclass
class NormalizeReduceWindow(_PhysicalRewrite):
    """`reduce-window(x{L}, init){L}, window=W` -> `bitcast(reduce-window(x', init),
    window=W')` with `W'[j] = W[P[j]]`.

    Guards: one operand (not variadic) with the result's layout."""

    OPCODES: ClassVar[tuple[str, ...]] = ("reduce-window",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        if len(op.operands) != 2 or not _same_order(value_shape(op.operands[0]), shape):  # type: ignore[arg-type]
            return
        w = op.attr("window")
        attrs = other_attrs(op, "window")
        attrs["window"] = Window(tuple(w.dims[d] for d in order(shape)))
        ins = [*self.inputs(rewriter, [op.operands[0]]), op.operands[1]]
        self.emit(rewriter, op, ins, physical(shape), attrs, "window permuted")


@dataclass
class NormalizeDynamicSlice(_PhysicalRewrite):
    """`dynamic-slice(x{L}, i0..in){L}, dynamic_slice_sizes=Z` -> `bitcast(dynamic-slice(
    x', i_P[0]..i_P[n]), dynamic_slice_sizes=Z[P])`: the scalar start indices permuted.

    Guards: the operand has the result's layout; one scalar index per dim."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dynamic-slice",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        x, *idx = op.operands
        if len(idx) != shape.rank or not _same_order(value_shape(x), shape):  # type: ignore[arg-type]
            return
        p = order(shape)
        sizes = op.attr("dynamic_slice_sizes")
        ins = [*self.inputs(rewriter, [x]), *(idx[d] for d in p)]
        attrs = {"dynamic_slice_sizes": tuple(sizes[d] for d in p)}
        self.emit(rewriter, op, ins, physical(shape), attrs, "indices permuted")


@dataclass
class NormalizeDynamicUpdateSlice(_PhysicalRewrite):
    """`dynamic-update-slice(x{L}, u{L}, i0..in){L}` -> `bitcast(dynamic-update-slice(x',
    u', i_P[0]..i_P[n]))`.

    Guards: operand and update have the result's layout; one scalar index per dim."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dynamic-update-slice",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        x, u, *idx = op.operands
        if len(idx) != shape.rank:
            return
        if not all(_same_order(value_shape(v), shape) for v in (x, u)):  # type: ignore[arg-type]
            return
        ins = [*self.inputs(rewriter, [x, u]), *(idx[d] for d in order(shape))]
        self.emit(rewriter, op, ins, physical(shape), other_attrs(op), "indices permuted")


@dataclass
class NormalizeTranspose(_PhysicalRewrite):
    """`transpose(x{L0}){L}, dimensions=T` -> `bitcast(transpose(x'), dimensions=T')` with
    `T'[j] = P0^-1[T[P[j]]]`, or `bitcast(x')` when T' is the identity. (A transpose
    that keeps the memory order became a bitcast before this; what is left moves data.)"""

    OPCODES: ClassVar[tuple[str, ...]] = ("transpose",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        src, dst = value_shape(op.operands[0]), op.shape
        assert isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)
        at0 = inverse(order(src))
        perm = op.attr("dimensions")
        new_perm = tuple(at0[perm[d]] for d in order(dst))
        (x,) = self.inputs(rewriter, [op.operands[0]])
        if new_perm == tuple(range(len(new_perm))):
            finish(rewriter, self.ctx, op, x)
            self.ctx.note(self, None, "physical transpose is the identity")
            return
        attrs = {"dimensions": new_perm}
        self.emit(rewriter, op, [x], physical(dst), attrs, f"physical dims {new_perm}")


@dataclass
class NormalizeReshape(_PhysicalRewrite):
    """`reshape(x{L0}){L}` that keeps every element at its memory offset ->
    `bitcast(reshape(x'))`: the reshape of the physical shapes, which with default layouts
    is itself a bitcast (layout-sensitive algsimp makes it one, as XLA's does).

    Guards: the reshape keeps every offset (XLA's pass requires it: ReshapeDecomposer
    runs first; a reshape that moves data is left as it is); one element type."""

    OPCODES: ClassVar[tuple[str, ...]] = ("reshape",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        src, dst = value_shape(op.operands[0]), op.shape
        assert isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)
        if src.element_type != dst.element_type or not reshape_is_bitcast(src, dst):
            return
        ins = self.inputs(rewriter, [op.operands[0]])
        self.emit(rewriter, op, ins, physical(dst), other_attrs(op), f"on {physical(dst)}")


@dataclass
class CopyKeepingOffsets(_PhysicalRewrite):
    """`copy(x{L0}){L}` that keeps every element at its memory offset -> `bitcast(x')`.

    Guards: one element type; another layout (a copy within one layout is left to
    copy-elision)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("copy",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        src, dst = value_shape(op.operands[0]), op.shape
        assert isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)
        if src.element_type != dst.element_type or same_layout(src, dst):
            return
        if not reshape_is_bitcast(src, dst):
            return
        (x,) = self.inputs(rewriter, [op.operands[0]])
        finish(rewriter, self.ctx, op, x)
        self.ctx.note(self, None, "copy keeps every offset: a bitcast")


@dataclass
class NormalizeCopy(_PhysicalRewrite):
    """`copy(x{L0}){L}` that moves elements -> `bitcast(transpose(x'), dimensions=T')`
    with `T'[j] = P0^-1[P[j]]` (a copy between layouts is a transpose of the physical
    shapes; it then runs as one).

    Guards: the operand has the result's dims and element type, and another layout (a
    copy within one layout is left to copy-elision; one that keeps every offset became a
    bitcast before this)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("copy",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        src, dst = value_shape(op.operands[0]), op.shape
        assert isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)
        if src.dims != dst.dims or src.element_type != dst.element_type:
            return
        if _same_order(src, dst):
            return
        at0 = inverse(order(src))
        perm = tuple(at0[d] for d in order(dst))
        (x,) = self.inputs(rewriter, [op.operands[0]])
        t = new_op(rewriter, self.ctx, "transpose", [x], physical(dst), {"dimensions": perm},
                   like=op, before=op)  # fmt: skip
        finish(rewriter, self.ctx, op, t.result)
        self.ctx.note(self, t, f"copy as transpose {perm}")


@dataclass
class NormalizeConstant(_PhysicalRewrite):
    """`constant(V){L}` -> `bitcast(constant(V'))`, V' the literal's elements in memory
    order (V transposed by P).

    Guards: an array literal with elements (an empty one has nothing to reorder)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("constant",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        lit = op.attr("value")
        if not isinstance(lit, ShapedLiteral) or shape.num_elements == 0:
            return
        arr = lit.literal.array
        if not isinstance(arr, np.ndarray) or arr.shape != shape.dims:
            return  # an elided or unusual literal: its elements are not known here
        phys = physical(shape)
        values = np.ascontiguousarray(np.transpose(arr, order(shape)))
        new_lit = replace(lit, shape=phys, literal=Literal(values))
        new = create_op("constant", [], phys, self.ctx.names.fresh("constant"), {"value": new_lit})
        rewriter.insert(new, InsertPoint.before(op))
        finish(rewriter, self.ctx, op, new.result)
        self.ctx.note(self, new, "literal reordered")


@dataclass
class NormalizeConvolution(_PhysicalRewrite):
    """`convolution(x{Li}, k{Lk}){Lo}, dim_labels=i_k->o` -> `bitcast(convolution(x', k'),
    dim_labels=i[Pi]_k[Pk]->o[Po])`: each side's labels read in its physical order.

    Guards: the dim labels parse (one label per dim on each side)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("convolution",)

    def rewrite(self, op: HloOp, rewriter: PatternRewriter) -> None:
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        labels = op.attr("dim_labels")
        if not isinstance(labels, ConvDims) or len(op.operands) != 2:
            return
        lhs, rest = labels.labels.split("_", 1)
        rhs, out = rest.split("->")
        shapes = [value_shape(op.operands[0]), value_shape(op.operands[1]), shape]
        sides = []
        for side, s in zip((lhs, rhs, out), shapes, strict=True):
            assert isinstance(s, ArrayShape)
            if len(side) != s.rank:
                return
            sides.append("".join(side[d] for d in order(s)))
        attrs = other_attrs(op, "dim_labels")
        attrs["dim_labels"] = ConvDims(f"{sides[0]}_{sides[1]}->{sides[2]}")
        ins = self.inputs(rewriter, list(op.operands))
        self.emit(rewriter, op, ins, physical(shape), attrs, f"labels {attrs['dim_labels']}")


COPY_PATTERNS = (CopyKeepingOffsets, NormalizeCopy)
"""The rewrites `layout-normalization{copies=false}` leaves out."""


def instruction_patterns(ctx: RewriteContext) -> list[RewritePattern]:
    """Every per-instruction rewrite, in the order they are tried."""
    kinds: list[type[_PhysicalRewrite]] = [
        NormalizeElementwise, NormalizeBitcastConvertRank, NormalizeBroadcast, NormalizeIota,
        NormalizeConcatenate, NormalizeReverse, NormalizePad, NormalizeSlice,
        NormalizeReduceWindow, NormalizeDynamicSlice, NormalizeDynamicUpdateSlice,
        NormalizeTranspose, NormalizeReshape, CopyKeepingOffsets, NormalizeCopy,
        NormalizeConstant, NormalizeConvolution,
    ]  # fmt: skip
    from .normalize_cudnn import NormalizeCudnnConvCall  # (it reads `rules`, which reads us)

    return [*(k(ctx) for k in kinds), NormalizeCudnnConvCall(ctx)]
