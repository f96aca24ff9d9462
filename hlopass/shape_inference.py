"""Result shapes of instructions whose text omits them (XLA's `CanInferShape` opcodes).

Covers the opcodes the importer meets without a result shape; others ask for one.
"""

from __future__ import annotations

from typing import Any

from hlopass.dialects.opcodes import OPCODES
from hlopass.shape import ArrayShape, Shape, TupleShape, array


def infer_shape(opcode: str, operands: list[Shape], attrs: dict[str, Any]) -> Shape:
    traits = OPCODES[opcode].traits
    if opcode == "tuple":
        return TupleShape(tuple(operands))
    if opcode == "get-tuple-element":
        (t,) = operands
        if not isinstance(t, TupleShape):
            raise ValueError("get-tuple-element of a non-tuple")
        index = attrs["index"]
        if not 0 <= index < len(t.elements):
            raise ValueError(f"tuple index {index} out of range")
        return t.elements[index]
    if opcode == "compare":
        a = _array(operands[0])
        return array("pred", a.dims)
    if opcode in ("select", "clamp"):
        return operands[1] if opcode == "select" else operands[1]
    if "elementwise" in traits and operands:
        a = _array(operands[0])
        return array(a.element_type, a.dims)
    raise ValueError("write the result shape explicitly")


def _array(s: Shape) -> ArrayShape:
    if not isinstance(s, ArrayShape):
        raise ValueError("expected an array operand")
    return s
