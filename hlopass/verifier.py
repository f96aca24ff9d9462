"""Per-instruction checks of XLA's shape rules, run by the ops' `verify_` and by the importer
(which reports a failure at the instruction's place in the text)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from xdsl.utils.exceptions import VerifyException

from hlopass.dialects.opcodes import OPCODES
from hlopass.shape import ArrayShape, Shape, TupleShape

if TYPE_CHECKING:
    from hlopass.dialects.hlo import HloOp

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


# Opcodes with a rule below; the rest pass trivially (the importer skips them outright).
# select and clamp are elementwise too, but broadcast scalars: they have rules of their own.
_ELEMENTWISE = frozenset(
    op for op, spec in OPCODES.items() if "elementwise" in spec.traits
) - {"select", "clamp"}  # fmt: skip
CHECKED_OPCODES = _ELEMENTWISE | {
    "select", "broadcast", "reshape", "transpose", "slice", "concatenate",
    "get-tuple-element", "tuple",
}  # fmt: skip


def verify_instruction(op: HloOp) -> None:
    opcode = op.OPCODE
    if opcode not in CHECKED_OPCODES:
        return
    props = op.properties
    check_instruction(
        opcode,
        props["name"].data,  # type: ignore[attr-defined]
        op.results[0].type.data,  # type: ignore[attr-defined]
        [v.type.data for v in op.operands],  # type: ignore[attr-defined]
        op.attr,
    )


def check_instruction(
    opcode: str,
    name: str,
    shape: Shape,
    operand_shapes: list[Shape],
    attr: Callable[[str], Any],
) -> None:
    """XLA's shape rules for one instruction, on plain values: `attr(name)` gives an
    attribute's Python value. Raises `VerifyException` naming the instruction `name`."""
    if opcode in _ELEMENTWISE:
        # `s is shape` (the common case: shapes are shared through the importer's caches)
        # short-cuts the comparisons but not the order of the checks.
        for s in operand_shapes:
            if s is shape and isinstance(s, ArrayShape):
                continue
            if not isinstance(s, ArrayShape) or not isinstance(shape, ArrayShape):
                raise VerifyException(f"{name}: elementwise op on a non-array")
            if s.dims != shape.dims:
                raise VerifyException(
                    f"{name}: operand shape {s.text(False)} does not match "
                    f"result {shape.text(False)}"
                )
        if opcode in _SAME_TYPE_BINARY:
            et = shape.element_type  # type: ignore[union-attr]
            for s in operand_shapes:
                if s is not shape and s.element_type != et:  # type: ignore[union-attr]
                    raise VerifyException(
                        f"{name}: {opcode} of {s.text(False)} does not give {shape.text(False)}"
                        if len({o.element_type for o in operand_shapes}) == 1  # type: ignore[union-attr]
                        else f"{name}: {opcode} operands have different element types: "
                        + " and ".join(o.text(False) for o in operand_shapes)
                    )
        elif opcode == "compare" and shape.element_type != "pred":  # type: ignore[union-attr]
            raise VerifyException(f"{name}: compare gives pred, not {shape.text(False)}")
    elif opcode == "select" and _static(shape, *operand_shapes):
        pred, on_true, on_false = operand_shapes
        for s in (on_true, on_false):
            if s.dims != shape.dims:  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: operand shape {s.text(False)} does not match result {shape.text(False)}"
                )
        if pred.rank and pred.dims != shape.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: predicate shape {pred.text(False)} does not match result {shape.text(False)}"
            )
    elif opcode == "broadcast" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        dims = attr("dimensions")
        if len(dims) != o.rank:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: broadcast dimensions={{{','.join(map(str, dims))}}} has {len(dims)} "
                f"entries but the operand {o.text(False)} has rank {o.rank}"  # type: ignore[union-attr]
            )
        for i, d in enumerate(dims):
            if not 0 <= d < shape.rank:  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: broadcast dimension {d} is out of range for {shape.text(False)}"
                )
            if o.dims[i] != shape.dims[d] and o.dims[i] != 1:  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: broadcast maps operand dimension {i} of {o.text(False)} to "
                    f"dimension {d} of {shape.text(False)}, of a different size"
                )
    elif opcode == "reshape" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        if o.num_elements != shape.num_elements:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: reshape of {o.text(False)} to {shape.text(False)} changes the "
                "number of elements"
            )
    elif opcode == "transpose" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        perm = attr("dimensions")
        if sorted(perm) != list(range(o.rank)):  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: transpose dimensions={{{','.join(map(str, perm))}}} is not a "
                f"permutation of the {o.rank} dimensions of {o.text(False)}"  # type: ignore[union-attr]
            )
        if tuple(o.dims[p] for p in perm) != shape.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: transpose of {o.text(False)} does not give {shape.text(False)}"
            )
    elif opcode == "slice" and _static(shape, *operand_shapes):
        (o,) = operand_shapes
        ranges = attr("slice")
        if len(ranges) != o.rank:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: slice has {len(ranges)} ranges but the operand has rank {o.rank}"  # type: ignore[union-attr]
            )
        want = []
        for i, r in enumerate(ranges):
            if not (0 <= r.start <= r.limit <= o.dims[i] and r.stride > 0):  # type: ignore[union-attr]
                raise VerifyException(
                    f"{name}: slice range [{r.start}:{r.limit}:{r.stride}] is out of bounds "
                    f"for dimension {i} of {o.text(False)}"
                )
            want.append(-(-(r.limit - r.start) // r.stride))
        if tuple(want) != shape.dims:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: slice of {o.text(False)} gives dimensions {want}, not {shape.text(False)}"
            )
    elif opcode == "concatenate" and _static(shape, *operand_shapes) and operand_shapes:
        (d,) = attr("dimensions")
        if not 0 <= d < shape.rank:  # type: ignore[union-attr]
            raise VerifyException(f"{name}: concatenate dimension {d} is out of range")
        total = 0
        for s in operand_shapes:
            if s.rank != shape.rank or any(  # type: ignore[union-attr]
                a != b
                for i, (a, b) in enumerate(zip(s.dims, shape.dims, strict=True))
                if i != d  # type: ignore[union-attr]
            ):
                raise VerifyException(
                    f"{name}: cannot concatenate {s.text(False)} into {shape.text(False)} "
                    f"along dimension {d}"
                )
            total += s.dims[d]  # type: ignore[union-attr]
        if total != shape.dims[d]:  # type: ignore[union-attr]
            raise VerifyException(
                f"{name}: concatenated operands have {total} along dimension {d}, "
                f"result {shape.text(False)} has {shape.dims[d]}"  # type: ignore[union-attr]
            )
    if opcode == "get-tuple-element":
        (t,) = operand_shapes
        index = attr("index")
        if not isinstance(t, TupleShape) or not 0 <= index < len(t.elements):
            raise VerifyException(f"{name}: tuple index {index} out of range")
        if not t.elements[index].compatible(shape):
            raise VerifyException(f"{name}: result shape does not match tuple element")
    if opcode == "tuple" and (
        not isinstance(shape, TupleShape) or len(shape.elements) != len(operand_shapes)
    ):
        raise VerifyException(f"{name}: tuple shape does not match its operands")
