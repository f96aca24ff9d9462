"""`algsimp` family: transpose and reshape."""

from __future__ import annotations

import numpy as np
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.cost.layouts import reshape_is_bitcast
from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    et,
    src,
)
from hlopass.rewriting import (
    same_shape,
    value_shape,
)


class ReshapeNoop(Simplification):
    """`reshape(x)` to x's own dims -> x."""

    OPCODES = ("reshape",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        return x if s is not None and not s.is_dynamic and s.dims == op.shape.dims else None  # type: ignore[attr-defined]


class ReshapeOfReshape(Simplification):
    """`reshape(reshape(x)) -> reshape(x)`."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"reshape"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "reshape")
        if inner is None or array(op.shape) is None or op.shape.is_dynamic:  # type: ignore[union-attr]
            return None
        return self.new("reshape", [inner.operands[0]], op.shape, like=op)


class ReshapeOfScalarBroadcast(Simplification):
    """`reshape(broadcast(scalar)) -> broadcast(scalar)`."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        if getattr(op.shape, "num_elements", 1) == 0:
            return None  # (XLA: a reshape to no elements becomes an empty constant first)
        return self.rebroadcast_scalar(op)


class TransposeIdentity(Simplification):
    """`transpose(x, dimensions={0,1,..})` -> x."""

    OPCODES = ("transpose",)

    def rewrite(self, op: HloOp):
        perm = tuple(op.attr("dimensions") or ())
        return op.operands[0] if perm == tuple(range(len(perm))) else None


class TransposeOfTranspose(Simplification):
    """`transpose(transpose(x, p1), p2) -> transpose(x, p1[p2])`."""

    OPCODES = ("transpose",)
    OPERAND_FROM = frozenset({"transpose"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "transpose")
        if inner is None:
            return None
        p1 = inner.attr("dimensions")
        p2 = op.attr("dimensions")
        perm = tuple(p1[i] for i in p2)
        return self.new("transpose", [inner.operands[0]], op.shape, {"dimensions": perm}, like=op)


class TransposeIsReshape(Simplification):
    """`transpose(x, perm) -> reshape(x)` when perm moves only size-1 dimensions (the other
    dimensions keep their order, so the elements keep theirs)."""

    OPCODES = ("transpose",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        if s is None or s.is_dynamic:
            return None
        perm = tuple(op.attr("dimensions") or ())
        if perm == tuple(range(len(perm))):
            return None  # TransposeIdentity
        big = [p for p in perm if s.dims[p] != 1]
        if big != sorted(big):
            return None
        return self.new("reshape", [x], op.shape, like=op)


class ReshapeOfIota(Simplification):
    """`reshape(iota(d))` that only adds or removes size-1 dimensions -> `iota(d')` of the
    reshape's shape (d' the position dimension d moves to)."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"iota"})

    def rewrite(self, op: HloOp):
        iota = src(op.operands[0], "iota")
        shape = array(op.shape)
        if iota is None or shape is None or shape.is_dynamic:
            return None
        s = array(value_shape(op.operands[0]))
        d = iota.attr("iota_dimension")
        big_in = [(i, n) for i, n in enumerate(s.dims) if n != 1]  # type: ignore[union-attr]
        big_out = [(i, n) for i, n in enumerate(shape.dims) if n != 1]
        if [n for _, n in big_in] != [n for _, n in big_out]:
            return None  # the reshape regroups elements
        if s.dims[d] == 1:  # type: ignore[union-attr]
            return self.const(0, shape)  # every element of a size-1 iota dimension is 0
        new_d = big_out[[i for i, _ in big_in].index(d)][0]
        return self.new("iota", [], shape, {"iota_dimension": new_d}, like=iota)


class TransposeOfScalarBroadcast(Simplification):
    """`transpose(broadcast(scalar)) -> broadcast(scalar)` of the transpose's shape (every
    element is the scalar; XLA does it for each permuting user of a scalar broadcast)."""

    OPCODES = ("transpose",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        return self.rebroadcast_scalar(op)


def _bitcast_permutation(src_shape: ArrayShape, dst: ArrayShape) -> tuple[int, ...] | None:
    """The permutation p for which `bitcast(x: src_shape) -> dst` is `transpose(x, p)`
    (the dims in physical order the same sizes; no tiles), else None."""
    if src_shape.rank != dst.rank or src_shape.is_dynamic or dst.is_dynamic:
        return None
    for s in (src_shape, dst):
        if s.layout is not None and s.layout.tiles:
            return None
    perm = [0] * dst.rank
    for a, b in zip(dst.minor_to_major, src_shape.minor_to_major, strict=True):
        perm[a] = b
    if any(dst.dims[j] != src_shape.dims[perm[j]] for j in range(dst.rank)):
        return None
    return tuple(perm)


class TransposeOfBroadcast(Simplification):
    """`transpose(broadcast(x, bdims), p) -> broadcast(x, p^-1[bdims])` when the new dims
    stay in order (x is not transposed); also for a bitcast that is such a transpose with
    fixed layouts; with fixed layouts x's dims must keep their layout order (as XLA)."""

    OPCODES = ("transpose", "bitcast")
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        shape = array(op.shape)
        sb = array(value_shape(op.operands[0]))
        if b is None or shape is None or sb is None:
            return None
        bdims = tuple(b.attr("dimensions") or ())
        if list(bdims) != sorted(bdims):
            return None
        if op.OPCODE == "transpose":
            perm = tuple(op.attr("dimensions"))
        else:
            if not self.opts.is_layout_sensitive or et(op) != et(b):
                return None
            tiles = (
                sb.layout.tiles if sb.layout else (),
                shape.layout.tiles if shape.layout else (),
            )
            if tiles[0] != tiles[1]:
                return None
            perm = _bitcast_permutation(sb, shape)
            if perm is None:
                return None
        inverse = [0] * len(perm)
        for j, d in enumerate(perm):
            inverse[d] = j
        new_dims = [inverse[d] for d in bdims]
        if new_dims != sorted(new_dims):
            return None
        if self.opts.is_layout_sensitive:
            sx = array(value_shape(b.operands[0]))
            if sx is None:
                return None
            extracted = [d for d in shape.minor_to_major if d in new_dims]
            order = sorted(range(len(new_dims)), key=lambda a: sx.minor_to_major[a])
            if order != sorted(range(len(new_dims)), key=lambda a: extracted[a]):
                return None
        return self.new("broadcast", [b.operands[0]], op.shape,
                        {"dimensions": tuple(new_dims)}, like=op)  # fmt: skip


def _ones(dims: tuple[int, ...]) -> int:
    return sum(d == 1 for d in dims)


def _chain_reshape(op: HloOp, layouts_fixed: bool = False) -> bool:
    """`op` is a reshape that only inserts or deletes size-1 dims, with at most one on
    either side (a link of XLA's removable reshape/transpose chains); with layouts fixed,
    also such a bitcast that keeps every element's offset (a reshape in memory)."""
    if op.OPCODE not in ("reshape", "bitcast"):
        return False
    a, b = array(value_shape(op.operands[0])), array(op.shape)
    if a is None or b is None or a.is_dynamic or b.is_dynamic:
        return False
    if op.OPCODE == "bitcast" and not (layouts_fixed and reshape_is_bitcast(a, b)):
        return False
    if _ones(a.dims) > 1 or _ones(b.dims) > 1:
        return False
    return [d for d in a.dims if d != 1] == [d for d in b.dims if d != 1]


def _effective_permutation(op: HloOp) -> list[int]:
    """The permutation of a transpose over its operand's dims other than a size-1 one."""
    perm = list(op.attr("dimensions"))
    sx = array(value_shape(op.operands[0]))
    assert sx is not None
    if _ones(sx.dims) != 1:
        return perm
    one = sx.dims.index(1)
    return [p - 1 if p > one else p for p in perm if p != one]


class TransposeReshapeChainIdentity(Simplification):
    """`reshape/transpose(... transpose/reshape(x))` -> x when the chain's transposes compose
    to the identity, its reshapes only insert or delete size-1 dims (each shape holding at
    most one), and the end has x's dims (XLA's `TryRemovingBitcastOrReshapeTransposeChain`).
    With layouts fixed, bitcasts that are reshapes in memory are links too, and an end of
    other dims or layout that x reshapes to in memory becomes `bitcast(x)`."""

    OPCODES = ("reshape", "transpose", "bitcast")
    OPERAND_FROM = frozenset({"reshape", "transpose", "bitcast"})

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or shape.is_dynamic:
            return None
        ls = self.opts.is_layout_sensitive
        if op.OPCODE == "bitcast" and not _chain_reshape(op, ls):
            return None
        size = len([d for d in shape.dims if d != 1])
        perm = list(range(size))
        if op.OPCODE == "transpose":
            dims = list(op.attr("dimensions"))
            if dims == sorted(dims) or _ones(shape.dims) > 1:
                return None
            perm = _effective_permutation(op)
        elif not _chain_reshape(op, ls):
            return None
        start = None
        current = op.operands[0].owner
        while isinstance(current, HloOp) and current.OPCODE in ("reshape", "transpose", "bitcast"):
            if current.OPCODE != "transpose":
                if not _chain_reshape(current, ls):
                    return None
            else:
                dims = list(current.attr("dimensions"))
                cs = array(current.shape)
                if dims == sorted(dims) or cs is None or _ones(cs.dims) > 1:
                    return None  # (an identity transpose goes by itself)
                inner = _effective_permutation(current)
                if len(inner) != len(perm):
                    return None
                perm = [inner[p] for p in perm]
            start = current
            current = current.operands[0].owner
        if start is None or perm != sorted(perm):
            return None
        x = start.operands[0]
        sx = array(value_shape(x))
        if sx is None or sx.is_dynamic:
            return None
        if sx.dims == shape.dims and (not ls or same_shape(sx, shape)):
            return x
        if ls and reshape_is_bitcast(sx, shape):
            return self.new("bitcast", [x], shape, like=op)
        return None


class ReshapeToEmpty(Simplification):
    """`reshape(x)` to a shape of no elements -> an empty constant of that shape."""

    OPCODES = ("reshape",)

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        if shape is None or shape.is_dynamic or shape.num_elements != 0:
            return None
        return self.array_const(np.zeros(shape.dims), shape)


class HoistTransposeOfReshape(Simplification):
    """`reshape(transpose(reshape(x)))` -> `transpose(reshape(x))` when each dim of the
    outer reshape merges one run of consecutive transpose inputs (it only collapses): the
    inner reshape then makes those merged dims and the transpose orders them (option
    `enable-hoist-transpose-of-reshape`; not with fixed layouts: as XLA)."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"transpose"})
    OPTION = "enable_hoist_transpose_of_reshape"
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        from hlopass.ir.shape import common_factors

        t = src(op.operands[0], "transpose")
        inner = src(t.operands[0], "reshape") if t is not None else None
        shape = array(op.shape)
        st = array(t.shape) if t is not None else None
        if t is None or inner is None or shape is None or st is None:
            return None
        if shape.is_dynamic or st.is_dynamic:
            return None
        perm = tuple(t.attr("dimensions"))
        factors = common_factors(shape.dims, st.dims)
        chunks = []  # (first transpose input dim, size, outer reshape dim)
        for (r0, t0), (r1, t1) in zip(factors, factors[1:], strict=False):
            if r1 - r0 != 1 or t1 == t0:
                return None
            if any(perm[k] != perm[k - 1] + 1 for k in range(t0 + 1, t1)):
                return None
            chunks.append((perm[t0], shape.dims[r0], r0))
        chunks.sort()
        new_perm = [0] * len(chunks)
        for k, (_, _, r) in enumerate(chunks):
            new_perm[r] = k
        r = self.new("reshape", [inner.operands[0]],
                     shape.with_dims(tuple(c[1] for c in chunks)), like=op)  # fmt: skip
        return self.new("transpose", [r.result], op.shape, {"dimensions": tuple(new_perm)},
                        like=op)  # fmt: skip


class ReshapeOfRng(Simplification):
    """`reshape(rng(a, b)) -> rng(a, b)` of the reshape's shape, likewise `transpose(rng)`
    (the rng used only here: its elements are independent draws, in any arrangement)."""

    OPCODES = ("reshape", "transpose")
    OPERAND_FROM = frozenset({"rng"})

    def rewrite(self, op: HloOp):
        rng = src(op.operands[0], "rng")
        if rng is None or not op.operands[0].has_one_use():
            return None
        attrs = {s.name: v for s, v in rng.hlo_attrs() if s.name not in ("metadata", "sharding")}
        return self.new("rng", list(rng.operands), op.shape, attrs, like=rng)

    def apply(self, op: HloOp, rewriter: PatternRewriter) -> None:
        old = src(op.operands[0], "rng")
        super().apply(op, rewriter)
        if old is not None and op.parent is None and not old.result.uses:
            rewriter.erase(old)  # (XLA reshapes the rng in place: one draw, not two)


class DepthToSpaceAsConcatenate(Simplification):
    """`reshape(transpose(reshape(x))) -> reshape(concatenate(slice_0(x), ...))` along t,
    where the reshapes and transpose split a dim d of x into n chunks and move the chunk
    index in front of another dim t (depth to space); slice i takes the i-th chunk of d (at
    most 5 chunks; the transpose has no other user;
    `rewrite-reshape-transpose-as-slice-concatenate`; XLA's rewrite)."""

    OPCODES = ("reshape",)
    OPERAND_FROM = frozenset({"transpose"})
    OPTION = "rewrite_reshape_transpose_as_slice_concatenate"
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        from hlopass.ir import attrs as A

        t = src(op.operands[0], "transpose")
        if t is None or not op.operands[0].has_one_use():
            return None
        inner = src(t.operands[0], "reshape")
        if inner is None:
            return None
        x = inner.operands[0]
        sx, si, so = array(value_shape(x)), array(inner.shape), array(op.shape)
        if sx is None or si is None or so is None or si.rank != sx.rank + 1:
            return None
        split = next((d for d in range(sx.rank) if si.dims[d] != sx.dims[d]), None)
        if split is None or sx.dims[split] != si.dims[split] * si.dims[split + 1]:
            return None
        if any(si.dims[d + 1] != sx.dims[d] for d in range(split + 1, sx.rank)):
            return None
        chunks, chunk = si.dims[split], si.dims[split + 1]
        if chunks > 5:
            return None
        perm = tuple(t.attr("dimensions"))
        td = perm.index(split) if split in perm else None
        if td is None or td in (split, split + 1) or td >= sx.rank:
            return None
        for d in range(si.rank):
            off = (-1 if d > td else 0) + (1 if d > split else 0)
            if d != td and perm[d] != d + off:
                return None
        if so.rank != sx.rank:
            return None
        for d in range(sx.rank):
            want = sx.dims[d]
            if d == td - 1:
                want = sx.dims[d] * chunks
            elif d == split:
                want = sx.dims[d] // chunks
            if so.dims[d] != want:
                return None
        slices = []
        for i in range(chunks):
            cut = tuple(A.SliceDim(i * chunk, (i + 1) * chunk, 1) if d == split
                        else A.SliceDim(0, n, 1) for d, n in enumerate(sx.dims))  # fmt: skip
            piece = sx.with_dims(tuple(chunk if d == split else n for d, n in enumerate(sx.dims)))
            slices.append(self.new("slice", [x], piece, {"slice": cut}).result)
        pdims = list(value_shape(slices[0]).dims)  # type: ignore[attr-defined]
        pdims[td] *= chunks  # (row-major, the chunks then interleave as the transpose puts them)
        cat = self.new("concatenate", slices, sx.with_dims(tuple(pdims)),
                       {"dimensions": (td,)})  # fmt: skip
        return self.new("reshape", [cat.result], op.shape, like=op)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
NO_OPS: tuple[type[Simplification], ...] = (
    ReshapeNoop, ReshapeOfReshape, ReshapeOfScalarBroadcast, TransposeIdentity,
    TransposeOfTranspose, TransposeIsReshape,
)  # fmt: skip
"""No-op and nested reshapes and transposes, a transpose that is a reshape."""

OF_PRODUCERS: tuple[type[Simplification], ...] = (
    ReshapeOfIota, TransposeReshapeChainIdentity, ReshapeOfRng, TransposeOfScalarBroadcast,
    TransposeOfBroadcast,
)  # fmt: skip
"""Reshapes and transposes of iotas, rngs, broadcasts and each other (after
`dot.TransposeOfDot` and `bitcast.MoveToBitcast`)."""

RESTRUCTURE: tuple[type[Simplification], ...] = (DepthToSpaceAsConcatenate, ReshapeToEmpty)
"""Depth-to-space and empty reshapes (after `factors`' reshapes and the bitcast chains)."""

HOIST: tuple[type[Simplification], ...] = (HoistTransposeOfReshape,)
"""A transpose hoisted out of reshapes (after `dynamic_slice.ReshapeOfDynamicUpdateSlice`)."""

PATTERNS: tuple[type[Simplification], ...] = (*NO_OPS, *OF_PRODUCERS, *RESTRUCTURE, *HOIST)
"""This family's rewrites, in the order they fire."""
