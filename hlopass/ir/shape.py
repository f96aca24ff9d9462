"""HLO shapes and layouts as small immutable Python values.

These are the values the IR carries (wrapped by `hlopass.dialects.hlo.ShapeType`); passes,
the interpreter and the cost model read them directly. Text forms follow XLA's
`ShapeUtil::HumanStringWithLayout` and `Layout::ToString`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlopass.ir.fields import set_field

# Element types by XLA's lower-case spelling, with their width in bits.
ELEMENT_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e3m4": 8,
    "f8e5m2fnuz": 8, "f8e4m3fnuz": 8, "f8e8m0fnu": 8, "f4e2m1fn": 4,
    "c64": 64, "c128": 128,
    "token": 0, "opaque": 0,
}  # fmt: skip

SIGNED_INTS = frozenset({"s1", "s2", "s4", "s8", "s16", "s32", "s64"})
UNSIGNED_INTS = frozenset({"u1", "u2", "u4", "u8", "u16", "u32", "u64"})
INTEGRAL = SIGNED_INTS | UNSIGNED_INTS
COMPLEX = frozenset({"c64", "c128"})
FLOATS = frozenset(t for t in ELEMENT_BITS if t.startswith(("f", "bf")) and t not in ("f",))

UNBOUNDED = -1
"""Dimension size of an unbounded dynamic dimension (`?` in text)."""


def is_float(element_type: str) -> bool:
    return element_type in FLOATS


def is_integral(element_type: str) -> bool:
    return element_type in INTEGRAL


def byte_size(element_type: str) -> int:
    """Bytes per element as XLA's `ShapeUtil::ByteSizeOfPrimitiveType` counts them."""
    bits = ELEMENT_BITS[element_type]
    return max(1, bits // 8) if bits else 0


@dataclass(frozen=True, slots=True)
class Tile:
    """One tiling level; `None` stands for `*` (combine dimension)."""

    dims: tuple[int | None, ...]

    def __str__(self) -> str:
        return "(" + ",".join("*" if d is None else str(d) for d in self.dims) + ")"


@dataclass(frozen=True, slots=True)
class Layout:
    minor_to_major: tuple[int, ...]
    tiles: tuple[Tile, ...] = ()
    tail_padding_alignment: int = 1
    index_type: str | None = None
    pointer_type: str | None = None
    element_size_bits: int = 0
    memory_space: int = 0
    split_configs: tuple[tuple[int, tuple[int, ...]], ...] = ()
    physical_shape: Shape | None = None
    dynamic_metadata_prefix_bytes: int = 0
    dim_level_types: tuple[str, ...] = ()

    def has_extras(self) -> bool:
        return bool(
            self.tiles
            or self.tail_padding_alignment != 1
            or self.index_type
            or self.pointer_type
            or self.element_size_bits
            or self.memory_space
            or self.split_configs
            or self.physical_shape is not None
            or self.dynamic_metadata_prefix_bytes
        )

    def __str__(self) -> str:
        text = ",".join(map(str, self.minor_to_major))
        if self.has_extras():
            parts = ["T" + "".join(map(str, self.tiles))] if self.tiles else []
            if self.tail_padding_alignment != 1:
                parts.append(f"L({self.tail_padding_alignment})")
            if self.index_type:
                parts.append(f"#({self.index_type})")
            if self.pointer_type:
                parts.append(f"*({self.pointer_type})")
            if self.element_size_bits:
                parts.append(f"E({self.element_size_bits})")
            if self.memory_space:
                parts.append(f"S({self.memory_space})")
            for dim, indices in self.split_configs:
                parts.append(f"SC({dim}:{','.join(map(str, indices))})")
            if self.physical_shape is not None:
                parts.append(f"P({self.physical_shape.text()})")
            if self.dynamic_metadata_prefix_bytes:
                parts.append(f"M({self.dynamic_metadata_prefix_bytes})")
            text += ":" + "".join(parts)
        return "{" + text + "}"


# The text of a layout with no extras, by its minor-to-major order (a pure function of it).
_LAYOUT_TEXTS: dict[tuple[int, ...], str] = {}


def number_elements(texts: list[str], every: int = 5) -> list[str]:
    """Prefix `/*index=N*/` to every `every`-th text after the first, in place, and return
    `texts`: how XLA's printer numbers the elements of a tuple shape (every 5) and of a long
    operand list."""
    for i in range(every, len(texts), every):
        texts[i] = f"/*index={i}*/{texts[i]}"
    return texts


def default_layout(rank: int) -> Layout:
    return (
        _DEFAULT_LAYOUTS[rank]
        if rank < len(_DEFAULT_LAYOUTS)
        else Layout(tuple(range(rank - 1, -1, -1)))
    )


_DEFAULT_LAYOUTS = [Layout(tuple(range(r - 1, -1, -1))) for r in range(9)]


class Shape:
    """Base of array, tuple and buffer shapes. Instances are immutable and hashable."""

    __slots__ = ()

    is_tuple = False
    is_array = False

    def text(self, layout: bool = True) -> str:
        # Cached by hand (the shape classes are immutable dataclasses): functools.
        # cached_property takes a lock on every first read (Python 3.11), and a module's
        # first print reads every shape. Stored inline, not through `__dict__`: see
        # `hlopass.ir.fields`.
        key = "_text" if layout else "_text_no_layout"
        t = getattr(self, key, None)
        if t is None:
            t = self._render(layout)
            set_field(self, key, t)
        return t

    def _render(self, with_layout: bool) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text()

    def leaves(self) -> list[ArrayShape]:
        """Array leaves in XLA's flattening order (depth first, left to right)."""
        raise NotImplementedError

    def without_layout(self) -> Shape:
        raise NotImplementedError

    def compatible(self, other: Shape) -> bool:
        """Equal ignoring layouts (XLA's `ShapeUtil::Compatible`)."""
        return self is other or self.without_layout() == other.without_layout()


@dataclass(frozen=True, eq=True)
class ArrayShape(Shape):
    element_type: str
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None

    is_array = True

    def _render(self, with_layout: bool) -> str:
        et = self.element_type
        if et == "token" or et == "opaque":
            return et + "[]"
        dyn = self.dynamic
        if dyn:
            dims = ",".join(
                ("?" if d == UNBOUNDED else f"<={d}") if dyn[i] else str(d)
                for i, d in enumerate(self.dims)
            )
        else:
            dims = ",".join(map(str, self.dims))
        text = f"{et}[{dims}]"
        layout = self.layout
        if with_layout and layout is not None:
            if layout.has_extras():
                text += str(layout)
            elif self.dims:
                m2m = layout.minor_to_major
                lt = _LAYOUT_TEXTS.get(m2m)
                if lt is None:
                    lt = _LAYOUT_TEXTS[m2m] = str(layout)
                text += lt
        return text

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic)

    @property
    def num_elements(self) -> int:
        # Cached inline (not `functools.cached_property`, which writes the instance dict:
        # see `hlopass.ir.fields`).
        try:
            return self._num_elements  # type: ignore[attr-defined]
        except AttributeError:
            n = 1
            for d in self.dims:
                n *= d
            set_field(self, "_num_elements", n)
            return n

    def leaves(self) -> list[ArrayShape]:
        return [self]

    def without_layout(self) -> ArrayShape:
        return ArrayShape(self.element_type, self.dims, self.dynamic, None)

    def compatible(self, other: Shape) -> bool:
        """`Shape.compatible` without building the two layout-less shapes (the parser and
        the verifier ask it for most instructions)."""
        if self is other:
            return True
        if not isinstance(other, ArrayShape):
            return False  # (a tuple or buffer shape is never equal to an array's)
        return (
            self.element_type == other.element_type
            and self.dims == other.dims
            and self.dynamic == other.dynamic
        )

    def with_layout(self, layout: Layout | None) -> ArrayShape:
        return ArrayShape(self.element_type, self.dims, self.dynamic, layout)

    def with_dims(self, dims: tuple[int, ...], element_type: str | None = None) -> ArrayShape:
        """Same element type (unless given) with new static dims and the default layout."""
        et = element_type or self.element_type
        layout = None if et in ("token", "opaque") else default_layout(len(dims))
        return ArrayShape(et, tuple(dims), (), layout)

    def with_element_type(self, element_type: str) -> ArrayShape:
        return ArrayShape(element_type, self.dims, self.dynamic, self.layout)

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        if self.layout is None:
            return tuple(range(len(self.dims) - 1, -1, -1))
        return self.layout.minor_to_major

    def byte_size(self) -> int:
        return self.num_elements * byte_size(self.element_type)


