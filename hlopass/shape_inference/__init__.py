"""Result shapes of instructions whose text leaves them out, as XLA's parser infers them.

XLA's parser infers a missing result shape for the opcodes of its `CanInferShape` list with
`ShapeInference` (`xla/service/shape_inference.cc`) and asks for a written shape for every
other opcode. This package does the same, one module per opcode family; the layout of an
inferred shape is the one XLA gives (the operand's layout for elementwise ops, reverse,
sort, scatter, ...; the default layout for ops that build new dimensions).

`infer_shape` raises `CannotInfer` with the reason; the importer reports it as
`file:line:col: error: cannot infer the shape of X: reason`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hlopass.ir.shape import Shape
from hlopass.shape_inference import control, elementwise, linalg, reduction, shaping
from hlopass.shape_inference.common import CannotInfer, Ctx

__all__ = ["CannotInfer", "INFERRED", "NEEDS_SHAPE", "infer_shape"]

_RULES: dict[str, Callable[[Ctx], Shape]] = {
    **elementwise.RULES,
    **shaping.RULES,
    **reduction.RULES,
    **linalg.RULES,
    **control.RULES,
}

INFERRED = frozenset(_RULES)
"""Opcodes whose result shape may be left out (XLA's `CanInferShape`)."""

NEEDS_SHAPE: dict[str, str] = {
    "opt-barrier": "XLA's unary shape inference does not know opt-barrier",
}
"""Opcodes XLA's parser lists as inferable but cannot infer, with XLA's reason."""


def infer_shape(
    opcode: str,
    operands: list[Shape],
    attrs: Mapping[str, Any],
    callee_root: Callable[[str], Shape | None] | None = None,
) -> Shape:
    """The result shape XLA infers for `opcode` on `operands` with `attrs` (attribute
    values as the importer builds them); `callee_root(name)` gives the ROOT shape of a
    called computation (None when unknown)."""
    why = NEEDS_SHAPE.get(opcode)
    if why is not None:
        raise CannotInfer(why)
    rule = _RULES.get(opcode)
    if rule is None:
        raise CannotInfer(f"XLA's parser needs the result shape of {opcode} written")
    try:
        return rule(Ctx(opcode, operands, attrs, callee_root))
    except CannotInfer:
        raise
    except (IndexError, KeyError, TypeError, AttributeError, ValueError) as e:
        # attributes that disagree with the operands in a way no rule names: still one line
        raise CannotInfer(
            f"its attributes do not fit its operands ({type(e).__name__}: {e})"
        ) from None
