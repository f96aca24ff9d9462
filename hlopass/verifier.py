"""Per-instruction checks of XLA's shape rules, run by the ops' `verify_`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.utils.exceptions import VerifyException

from hlopass.shape import ArrayShape, TupleShape

if TYPE_CHECKING:
    from hlopass.dialects.hlo import HloOp


def verify_instruction(op: HloOp) -> None:
    opcode = op.opcode
    shape = op.shape
    operand_shapes = [v.type.data for v in op.operands]  # type: ignore[attr-defined]
    traits = op.spec.traits
    if "elementwise" in traits and opcode not in ("select", "clamp"):
        for s in operand_shapes:
            if not isinstance(s, ArrayShape) or not isinstance(shape, ArrayShape):
                raise VerifyException(f"{op.inst_name}: elementwise op on a non-array")
            if s.dims != shape.dims:
                raise VerifyException(
                    f"{op.inst_name}: operand shape {s.text(False)} does not match "
                    f"result {shape.text(False)}"
                )
    if opcode == "get-tuple-element":
        (t,) = operand_shapes
        index = op.attr("index")
        if not isinstance(t, TupleShape) or not 0 <= index < len(t.elements):
            raise VerifyException(f"{op.inst_name}: tuple index {index} out of range")
        if not t.elements[index].compatible(shape):
            raise VerifyException(f"{op.inst_name}: result shape does not match tuple element")
    if opcode == "tuple":
        if not isinstance(shape, TupleShape) or len(shape.elements) != len(operand_shapes):
            raise VerifyException(f"{op.inst_name}: tuple shape does not match its operands")
