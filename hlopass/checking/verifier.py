"""Per-instruction checks of XLA's shape rules, run by the ops' `verify_` and by the importer
(which reports a failure at the instruction's place in the text)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard, cast

from xdsl.ir import Operation, OpResult
from xdsl.utils.exceptions import VerifyException

from hlopass.dialects.opcodes import OPCODES
from hlopass.ir.shape import UNBOUNDED, ArrayShape, Shape, TupleShape
from hlopass.shape_inference import CannotInfer, infer_shape
from hlopass.shape_inference.common import MIXED_PRECISION as MIXED_PRECISION
from hlopass.shape_inference.common import allow_mixed_precision as allow_mixed_precision
from hlopass.shape_inference.common import mixed_floats as mixed_floats

if TYPE_CHECKING:
    from hlopass.dialects.hlo import ComputationOp, HloOp

_Attr = Callable[[str], Any]


class _Inst(NamedTuple):
    """One instruction as a shape rule sees it: plain values, `attr(name)` giving an
    attribute's Python value (the importer checks an instruction before its op exists)."""

    opcode: str
    name: str
    shape: Shape
    operands: list[Shape]
    attr: _Attr


# (`_Inst(...)` goes through a Python-level `__new__`: twice as slow, on every op verified)
_new_inst: Callable[[type[_Inst], tuple[str, str, Shape, list[Shape], _Attr]], _Inst] = (
    tuple.__new__
)  # type: ignore[assignment]

_Rule = Callable[[_Inst], None]
"""A shape rule: raises `VerifyException`, naming the instruction, where it is broken."""

# Elementwise binary ops whose operands and result share one element type.
_SAME_TYPE_BINARY = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "mulhi",
})  # fmt: skip


def _static(shape: object, *others: object) -> TypeGuard[ArrayShape]:
    """All array shapes without dynamic dimensions (their sizes can be checked); narrows
    the first one to `ArrayShape`."""
    return all(isinstance(s, ArrayShape) and not s.dynamic for s in (shape, *others))


def _bounded(*shapes: object) -> bool:
    """All array shapes whose sizes are known or bounded (`<=N` counts as N, as XLA's
    `ShapeUtil::Compatible` compares bounds); false when one has an unbounded `?`."""
    return all(
        isinstance(s, ArrayShape) and (not s.dynamic or UNBOUNDED not in s.dims) for s in shapes
    )


def _dims(shape: ArrayShape) -> str:
    return shape.text(False)


# --- rules that compare the result with shape inference's ---------------------------------


