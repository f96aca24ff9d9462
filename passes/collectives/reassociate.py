"""`all-reduce-reassociate` and `reduce-scatter-reassociate`: an elementwise reduction of
two compatible collectives becomes one collective of the elementwise result (XLA's
`AllReduceReassociate` and `ReduceScatterReassociate`).

`add(all-reduce(x), all-reduce(y))` is `(x0 + ... + xk) + (y0 + ... + yk)`; after the
rewrite `all-reduce(add(x, y))` computes `(x0 + y0) + ... + (xk + yk)`: the same sum in
another order (exact for integers, min, max; floats round differently). The all-reduce
form also looks through reshape, slice, convert and pad-by-the-identity between the
collective and the op, and through a dynamic-slice (a reduce-scatter written as
all-reduce + dynamic-slice); with `reassociate-converted-ar` it also reassociates
all-reduces under value-preserving converts, reducing in the wider type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, create_op, new_computation_op, new_return_op
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.names import first_free
from hlopass.ir.shape import ArrayShape, is_float, is_integral, scalar
from hlopass.passes.collectives.all_reduce_folder import (
    GROUP_KEY,
    ChannelIds,
    all_reduce_key,
    computation_kind,
    frontend_attributes,
    layout_constrained,
    reducer,
    reduction_kind,
    unique_users,
)
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    const_array,
    new_op,
    owner,
    run_patterns,
)

_LOOK_THROUGH = ("reshape", "pad", "slice", "convert")
_IEEE = ("f16", "bf16", "f32", "f64")


def identity(kind: str, element_type: str) -> np.ndarray | None:
    """XLA's `GetReductionIdentity`: 0, 1, the type's max (min), infinities where the type
    has them; none for min/max of complex numbers."""
    dtype = np.dtype(numpy_dtype(element_type))
    if kind in ("sum", "product"):
        return np.asarray(0 if kind == "sum" else 1).astype(dtype)
    if dtype.kind == "c":
        return None
    if dtype.kind == "b":
        return np.asarray(kind == "min")
    if not is_float(element_type):
        info = np.iinfo(dtype)
        return np.asarray(info.max if kind == "min" else info.min).astype(dtype)
    if element_type in _IEEE or element_type in ("f8e5m2", "f8e4m3", "f8e3m4"):
        return np.asarray(np.inf if kind == "min" else -np.inf).astype(dtype)
    info = ml_dtypes.finfo(dtype)
    return np.asarray(info.max if kind == "min" else info.min).astype(dtype)


def cast_preserves_values(src: str, dst: str) -> bool:
    """XLA's `CastPreservesValues` for the types reassociation meets: pred to anything,
    narrower to wider IEEE floats, integers to integers or floats with room for them."""
    if src == dst or src == "pred":
        return True
    if dst == "pred" or not (is_float(dst) or is_integral(dst)):
        return False
    if is_float(src):
        if src not in _IEEE or dst not in _IEEE:
            return False
        a, b = ml_dtypes.finfo(numpy_dtype(src)), ml_dtypes.finfo(numpy_dtype(dst))
        return (
            a.nmant <= b.nmant and a.maxexp <= b.maxexp and a.minexp - a.nmant >= b.minexp - b.nmant
        )
    if not is_integral(src):
        return False
    signed = np.dtype(numpy_dtype(src)).kind == "i"
    bits = np.dtype(numpy_dtype(src)).itemsize * 8 - (1 if signed else 0)
    if is_float(dst):
        return dst in _IEEE and bits <= ml_dtypes.finfo(numpy_dtype(dst)).nmant + 1
    to_signed = np.dtype(numpy_dtype(dst)).kind == "i"
    to_bits = np.dtype(numpy_dtype(dst)).itemsize * 8 - (1 if to_signed else 0)
    return bits <= to_bits and (to_signed or not signed)


def _one_user(op: HloOp) -> bool:
    return len(unique_users(op.result)) == 1


def look_through(value: SSAValue, ident: np.ndarray) -> HloOp | None:
    """XLA's `LookThroughForAllReduce`: the all-reduce under a single-user chain of
    reshape, slice, convert and pad by `ident`, or a dynamic-slice (single user) of a
    single-user all-reduce; None otherwise."""
    op = owner(value)
    if op is None:
        return None
    if op.opcode == "dynamic-slice":
        ar = owner(op.operands[0])
        ok = ar is not None and ar.opcode == "all-reduce" and _one_user(ar) and _one_user(op)
        return op if ok else None
    while op.opcode != "all-reduce":
        if not _one_user(op) or op.opcode not in _LOOK_THROUGH:
            return None
        if op.opcode == "pad":
            pad = const_array(op.operands[1])
            if pad is None or not np.array_equal(pad, ident, equal_nan=False):
                return None
        op = owner(op.operands[0])
        if op is None:
            return None
    return op if _one_user(op) else None


def _converted(value: SSAValue) -> HloOp | None:
    """The convert in `convert(all-reduce)` with one user, else None."""
    c = owner(value)
    if c is None or c.opcode != "convert" or not _one_user(c):
        return None
    ar = owner(c.operands[0])
    return c if ar is not None and ar.opcode == "all-reduce" else None


def _direct_or_converted(value: SSAValue) -> bool:
    o = owner(value)
    return o is not None and (o.opcode == "all-reduce" or _converted(value) is not None)


def _attrs(op: HloOp, *without: str) -> dict:
    return {s.name: v for s, v in op.hlo_attrs() if s.name not in without}


def _same_slices(a: HloOp, b: HloOp) -> bool:
    """XLA's `Identical` of two dynamic-slices once their operand 0 is the same."""
    return (_attrs(a, "metadata") == _attrs(b, "metadata") and a.shape == b.shape
            and list(a.operands[1:]) == list(b.operands[1:]))  # fmt: skip


