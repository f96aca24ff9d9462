"""`algsimp` family: broadcast."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import array as shape_array
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    et,
    is_scalar_broadcast,
    src,
)
from hlopass.rewriting import (
    value_shape,
)


class BroadcastOfBroadcast(Simplification):
    """`broadcast(broadcast(x, dims=d1), dims=d2) -> broadcast(x, dims=d2[d1])`."""

    OPCODES = ("broadcast",)
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        inner = src(op.operands[0], "broadcast")
        if inner is None:
            return None
        d1 = inner.attr("dimensions") or ()
        d2 = op.attr("dimensions") or ()
        dims = tuple(d2[i] for i in d1)
        return self.new("broadcast", [inner.operands[0]], op.shape, {"dimensions": dims}, like=op)


class BroadcastNoop(Simplification):
    """`broadcast(x, dims={0,..,n-1})` of x's own shape -> x."""

    OPCODES = ("broadcast",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        shape = array(op.shape)
        if s is None or shape is None or s.dims != shape.dims:
            return None
        if tuple(op.attr("dimensions") or ()) != tuple(range(s.rank)):
            return None
        return x


class BroadcastToReshape(Simplification):
    """`broadcast(x)` adding only size-1 dims, order kept -> `reshape(x)`."""

    OPCODES = ("broadcast",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s = array(value_shape(x))
        shape = array(op.shape)
        dims = tuple(op.attr("dimensions") or ())
        if s is None or shape is None or s.dims == shape.dims or s.is_dynamic or shape.is_dynamic:
            return None
        if s.num_elements != shape.num_elements or list(dims) != sorted(dims):
            return None
        if s.rank == 0:
            return None  # a scalar broadcast is already canonical
        return self.new("reshape", [x], shape, like=op)


class BroadcastSinkBinary(Simplification):
    """`f(broadcast(a, dims), broadcast(b, dims)) -> broadcast(f(a, b), dims)` for an
    elementwise binary f (a and b of one shape; the op runs on the smaller arrays)."""

    OPCODES = (
        "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
        "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
        "shift-right-logical", "compare", "complex",
    )  # fmt: skip
    OPTION = "enable_sink_broadcast"
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        ba, bb = (src(v, "broadcast") for v in op.operands)
        if ba is None or bb is None or ba is bb:
            return None
        a, b = ba.operands[0], bb.operands[0]
        sa, sb, shape = array(value_shape(a)), array(value_shape(b)), array(op.shape)
        if sa is None or sb is None or shape is None or sa.dims != sb.dims:
            return None
        dims = tuple(ba.attr("dimensions") or ())
        if dims != tuple(bb.attr("dimensions") or ()) or sa.num_elements >= shape.num_elements:
            return None
        small = shape_array(shape.element_type, list(sa.dims))
        attrs = {"direction": op.attr("direction")} if op.OPCODE == "compare" else None
        if op.OPCODE == "compare" and op.attr("type") is not None:
            attrs["type"] = op.attr("type")  # type: ignore[index]
        inner = self.new(op.OPCODE, [a, b], small, attrs, like=op)
        return self.new("broadcast", [inner.result], shape, {"dimensions": dims}, like=op)


class BroadcastDropDegenerateDims(Simplification):
    """`broadcast(x, dims)` where x has size-1 dimensions ->
    `broadcast(reshape(x without them), dims without them)` (XLA's canonical form: only
    the dims that carry data are mapped)."""

    OPCODES = ("broadcast",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or shape.is_dynamic:
            return None
        dims = tuple(op.attr("dimensions") or ())
        keep = [i for i in range(s.rank) if s.dims[i] != 1]
        if len(keep) == s.rank:
            return None
        r = src(x, "reshape")
        if r is not None and _only_inserts_ones(r):
            return None  # XLA drops such a reshape instead (BroadcastOfDegenerateReshape)
        small = shape_array(s.element_type, [s.dims[i] for i in keep])
        r = self.new("reshape", [x], small, like=op)
        return self.new("broadcast", [r.result], shape,
                        {"dimensions": tuple(dims[i] for i in keep)}, like=op)  # fmt: skip


class BroadcastSinkUnary(Simplification):
    """`f(broadcast(x, dims)) -> broadcast(f(x), dims)` for an elementwise unary f (XLA's
    `TryToSinkBroadcastAfterOpWithUniqueNonScalarOperand`: f then runs on the smaller x)."""

    OPCODES = (
        "abs", "negate", "exponential", "exponential-minus-one", "log", "log-plus-one",
        "sqrt", "rsqrt", "cbrt", "sine", "cosine", "tan", "tanh", "logistic", "floor",
        "ceil", "round-nearest-afz", "round-nearest-even", "sign", "not", "is-finite",
        "convert", "real", "imag", "popcnt", "count-leading-zeros", "erf",
    )  # fmt: skip
    OPTION = "enable_sink_broadcast"
    """Not copy (XLA keeps copies: they change layouts) nor fusion."""
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        b = src(op.operands[0], "broadcast")
        if b is None or op.attr("result_accuracy") is not None:
            return None  # (an accuracy request is not carried over to the new op)
        x = b.operands[0]
        sx, shape = array(value_shape(x)), array(op.shape)
        if sx is None or shape is None or shape.rank == 0:
            return None  # (XLA: a broadcast to a scalar is left alone)
        if sx.num_elements >= shape.num_elements:
            return None  # nothing to gain (a no-op broadcast is removed by BroadcastNoop)
        inner = self.new(op.OPCODE, [x], sx.with_element_type(shape.element_type), like=op)
        return self.new("broadcast", [inner.result], shape,
                        {"dimensions": tuple(b.attr("dimensions") or ())}, like=op)  # fmt: skip


class BroadcastSinkBinaryWithScalar(Simplification):
    """`f(broadcast(x, dims), broadcast(s)) -> broadcast(f(x, broadcast(s)), dims)` for an
    elementwise binary f and a scalar s (either side): the broadcast is f's unique
    non-scalar operand, and f then runs on x's smaller shape."""

    OPCODES = BroadcastSinkBinary.OPCODES
    OPTION = "enable_sink_broadcast"
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        ops = list(op.operands)
        big = [k for k, v in enumerate(ops) if is_scalar_broadcast(v) is None]
        if len(big) != 1 or (b := src(ops[big[0]], "broadcast")) is None:
            return None
        x = b.operands[0]
        sx, shape = array(value_shape(x)), array(op.shape)
        if sx is None or shape is None or sx.rank == 0 or sx.num_elements >= shape.num_elements:
            return None
        k = 1 - big[0]
        s = is_scalar_broadcast(ops[k])
        assert s is not None
        small_s = self.new("broadcast", [s.operands[0]], sx.with_element_type(et(s)),
                           {"dimensions": ()}, like=s)  # fmt: skip
        args = [x, x]
        args[k] = small_s.result
        attrs = None
        if op.OPCODE == "compare":
            attrs = {"direction": op.attr("direction")}
            if op.attr("type") is not None:
                attrs["type"] = op.attr("type")
        inner = self.new(op.OPCODE, args, sx.with_element_type(shape.element_type), attrs, like=op)
        return self.new("broadcast", [inner.result], shape,
                        {"dimensions": tuple(b.attr("dimensions") or ())}, like=op)  # fmt: skip


class BroadcastSinkTernary(Simplification):
    """`f(broadcast(a, dims), broadcast(b, dims), broadcast(c, dims)) ->
    broadcast(f(a, b, c), dims)` for select and clamp, where each operand is either a
    broadcast of x's shape with the same dims, a scalar broadcast (re-broadcast to x's
    shape) or a scalar (clamp bounds, select predicate: kept as is)."""

    OPCODES = ("select", "clamp")
    OPTION = "enable_sink_broadcast"
    OPERAND_FROM = frozenset({"broadcast"})

    def rewrite(self, op: HloOp):
        shape = array(op.shape)
        big = [b for v in op.operands if (b := src(v, "broadcast")) is not None
               and is_scalar_broadcast(v) is None]  # fmt: skip
        if shape is None or not big:
            return None
        dims = tuple(big[0].attr("dimensions") or ())
        sx = array(value_shape(big[0].operands[0]))
        if sx is None or sx.num_elements >= shape.num_elements:
            return None
        kinds = [_sink_kind(v, dims, sx.dims) for v in op.operands]
        if None in kinds:
            return None  # some operand is neither a scalar nor a compatible broadcast
        args = []
        for v, kind in zip(op.operands, kinds, strict=True):
            if kind == "scalar":
                args.append(v)
            elif kind == "scalar-broadcast":
                sb = src(v, "broadcast")
                assert sb is not None
                args.append(self.new("broadcast", [sb.operands[0]], sx.with_element_type(et(v)),
                                     {"dimensions": ()}, like=sb).result)  # fmt: skip
            else:
                args.append(src(v, "broadcast").operands[0])  # type: ignore[union-attr]
        inner = self.new(op.OPCODE, args, sx.with_element_type(shape.element_type), like=op)
        return self.new("broadcast", [inner.result], shape, {"dimensions": dims}, like=op)


def _sink_kind(v, dims: tuple[int, ...], small: tuple[int, ...]) -> str | None:
    """How operand `v` moves below a sunk broadcast: "scalar" (stays), "scalar-broadcast"
    (re-broadcast to the small shape), "broadcast" (its operand, of the small shape)."""
    s = array(value_shape(v))
    if s is not None and s.rank == 0:
        return "scalar"
    if is_scalar_broadcast(v) is not None:
        return "scalar-broadcast"
    b = src(v, "broadcast")
    if b is None or tuple(b.attr("dimensions") or ()) != dims:
        return None
    sa = array(value_shape(b.operands[0]))
    return "broadcast" if sa is not None and sa.dims == small else None


def _only_inserts_ones(reshape: HloOp) -> bool:
    """`reshape` only inserts size-1 dims into its operand's shape."""
    from hlopass.passes.algsimp.factors import inserted_ones

    a, b = array(value_shape(reshape.operands[0])), array(reshape.shape)
    return a is not None and b is not None and inserted_ones(a.dims, b.dims) is not None


class BroadcastIsTranspose(Simplification):
    """`broadcast(x, dims)` of x's own rank and size (dims a permutation) ->
    `transpose(x, inverse(dims))`."""

    OPCODES = ("broadcast",)

    def rewrite(self, op: HloOp):
        x = op.operands[0]
        sx, shape = array(value_shape(x)), array(op.shape)
        if sx is None or shape is None or sx.rank != shape.rank or sx.rank < 2:
            return None
        if sx.is_dynamic or shape.is_dynamic or sx.num_elements != shape.num_elements:
            return None
        dims = tuple(op.attr("dimensions") or ())
        if sorted(dims) != list(range(sx.rank)) or dims == tuple(range(sx.rank)):
            return None
        inverse = [0] * sx.rank
        for i, d in enumerate(dims):
            inverse[d] = i
        return self.new("transpose", [x], op.shape, {"dimensions": tuple(inverse)}, like=op)


# The family's rewrites in groups, each in the order its rewrites fire: `algsimp.PATTERNS`
# runs each group where it falls among the other families' rewrites of the same opcodes.
BROADCASTS: tuple[type[Simplification], ...] = (
    BroadcastOfBroadcast, BroadcastNoop, BroadcastToReshape, BroadcastDropDegenerateDims,
    BroadcastSinkTernary,
)  # fmt: skip
"""Broadcasts of broadcasts, no-op and reshape-like broadcasts; select sinking."""

SINK: tuple[type[Simplification], ...] = (BroadcastSinkBinary, BroadcastSinkUnary)
"""Elementwise ops of broadcasts made broadcasts of the op (after each family's own
rewrite of those ops)."""

SINK_WITH_SCALAR: tuple[type[Simplification], ...] = (BroadcastSinkBinaryWithScalar,)
"""The same with one broadcast scalar operand (after the signed divisions, the rsqrt
rewrites and the iota compares, before the constant-array reassociations)."""

IS_TRANSPOSE: tuple[type[Simplification], ...] = (BroadcastIsTranspose,)
"""A broadcast that only permutes dims made a transpose (after `factors`)."""

PATTERNS: tuple[type[Simplification], ...] = (*BROADCASTS, *SINK, *SINK_WITH_SCALAR, *IS_TRANSPOSE)
"""This family's rewrites, in the order they fire."""
