"""Constant literals: numpy-backed values, XLA's text form, and element dtypes."""

from __future__ import annotations

import math
import re
import struct
from functools import cache
from typing import Any, cast

import ml_dtypes
import numpy as np

from hlopass.ir import narrowing
from hlopass.ir.shape import ArrayShape, Shape, TupleShape

_DTYPES: dict[str, object] = {
    "pred": np.bool_,
    "s1": np.int8, "s2": ml_dtypes.int2, "s4": ml_dtypes.int4, "s8": np.int8,
    "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u1": np.uint8, "u2": ml_dtypes.uint2, "u4": ml_dtypes.uint4, "u8": np.uint8,
    "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "f8e5m2": ml_dtypes.float8_e5m2, "f8e4m3": ml_dtypes.float8_e4m3,
    "f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz,
    "f8e3m4": ml_dtypes.float8_e3m4, "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "f8e8m0fnu": ml_dtypes.float8_e8m0fnu,
    "f4e2m1fn": ml_dtypes.float4_e2m1fn,
    "c64": np.complex64, "c128": np.complex128,
}  # fmt: skip


def numpy_dtype(element_type: str) -> np.dtype:
    """The numpy dtype holding values of an HLO element type."""
    try:
        return np.dtype(_DTYPES[element_type])  # type: ignore[arg-type]
    except KeyError:
        raise ValueError(f"element type {element_type} has no numpy dtype") from None


_UNKNOWN = object()
"""A cached value not computed yet."""


class Literal:
    """A constant's value: an ndarray, a tuple of literals, or `None` when elided (`{...}`).

    Compared and hashed by value (bit pattern), so CSE can merge identical constants.
    """

    __slots__ = ("array", "elements", "_key", "_splat")

    def __init__(
        self, array: np.ndarray | None = None, elements: tuple[Literal, ...] | None = None
    ):
        if array is not None and array.flags.writeable:
            # Read-only (a view: the caller's array is left as it is): the key below and
            # the printer's text are cached on the literal's attribute, by value.
            array = array.view()
            array.flags.writeable = False
        self.array = array
        self.elements = elements
        self._key: object = None
        self._splat: object = _UNKNOWN

    @property
    def elided(self) -> bool:
        if self.elements is not None:
            return any(e.elided for e in self.elements)
        return self.array is None

    def splat(self) -> Any:
        """The one value of an array literal whose elements are all equal (a Python int or
        bool for integer and predicate types, a numpy scalar for float and complex ones),
        else None (no array, no elements, elements that differ: NaNs never equal).
        Computed once: algsimp's patterns ask it of the same constants thousands of times."""
        if self._splat is _UNKNOWN:
            arr = self.array
            value = None
            if arr is not None and arr.size:
                first = arr.reshape(-1)[0]
                if arr.size == 1 or np.all(arr == first):
                    value = first.item() if arr.dtype.kind in "biu" else first
            self._splat = value
        return self._splat

    def key(self) -> object:
        if self._key is None:
            if self.elements is not None:
                self._key = tuple(e.key() for e in self.elements)
            elif self.array is None:
                self._key = ("elided", id(self))
            else:
                self._key = (str(self.array.dtype), self.array.shape, self.array.tobytes())
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Literal) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        if self.elements is not None:
            return f"Literal({self.elements!r})"
        return "Literal(...)" if self.array is None else f"Literal({self.array!r})"


# --- element formatting -------------------------------------------------------------------


@cache
def _float_digits(element_type: str) -> tuple[int, int]:
    """(digits10, max_digits10) of a float type, as std::numeric_limits defines them."""
    info = ml_dtypes.finfo(_DTYPES[element_type])  # type: ignore[arg-type]
    p = info.nmant + 1
    return max(0, math.floor((p - 1) * math.log10(2))), math.ceil(p * math.log10(2) + 1)


def _g(v: float, digits: int) -> str:
    return "%.*g" % (digits, v)


def _nan_text(x: np.generic, element_type: str) -> str:
    """NaN with XLA's sign and payload spelling (`-nan`, `nan(0x1)`)."""
    bits = int(np.asarray(x).view(np.dtype(f"u{np.asarray(x).dtype.itemsize}")))
    nbits = np.asarray(x).dtype.itemsize * 8
    negative = bool(bits >> (nbits - 1)) if nbits > 0 else False
    info = ml_dtypes.finfo(_DTYPES[element_type])  # type: ignore[arg-type]
    mant_mask = (1 << info.nmant) - 1
    payload = bits & mant_mask
    quiet = 1 << (info.nmant - 1) if info.nmant > 0 else 0
    text = "-nan" if negative else "nan"
    if element_type in ("f16", "bf16", "f32", "f64") and payload != quiet:
        text += f"(0x{payload:x})"
    return text