@dataclass
class _Match:
    lhs: HloOp
    rhs: HloOp
    ar0: HloOp
    ar1: HloOp
    convert0: HloOp | None
    convert1: HloOp | None

    @property
    def sliced(self) -> bool:
        return self.lhs.opcode == "dynamic-slice"


def _elements(op: HloOp) -> int:
    s = op.shape
    return s.num_elements if isinstance(s, ArrayShape) else 0


def match_reassociation(op: HloOp, converted_ok: bool) -> _Match | None:
    """XLA's guards for `op(ar(x), ar(y))`, in its order."""
    if len(op.operands) != 2 or not isinstance(op.shape, ArrayShape):
        return None
    kind = reduction_kind(op.opcode, op.shape.element_type)
    ident = identity(kind, op.shape.element_type) if kind else None
    if ident is None:
        return None
    lhs, rhs = look_through(op.operands[0], ident), look_through(op.operands[1], ident)
    if lhs is None or rhs is None or lhs.opcode != rhs.opcode:
        return None
    if lhs.opcode == "dynamic-slice":
        if not lhs.operands[0].type.data.compatible(rhs.operands[0].type.data):  # type: ignore[attr-defined]
            return None
        if not _same_slices(lhs, rhs):
            return None
        ar0, ar1 = owner(lhs.operands[0]), owner(rhs.operands[0])
    else:
        ar0, ar1 = lhs, rhs
    assert ar0 is not None and ar1 is not None
    before = _elements(lhs) + (_elements(rhs) if lhs is not rhs else 0)
    if before < _elements(op):
        return None  # padding would make the one all-reduce move more than the two did
    both = _direct_or_converted(op.operands[0]) and _direct_or_converted(op.operands[1])
    c0 = _converted(op.operands[0]) if both else None
    c1 = _converted(op.operands[1]) if both else None
    promote = c0 is not None or c1 is not None
    if promote and (not converted_ok or not _compatible_converts(c0, c1)):
        return None
    if not _compatible(ar0, ar1, kind, promote):  # type: ignore[arg-type]
        return None
    # (a convert left in the chain would put values of another type through the
    # all-reduce's reducer: not XLA's guard, the verifier's)
    reduced = reducer(ar0).root.shape.element_type  # type: ignore[union-attr]
    if not promote and lhs.opcode != "dynamic-slice" and reduced != op.shape.element_type:
        return None
    return _Match(lhs, rhs, ar0, ar1, c0, c1)


def _compatible_converts(c0: HloOp | None, c1: HloOp | None) -> bool:
    def src(c: HloOp) -> str:
        return c.operands[0].type.data.element_type  # type: ignore[attr-defined]

    for c in (c0, c1):
        if c is not None and not cast_preserves_values(src(c), c.shape.element_type):  # type: ignore[attr-defined]
            return False
    return c0 is None or c1 is None or src(c0) == src(c1)


def _compatible(ar0: HloOp, ar1: HloOp, kind: str, ignore_type: bool) -> bool:
    """XLA's `AreCompatible`: equal keys (but for the type when promoting), the reducer of
    `kind`, no differing collective group keys."""
    k0, k1 = all_reduce_key(ar0), all_reduce_key(ar1)
    if k0 is None or k1 is None or computation_kind(reducer(ar0)) != kind:
        return False
    if ignore_type:
        k0, k1 = k0[:1] + k0[2:], k1[:1] + k1[2:]
    keys = frontend_attributes(ar0).get(GROUP_KEY), frontend_attributes(ar1).get(GROUP_KEY)
    return k0 == k1 and keys[0] == keys[1]


