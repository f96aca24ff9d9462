"""Elementwise ops: the result has the (first) operand's dimensions and layout."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, Shape
from hlopass.shape_inference.common import CannotInfer, Ctx, like, mixed_floats

_REAL_OF = {"c64": "f32", "c128": "f64"}
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}

_SAME_TYPE_UNARY = (
    "ceil", "floor", "negate", "not", "sign", "round-nearest-afz", "round-nearest-even",
    "count-leading-zeros", "popcnt", "acos", "acosh", "asin", "asinh", "atanh", "cbrt",
    "cosine", "cosh", "erf", "exponential", "exponential-minus-one", "log", "log-plus-one",
    "logistic", "rsqrt", "sine", "sinh", "sqrt", "tan", "tanh",
)  # fmt: skip
_BINARY = (
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power",
    "atan2", "and", "or", "xor", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "mulhi",
)  # fmt: skip


def _unary(ctx: Ctx) -> Shape:
    return ctx.array(0)


def _real_part(ctx: Ctx) -> Shape:
    """abs, real and imag of a complex array give its real element type."""
    a = ctx.array(0)
    return like(a, _REAL_OF.get(a.element_type, a.element_type))


def _is_finite(ctx: Ctx) -> Shape:
    a = ctx.array(0)
    if a.element_type not in _COMPLEX_OF and not a.element_type.startswith(("f", "bf")):
        raise CannotInfer(f"is-finite needs a floating-point operand, got {a.text(False)}")
    return like(a, "pred")


def _same_dims(ctx: Ctx, a: ArrayShape, b: ArrayShape) -> None:
    if a.dims != b.dims:
        raise CannotInfer(
            f"{ctx.opcode} operands have incompatible shapes {a.text(False)} and {b.text(False)}"
        )


def _binary(ctx: Ctx) -> Shape:
    a, b = ctx.array(0), ctx.array(1)
    _same_dims(ctx, a, b)
    if a.element_type != b.element_type:
        if mixed_floats(a.element_type, b.element_type):  # the higher precision
            return a if ELEMENT_BITS[a.element_type] >= ELEMENT_BITS[b.element_type] else b
        raise CannotInfer(
            f"{ctx.opcode} operands have different element types: "
            f"{a.text(False)} and {b.text(False)}"
        )
    return a


def _compare(ctx: Ctx) -> Shape:
    return like(_binary(ctx), "pred")  # type: ignore[arg-type]


def _complex(ctx: Ctx) -> Shape:
    a = _binary(ctx)
    et = _COMPLEX_OF.get(a.element_type)  # type: ignore[union-attr]
    if et is None:
        raise CannotInfer(f"complex needs f32 or f64 parts, got {a.text(False)}")
    return like(a, et)  # type: ignore[arg-type]


def _select(ctx: Ctx) -> Shape:
    pred, on_true, on_false = ctx.array(0), ctx.array(1), ctx.array(2)
    _same_dims(ctx, on_true, on_false)
    if pred.element_type != "pred":
        raise CannotInfer(f"select needs a pred selector, got {pred.text(False)}")
    if pred.dims and pred.dims != on_true.dims:
        _same_dims(ctx, pred, on_true)
    return like(pred, on_true.element_type) if pred.dims else on_true


def _clamp(ctx: Ctx) -> Shape:
    lo, x, hi = ctx.array(0), ctx.array(1), ctx.array(2)
    for bound in (lo, hi):
        if bound.dims and bound.dims != x.dims:
            _same_dims(ctx, bound, x)
    return x


RULES: dict[str, Callable[[Ctx], Shape]] = {
    **dict.fromkeys(_SAME_TYPE_UNARY, _unary),
    "copy": _unary,
    **dict.fromkeys(("abs", "real", "imag"), _real_part),
    "is-finite": _is_finite,
    **dict.fromkeys(_BINARY, _binary),
    "compare": _compare,
    "complex": _complex,
    "select": _select,
    "clamp": _clamp,
}