_NEG_ZERO = "-0.0"
"""How we print negative zero. XLA prints `-0`, which its parser reads back as +0.0; `-0.0`
reads back as -0.0 in both parsers (the one intended difference from XLA's printer)."""


def format_float_element(x: object, element_type: str) -> str:
    v = float(x)  # type: ignore[arg-type]
    if v == 0 and math.copysign(1.0, v) < 0:
        return _NEG_ZERO
    if v != v:
        return _nan_text(x, element_type)  # type: ignore[arg-type]
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    d10, dmax = _float_digits(element_type)
    if element_type not in ("f32", "f64"):
        return _g(v, dmax)  # XLA prints narrow floats with max_digits10 digits
    text = _g(v, d10)
    dtype = _DTYPES[element_type]
    if np.asarray(float(text), dtype=np.float64).astype(dtype) == np.asarray(x, dtype=dtype):  # type: ignore[call-overload]
        return text
    return _g(v, dmax)


_F32_MAX = float(np.finfo(np.float32).max)


def _c64_part(x: object, part: str) -> str:
    """A complex part. XLA's parser reads c64 parts as doubles and rejects one beyond the f32
    range, so the shortest text of +-FLT_MAX (3.40282347e+38, above it) is written with 17
    digits instead, which reads back exactly (XLA prints the shorter, unreadable one)."""
    text = format_float_element(x, part)
    if part == "f32" and math.isfinite(float(x)) and abs(float(text)) > _F32_MAX:  # type: ignore[arg-type]
        return "%.17g" % float(x)  # type: ignore[arg-type]
    return text


def _format_element(x: object, element_type: str, in_array: bool) -> str:
    if element_type == "pred":
        if in_array:
            return "1" if x else "0"
        return "true" if x else "false"
    if element_type in ("c64", "c128"):
        part = "f32" if element_type == "c64" else "f64"
        c = complex(x)  # type: ignore[arg-type]
        re_ = np.float32(c.real) if part == "f32" else c.real
        im = np.float32(c.imag) if part == "f32" else c.imag
        return f"({_c64_part(re_, part)}, {_c64_part(im, part)})"
    if element_type[0] in "su":
        return str(int(x))  # type: ignore[call-overload]
    return format_float_element(x, element_type)


def _elements_as_text(arr: np.ndarray, element_type: str, in_array: bool) -> list[str]:
    flat = arr.reshape(-1)
    if element_type[0] in "su" or element_type == "pred":
        if element_type == "pred":
            return (
                ["1" if b else "0" for b in flat.tolist()]
                if in_array
                else ["true" if b else "false" for b in flat.tolist()]
            )
        return [str(v) for v in flat.astype(object).tolist()]
    if element_type in ("f32", "f64") and in_array:
        return _fast_float_texts(flat, element_type)
    return [_format_element(x, element_type, in_array) for x in flat]


def _fast_float_texts(flat: np.ndarray, element_type: str) -> list[str]:
    out = [_float_text(v, element_type) for v in flat.tolist()]
    return [
        t if t is not None else format_float_element(flat[i], element_type)
        for i, t in enumerate(out)
    ]


# Float types whose `ndarray.item()` is an exact Python float.
_PYTHON_FLOAT_TYPES = frozenset(("f16", "f32", "f64"))


def _float_text(v: float, element_type: str) -> str | None:
    """`format_float_element` of a finite value (a Python float) of a `_PYTHON_FLOAT_TYPES`
    type, without numpy scalars; None for NaN and infinities."""
    if v != v or math.isinf(v):
        return None
    if v == 0 and math.copysign(1.0, v) < 0:
        return _NEG_ZERO
    d10, dmax = _float_digits(element_type)
    if element_type == "f16":
        return "%.*g" % (dmax, v)  # narrow floats: max_digits10 digits
    text = "%.*g" % (d10, v)
    if element_type == "f64":
        return text if float(text) == v else "%.*g" % (dmax, v)
    try:  # round to f32 as numpy does (to nearest, ties to even)
        ok = _F32.unpack(_F32.pack(float(text)))[0] == v
    except OverflowError:  # rounds past the largest f32: numpy gives inf, never `v`
        ok = False
    return text if ok else "%.*g" % (dmax, v)


_F32 = struct.Struct("f")


_SCALAR_TEXTS: dict[tuple[str, Any, bytes], str] = {}
_SCALAR_TEXTS_MAX = 4096