def scheduling_group(op: HloOp, key: str = "_scheduling_group_id") -> str | None:
    """The frontend attribute `key` of `op`, None when absent."""
    text = str(getattr(op.attr("frontend_attributes"), "text", op.attr("frontend_attributes")))
    m = re.search(re.escape(key) + r'="([^"]*)"', text)
    return m.group(1) if m else None


@dataclass
class ReassociateAllReduce(RewritePattern):
    """`op(all-reduce(x), all-reduce(y)) -> all-reduce(op(x, y))` (op add, multiply,
    minimum, maximum; and/or of pred), through the chains `look_through` allows.

    Guards: see `match_reassociation` (XLA's, in its order)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("add", "multiply", "minimum", "maximum", "and", "or")

    ctx: RewriteContext
    converted: bool

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        m = match_reassociation(op, self.converted)
        if m is None:
            return
        self.ctx.note(self, op, f"{m.ar0.inst_name}, {m.ar1.inst_name}")
        if m.convert0 is not None or m.convert1 is not None:
            self._promoted(op, m, rewriter)
        elif m.sliced:
            self._sliced(op, m, rewriter)
        else:
            self._plain(op, m, rewriter)

    def _plain(self, op: HloOp, m: _Match, rewriter: PatternRewriter) -> None:
        users = [u for u in op.result.uses]
        for ar in dict.fromkeys((m.ar0, m.ar1)):
            rewriter.replace_all_uses_with(ar.result, ar.operands[0])
        new = new_op(rewriter, self.ctx, "all-reduce", [op.result], op.shape, _attrs(m.ar0),
                     like=m.ar0, before=op.next_op)  # fmt: skip
        for u in users:
            u.operation.operands = [new.result if v is op.result else v
                                    for v in u.operation.operands]  # fmt: skip
            rewriter.notify_op_modified(u.operation)
        for ar in dict.fromkeys((m.ar0, m.ar1)):
            rewriter.erase(ar)

    def _sliced(self, op: HloOp, m: _Match, rewriter: PatternRewriter) -> None:
        x, y = m.ar0.operands[0], m.ar1.operands[0]
        inner = new_op(rewriter, self.ctx, op.opcode, [x, y], m.ar0.shape, _attrs(op), like=op,
                       before=op)  # fmt: skip
        ar = new_op(rewriter, self.ctx, "all-reduce", [inner.result], m.ar0.shape,
                    _attrs(m.ar0), like=m.ar0, before=op)  # fmt: skip
        ds = new_op(rewriter, self.ctx, "dynamic-slice", [ar.result, *m.lhs.operands[1:]],
                    op.shape, _attrs(m.lhs), like=m.lhs, before=op)  # fmt: skip
        rewriter.replace_all_uses_with(op.result, ds.result)
        for dead in dict.fromkeys((op, m.lhs, m.rhs, m.ar0, m.ar1)):
            rewriter.erase(dead)

    def _promoted(self, op: HloOp, m: _Match, rewriter: PatternRewriter) -> None:
        operands = []
        for c, ar in ((m.convert0, m.ar0), (m.convert1, m.ar1)):
            if c is not None:
                c.operands = [ar.operands[0]]
                rewriter.notify_op_modified(c)
                operands.append(c.result)
            else:
                operands.append(ar.operands[0])
        inner = new_op(rewriter, self.ctx, op.opcode, operands, op.shape, _attrs(op), like=op,
                       before=op)  # fmt: skip
        et = operands[0].type.data.element_type  # type: ignore[attr-defined]
        attrs = _attrs(m.ar0) | {"to_apply": self._promoted_reducer(m.ar0, et)}
        shape = op.shape.with_element_type(et)  # type: ignore[attr-defined]
        ar = new_op(rewriter, self.ctx, "all-reduce", [inner.result], shape, attrs, like=m.ar0,
                    before=op)  # fmt: skip
        rewriter.replace_all_uses_with(op.result, ar.result)
        for dead in dict.fromkeys((op, m.ar0, m.ar1)):
            rewriter.erase(dead)

    def _promoted_reducer(self, ar: HloOp, et: str) -> str:
        """XLA's `<reducer>_reassoc_promoted`: the reducer's root opcode over `et`."""
        comp = reducer(ar)
        assert comp is not None
        taken = {c.comp_name for c in comp.parent_block().ops}  # type: ignore[union-attr]
        name = first_free(f"{comp.comp_name}_reassoc_promoted", taken)
        fresh = self.ctx.names.fresh
        x = create_op("parameter", [], scalar(et), fresh("x"), {"number": 0})
        y = create_op("parameter", [], scalar(et), fresh("y"), {"number": 1})
        root = create_op(
            comp.root.opcode, [x.result, y.result], scalar(et), fresh(comp.root.opcode)
        )
        block = Block([x, y, root, new_return_op(root.result)])
        comp.parent_block().insert_op_after(new_computation_op(name, block), comp)  # type: ignore[union-attr]
        return name


@dataclass(frozen=True)
class AllReduceReassociatePass(HloModulePass):
    """`op(all-reduce(x), all-reduce(y))` -> `all-reduce(op(x, y))`."""

    name: ClassVar[str] = "all-reduce-reassociate"

    reassociate_converted_ar: bool = False
    """XLA's option: also reassociate all-reduces read through value-preserving converts
    (`add(convert(ar(x)), convert(ar(y)))` -> `ar(add(convert(x), convert(y)))`, reducing
    in the wider type with a `_reassoc_promoted` reducer)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if layout_constrained(module, ("all-reduce",)):
            return False  # as XLA
        rctx = RewriteContext.of(module, trace)
        return run_patterns(module, [ReassociateAllReduce(rctx, self.reassociate_converted_ar)])


