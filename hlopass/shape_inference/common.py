"""What every shape rule needs: the instruction at hand, and the checks XLA makes first."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from hlopass.ir.shape import ArrayShape, Layout, Shape, TupleShape, default_layout, is_float

MIXED_PRECISION: ContextVar[bool] = ContextVar("allow_mixed_precision", default=False)
"""XLA's `HloVerifier(allow_mixed_precision=true)`: the operands and the result of an
elementwise op may be floats of different precisions (`minimum(f16, f32) -> f32`)."""


@contextmanager
def allow_mixed_precision(allow: bool = True) -> Iterator[None]:
    """Verify (and infer shapes) as XLA's verifier with `allow_mixed_precision` does."""
    token = MIXED_PRECISION.set(allow)
    try:
        yield
    finally:
        MIXED_PRECISION.reset(token)


def mixed_floats(*element_types: str) -> bool:
    """Floats of several precisions, allowed where mixed precision is (XLA ignores the
    precision of floating-point types then, not of integers or complex)."""
    return MIXED_PRECISION.get() and all(is_float(t) for t in element_types)


class CannotInfer(ValueError):
    """XLA cannot infer this shape either; the message says why."""


@dataclass(frozen=True, slots=True)
class Ctx:
    opcode: str
    operands: list[Shape]
    # (the importer's dict, or the verifier's view of an op's attributes)
    attrs: Mapping[str, Any]
    callee_root: Callable[[str], Shape | None] | None

    def array(self, i: int) -> ArrayShape:
        """Operand `i`, which must be an array."""
        if i >= len(self.operands):
            raise CannotInfer(f"{self.opcode} needs operand {i}")
        s = self.operands[i]
        if not isinstance(s, ArrayShape):
            raise CannotInfer(
                f"expected an array for operand {i} of {self.opcode}, got {s.text(False)}"
            )
        return s

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def ints(self, name: str) -> tuple[int, ...]:
        v = self.attrs.get(name)
        if v is None:
            raise CannotInfer(f"{self.opcode} needs {name}=")
        return tuple(v)

    def root(self, attr: str = "to_apply") -> Shape:
        """The ROOT shape of the computation named by attribute `attr`."""
        name = self.attrs.get(attr)
        if isinstance(name, tuple):
            name = name[0] if name else None
        if name is None:
            raise CannotInfer(f"{self.opcode} needs {attr}=")
        shape = self.callee_root(name) if self.callee_root is not None else None
        if shape is None:
            raise CannotInfer(f"computation {name} is not defined before its use")
        return shape


def fresh(element_type: str, dims: tuple[int, ...] | list[int]) -> ArrayShape:
    """A new array with XLA's default layout (what ShapeUtil::MakeShape gives)."""
    dims = tuple(dims)
    layout: Layout | None = (
        None if element_type in ("token", "opaque") else default_layout(len(dims))
    )
    return ArrayShape(element_type, dims, (), layout)


def like(s: ArrayShape, element_type: str) -> ArrayShape:
    """`s` with another element type, its layout and dynamic dimensions kept."""
    return s if s.element_type == element_type else s.with_element_type(element_type)


def check_dims(ctx: Ctx, dims: tuple[int, ...], rank: int, what: str = "dimensions") -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise CannotInfer(f"{what} value {d} out of range for rank {rank}")
    if len(set(dims)) != len(dims):
        raise CannotInfer(f"{what} {{{','.join(map(str, dims))}}} repeats a dimension")


def tuple_of(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))
