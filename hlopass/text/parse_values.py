"""HLO text, the value layer: shapes, layouts, literals, strings and attribute values
(`ValueParser`, which the instruction and module layers build on)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NoReturn, cast

from hlopass.dialects.hlo import (
    ShapeType,
    install_attribute_reader,
    shape_type,
)
from hlopass.dialects.opcodes import IDENT_VALUES
from hlopass.errors import HloParseError
from hlopass.ir import attrs as A
from hlopass.ir.literal import Literal, LiteralSyntaxError, parse_array_text, parse_scalar_token
from hlopass.ir.shape import (
    ELEMENT_BITS,
    UNBOUNDED,
    ArrayShape,
    BufferShape,
    Layout,
    Shape,
    Tile,
    TupleShape,
    default_layout,
    number_elements,
)
from hlopass.text.lexer import SHAPE_RE, STRING_RE, Lexer
from hlopass.text.quoting import string_end

# The fields XLA's metadata parser reads.
METADATA_FIELDS = frozenset(
    ("op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
     "source_end_column", "profile_type", "deduplicated_name", "scheduling_name",
     "stack_frame_id", "metadata_payload")
)  # fmt: skip
# The first word of a (non-tuple) sharding (`mesh[...]`, `maximal_mesh[...]`: XLA's named
# shardings; `unreduced`: XLA's keyword for an unreduced sharding).
_SHARDING_HEAD = re.compile(
    r"\{\s*(?:replicated|maximal|devices=|manual|unknown|unreduced\b|mesh\b|\})"
)


def sharding_form_ok(text: str) -> bool:
    """Whether `text` has a sharding's outer form (XLA's parser checks the rest)."""
    if "/*" in text:  # (XLA prints `/*index=5*/` before some elements of a tuple)
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    if text.replace(" ", "").startswith("{{"):
        parts = split_tuple_sharding(text)
        return parts is not None and all(sharding_form_ok(p) for p in parts)
    return _SHARDING_HEAD.match(text) is not None


_DIMS_RE = re.compile(r"(<=)?(\d+|\?)")


def parse_shape_text(text: str) -> Shape:
    """Parse one shape (array, tuple or buffer); raises ValueError with a reason."""
    lx = Lexer(text)
    p = ValueParser(lx)
    shape = p.shape()
    if lx.peek()[0] != "EOF":
        raise ValueError(f"trailing text after shape: {text!r}")
    return shape


def _array_shape_from_token(tok: str) -> ArrayShape:
    """`f32[2,<=3]{1,0:T(8)}` -> ArrayShape (layout filled with the default when absent);
    uncached: the parser reads each distinct token once per parse (`ValueParser.array_shape`)."""
    lb = tok.index("[")
    rb = tok.index("]")
    et = tok[:lb]
    if et == "opaque_type":
        et = "opaque"
    dims_text = tok[lb + 1 : rb].strip()
    dims: list[int] = []
    dynamic: list[bool] = []
    if dims_text:
        for part in dims_text.split(","):
            part = part.strip()
            if part == "?":
                dims.append(UNBOUNDED)
                dynamic.append(True)
            elif part.startswith("<=") and part[2:].strip().isdigit():
                dims.append(int(part[2:]))
                dynamic.append(True)
            elif part.startswith("-") and part[1:].isdigit() and not int(part[1:]):
                dims.append(0)  # XLA reads `-0` as a dimension of size 0
                dynamic.append(False)
            elif part.isdigit():
                if len(part) > 18 and int(part) >= 2**63:
                    raise ValueError(f"dimension {part} is too large in shape {tok}")
                dims.append(int(part))
                dynamic.append(False)
            else:
                raise ValueError(f"bad dimension {part!r} in shape {tok}")
    layout_text = tok[rb + 1 :]
    if et in ("token", "opaque"):
        if dims:
            raise ValueError(f"{et} shape cannot have dimensions")
        layout = None
    elif layout_text:
        layout = _parse_layout(layout_text, len(dims))
    else:
        layout = default_layout(len(dims))
    return ArrayShape(et, tuple(dims), tuple(dynamic) if any(dynamic) else (), layout)


def _is_printed_form(tok: str, shape: ArrayShape) -> bool:
    """Whether an array shape token is exactly the text XLA prints for its shape (the
    usual case: the module was printed by XLA), so that the printer can take it: static
    dims written plainly, the layout a plain minor-to-major list (none for a scalar). The
    parse has checked that the layout lists each dimension once."""
    return shape.layout is not None and _PRINTED_ARRAY.fullmatch(tok) is not None


def _tuple_texts(toks: list[str]) -> tuple[str, str]:
    """The printed text of a tuple of array shapes printed as `toks`, with and without
    the layouts (`exporter._indexed_shape`: XLA numbers every fifth element)."""
    parts = number_elements(list(toks))
    bare = number_elements([tok[: tok.index("]") + 1] for tok in toks])
    return "(" + ", ".join(parts) + ")", "(" + ", ".join(bare) + ")"


# (`opaque_type` reads as `opaque`; a token or opaque shape has no layout)
_PRINTED_ARRAY = re.compile(
    r"[a-z][a-z0-9]*+\[(?:(?:0|[1-9]\d*+)(?:,(?:0|[1-9]\d*+))*+\]\{(?:0|[1-9]\d*+)(?:,(?:0|[1-9]\d*+))*+\}|\])"
)


# XLA's lexer lets the closing `)` of the last item go (`{1,0:E(4}` reads as E(4)).
_LAYOUT_ITEM = re.compile(
    r"T((?:\([\d,*]*+(?:\)|$))++)|L\((\d+)(?:\)|$)|#\((\w+)(?:\)|$)|\*\((\w+)(?:\)|$)"
    r"|E\((\d+)(?:\)|$)|S\((\d+)(?:\)|$)|SC\((\d+):([\d,]*)(?:\)|$)|M\((\d+)(?:\)|$)"
    r"|D\(([^)]*)(?:\)|$)"
)


def _parse_layout(text: str, rank: int) -> Layout:
    body = text[1:-1]
    m2m_text, _, extras = body.partition(":")
    if not body.strip():
        raise ValueError("an empty layout {} (XLA's parser rejects it, scalar or not)")
    if rank and not m2m_text.strip():
        raise ValueError(f"layout {text} of a rank-{rank} shape lists no dimensions")
    items = m2m_text.split(",") if m2m_text.strip() else []
    if any(not x.strip() for x in items):
        raise ValueError(f"layout {text} has an empty dimension")
    m2m = tuple(int(x) for x in items)
    if (m2m_text.strip() or rank == 0) and sorted(m2m) != list(range(rank)):
        raise ValueError(f"layout {{{m2m_text}}} is not a permutation of the {rank} dimensions")
    kw: dict[str, Any] = {}
    pos = 0
    tiles: list[Tile] = []
    splits: list[tuple[int, tuple[int, ...]]] = []
    while pos < len(extras):
        m = _LAYOUT_ITEM.match(extras, pos)
        if not m:
            raise ValueError(f"bad layout attribute at {extras[pos:]!r}")
        pos = m.end()
        if m.group(1):
            for t in re.findall(r"\(([\d,*]*)(?:\)|$)", m.group(1)):
                tiles.append(Tile(tuple(None if x == "*" else int(x) for x in t.split(",") if x)))
        elif m.group(2):
            kw["tail_padding_alignment"] = int(m.group(2))
        elif m.group(3):
            kw["index_type"] = m.group(3)
        elif m.group(4):
            kw["pointer_type"] = m.group(4)
        elif m.group(5):
            kw["element_size_bits"] = int(m.group(5))
        elif m.group(6):
            kw["memory_space"] = int(m.group(6))
        elif m.group(7):
            splits.append((int(m.group(7)), tuple(int(x) for x in m.group(8).split(",") if x)))
        elif m.group(9):
            kw["dynamic_metadata_prefix_bytes"] = int(m.group(9))
        elif m.group(10) is not None:
            kw["dim_level_types"] = tuple(x.strip() for x in m.group(10).split(","))
    return Layout(m2m, tuple(tiles), split_configs=tuple(splits), **kw)


# One unit on purpose: the value layer of the parse hot path (benchmarks/io_bench.py).
class ValueParser:
    def __init__(self, lx: Lexer):
        self.lx = lx
        self.intern: dict[tuple[str, Any], Any] = {}
        # Per parse (never process-wide): a module repeats few distinct shape tokens.
        self.shapes: dict[str, ArrayShape] = {}  # array shape token -> shape
        self.types: dict[str, ShapeType] = {}  # -> its interned IR type
        self.tuples: dict[str, TupleShape] = {}  # `flat_tuple_shape`: tuple text -> shape
        self.metadata_values: dict[str, A.Metadata] = {}  # `fast_value`: metadata text -> value
        self.scalars: dict[tuple[str, str], Any] = {}  # `literal`: (type, token) -> 0-d array
        # `constant_value`: (shape, token) -> the value its constants share
        self.shared_scalars: dict[tuple[int, str], A.ShapedLiteral] = {}
        # `check_shapes`: the inputs that passed `check_instruction`, and the attributes
        # its rule for each opcode has read so far.
        self.checked: dict[tuple[Any, ...], tuple[Shape, list[Any]]] = {}
        self.rule_reads: dict[str, tuple[str, ...]] = {}

    def array_shape(self, tok: str) -> ArrayShape:
        """The shape of an array shape token (ValueError when malformed), read once."""
        shape = self.shapes.get(tok)
        if shape is None:
            shape = self.shapes[tok] = _array_shape_from_token(tok)
        return shape

    def tuple_type(self, tok: str) -> ShapeType | None:
        """The interned IR type of a flat tuple shape token (`_FLAT_TUPLE`), as `shape`
        reads it; None where `shape` must read it (and report its error), ValueError on a
        malformed element."""
        tup = self.tuples.get(tok)
        toks = SHAPE_TOKEN.findall(tok)
        if tup is None:
            tup = TupleShape(tuple(map(self.array_shape, toks)))
            if any(_tuple_element_problem(e) for e in tup.elements):
                return None
            self.tuples[tok] = tup
        texts = None
        if all(map(_is_printed_form, toks, cast(tuple[ArrayShape, ...], tup.elements))):
            texts = _tuple_texts(toks)
            if texts[0] != tok:
                texts = None  # (spaces, index comments other than XLA's)
        t = self.types[tok] = shape_type(tup, texts)
        return t

    def type_of(self, tok: str) -> ShapeType:
        """The interned IR type of an array shape token (ValueError when malformed)."""
        t = self.types.get(tok)
        if t is None:
            shape = self.array_shape(tok)
            texts = (tok, tok[: tok.index("]") + 1]) if _is_printed_form(tok, shape) else None
            t = self.types[tok] = shape_type(shape, texts)
        return t

    # --- token helpers ------------------------------------------------------------------

    def error(self, message: str, offset: int | None = None) -> NoReturn:
        if offset is None:
            offset = self.lx.peek()[2]
        self.lx.error_at(offset, message)

    def expect(self, text: str) -> int:
        kind, tok, start = self.lx.next()
        if tok != text or kind in ("STRING",):
            self.error(f"expected '{text}', got {describe(kind, tok)}", start)
        return start

    def accept(self, text: str) -> bool:
        kind, tok, _ = self.lx.peek()
        if tok == text and kind not in ("STRING",):
            self.lx.next()
            return True
        return False

    def int_(self) -> int:
        kind, tok, start = self.lx.next()
        if kind != "INT":
            self.error(f"expected an integer, got {describe(kind, tok)}", start)
        return int(tok)

    def name(self) -> str:
        kind, tok, start = self.lx.next()
        if kind != "NAME":
            self.error(f"expected a name, got {describe(kind, tok)}", start)
        return tok[1:] if tok.startswith("%") else tok

    # --- shapes ---------------------------------------------------------------------------

    def shape(self) -> Shape:
        kind, tok, start = self.lx.next()
        if kind == "SHAPE":
            try:
                return self.array_shape(tok)
            except ValueError as e:
                self.error(str(e), start)
        if tok == "(" and kind == "PUNCT":
            flat = self.flat_tuple_shape(start)
            if flat is not None:
                return flat
            elements: list[Shape] = []
            if not self.accept(")"):
                while True:
                    at = self.lx.peek()[2]
                    elements.append(self.shape())
                    why = _tuple_element_problem(elements[-1])
                    if why is not None:
                        self.error(why, at)
                    if self.accept(")"):
                        break
                    self.expect(",")
            return TupleShape(tuple(elements))
        if kind == "NAME" and tok == "b":
            self.expect("(")
            inner = self.shape()
            self.expect(")")
            assert isinstance(inner, ArrayShape)
            return BufferShape(inner)
        if kind == "NAME" and tok.split("[")[0] in ELEMENT_BITS:
            self.error(f"malformed shape starting at {tok!r}", start)
        self.error(f"expected a shape, got {describe(kind, tok)}", start)
        raise AssertionError

    def flat_tuple_shape(self, start: int) -> TupleShape | None:
        """A tuple of array shapes `(f32[2]{0}, s32[])` whose `(` is at `start`, read in one
        match (the lexer moved past it); None (nothing moved) when `shape` must read it."""
        text = self.lx.text
        m = _FLAT_TUPLE.match(text, start)
        if m is None:
            return None
        tup = self.tuples.get(m.group())
        if tup is None:
            try:
                tup = TupleShape(tuple(map(self.array_shape, SHAPE_TOKEN.findall(m.group()))))
            except ValueError:
                return None  # `shape` reports it at the element's place
            if any(_tuple_element_problem(e) for e in tup.elements):
                return None  # likewise
            self.tuples[m.group()] = tup
        self.lx.pos = m.end()
        return tup

    def at_shape(self) -> bool:
        kind, tok, _ = self.lx.peek()
        return kind == "SHAPE" or (kind == "PUNCT" and tok == "(")

    # --- attribute values -------------------------------------------------------------------

    def braced(self, item: Callable[[], Any]) -> tuple[Any, ...]:
        """`{a, b, ...}` (or `{}`), each element read by `item`."""
        self.expect("{")
        out: list[Any] = []
        if self.accept("}"):
            return ()
        while True:
            out.append(item())
            if self.accept("}"):
                return tuple(out)
            self.expect(",")

    def ints(self) -> tuple[int, ...]:
        return self.braced(self.int_)

    # One function on purpose: every attribute value goes through it (benchmarks/io_bench.py).
    def value(self, kind: str, attr: str, opcode: str | None = None) -> Any:
        lx = self.lx
        if kind == "ints":
            return self.ints()
        if kind == "int":
            return self.int_()
        if kind == "bool":
            k, tok, start = lx.next()
            if tok not in ("true", "false"):
                self.error(f"expected true or false for {attr}, got {describe(k, tok)}", start)
            return tok == "true"
        if kind in ("ident", "dot_algorithm"):
            k, tok, start = lx.next()
            if k not in ("NAME", "INT"):
                self.error(f"expected a value for {attr}, got {describe(k, tok)}", start)
            allowed = IDENT_VALUES.get(attr) if kind == "ident" else None
            if allowed is not None and tok not in allowed:
                self.error(
                    f"invalid value {tok!r} for {attr}; expected one of {', '.join(sorted(allowed))}",
                    start,
                )
            return tok
        if kind == "str":
            k, tok, start = lx.next()
            if k != "STRING":
                self.error(f"expected a quoted string for {attr}, got {describe(k, tok)}", start)
            return unescape(tok)
        if kind == "comp":
            k, tok, start = lx.peek()
            if tok == "{":
                inline = getattr(self, "inline_computation", None)
                if inline is None:
                    self.error("an inline computation needs a module around it")
                return inline()
            return self.name()
        if kind in ("comps", "names"):
            return self.braced(self.name)
        if kind == "metadata":
            return self.metadata()
        if kind == "backend_config":
            k, tok, start = lx.peek()
            if k == "STRING":
                lx.next()
                return unescape(tok)
            if tok == "{":
                return lx.take_balanced("{", "}")[0]
            self.error(f"expected a string or {{...}} for backend_config, got {describe(k, tok)}")
        if kind in ("raw", "replica_groups"):
            k, tok, start = lx.peek()
            if tok == "{":
                raw = lx.take_balanced("{", "}")[0]
                if kind == "replica_groups":
                    return A.Raw(re.sub(r"\s+", "", raw))  # XLA prints {{0,1},{2,3}}
                return A.Raw(squash(raw))
            if tok == "[" and kind == "replica_groups":
                return A.Raw(self.iota_list())
            lx.next()
            return A.Raw(tok)
        if kind == "window":
            return self.window()
        if kind == "result_accuracy":
            return self.result_accuracy()
        if kind == "dim_labels":
            k, tok, start = lx.next()
            if k != "DIMLABELS":
                self.error(
                    f"expected dimension labels like b01f_01io->b01f, got {describe(k, tok)}",
                    start,
                )
            why = _dim_labels_problem(tok)
            if why:
                self.error(f"invalid dim_labels {tok}: {why}", start)
            return A.ConvDims(tok)
        if kind == "slice":
            return self.slice_()
        if kind == "padding":
            k, tok, start = lx.next()
            if k != "PAD":
                self.error(f"expected padding like 0_0x1_1, got {describe(k, tok)}", start)
            return tuple(A.PadDim(*map(int, p.split("_"))) for p in _split_x(tok))
        if kind == "precision":
            return self.braced(self.name)
        if kind == "intss":
            return self.braced(self.ints)
        if kind == "bools":
            return self.braced(lambda: self.value("bool", attr))
        if kind == "float":
            k, tok, start = lx.next()
            if k not in ("FLOAT", "INT", "NANINF"):
                self.error(f"expected a number for {attr}, got {describe(k, tok)}", start)
            return float(tok)
        if kind == "shape":
            return self.shape()
        if kind == "shapes":
            return self.braced(self.shape)
        if kind == "literal":
            if lx.peek()[1] == "(":
                # A tuple literal: `( s32[2]{0} {1, 2}, pred[] 1 )`, each element with its shape.
                lx.next()
                parts: list[A.ShapedLiteral] = []
                while not self.accept(")"):
                    parts.append(self.value("literal", attr))
                    if self.accept(")"):
                        break
                    self.expect(",")
                return A.ShapedLiteral(
                    TupleShape(tuple(p.shape for p in parts)),
                    Literal(elements=tuple(p.literal for p in parts)),
                )
            shape = self.shape()
            return A.ShapedLiteral(shape, self.literal(shape))
        if kind == "program_shape":
            self.expect("{")
            params = self.shape()
            assert isinstance(params, TupleShape) or self.error("expected (parameter shapes)")
            self.expect("->")
            result = self.shape()
            self.expect("}")
            return (*params.elements, result)  # type: ignore[union-attr]
        raise AssertionError(f"no parser for attribute kind {kind}")

    def result_accuracy(self) -> A.ResultAccuracy:
        """`{mode=highest}` or `{tolerance={atol=..,rtol=..,ulps=..}}` (fields optional)."""
        raw, start = self.lx.take_balanced("{", "}")
        body = re.sub(r"\s+", "", raw)
        m = re.fullmatch(r"\{mode=([A-Za-z_]+)\}", body)
        if m is not None:
            mode = m.group(1).lower()
            if mode not in A.RESULT_ACCURACY_MODES:
                self.error(f"unknown result_accuracy mode {m.group(1)!r}", start)
            return A.ResultAccuracy(mode)
        m = re.fullmatch(r"\{tolerance=\{(.*)\}\}", body)
        if m is None:
            self.error("expected {mode=...} or {tolerance={...}} for result_accuracy", start)
            raise AssertionError
        fields: dict[str, float] = {}
        for item in m.group(1).split(",") if m.group(1) else ():
            key, _, val = item.partition("=")
            if key not in ("atol", "rtol", "ulps") or key in fields:
                self.error(f"invalid result_accuracy tolerance field {item!r}", start)
            try:
                num = int(val) if key == "ulps" else float(val)
            except ValueError:
                self.error(f"invalid number {val!r} for result_accuracy {key}", start)
                raise AssertionError from None
            if num < 0 or num != num:
                self.error(f"result_accuracy {key} must be non-negative, got {val}", start)
            fields[key] = num
        return A.ResultAccuracy(
            None, fields.get("atol", 0.0), fields.get("rtol", 0.0), int(fields.get("ulps", 0))
        )

    def iota_list(self) -> str:
        """Iota replica groups `[2,4]<=[8]` or `[2,4]<=[4,2]T(1,0)`, kept as text."""
        start = self.lx.rewind_to_peek()
        m = re.compile(r"\s*(\[[\d,]*\]<=\[[\d,]*\](?:T\([\d,]*\))?)").match(self.lx.text, start)
        if not m:
            self.error("malformed iota replica group list")
        assert m is not None
        self.lx.pos = m.end()
        return m.group(1)

    def window(self) -> A.Window:
        self.expect("{")
        fields: dict[str, list[list[int]]] = {}
        field_starts: dict[str, int] = {}
        while not self.accept("}"):
            k, key, start = self.lx.next()
            if k != "ATTR":
                self.error(f"expected a window field, got {describe(k, key)}", start)
            field_starts[key] = start
            k, tok, vstart = self.lx.next()
            if key == "pad":
                if k != "PAD":
                    self.error(f"expected padding like 0_0x1_1, got {describe(k, tok)}", vstart)
                fields[key] = [list(map(int, p.split("_"))) for p in _split_x(tok)]
            elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
                if k not in ("DXD", "INT"):
                    self.error(f"expected sizes like 3x3 for {key}, got {describe(k, tok)}", vstart)
                fields[key] = [[int(x)] for x in tok.split("x")]
            else:
                self.error(f"unknown window field {key!r}", start)
        n = len(fields.get("size", []))
        for key, vals in fields.items():
            if len(vals) != n:
                self.error(
                    f"window field {key} has {len(vals)} dimensions, size has {n}",
                    field_starts[key],
                )
        dims = []
        for i in range(n):
            pad = fields.get("pad", [[0, 0]] * n)[i]
            dims.append(
                A.WindowDim(
                    size=fields["size"][i][0],
                    stride=fields.get("stride", [[1]] * n)[i][0],
                    pad_low=pad[0],
                    pad_high=pad[1],
                    lhs_dilation=fields.get("lhs_dilate", [[1]] * n)[i][0],
                    rhs_dilation=fields.get("rhs_dilate", [[1]] * n)[i][0],
                    reversal=bool(fields.get("rhs_reversal", [[0]] * n)[i][0]),
                )
            )
        return A.Window(tuple(dims))

    def slice_(self) -> tuple[A.SliceDim, ...]:
        self.expect("{")
        out: list[A.SliceDim] = []
        if self.accept("}"):
            return ()
        while True:
            range_start = self.expect("[")
            parts = [self.int_()]
            while self.accept(":"):
                parts.append(self.int_())
            self.expect("]")
            if len(parts) not in (2, 3):
                self.error("a slice range is [start:limit] or [start:limit:stride]", range_start)
            out.append(A.SliceDim(*parts))
            if self.accept("}"):
                return tuple(out)
            self.expect(",")

    def metadata(self) -> A.Metadata:
        self.expect("{")
        fields: list[tuple[str, str]] = []
        while not self.accept("}"):
            k, key, start = self.lx.next()
            if k != "ATTR":
                self.error(f"expected a metadata field, got {describe(k, key)}", start)
            if key not in METADATA_FIELDS:
                self.error(
                    f"unknown metadata field {key!r}; the fields are "
                    + ", ".join(sorted(METADATA_FIELDS)),
                    start,
                )
            k, tok, vstart = self.lx.peek()
            if tok == "{":
                braced = squash(self.lx.take_balanced("{", "}")[0])
                if key == "profile_type":  # ProfileType values: INVALID, WINDOW, FLAG, INTEGER
                    types = re.sub(r"\s", "", braced[1:-1])
                    if types and not re.fullmatch(r"[0-3](?:,[0-3])*", types):
                        self.error("profile_type is a list of integers 0 to 3", vstart)
                    braced = "{" + types + "}"
                if key != "profile_type" or braced[1:-1].strip():  # (XLA drops an empty one)
                    fields.append((key, braced))
            else:
                self.lx.next()
                # (XLA drops fields at their default, but prints an empty payload)
                if (tok != '""' or key == "metadata_payload") and tok != "0":
                    fields.append((key, tok if tok.isascii() else escaped_string(tok)))
                if key == "stack_frame_id":
                    self.saw_stack_frame_id = True
            self.accept(",")
        return A.Metadata(tuple(fields))

    # --- literals -------------------------------------------------------------------------

    def constant_value(self, shape: Shape) -> A.ShapedLiteral:
        """A constant's value. The constants of one shape spelled by one scalar token (a
        module's many 0s and 1s) share one value, which `create_op` gives one attribute:
        the token is read once, and a print formats it once."""
        if isinstance(shape, ArrayShape) and not shape.dims:
            k, tok, _ = self.lx.peek()
            if k in ("INT", "FLOAT", "NANINF", "NAME"):
                key = (id(shape), tok)  # (no dataclass hash; the value holds the shape)
                v = self.shared_scalars.get(key)
                if v is None:
                    v = self.shared_scalars[key] = A.ShapedLiteral(shape, self.literal(shape))
                else:
                    self.lx.next()
                return v
        return A.ShapedLiteral(shape, self.literal(shape))

    def literal(self, shape: Shape) -> Literal:
        lx = self.lx
        if isinstance(shape, TupleShape):
            self.expect("(")
            elements = []
            for i, s in enumerate(shape.elements):
                if i:
                    self.expect(",")
                elements.append(self.literal(s))
            self.expect(")")
            return Literal(elements=tuple(elements))
        assert isinstance(shape, ArrayShape)
        k, tok, start = lx.peek()
        if tok == "{":
            raw, start = lx.take_balanced("{", "}")
            if re.fullmatch(r"\{\s*\.\.\.\s*\}", raw):
                return Literal(None)
            if shape.rank == 0:
                self.error("a scalar literal has no braces", start)
            return self.array_literal(raw, shape, start)
        if shape.rank != 0 and k in ("INT", "FLOAT", "NANINF", "NAME") and tok not in ("(", "{"):
            # XLA takes a bare scalar for an array: it sets the first element, zeroes the rest.
            lx.next()
            scalar = ArrayShape(shape.element_type, (), (), default_layout(0))
            try:
                first = parse_scalar_token(tok, scalar)
            except LiteralSyntaxError as e:
                self.error(str(e), start)
                raise AssertionError from None
            import numpy as np

            arr = np.zeros(shape.dims, dtype=first.dtype)
            if arr.size:
                arr.reshape(-1)[0] = first
            return Literal(arr)
        if shape.rank != 0:
            self.error(f"expected {{...}} for a literal of shape {shape.text()}", start)
        if tok == "(" and shape.element_type in ("c64", "c128"):
            raw, start = lx.take_balanced("(", ")")
            return self.array_literal(raw, shape, start)
        lx.next()
        if k not in ("INT", "FLOAT", "NANINF", "NAME"):
            self.error(f"expected a literal value, got {describe(k, tok)}", start)
        # A module repeats few scalars (0, 1, -inf): each (type, token) read once per parse,
        # every constant getting its own copy of the array.
        read = self.scalars.get((shape.element_type, tok))
        if read is None:
            try:
                read = parse_scalar_token(tok, shape)
            except LiteralSyntaxError as e:
                self.error(str(e), start)
                raise AssertionError from None
            self.check_float_range(read, tok, shape, start)
            self.scalars[shape.element_type, tok] = read
        return Literal(read.copy())

    def array_literal(self, raw: str, shape: ArrayShape, start: int) -> Literal:
        """The literal `raw` (`{...}`, or a complex `(re, im)`) spells for `shape`."""
        try:
            arr = parse_array_text(raw, shape)
        except LiteralSyntaxError as e:
            self.error(str(e), start)
            raise AssertionError from None
        self.check_float_range(arr, raw, shape, start)
        return Literal(arr)

    def check_float_range(self, arr: Any, raw: str, shape: ArrayShape, start: int) -> None:
        """XLA rejects a finite number written beyond its type's range (`f32 1e400`), which
        numpy reads as inf: on an inf, find the number that made it."""
        if "e" not in raw and "E" not in raw and len(raw) < 300:
            return  # (the common case, without numpy) no float64 overflow without an exponent
        import numpy as np

        if arr.dtype.kind not in "fc" or not np.isinf(arr).any():
            return
        part = arr.real.dtype
        for num in _FINITE_NUMBER.findall(raw):
            # out of range = rounds to inf in the type (XLA prints FLT_MAX as 3.40282347e+38,
            # above FLT_MAX as a real number, and reads it back as FLT_MAX)
            with np.errstate(over="ignore"):
                rounded = np.asarray(float(num)).astype(part)
            if np.isinf(rounded):
                self.error(f"literal value {num} is out of range for {shape.element_type}", start)


def escaped_string(tok: str) -> str:
    """A quoted metadata string as XLA prints it (non-ASCII as octal UTF-8 bytes)."""
    if not tok.startswith('"'):
        return tok
    return '"' + A.c_escape(unescape(tok)) + '"'


# A decimal number in a literal's text (inf, nan and hex payloads are not).
_FINITE_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.(])")


def _dim_labels_problem(tok: str) -> str | None:
    """What XLA's parser finds wrong with convolution labels `b01f_01io->b01f`, or None:
    each side names its two special dimensions once and the spatial ones 0..n-1 once,
    with the same n on every side."""
    lhs, _, rest = tok.partition("_")
    rhs, _, out = rest.partition("->")
    ranks = set()
    for side, letters in ((lhs, "bf"), (rhs, "io"), (out, "bf")):
        # `?` marks a dimension without a role (XLA's parser allows it: custom-calls)
        if any(side.count(c) != 1 for c in letters) and "?" not in side:
            return f"{side!r} must name each of {letters[0]} and {letters[1]} once"
        if any(side.count(c) > 1 for c in letters):
            return f"{side!r} names {letters[0]} or {letters[1]} twice"
        digits = [c for c in side if c.isdigit()]
        if len(set(digits)) != len(digits) or any(int(d) >= len(side) for d in digits):
            return f"{side!r} must number its spatial dimensions once each"
        if any(c not in letters and c != "?" and not c.isdigit() for c in side):
            return f"{side!r} has a letter that is not {letters}"
        ranks.add(len(side))
    if len(ranks) != 1:
        return "the input, kernel and output have different ranks"
    return None


def describe(kind: str, tok: str) -> str:
    if kind == "EOF":
        return "end of input"
    return repr(tok)


def _split_x(tok: str) -> list[str]:
    return tok.split("x")


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}  # fmt: skip


def unescape(tok: str) -> str:
    """absl::CUnescape of a quoted string: octal and hex escapes are bytes (XLA prints
    non-ASCII text as its UTF-8 bytes in octal), `\\uXXXX`/`\\UXXXXXXXX` the character's
    UTF-8 bytes, decoded as UTF-8 (an invalid byte kept as a surrogate escape, which
    `c_escape` writes back as the byte). `check_escapes` has rejected malformed escapes."""
    s = tok[1:-1]
    if "\\" not in s:
        return s
    if s.isascii() and _NOT_SIMPLE_ESCAPE.search(s) is None:
        # (JSON in a backend_config: only `\"` and `\\`) one substitution, as the loop
        # below gives for ASCII text with simple escapes only
        return _SIMPLE_ESCAPE.sub(_simple_escape, s)
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            m = ESCAPE.match(s, i)
            if m is not None and m.group(6) is None:
                octal, hexa, u4, u8, simple = m.group(1, 2, 3, 4, 5)
                if simple is not None:
                    out += _ESCAPES[simple].encode()
                elif octal is not None:
                    out.append(int(octal, 8) & 0xFF)
                elif hexa:
                    out.append(int(hexa, 16) & 0xFF)
                elif u4 or u8:
                    out += chr(min(int(u4 or u8, 16), 0x10FFFF)).encode("utf-8", "surrogatepass")
                else:  # `\\x` without digits: rejected before; kept as written
                    out += m.group(0).encode()
                i = m.end()
                continue
        out += c.encode("utf-8", "surrogatepass")
        i += 1
    return out.decode("utf-8", "surrogateescape")


# One escape of absl::CUnescape (what XLA's lexer applies to every string): octal (up to
# three digits), hex (all the digits that follow), \\u with four and \\U with eight hex
# digits, the simple C escapes; group 6 is anything else (an error in XLA).
_SIMPLE_ESCAPE = re.compile(r"\\([abfnrtv\\?'\"])")
# A backslash not followed by a simple escape's letter (also the second backslash of an
# escaped backslash: then `unescape` takes its general path, as for any other escape).
_NOT_SIMPLE_ESCAPE = re.compile(r"\\(?![abfnrtv\\?'\"])")


def _simple_escape(m: re.Match[str]) -> str:
    return _ESCAPES[m.group(1)]


ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|[xX]([0-9a-fA-F]*+)|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
    r"|([abfnrtv\\?'\"])|(.?))",
    re.S,
)
# From a place outside strings and comments to the next string that holds a backslash or
# is not closed (group 1): code, comments and plain strings are skipped inside one match
# (possessively, and by `match` at the place only: linear), not one Python step each.
NEXT_ODD_STRING = re.compile(
    r'(?:[^"/]++|/(?![/*])|//[^\n]*+|/\*(?:.*?\*/|.*)|"[^"\\]*+")*+'
    r'("[^"\\]*+(?:\\.[^"\\]*+)*+"?)',
    re.S,
)


def escape_error(m: re.Match[str]) -> str | None:
    """What absl::CUnescape (so XLA's lexer) finds wrong with one escape, or None."""
    octal, hexa, u4, u8, _, other = m.groups()
    if octal is not None:
        return None if int(octal, 8) <= 0xFF else f"value of {m.group(0)} exceeds 0xff"
    if hexa is not None:
        if not hexa:
            return "\\x must be followed by a hex digit"
        return None if int(hexa, 16) <= 0xFF else f"value of {m.group(0)} exceeds 0xff"
    if u4 is not None or u8 is not None:
        v = int(u4 or u8, 16)
        if 0xD800 <= v <= 0xDFFF or v > 0x10FFFF:
            return f"{m.group(0)} is not a Unicode character"
        return None
    if other is not None:
        if other in "uU":
            return f"\\{other} must be followed by {4 if other == 'u' else 8} hex digits"
        return f"unknown escape sequence {m.group(0)}"
    return None


def _tuple_element_problem(shape: Shape) -> str | None:
    """What XLA's parser finds wrong with an element of a tuple shape beyond what it checks
    in any array shape: it validates a tuple's layouts, where a tile dimension of 0 is an
    error (found by the fuzzer: `(f32[5,5]{1,0:T(0)})`; a lone array shape may have it)."""
    layout = getattr(shape, "layout", None)
    for tile in getattr(layout, "tiles", ()):
        if any(d is not None and d <= 0 for d in tile.dims):
            return f"tile {tile} of a tuple element's layout must have positive sizes"
    return None


def squash(text: str) -> str:
    """Whitespace outside strings collapsed the way XLA re-prints braced attributes."""
    if "\n" not in text and "  " not in text:
        return text
    parts = re.split(f"({STRING_RE})", text)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\s+", " ", parts[i])
    return "".join(parts)


def split_tuple_sharding(text: str) -> list[str] | None:
    """The elements of a tuple sharding `{{a},{b}}` (None if its braces do not balance)."""
    parts: list[str] = []
    depth = 0
    begin = 1
    i = 1
    n = len(text) - 1  # the closing brace
    while i < n:
        c = text[i]
        if c == '"':
            i = string_end(text, i, n)
            if i < 0:
                return None  # a string left open
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    if depth != 0 or not text.endswith("}"):
        return None
    parts.append(text[begin:n].strip())
    return parts


SHAPE_ATOM = f"(?>{SHAPE_RE})"  # no backtracking into a shape: the lexer takes it whole
SHAPE_TOKEN = re.compile(SHAPE_ATOM)
_ELEMENT = rf"(?:/\*index=\d++\*/\s*+)?+{SHAPE_ATOM}\s*+"  # XLA numbers every 5th element
# Lists as `item(?:,item)*+`, possessive: an item starts where the loop could stop, so giving
# an item back can never let what follows match, and no backtracking state piles up.
ELEMENTS = rf"(?:{_ELEMENT}(?:,\s*+{_ELEMENT})*+)?+"
_FLAT_TUPLE = re.compile(rf"\(\s*+{ELEMENTS}\)")


def parse_attribute_value(kind: str, text: str) -> Any:
    """Parse one attribute value of `kind` from its HLO text (used by the xDSL form)."""
    p = ValueParser(Lexer(text))
    if kind == "shape":
        v: Any = p.shape()
    elif kind == "constant":
        v = p.value("literal", kind)
    elif kind == "raw":
        v = A.Raw(text)
        p.lx.pos = len(text)
    elif kind == "backend_config":
        v = text
        p.lx.pos = len(text)
    else:
        v = p.value(kind, kind)
    if p.lx.peek()[0] != "EOF":
        raise HloParseError(f"trailing text in {kind} attribute: {text!r}", None, 1, 1)
    return v


install_attribute_reader(parse_attribute_value)