@dataclass
class ReassociateReduceScatter(RewritePattern):
    """`op(reduce-scatter(x), reduce-scatter(y)) -> reduce-scatter(op(x, y))`.

    Guards: op a reduction kind, both operands single-operand reduce-scatters of equal
    keys (groups included), dimension and operand shape, whose reducer is op's kind, the
    same collective group key, each with no other user, not in different scheduling
    groups."""

    # the opcodes `reduction_kind` maps to a kind (and, or only on pred)
    OPCODES: ClassVar[tuple[str, ...]] = ("add", "multiply", "minimum", "maximum", "and", "or")

    ctx: RewriteContext
    channels: ChannelIds

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or len(op.operands) != 2:
            return
        shape = op.shape
        kind = (
            reduction_kind(op.opcode, shape.element_type) if isinstance(shape, ArrayShape) else None
        )
        rs0, rs1 = owner(op.operands[0]), owner(op.operands[1])
        if kind is None or rs0 is None or rs1 is None or not _scatters(rs0, rs1):
            return
        k0, k1 = all_reduce_key(rs0), all_reduce_key(rs1)
        if k0 is None or k0 != k1 or computation_kind(reducer(rs0)) != kind:
            return
        if rs0.attr("dimensions") != rs1.attr("dimensions"):
            return
        if frontend_attributes(rs0).get(GROUP_KEY) != frontend_attributes(rs1).get(GROUP_KEY):
            return
        if not (_one_user(rs0) and _one_user(rs1)):
            return
        g0, g1 = scheduling_group(rs0), scheduling_group(rs1)
        if g0 is not None and g1 is not None and g0 != g1:
            return
        self.ctx.note(self, op, f"{rs0.inst_name}, {rs1.inst_name}")
        x, y = rs0.operands[0], rs1.operands[0]
        inner = new_op(rewriter, self.ctx, op.opcode, [x, y], x.type.data, _attrs(op), like=op,  # type: ignore[attr-defined]
                       before=op)  # fmt: skip
        attrs = _attrs(rs0)
        if attrs.get("channel_id") is not None:
            attrs["channel_id"] = self.channels.take()  # never reuse a channel id
        new = new_op(rewriter, self.ctx, "reduce-scatter", [inner.result], shape, attrs,
                     like=rs0, before=op)  # fmt: skip
        if (g0 is None) != (g1 is None):
            _drop_scheduling_group(new)
        rewriter.replace_all_uses_with(op.result, new.result)
        for dead in dict.fromkeys((op, rs0, rs1)):
            rewriter.erase(dead)


def _scatters(rs0: HloOp, rs1: HloOp) -> bool:
    if rs0.opcode != "reduce-scatter" or rs1.opcode != "reduce-scatter":
        return False
    if len(rs0.operands) != 1 or len(rs1.operands) != 1:
        return False
    return rs0.operands[0].type.data.compatible(rs1.operands[0].type.data)  # type: ignore[attr-defined]


def _drop_scheduling_group(op: HloOp) -> None:
    attrs = op.attr("frontend_attributes")
    if attrs is None:
        return
    text = str(getattr(attrs, "text", attrs))
    rest = re.sub(r',?\s*_scheduling_group_id="[^"]*"', "", text).replace("{,", "{")
    op.set_attr("frontend_attributes", None if rest.replace(" ", "") == "{}" else type(attrs)(rest))


@dataclass(frozen=True)
class ReduceScatterReassociatePass(HloModulePass):
    """`op(reduce-scatter(x), reduce-scatter(y))` -> `reduce-scatter(op(x, y))`."""

    name: ClassVar[str] = "reduce-scatter-reassociate"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if layout_constrained(module, ("reduce-scatter",)):
            return False  # as XLA
        rctx = RewriteContext.of(module, trace)
        pattern = ReassociateReduceScatter(rctx, ChannelIds.of(module))
        return run_patterns(module, [pattern])
