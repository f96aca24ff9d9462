"""Tuples, control flow, tokens and ids."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.ir.shape import Shape, TupleShape
from hlopass.shape_inference.common import CannotInfer, Ctx, fresh


def _tuple(ctx: Ctx) -> Shape:
    return TupleShape(tuple(ctx.operands))


def _get_tuple_element(ctx: Ctx) -> Shape:
    (t,) = ctx.operands or (None,)
    if not isinstance(t, TupleShape):
        raise CannotInfer("get-tuple-element of a non-tuple")
    index = ctx.attr("index")
    if index is None or not 0 <= index < len(t.elements):
        raise CannotInfer(f"tuple index {index} out of range for {t.text(False)}")
    return t.elements[index]


def _while(ctx: Ctx) -> Shape:
    if len(ctx.operands) != 1:
        raise CannotInfer("while takes one operand")
    return ctx.operands[0]


def _call(ctx: Ctx) -> Shape:
    return ctx.root("to_apply")


def _conditional(ctx: Ctx) -> Shape:
    if "branch_computations" in ctx.attrs:
        return ctx.root("branch_computations")
    return ctx.root("true_computation")


def _after_all(ctx: Ctx) -> Shape:
    return fresh("token", ())


def _add_dependency(ctx: Ctx) -> Shape:
    if len(ctx.operands) != 2:
        raise CannotInfer("add-dependency takes two operands")
    return ctx.operands[0]


def _id(ctx: Ctx) -> Shape:
    return fresh("u32", ())


def _domain(ctx: Ctx) -> Shape:
    return ctx.operands[0]


RULES: dict[str, Callable[[Ctx], Shape]] = {
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    "while": _while,
    "call": _call,
    "conditional": _conditional,
    "after-all": _after_all,
    "add-dependency": _add_dependency,
    "partition-id": _id,
    "replica-id": _id,
    "domain": _domain,
}
