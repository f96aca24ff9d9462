"""`algsimp` family: reduce."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import (
    array,
    is_identity_init,
    is_scalar_broadcast,
    reducer_opcode,
    src,
)
from hlopass.rewriting import (
    is_zero,
    value_shape,
)
from hlopass.shape import is_float


class ReduceTrivial(Simplification):
    """`reduce(x, init)` removing no elements -> `reshape(x)`. XLA assumes `init` is the
    reducer's identity here, and XLA-CPU computes `x` for any init (its algsimp drops it):
    unlike reduce-window's, this rewrite keeps XLA-CPU's values."""

    OPCODES = ("reduce",)
    LAYOUT_CHANGING = True

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x = op.operands[0]
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.is_dynamic or s.num_elements != shape.num_elements:
            return None
        if s.num_elements == 0:
            return None
        if s.dims == shape.dims:
            return x
        return self.new("reshape", [x], shape, like=op)


class ReduceOfEmpty(Simplification):
    """`reduce(x, init)` of a zero-element x -> `broadcast(init)`."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        x, init = op.operands
        s, shape = array(value_shape(x)), array(op.shape)
        if s is None or shape is None or s.num_elements != 0 or shape.num_elements == 0:
            return None
        return self.new("broadcast", [init], shape, {"dimensions": ()}, like=op)


_IDEMPOTENT = ("maximum", "minimum", "and", "or")


class ReduceOfScalarBroadcast(Simplification):
    """`reduce(broadcast(s), init) -> broadcast(f(init, s))` for an idempotent reducer f
    (maximum, minimum, and, or) over a non-empty set of elements."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        b = is_scalar_broadcast(op.operands[0])
        s, shape = array(value_shape(op.operands[0])), array(op.shape)
        kind = reducer_opcode(op)
        if b is None or s is None or shape is None or kind not in _IDEMPOTENT:
            return None
        if s.num_elements == 0 or shape.num_elements == 0:
            return None
        init = op.operands[1]
        f = self.new(kind, [init, b.operands[0]], value_shape(init), like=op)  # type: ignore[arg-type]
        return self.new("broadcast", [f.result], shape, {"dimensions": ()}, like=op)


class ReduceOfConcatenate(Simplification):
    """`reduce(concatenate(a, b, ...), init)` over dims including the concatenated one ->
    `f(reduce(a, init), reduce(b, init), ...)` (reducer f one of add, multiply, maximum,
    minimum, and, or with `init` its identity; for float add/multiply the order of the
    sum changes, so those need `enable-floats-are-real`)."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        cat = src(op.operands[0], "concatenate")
        kind = reducer_opcode(op)
        shape = array(op.shape)
        if cat is None or kind is None or shape is None or len(cat.operands) < 2:
            return None
        dims = tuple(op.attr("dimensions") or ())
        if cat.attr("dimensions")[0] not in dims or not is_identity_init(op, op.operands[1]):
            return None
        float_sum = kind in ("add", "multiply") and is_float(shape.element_type)
        if float_sum and not self.opts.floats_are_real:
            return None
        parts = [
            self.new("reduce", [v, op.operands[1]], shape,
                     {"dimensions": dims, "to_apply": op.attr("to_apply")}, like=op).result
            for v in cat.operands
        ]  # fmt: skip
        acc = parts[0]
        for p in parts[1:]:
            acc = self.new(kind, [acc, p], shape, like=op).result
        return acc


class ReduceOfBroadcastIdempotent(Simplification):
    """`reduce(broadcast(x, dims), init)` over exactly the dims the broadcast added ->
    `f(broadcast(init), x)` for an idempotent reducer f (maximum, minimum, and, or), at
    least one element per reduced group, broadcast dims in order."""

    OPCODES = ("reduce",)

    def rewrite(self, op: HloOp):
        if len(op.operands) != 2:
            return None
        b = src(op.operands[0], "broadcast")
        kind = reducer_opcode(op)
        shape = array(op.shape)
        if b is None or kind not in _IDEMPOTENT or shape is None:
            return None
        x = b.operands[0]
        sx, sb = array(value_shape(x)), array(value_shape(op.operands[0]))
        if sx is None or sb is None or sx.rank == 0 or sb.num_elements == 0:
            return None  # (a scalar x: ReduceOfScalarBroadcast)
        bdims = tuple(b.attr("dimensions") or ())
        added = tuple(d for d in range(sb.rank) if d not in bdims)
        if tuple(sorted(op.attr("dimensions") or ())) != added or list(bdims) != sorted(bdims):
            return None
        if sx.dims != shape.dims or sx.element_type != shape.element_type:
            return None
        init = self.new("broadcast", [op.operands[1]], shape, {"dimensions": ()}, like=op)
        return self.new(kind, [init.result, x], shape, like=op)


class ReduceOfBatchDot(Simplification):
    """`reduce(dot(a, b), 0, add) over batch dims -> dot(a, b)` with those batch dims
    contracted instead (single-use dot of plain precision; the sum's order changes, so for
    floats it needs `enable-floats-are-real`)."""

    OPCODES = ("reduce",)
    FLOAT_UNSAFE = True

    def rewrite(self, op: HloOp):
        from hlopass.passes.algsimp.dot import plain_precision

        if len(op.operands) != 2 or self.opts.is_layout_sensitive:
            return None  # (dot rewrites do not run when layouts are fixed)
        d, init = src(op.operands[0], "dot"), op.operands[1]
        if d is None or not op.operands[0].has_one_use() or not plain_precision(d):
            return None
        shape = array(op.shape)
        if shape is None or shape.element_type in ("pred", "c64", "c128") or d.attr("sparsity"):
            return None
        if reducer_opcode(op) != "add":
            return None
        if not is_identity_init(op, init) and not (is_float(shape.element_type) and is_zero(init)):
            return None  # (+0 is not add's float identity, but this runs with fast math only)
        lb, rb = list(d.attr("lhs_batch_dims") or ()), list(d.attr("rhs_batch_dims") or ())
        dims = sorted(op.attr("dimensions") or ())
        if not dims or any(k >= len(lb) for k in dims):
            return None  # some reduced dimension is not a batch dimension
        attrs = {
            "lhs_batch_dims": tuple(x for k, x in enumerate(lb) if k not in dims),
            "rhs_batch_dims": tuple(x for k, x in enumerate(rb) if k not in dims),
            "lhs_contracting_dims": tuple(d.attr("lhs_contracting_dims") or ())
            + tuple(lb[k] for k in dims),
            "rhs_contracting_dims": tuple(d.attr("rhs_contracting_dims") or ())
            + tuple(rb[k] for k in dims),
        }
        if d.attr("operand_precision") is not None:
            attrs["operand_precision"] = d.attr("operand_precision")
        return self.new("dot", list(d.operands), shape, attrs, like=d)