@dataclass(frozen=True, eq=True)
class TupleShape(Shape):
    elements: tuple[Shape, ...] = ()

    is_tuple = True

    def _render(self, with_layout: bool) -> str:
        return "(" + ", ".join([e.text(with_layout) for e in self.elements]) + ")"

    def leaves(self) -> list[ArrayShape]:
        return [leaf for e in self.elements for leaf in e.leaves()]

    def without_layout(self) -> TupleShape:
        return TupleShape(tuple(e.without_layout() for e in self.elements))


@dataclass(frozen=True, eq=True)
class BufferShape(Shape):
    """`b(shape)`: a buffer holding an array (XLA's `BUFFER` type)."""

    inner: ArrayShape

    def _render(self, with_layout: bool) -> str:
        return f"b({self.inner.text(with_layout)})"

    def leaves(self) -> list[ArrayShape]:
        return [self.inner]

    def without_layout(self) -> BufferShape:
        return BufferShape(self.inner.without_layout())


def scalar(element_type: str) -> ArrayShape:
    return _SCALARS.setdefault(element_type, ArrayShape(element_type, (), (), _SCALAR_LAYOUT))


_SCALAR_LAYOUT = Layout(())
_SCALARS: dict[str, ArrayShape] = {}


def array(element_type: str, dims: tuple[int, ...] | list[int]) -> ArrayShape:
    """An array shape with XLA's default (major-to-minor) layout."""
    dims = tuple(dims)
    return ArrayShape(element_type, dims, (), default_layout(len(dims)))


