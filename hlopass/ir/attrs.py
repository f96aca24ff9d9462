"""Values of HLO instruction attributes and their text form as XLA prints them.

Each attribute kind (the `kind` column of `hlopass.dialects.opcodes`) maps to a plain,
hashable Python value. The importer builds these values, the exporter prints them with
`format_value`, and the dialect wraps them in xDSL attributes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from hlopass.ir.literal import Literal
from hlopass.ir.shape import Shape
from hlopass.text.lexer import STRING_RE


@dataclass(frozen=True, slots=True)
class WindowDim:
    size: int = 1
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True, slots=True)
class Window:
    dims: tuple[WindowDim, ...]

    def __str__(self) -> str:
        d = self.dims
        parts = ["size=" + "x".join(str(w.size) for w in d)]
        if any(w.stride != 1 for w in d):
            parts.append("stride=" + "x".join(str(w.stride) for w in d))
        if any(w.pad_low or w.pad_high for w in d):
            parts.append("pad=" + "x".join(f"{w.pad_low}_{w.pad_high}" for w in d))
        if any(w.lhs_dilation != 1 for w in d):
            parts.append("lhs_dilate=" + "x".join(str(w.lhs_dilation) for w in d))
        if any(w.rhs_dilation != 1 for w in d):
            parts.append("rhs_dilate=" + "x".join(str(w.rhs_dilation) for w in d))
        if any(w.reversal for w in d):
            parts.append("rhs_reversal=" + "x".join(str(int(w.reversal)) for w in d))
        return "{" + " ".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class SliceDim:
    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True, slots=True)
class PadDim:
    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True, slots=True)
class ConvDims:
    """Convolution dimension numbers, kept as XLA's dim-label string (`b01f_01io->b01f`)."""

    labels: str

    def _side(self, i: int) -> str:
        lhs, rest = self.labels.split("_", 1)
        rhs, out = rest.split("->")
        return (lhs, rhs, out)[i]

    def _decode(self, side: str, a: str, b: str) -> tuple[int, int, tuple[int, ...]]:
        spatial = sorted((int(c), i) for i, c in enumerate(side) if c.isdigit())
        return side.index(a), side.index(b), tuple(i for _, i in spatial)

    @property
    def input(self) -> tuple[int, int, tuple[int, ...]]:
        """(batch dim, feature dim, spatial dims) of the input."""
        return self._decode(self._side(0), "b", "f")

    @property
    def kernel(self) -> tuple[int, int, tuple[int, ...]]:
        """(input feature dim, output feature dim, spatial dims) of the kernel."""
        return self._decode(self._side(1), "i", "o")

    @property
    def output(self) -> tuple[int, int, tuple[int, ...]]:
        return self._decode(self._side(2), "b", "f")

    def __str__(self) -> str:
        return self.labels


@dataclass(frozen=True, slots=True)
class Metadata:
    """`OpMetadata`: fields kept as their source text, printed in XLA's field order."""

    fields: tuple[tuple[str, str], ...]

    def get(self, key: str) -> str | None:
        for k, v in self.fields:
            if k == key:
                return v
        return None


METADATA_ORDER = (
    "op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
    "source_end_column", "profile_type", "deduplicated_name", "preserve_layout",
    "scheduling_name", "stack_frame_id", "metadata_payload",
)  # fmt: skip
_METADATA_RANK = {k: i for i, k in enumerate(METADATA_ORDER)}