class _Reads(Mapping[str, Any]):
    """An instruction's attributes as shape inference reads them: each through `attr`, so
    that the importer's check cache learns which attributes a rule read."""

    __slots__ = ("_attr",)

    def __init__(self, attr: _Attr) -> None:
        self._attr = attr

    def __getitem__(self, key: str) -> Any:
        value = self._attr(key)
        if value is None:
            raise KeyError(key)
        return value

    # (`get` and `in` without `Mapping`'s KeyError round trip: shape inference asks for
    # attributes an instruction mostly does not have, such as dot's batch dimensions)
    def get(self, key: str, default: Any = None) -> Any:
        value = self._attr(key)
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._attr(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(())  # (no rule lists the attributes: it asks for those it reads)

    def __len__(self) -> int:
        return 0


def _differs(want: Shape, got: Shape, types: bool) -> bool:
    """`got` is not the inferred `want`: another structure or other dimensions, or (with
    `types`) another element type, floats of another precision aside where mixed precision
    is allowed. A result with an unbounded dimension has sizes that cannot be checked."""
    if isinstance(want, TupleShape) or isinstance(got, TupleShape):
        if not (isinstance(want, TupleShape) and isinstance(got, TupleShape)):
            return True
        if len(want.elements) != len(got.elements):
            return True
        return any(_differs(w, g, types) for w, g in zip(want.elements, got.elements, strict=True))
    assert isinstance(want, ArrayShape)
    if not isinstance(got, ArrayShape):
        return True
    if not _bounded(got):
        return False
    if want.dims != got.dims:
        return True
    et, got_et = want.element_type, got.element_type
    return types and et != got_et and not mixed_floats(et, got_et)


def _listed(shapes: list[Shape]) -> str:
    """`f32[2], f32[4] and f32[3]`"""
    texts = [s.text(False) for s in shapes]
    return " and ".join(filter(None, (", ".join(texts[:-1]), texts[-1])))


def _what(inst: _Inst) -> str:
    """The instruction in a mismatch message: `dot of f32[4,8] and f32[8,3]`."""
    opcode, operands = inst.opcode, inst.operands
    if opcode == "pad":  # (its pad value aside)
        operands = operands[:1]
    elif opcode == "reduce":  # the inputs, without their init values
        dims = ",".join(map(str, inst.attr("dimensions") or ()))
        return f"reduce of {_listed(operands[: len(operands) // 2])} over dimensions={{{dims}}}"
    return f"{opcode} of {_listed(operands)}" if operands else opcode


def _expect(inst: _Inst) -> Shape:
    """The result shape inference gives; what it refuses is the instruction's error."""
    try:
        return infer_shape(inst.opcode, inst.operands, _Reads(inst.attr))
    except CannotInfer as e:
        raise VerifyException(f"{inst.name}: {e}") from None


def _mismatch(inst: _Inst, want: Shape, dims_only: bool = False) -> VerifyException:
    gives = f"dimensions {list(want.dims)}" if dims_only else want.text(False)  # type: ignore[union-attr]
    return VerifyException(
        f"{inst.name}: {_what(inst)} gives {gives}, not {inst.shape.text(False)}"
    )


def _inferred(gate: Callable[[_Inst], bool], types: bool) -> _Rule:
    """The rule of an opcode shape inference covers: where `gate` holds (the sizes can be
    checked), the result is the inferred shape, in its dimensions and (with `types`) its
    element types. Without `types` the result's element type is the instruction's to
    choose (dot's and convolution's preferred element type) or, as before, not checked."""

    def rule(inst: _Inst) -> None:
        if not gate(inst):
            return
        want = _expect(inst)
        if _differs(want, inst.shape, types):
            arrays = isinstance(want, ArrayShape) and isinstance(inst.shape, ArrayShape)
            raise _mismatch(inst, want, dims_only=not types and arrays)

    return rule


def _all_bounded(inst: _Inst) -> bool:
    return _bounded(inst.shape, *inst.operands)


def _two_bounded(inst: _Inst) -> bool:
    """dot and convolution: their sizes are those of the result and the two operands."""
    return _bounded(inst.shape, *inst.operands[:2])


def _all_static(inst: _Inst) -> bool:
    return _static(inst.shape, *inst.operands)


def _always(inst: _Inst) -> bool:
    return True


def _reduce_gate(inst: _Inst) -> bool:
    """Operands that do not pair inputs with init values are refused whatever their sizes;
    a reduce of several inputs has a tuple result, whose elements are compared one by one."""
    operands = inst.operands
    if len(operands) % 2 or not operands:
        return True
    return _bounded(*operands) and (len(operands) > 2 or _bounded(inst.shape))


def _concatenate_gate(inst: _Inst) -> bool:
    """A concatenate names one dimension, whatever the sizes of its operands."""
    if len(inst.attr("dimensions") or ()) != 1:
        return True
    return bool(inst.operands) and _bounded(inst.shape, *inst.operands)


_select_by_inference = _inferred(_all_static, types=False)


def _check_select(inst: _Inst) -> None:
    """Shape inference's rule but for the selector's element type, which is not checked:
    XLA's own pass tests select on an s32[] (algebraic_simplifier_test's SelectIdentical,
    run unverified there), and so do the modules the passes are checked on."""
    pred, *rest = inst.operands
    if isinstance(pred, ArrayShape) and pred.element_type != "pred":
        inst = inst._replace(operands=[pred.with_element_type("pred"), *rest])
    _select_by_inference(inst)


def _check_get_tuple_element(inst: _Inst) -> None:
    """The element's shape, its layout aside (XLA's `ShapeUtil::Compatible`)."""
    want = _expect(inst)
    if not want.compatible(inst.shape):
        raise _mismatch(inst, want)


def _check_tuple(inst: _Inst) -> None:
    """A tuple of as many elements as operands (their layouts, and their shapes as passes
    leave them, are not compared)."""
    want = _expect(inst)
    shape = inst.shape
    if not isinstance(shape, TupleShape) or len(shape.elements) != len(want.elements):  # type: ignore[union-attr]
        raise _mismatch(inst, want)


# --- rules of the verifier's own ----------------------------------------------------------


def _check_elementwise(inst: _Inst) -> None:
    """The operands have the result's dimensions; binary arithmetic keeps the element type
    (floats of other precisions aside where mixed precision is allowed); compare gives
    pred. (Faster than shape inference, on the ops most frequent by far.)"""
    opcode, name, shape, operands, _ = inst
    # `s is shape` (the common case: shapes are shared through the importer's caches)
    # short-cuts the comparisons but not the order of the checks.
    for s in operands:
        if s is shape and isinstance(s, ArrayShape):
            continue
        if not isinstance(s, ArrayShape) or not isinstance(shape, ArrayShape):
            raise VerifyException(f"{name}: elementwise op on a non-array")
        if s.dims != shape.dims:
            raise VerifyException(
                f"{name}: operand shape {s.text(False)} does not match result {shape.text(False)}"
            )
    if opcode in _SAME_TYPE_BINARY:
        et = shape.element_type  # type: ignore[union-attr]
        for s in operands:
            if s is not shape and s.element_type != et:  # type: ignore[union-attr]
                if mixed_floats(et, s.element_type):  # type: ignore[union-attr]
                    continue
                raise VerifyException(
                    f"{name}: {opcode} of {s.text(False)} does not give {shape.text(False)}"
                    if len({o.element_type for o in operands}) == 1  # type: ignore[union-attr]
                    else f"{name}: {opcode} operands have different element types: "
                    + " and ".join(o.text(False) for o in operands)
                )
    elif opcode == "compare" and shape.element_type != "pred":  # type: ignore[union-attr]
        raise VerifyException(f"{name}: compare gives pred, not {shape.text(False)}")


def _one_per_dimension(
    inst: _Inst, key: str, noun: str
) -> tuple[ArrayShape, ArrayShape, Any] | None:
    """The operand, the result and attribute `key` of a broadcast or a slice whose sizes
    can be checked (None otherwise), the attribute holding one entry per operand dimension."""
    _, name, shape, operands, attr = inst
    if not _static(shape, *operands):
        return None
    (o,) = operands
    assert isinstance(o, ArrayShape)
    entries = attr(key)
    if len(entries) != o.rank:
        raise VerifyException(
            f"{name}: {inst.opcode} has {len(entries)} {noun} but the operand {o.text(False)} "
            f"has rank {o.rank}"
        )
    return o, shape, entries


def _check_broadcast(inst: _Inst) -> None:
    """Each operand dimension maps to a result dimension of its size (or is 1). (XLA's
    parser infers another shape from `dimensions`, the sizes of new leading dimensions:
    shape inference does not give the shape the verifier checks.)"""
    name = inst.name
    checkable = _one_per_dimension(inst, "dimensions", "dimensions")
    if checkable is None:
        return
    o, shape, dims = checkable
    for i, d in enumerate(dims):
        if not 0 <= d < shape.rank:
            raise VerifyException(
                f"{name}: broadcast dimension {d} is out of range for {shape.text(False)}"
            )
        if o.dims[i] != shape.dims[d] and o.dims[i] != 1:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: broadcast maps operand dimension {i} of {o.text(False)} to "
                f"dimension {d} of {shape.text(False)}, of a different size"
            )