def _scalar_text(arr: np.ndarray, et: str) -> str:
    """The text of a 0-d array holding a value of element type `et`."""
    if et in _PYTHON_FLOAT_TYPES:
        text = _float_text(arr.item(), et)
        if text is not None:
            return text
    return _format_element(arr.reshape(()).item() if et[0] in "su" or et == "pred"
                           else arr.reshape(())[()], et, False)  # fmt: skip


def format_literal(lit: Literal, shape: Shape) -> str:
    """The literal as XLA's one-line printer writes it inside `constant(...)`."""
    if isinstance(shape, TupleShape):
        assert lit.elements is not None
        inner = ", ".join(
            format_literal(e, s) for e, s in zip(lit.elements, shape.elements, strict=True)
        )
        return "( " + inner + " )" if inner else "()"
    assert isinstance(shape, ArrayShape)
    if lit.array is None:
        return "{...}"
    et = shape.element_type
    dims = shape.dims
    rank = len(dims)
    if rank == 0:
        # A module repeats few scalars (0, 1, its epsilon): each value's text is made once
        # (2.4 us a constant, ~0.6 ms of seed 001's first print before), keyed by its bits.
        arr = lit.array
        key = (et, arr.dtype, arr.tobytes())
        text = _SCALAR_TEXTS.get(key)
        if text is None:
            if len(_SCALAR_TEXTS) >= _SCALAR_TEXTS_MAX:
                _SCALAR_TEXTS.clear()
            text = _SCALAR_TEXTS[key] = _scalar_text(arr, et)
        return text
    texts = _elements_as_text(lit.array, et, True)
    pos = 0
    parts: list[str] = []
    append = parts.append

    def rec(level: int, indices: list[int]) -> None:
        nonlocal pos
        remaining = rank - level
        size = dims[level]
        # opening brace
        if rank == 1:
            append("{")
        elif remaining == 1:
            append("{" if size <= 1 else "{ ")
        elif rank > 3 and indices:
            append(f"{{ /*i{len(indices) - 1}={indices[-1]}*/" + (" " if size > 0 else ""))
        else:
            append("{ ")
        if remaining == 1:
            append(", ".join(texts[pos : pos + size]))
            pos += size
        else:
            for i in range(size):
                indices.append(i)
                rec(level + 1, indices)
                indices.pop()
                if i < size - 1:
                    append(", ")
        if rank == 1:
            append("}")
        elif remaining == 1:
            append("}" if size <= 1 else " }")
        else:
            append(" }")

    rec(0, [])
    return "".join(parts)


# --- parsing ------------------------------------------------------------------------------

_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_NAN_PAYLOAD = re.compile(r"(-?)nan\(0x([0-9a-fA-F]+)\)")


def _parse_float_token(tok: str, element_type: str) -> np.generic:
    # `a[()]` of a 0-d array is a scalar; numpy's stubs type it as an array, hence the casts
    m = _NAN_PAYLOAD.fullmatch(tok)
    dtype = np.dtype(_DTYPES[element_type])  # type: ignore[arg-type]
    if m:
        nbits = dtype.itemsize * 8
        info = ml_dtypes.finfo(dtype)
        exp_bits = nbits - 1 - info.nmant
        bits = (((1 << exp_bits) - 1) << info.nmant) | int(m.group(2), 16)
        if m.group(1):
            bits |= 1 << (nbits - 1)
        return cast(
            np.generic, np.array(bits, dtype=np.dtype(f"u{dtype.itemsize}")).view(dtype)[()]
        )
    if tok in ("-nan",):
        return cast(np.generic, np.array(-np.float64("nan")).astype(dtype)[()])
    # `-0` is -0.0 here (XLA reads +0: see _convert_tokens)
    return cast(np.generic, narrowing.narrow(np.array(float(tok)), dtype)[()])


class LiteralSyntaxError(ValueError):
    pass


def parse_array_text(text: str, shape: ArrayShape) -> np.ndarray:
    """Parse the body of an array literal (braces and all) into an ndarray of `shape`.

    Raises LiteralSyntaxError with a message when the element count or values don't fit.
    """
    et = shape.element_type
    body = _COMMENT.sub(" ", text) if "/*" in text else text
    if et in ("c64", "c128"):
        arr = _complex_elements(body, et)
    else:
        tokens = body.replace("{", ",").replace("}", ",").split(",")
        tokens = [t.strip() for t in tokens]
        tokens = [t for t in tokens if t]
        try:
            arr = _convert_tokens(tokens, et)
        except (ValueError, OverflowError) as e:
            raise LiteralSyntaxError(f"invalid {et} literal element: {e}") from None
    expected = shape.num_elements
    if arr.size != expected:
        raise LiteralSyntaxError(
            f"literal has {arr.size} elements but shape {shape.text()} needs {expected}"
        )
    return arr.reshape(shape.dims)