@dataclass(frozen=True, slots=True)
class Raw:
    """An attribute value kept as canonical text (sharding, frontend attributes, ...)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class ResultAccuracy:
    """`result_accuracy=`: a mode (`highest`) or a tolerance; XLA omits the default mode."""

    mode: str | None = None  # lower-case mode name; None when a tolerance is given
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0

    @property
    def is_default(self) -> bool:
        return self.mode == "default"

    def __str__(self) -> str:
        if self.mode is not None:
            return "{mode=" + self.mode + "}"
        return (
            "{tolerance={atol="
            + format_float(self.atol)
            + ",rtol="
            + format_float(self.rtol)
            + ",ulps="
            + str(self.ulps)
            + "}}"
        )


RESULT_ACCURACY_MODES = frozenset({"default", "highest"})


@dataclass(frozen=True, slots=True)
class ShapedLiteral:
    """custom-call `literal=`: a shape and a literal."""

    shape: Shape
    literal: Literal


# Not printable ASCII, or one of "'\ (a negated class: as a range up to U+10FFFF it took
# ~15 ms to compile, in every process).
_NEEDS_ESCAPE = re.compile(r"[^ !#-&(-\[\]-~]")


# the characters CEscape writes as a backslash and one more character
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "'": "\\'", "\\": "\\\\"}


def c_escape(s: str) -> str:
    """absl::CEscape: the escaping XLA applies to printed strings."""
    if _NEEDS_ESCAPE.search(s) is None:  # the common case, without a loop over characters
        return s
    out = []
    for ch in s:
        o = ord(ch)
        short = _SHORT_ESCAPES.get(ch)
        if short is not None:
            out.append(short)
        elif o < 32 or o == 127:
            out.append(f"\\{o:03o}")
        elif 0xDC80 <= o <= 0xDCFF:  # a byte that was not UTF-8 (`unescape`): itself
            out.append(f"\\{o - 0xDC00:03o}")
        elif o > 127:  # CEscape writes each UTF-8 byte in octal
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def format_ints(v: tuple[int, ...]) -> str:
    return "{" + ",".join(map(str, v)) + "}"


def format_float(v: float) -> str:
    """absl::StrCat(double): six significant digits, %g style."""
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return "%.6g" % v


def format_slice(v: tuple[SliceDim, ...]) -> str:
    # XLA writes every stride as soon as one of them is not 1.
    if all(s.stride == 1 for s in v):
        return "{" + ", ".join(f"[{s.start}:{s.limit}]" for s in v) + "}"
    return "{" + ", ".join(f"[{s.start}:{s.limit}:{s.stride}]" for s in v) + "}"


def format_padding(v: tuple[PadDim, ...]) -> str:
    if any(p.interior for p in v):
        return "x".join(f"{p.low}_{p.high}_{p.interior}" for p in v)
    return "x".join(f"{p.low}_{p.high}" for p in v)


def format_metadata(m: Metadata) -> str:
    fields = m.fields
    rank = _METADATA_RANK.get
    if len(fields) == 2:  # the common op_type and op_name, without a loop
        (k0, v0), (k1, v1) = fields
        if rank(k0, 99) <= rank(k1, 99):
            return f"{{{k0}={v0} {k1}={v1}}}"  # (one build, not six concatenations)
    last = -1
    for k, _ in fields:  # usually in order already (as XLA printed them): no sort
        r = rank(k, 99)
        if r < last:
            fields = sorted(fields, key=lambda kv: rank(kv[0], 99))
            break
        last = r
    return "{" + " ".join([k + "=" + v for k, v in fields]) + "}"


# A quoted string (escapes skipped), an unterminated quote, or a brace.
_BRACE_TOKENS = re.compile(rf'{STRING_RE}|"|[{{}}]', re.S)


def is_json_dict(s: str) -> bool:
    """True when XLA's lexer would read `s` as one balanced `{...}` dictionary
    (`find_closing(s, 0) == len(s) - 1`, with a regular expression skipping the text
    between braces: backend configs are long)."""
    if not s.startswith("{"):
        return False
    depth = 0
    for m in _BRACE_TOKENS.finditer(s):
        t = m.group()
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if not depth:
                return m.end() == len(s)
        elif t == '"':
            return False  # an unterminated string: no closing brace after it
    return False


def format_backend_config(s: str) -> str:
    return s if is_json_dict(s) else '"' + c_escape(s) + '"'


def format_shaped_literal(lit: Literal, shape: Shape) -> str:
    """Literal::ToString: `shape literal`, a tuple as `( shape literal, ... )`."""
    from hlopass.ir.literal import format_literal

    if shape.is_tuple:
        assert lit.elements is not None
        inner = ", ".join(
            format_shaped_literal(e, s)
            for e, s in zip(lit.elements, shape.elements, strict=True)  # type: ignore[attr-defined]
        )
        return "( " + inner + " )"
    return shape.text() + " " + format_literal(lit, shape)


def _format_str(v: str) -> str:
    return '"' + c_escape(v) + '"'


def _format_bool(v: bool) -> str:
    return "true" if v else "false"


def _format_constant(v: ShapedLiteral) -> str:
    assert isinstance(v, ShapedLiteral)
    return format_shaped_literal(v.literal, v.shape)


# Formatters of the kinds whose text does not depend on the `%` style, by kind (a dict
# lookup instead of a chain of tests: the first print of a module formats thousands).
FORMATTERS: dict[str, Any] = {
    "ints": format_ints,
    **dict.fromkeys(
        (
            "int",
            "ident",
            "dot_algorithm",
            "raw",
            "dim_labels",
            "window",
            "replica_groups",
            "result_accuracy",
        ),
        str,
    ),
    "bool": _format_bool,
    "str": _format_str,
    "metadata": format_metadata,
    "backend_config": format_backend_config,
    "slice": format_slice,
    "padding": format_padding,
    "precision": lambda v: "{" + ",".join(v) + "}",
    "intss": lambda v: "{" + ",".join([format_ints(x) for x in v]) + "}",
    "bools": lambda v: "{" + ",".join(["true" if b else "false" for b in v]) + "}",
    "float": format_float,
    "shape": lambda v: v.text(),
    "shapes": lambda v: "{" + ", ".join([s.text() for s in v]) + "}",
    "literal": _format_constant,
    "constant": _format_constant,
}


def format_value(kind: str, v: object, percent: bool = True) -> str:
    """The text XLA prints after `name=` for an attribute of `kind`."""
    f = FORMATTERS.get(kind)
    if f is not None:
        return f(v)
    p = "%" if percent else ""
    if kind == "comp":
        return p + str(v)
    if kind == "comps":
        return "{" + ", ".join([p + c for c in v]) + "}"  # type: ignore[attr-defined]
    if kind == "names":
        return "{" + ", ".join([p + n for n in v]) + "}"  # type: ignore[attr-defined]
    raise KeyError(f"unknown attribute kind {kind!r}")


def backend_config(op: Any) -> dict:
    """An instruction's `backend_config` JSON as a dict (`{}` when absent, not JSON or not
    an object): what the cost model and the interpreter read library-call settings from."""
    import json

    raw = op.attr("backend_config") if op is not None else None
    if not raw:
        return {}
    if not isinstance(raw, str):
        raw = getattr(raw, "text", str(raw))
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}