def subshape(shape: Shape, index: tuple[int, ...]) -> Shape:
    for i in index:
        assert isinstance(shape, TupleShape)
        shape = shape.elements[i]
    return shape


def common_factors(a: tuple[int, ...], b: tuple[int, ...]) -> list[tuple[int, int]]:
    """The pairs (i, j) with prod(a[:i]) == prod(b[:j]) that bound groups of dimensions
    reshaping into each other, from (0, 0) to (len(a), len(b)) (XLA's `CommonFactors`:
    the same walk, so that the groups, and which size-1 dims join which, are XLA's)."""
    if a == b:
        return [(i, i) for i in range(len(a) + 1)]
    bounds: list[tuple[int, int]] = []
    i = j = 0
    prior_i = prior_j = -1
    while i < len(a) and j < len(b) and a[i] == b[j]:
        prior_i, prior_j = i, j
        bounds.append((i, j))
        i += 1
        j += 1
    if math.prod(a[i:]) != math.prod(b[j:]):
        return [(0, 0), (len(a), len(b))]
    if math.prod(a[i:]) == 0:
        return [*bounds, (i, j), (len(a), len(b))]
    pa = pb = 1
    while True:
        if pa == pb and (i > prior_i or j > prior_j):
            prior_i, prior_j = i, j
            bounds.append((i, j))
            continue
        in_i, in_j = i < len(a), j < len(b)
        if not (in_i or in_j):
            break
        next_a = pa < pb or (in_i and (not in_j or (pa == pb and a[i] <= b[j])))
        next_b = pb < pa or (in_j and (not in_i or (pb == pa and b[j] <= a[i])))
        if next_a:
            pa *= a[i]
            i += 1
        if next_b:
            pb *= b[j]
            j += 1
    return bounds