# One piece of a complex array literal: a `(re, im)` pair, a separator, or anything else
# (group 3), which is an error.
# a part is a number, inf or nan, a NaN with its payload `nan(0x1)` included
_COMPLEX_PART = r"[^,(){}\s]++(?:\([^()]*+\))?+"
_COMPLEX_PIECE = re.compile(
    rf"\(\s*+({_COMPLEX_PART})\s*+,\s*+({_COMPLEX_PART})\s*+\)|[\s{{}},]++|(.)", re.S
)


def _complex_elements(body: str, et: str) -> np.ndarray:
    """The `(re, im)` elements of a complex literal; every other character must be a brace,
    comma or blank (a malformed pair is an error, never skipped). As XLA's parser, `(nan, x)`
    reads as `(nan, nan)`: a NaN real part (sign and payload included) is copied into the
    imaginary part."""
    part = "f32" if et == "c64" else "f64"
    reals, imags = [], []
    for m in _COMPLEX_PIECE.finditer(body):
        if m.group(3) is not None:
            rest = body[m.start() :].split("\n", 1)[0][:20]
            raise LiteralSyntaxError(f"invalid {et} literal: expected (real, imag) at {rest!r}")
        if m.group(1) is None:
            continue
        try:
            reals.append(_parse_float_token(m.group(1), part))
            imags.append(_parse_float_token(m.group(2), part))
        except (ValueError, OverflowError):
            raise LiteralSyntaxError(
                f"invalid {et} literal element ({m.group(1)}, {m.group(2)})"
            ) from None
    re_ = np.array(reals, numpy_dtype(part))
    im = np.where(np.isnan(re_), re_, np.array(imags, numpy_dtype(part)))
    arr = np.empty(len(reals), numpy_dtype(et))
    arr.real, arr.imag = re_, im
    return arr


def _convert_tokens(tokens: list[str], et: str) -> np.ndarray:
    dtype = numpy_dtype(et)
    if et == "pred":
        vals = []
        for t in tokens:
            if t in ("true", "false"):
                vals.append(t == "true")
            elif _is_int_token(t):  # XLA: any integer, nonzero is true
                vals.append(int(t) != 0)
            else:
                raise ValueError(f"{t!r} is not a pred value")
        return np.array(vals, dtype=np.bool_)
    if et[0] in "su":
        ints = [int(t) for t in tokens]
        bits = int(et[1:])
        lo, hi = (
            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if et[0] == "s" else (0, (1 << bits) - 1)
        )
        if bits == 64:  # XLA: any s64 or u64 number, as its 64 bits
            lo, hi = -(1 << 63), (1 << 64) - 1
        for v in ints:
            if not lo <= v <= hi:
                raise ValueError(f"{v} out of range for {et}")
        mask = (1 << bits) - 1
        if et[0] == "u":
            ints = [v & mask for v in ints]
        elif bits == 64:
            ints = [(v & mask) - (1 << 64) if v & (1 << 63) else v for v in ints]
        if et in ("s1", "u1"):
            return np.array(ints, dtype=dtype)
        return np.array(ints, dtype=np.int64 if et[0] == "s" else np.uint64).astype(dtype)
    simple = all(not t.startswith(("nan(", "-nan")) for t in tokens)
    if simple:
        # `-0` is -0.0. XLA lexes it as the integer 0 (+0.0); we keep the sign, because XLA's
        # printer writes -0.0 as `-0`, so a `-0` in XLA's output meant -0.0 (our printer
        # writes `-0.0`, which both parsers read as -0.0).
        f64 = np.array([float(t) for t in tokens], dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            arr = narrowing.narrow(f64, dtype)
        wide = np.complex128 if arr.dtype.kind == "c" else np.float64  # (no ComplexWarning)
        overflow = np.flatnonzero(np.isfinite(f64) & ~np.isfinite(arr.astype(wide)))
        if overflow.size:  # XLA rejects a finite value that becomes inf (or nan) in `et`
            raise ValueError(f"value {tokens[int(overflow[0])]} is out of range for {et}")
        return arr
    return np.array([_parse_float_token(t, et) for t in tokens], dtype=dtype)


def _is_int_token(tok: str) -> bool:
    return tok.lstrip("-+").isdigit()


def parse_scalar_token(tok: str, shape: ArrayShape) -> np.ndarray:
    try:
        return _convert_tokens([tok], shape.element_type).reshape(())
    except (ValueError, OverflowError) as e:
        raise LiteralSyntaxError(f"invalid {shape.element_type} literal: {e}") from None