def _check_reshape(inst: _Inst) -> None:
    """The number of elements is kept."""
    _, name, shape, operands, _ = inst
    if _static(shape, *operands) and operands[0].num_elements != shape.num_elements:  # type: ignore[union-attr]
        raise VerifyException(
            f"{name}: reshape of {operands[0].text(False)} to {shape.text(False)} changes the "
            "number of elements"
        )


def _check_slice(inst: _Inst) -> None:
    """XLA's InferSliceShape: one in-bounds range per dimension, each giving
    `ceil((limit - start) / stride)` elements."""
    name = inst.name
    checkable = _one_per_dimension(inst, "slice", "ranges")
    if checkable is None:
        return
    o, shape, ranges = checkable
    want = []
    for i, r in enumerate(ranges):
        if not (0 <= r.start <= r.limit <= o.dims[i] and r.stride > 0):  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: slice range [{r.start}:{r.limit}:{r.stride}] is out of bounds "
                f"for dimension {i} of {o.text(False)}"
            )
        want.append(-(-(r.limit - r.start) // r.stride))
    if tuple(want) != shape.dims:
        raise VerifyException(
            f"{name}: slice of {o.text(False)} gives dimensions {want}, not {shape.text(False)}"
        )


def _check_start_indices(name: str, opcode: str, operand: ArrayShape, indices: list[Shape]) -> None:
    """One integer scalar per dimension (or XLA's older form: one vector of them)."""
    ok = (len(indices) == operand.rank and all(s.rank == 0 for s in indices)) or (  # type: ignore[union-attr]
        len(indices) == 1 and indices[0].rank == 1 and indices[0].dims == (operand.rank,)  # type: ignore[union-attr]
    )
    if not ok:
        raise VerifyException(
            f"{name}: {opcode} of {_dims(operand)} needs {operand.rank} scalar start "
            f"indices, got {len(indices)} operand(s)"
        )


def _check_dynamic_slice(inst: _Inst) -> None:
    """XLA's InferDynamicSliceShape: the operand, its start indices, and a result of
    `dynamic_slice_sizes` each within the operand."""
    _, name, shape, operands, attr = inst
    if not operands or not _bounded(shape, *operands):
        return
    o = operands[0]
    assert isinstance(o, ArrayShape) and isinstance(shape, ArrayShape)
    _check_start_indices(name, "dynamic-slice", o, operands[1:])
    sizes = tuple(attr("dynamic_slice_sizes") or ())
    if len(sizes) != o.rank or any(not 0 <= z <= d for z, d in zip(sizes, o.dims, strict=True)):
        raise VerifyException(
            f"{name}: dynamic_slice_sizes={{{','.join(map(str, sizes))}}} do not fit {_dims(o)}"
        )
    if sizes != shape.dims:
        raise VerifyException(
            f"{name}: dynamic-slice of sizes {list(sizes)} does not give {_dims(shape)}"
        )


def _check_dynamic_update_slice(inst: _Inst) -> None:
    """XLA's InferDynamicUpdateSliceShape: operand, an update of the same rank that fits
    in it, start indices; the result has the operand's dimensions."""
    _, name, shape, operands, _ = inst
    if len(operands) < 2:
        raise VerifyException(
            f"{name}: dynamic-update-slice takes an operand, an update and start indices"
        )
    if not _bounded(shape, *operands):
        return
    o, u = operands[0], operands[1]
    assert isinstance(o, ArrayShape) and isinstance(u, ArrayShape) and isinstance(shape, ArrayShape)
    _check_start_indices(name, "dynamic-update-slice", o, operands[2:])
    if u.rank != o.rank or any(a > b for a, b in zip(u.dims, o.dims, strict=True)):
        raise VerifyException(f"{name}: update {_dims(u)} does not fit in {_dims(o)}")
    if shape.dims != o.dims:
        raise VerifyException(
            f"{name}: dynamic-update-slice of {_dims(o)} does not give {_dims(shape)}"
        )


def _check_all_to_all(inst: _Inst) -> None:
    """XLA's parser: an array all-to-all names its one split dimension, if any."""
    dims = inst.attr("dimensions")
    if dims is not None and len(dims) != 1:
        raise VerifyException(
            f"{inst.name}: all-to-all takes one split dimension, got dimensions="
            f"{{{','.join(map(str, dims))}}}"
        )


def _check_dynamic_reshape(inst: _Inst) -> None:
    """One size operand per result dimension (XLA's parser aborts otherwise)."""
    _, name, shape, operands, _ = inst
    if isinstance(shape, ArrayShape) and len(operands) != 1 + shape.rank:
        raise VerifyException(
            f"{name}: dynamic-reshape to {shape.text(False)} takes the operand and "
            f"{shape.rank} size operand(s), got {len(operands) - 1}"
        )


# select and clamp are elementwise too, but broadcast scalars: select's rule is shape
# inference's, clamp has none.
_ELEMENTWISE = frozenset(
    op for op, spec in OPCODES.items() if "elementwise" in spec.traits
) - {"select", "clamp"}  # fmt: skip

_RULES: dict[str, _Rule] = {
    **dict.fromkeys(_ELEMENTWISE, _check_elementwise),
    # from shape inference
    "pad": _inferred(_all_bounded, types=True),
    "reduce": _inferred(_reduce_gate, types=False),
    "dot": _inferred(_two_bounded, types=False),
    "convolution": _inferred(_two_bounded, types=False),
    "concatenate": _inferred(_concatenate_gate, types=False),
    "transpose": _inferred(_all_static, types=False),
    "select": _check_select,
    "partition-id": _inferred(_always, types=True),
    "replica-id": _inferred(_always, types=True),
    "get-tuple-element": _check_get_tuple_element,
    "tuple": _check_tuple,
    # shape inference does not cover these (XLA's parser wants their shapes written)
    "broadcast": _check_broadcast,
    "reshape": _check_reshape,
    "slice": _check_slice,
    "dynamic-slice": _check_dynamic_slice,
    "dynamic-update-slice": _check_dynamic_update_slice,
    "all-to-all": _check_all_to_all,
    "dynamic-reshape": _check_dynamic_reshape,
}

CHECKED_OPCODES = frozenset(_RULES)
"""Opcodes with a rule; the rest pass trivially (the importer skips them outright)."""


def verify_instruction(op: HloOp) -> None:
    rule = _RULES.get(op.OPCODE)
    if rule is None:
        return
    name = op.properties["name"].data  # type: ignore[attr-defined]
    shape = op.results[0].type.data  # type: ignore[attr-defined]
    operands = [v.type.data for v in op.operands]  # type: ignore[attr-defined]
    rule(_new_inst(_Inst, (op.OPCODE, name, shape, operands, op.attr)))


def check_instruction(
    opcode: str,
    name: str,
    shape: Shape,
    operand_shapes: list[Shape],
    attr: Callable[[str], Any],
) -> None:
    """XLA's shape rules for one instruction, on plain values: `attr(name)` gives an
    attribute's Python value. Raises `VerifyException` naming the instruction `name`."""
    rule = _RULES.get(opcode)
    if rule is not None:
        rule(_new_inst(_Inst, (opcode, name, shape, operand_shapes, attr)))


def verify_module(
    module: Operation,
    only: Collection[ComputationOp] | None = None,
    touched: Mapping[ComputationOp, Collection[Operation]] | None = None,
) -> None:
    """Verify `module` (xDSL's `verify`, which runs the checks above per instruction).

    With `only`: the module-level checks (its traits: unique computation names, ...) and
    the computations in `only`, each with its instructions; instead of the module-wide
    isolation walk, the instructions of those computations are checked to use only values
    of their own computation. What a pass reported as unchanged is left alone, as a pass
    that changed nothing is (XLA's `HloPassPipeline` verifies only after a pass that
    changed the module). With `touched` as well: in a computation listed there, the
    computation's own checks and the instructions listed (those a pass created or
    edited); the others have the operands, attributes and type they verified with."""
    if only is None:
        module.verify()
        return
    from xdsl.traits import IsolatedFromAbove

    todo = {c for c in only if c.parent is not None}
    # the module's own traits (unique computation names, ...) but the isolation walk
    for trait in type(module).get_irdl_definition().traits:  # type: ignore[attr-defined]
        if not isinstance(trait, IsolatedFromAbove):
            trait.verify(module)
    # in module order (the dialect imports this module: its op classes are not at hand)
    for comp in cast("list[ComputationOp]", [c for c in module.regions[0].block.ops if c in todo]):
        block = comp.block
        some = touched.get(comp) if touched is not None else None
        ops = list(block.ops) if some is None else [o for o in some if o.parent is block]
        for op in ops:
            for v in op.operands:
                if isinstance(v, OpResult) and v.op.parent is not block:
                    raise VerifyException(
                        f"{getattr(op, 'inst_name', op.name)} in computation {comp.comp_name} "
                        "uses a value defined outside it"
                    )
        if some is None:
            comp.verify()
            continue
        comp.verify(verify_nested_ops=False)
        for op in ops:
            op.verify()
