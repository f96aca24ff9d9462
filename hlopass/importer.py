"""HLO text -> xDSL IR (`parse_hlo`). Builds ops directly; no MLIR text in between."""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from operator import attrgetter
from typing import Any

from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from hlopass import attrs as A
from hlopass.dialects.hlo import (
    ATTR_CLASSES,
    OP_CLASSES,
    ComputationOp,
    HloOp,
    ReturnOp,
    ShapeType,
    create_op,
    new_block,
    new_computation_op,
    new_return_op,
    shape_type,
)
from hlopass.dialects.opcodes import COMMON_BY_NAME, IDENT_VALUES, OPCODES, AttrSpec
from hlopass.errors import HloParseError, HloShapeError
from hlopass.gcutil import gc_paused
from hlopass.lexer import SHAPE_RE, STRING_RE, TRIVIA_RE, Lexer, find_closing
from hlopass.literal import Literal, LiteralSyntaxError, parse_array_text, parse_scalar_token
from hlopass.module import as_hlo_module
from hlopass.shape import (
    ELEMENT_BITS,
    UNBOUNDED,
    ArrayShape,
    BufferShape,
    Layout,
    Shape,
    Tile,
    TupleShape,
    default_layout,
)
from hlopass.verifier import CHECKED_OPCODES, check_instruction, verify_instruction

# The fields XLA's metadata parser reads.
METADATA_FIELDS = frozenset(
    ("op_type", "op_name", "source_file", "source_line", "source_end_line", "source_column",
     "source_end_column", "profile_type", "deduplicated_name", "scheduling_name",
     "stack_frame_id", "metadata_payload")
)  # fmt: skip
# The first word of a (non-tuple) sharding.
_SHARDING_HEAD = re.compile(r"\{\s*(?:replicated|maximal|devices=|manual|unknown|\})")


def _sharding_form_ok(text: str) -> bool:
    """Whether `text` has a sharding's outer form (XLA's parser checks the rest)."""
    if "/*" in text:  # (XLA prints `/*index=5*/` before some elements of a tuple)
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    if text.replace(" ", "").startswith("{{"):
        parts = _split_tuple_sharding(text)
        return parts is not None and all(_sharding_form_ok(p) for p in parts)
    return _SHARDING_HEAD.match(text) is not None


# Module header attributes, in XLA's print order, with their value kinds.
MODULE_ATTRS: dict[str, str] = {
    "is_scheduled": "bool",
    "input_output_alias": "raw",
    "buffer_donor": "raw",
    "alias_passthrough_params": "bool",
    "entry_computation_layout": "program_shape",
    "allow_spmd_sharding_propagation_to_parameters": "raw",
    "allow_spmd_sharding_propagation_to_output": "raw",
    "replica_count": "int",
    "num_partitions": "int",
    "frontend_attributes": "raw",
    "origin_recovery_table": "raw",
}

_DIMS_RE = re.compile(r"(<=)?(\d+|\?)")


def parse_shape_text(text: str) -> Shape:
    """Parse one shape (array, tuple or buffer); raises ValueError with a reason."""
    lx = Lexer(text)
    p = _Parser(lx)
    shape = p.shape()
    if lx.peek()[0] != "EOF":
        raise ValueError(f"trailing text after shape: {text!r}")
    return shape


def _array_shape_from_token(tok: str) -> ArrayShape:
    """`f32[2,<=3]{1,0:T(8)}` -> ArrayShape (layout filled with the default when absent);
    uncached: the parser reads each distinct token once per parse (`_Parser.array_shape`)."""
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


class _Parser:
    def __init__(self, lx: Lexer):
        self.lx = lx
        self.intern: dict[tuple[str, Any], Any] = {}
        # Per parse (never process-wide): a module repeats few distinct shape tokens.
        self.shapes: dict[str, ArrayShape] = {}  # array shape token -> shape
        self.types: dict[str, ShapeType] = {}  # -> its interned IR type
        self.tuples: dict[str, TupleShape] = {}  # `flat_tuple_shape`: tuple text -> shape
        self.metadata_values: dict[str, A.Metadata] = {}  # `fast_value`: metadata text -> value
        self.scalars: dict[tuple[str, str], Any] = {}  # `literal`: (type, token) -> 0-d array
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
        if tup is None:
            tup = TupleShape(tuple(map(self.array_shape, _SHAPE_TOKEN.findall(tok))))
            if any(_tuple_element_problem(e) for e in tup.elements):
                return None
            self.tuples[tok] = tup
        t = self.types[tok] = shape_type(tup)
        return t

    def type_of(self, tok: str) -> ShapeType:
        """The interned IR type of an array shape token (ValueError when malformed)."""
        t = self.types.get(tok)
        if t is None:
            t = self.types[tok] = shape_type(self.array_shape(tok))
        return t

    # --- token helpers ------------------------------------------------------------------

    def error(self, message: str, offset: int | None = None) -> None:
        if offset is None:
            offset = self.lx.peek()[2]
        self.lx.error_at(offset, message)

    def expect(self, text: str) -> int:
        kind, tok, start = self.lx.next()
        if tok != text or kind in ("STRING",):
            self.error(f"expected '{text}', got {_describe(kind, tok)}", start)
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
            self.error(f"expected an integer, got {_describe(kind, tok)}", start)
        return int(tok)

    def name(self) -> str:
        kind, tok, start = self.lx.next()
        if kind != "NAME":
            self.error(f"expected a name, got {_describe(kind, tok)}", start)
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
        self.error(f"expected a shape, got {_describe(kind, tok)}", start)
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
                tup = TupleShape(tuple(map(self.array_shape, _SHAPE_TOKEN.findall(m.group()))))
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

    def ints(self) -> tuple[int, ...]:
        self.expect("{")
        out: list[int] = []
        if self.accept("}"):
            return ()
        while True:
            out.append(self.int_())
            if self.accept("}"):
                return tuple(out)
            self.expect(",")

    def value(self, kind: str, attr: str, opcode: str | None = None) -> Any:
        lx = self.lx
        if kind == "ints":
            return self.ints()
        if kind == "int":
            return self.int_()
        if kind == "bool":
            k, tok, start = lx.next()
            if tok not in ("true", "false"):
                self.error(f"expected true or false for {attr}, got {_describe(k, tok)}", start)
            return tok == "true"
        if kind in ("ident", "dot_algorithm"):
            k, tok, start = lx.next()
            if k not in ("NAME", "INT"):
                self.error(f"expected a value for {attr}, got {_describe(k, tok)}", start)
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
                self.error(f"expected a quoted string for {attr}, got {_describe(k, tok)}", start)
            return _unescape(tok)
        if kind == "comp":
            k, tok, start = lx.peek()
            if tok == "{":
                inline = getattr(self, "inline_computation", None)
                if inline is None:
                    self.error("an inline computation needs a module around it")
                return inline()
            return self.name()
        if kind in ("comps", "names"):
            self.expect("{")
            out: list[str] = []
            if self.accept("}"):
                return ()
            while True:
                out.append(self.name())
                if self.accept("}"):
                    return tuple(out)
                self.expect(",")
        if kind == "metadata":
            return self.metadata()
        if kind == "backend_config":
            k, tok, start = lx.peek()
            if k == "STRING":
                lx.next()
                return _unescape(tok)
            if tok == "{":
                return lx.take_balanced("{", "}")[0]
            self.error(f"expected a string or {{...}} for backend_config, got {_describe(k, tok)}")
        if kind in ("raw", "replica_groups"):
            k, tok, start = lx.peek()
            if tok == "{":
                raw = lx.take_balanced("{", "}")[0]
                if kind == "replica_groups":
                    return A.Raw(re.sub(r"\s+", "", raw))  # XLA prints {{0,1},{2,3}}
                return A.Raw(_squash(raw))
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
                    f"expected dimension labels like b01f_01io->b01f, got {_describe(k, tok)}",
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
                self.error(f"expected padding like 0_0x1_1, got {_describe(k, tok)}", start)
            return tuple(A.PadDim(*map(int, p.split("_"))) for p in _split_x(tok))
        if kind == "precision":
            self.expect("{")
            names: list[str] = []
            if self.accept("}"):
                return ()
            while True:
                names.append(self.name())
                if self.accept("}"):
                    return tuple(names)
                self.expect(",")
        if kind == "intss":
            self.expect("{")
            groups: list[tuple[int, ...]] = []
            if self.accept("}"):
                return ()
            while True:
                groups.append(self.ints())
                if self.accept("}"):
                    return tuple(groups)
                self.expect(",")
        if kind == "bools":
            self.expect("{")
            bs: list[bool] = []
            if self.accept("}"):
                return ()
            while True:
                bs.append(self.value("bool", attr))
                if self.accept("}"):
                    return tuple(bs)
                self.expect(",")
        if kind == "float":
            k, tok, start = lx.next()
            if k not in ("FLOAT", "INT", "NANINF"):
                self.error(f"expected a number for {attr}, got {_describe(k, tok)}", start)
            return float(tok)
        if kind == "shape":
            return self.shape()
        if kind == "shapes":
            self.expect("{")
            shapes: list[Shape] = []
            if self.accept("}"):
                return ()
            while True:
                shapes.append(self.shape())
                if self.accept("}"):
                    return tuple(shapes)
                self.expect(",")
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
                self.error(f"expected a window field, got {_describe(k, key)}", start)
            field_starts[key] = start
            k, tok, vstart = self.lx.next()
            if key == "pad":
                if k != "PAD":
                    self.error(f"expected padding like 0_0x1_1, got {_describe(k, tok)}", vstart)
                fields[key] = [list(map(int, p.split("_"))) for p in _split_x(tok)]
            elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
                if k not in ("DXD", "INT"):
                    self.error(
                        f"expected sizes like 3x3 for {key}, got {_describe(k, tok)}", vstart
                    )
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
                self.error(f"expected a metadata field, got {_describe(k, key)}", start)
            if key not in METADATA_FIELDS:
                self.error(
                    f"unknown metadata field {key!r}; the fields are "
                    + ", ".join(sorted(METADATA_FIELDS)),
                    start,
                )
            k, tok, vstart = self.lx.peek()
            if tok == "{":
                braced = _squash(self.lx.take_balanced("{", "}")[0])
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
                    fields.append((key, tok if tok.isascii() else _escaped(tok)))
                if key == "stack_frame_id":
                    self.saw_stack_frame_id = True
            self.accept(",")
        return A.Metadata(tuple(fields))

    # --- literals -------------------------------------------------------------------------

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
            try:
                arr = parse_array_text(raw, shape)
            except LiteralSyntaxError as e:
                self.error(str(e), start)
                raise AssertionError from None
            self.check_float_range(arr, raw, shape, start)
            return Literal(arr)
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
            try:
                arr = parse_array_text(raw, shape)
            except LiteralSyntaxError as e:
                self.error(str(e), start)
                raise AssertionError from None
            self.check_float_range(arr, raw, shape, start)
            return Literal(arr)
        lx.next()
        if k not in ("INT", "FLOAT", "NANINF", "NAME"):
            self.error(f"expected a literal value, got {_describe(k, tok)}", start)
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


def _escaped(tok: str) -> str:
    """A quoted metadata string as XLA prints it (non-ASCII as octal UTF-8 bytes)."""
    if not tok.startswith('"'):
        return tok
    return '"' + A.c_escape(_unescape(tok)) + '"'


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


def _describe(kind: str, tok: str) -> str:
    if kind == "EOF":
        return "end of input"
    return repr(tok)


def _split_x(tok: str) -> list[str]:
    return tok.split("x")


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\", "?": "?",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}  # fmt: skip


def _unescape(tok: str) -> str:
    """absl::CUnescape of a quoted string: octal and hex escapes are bytes (XLA prints
    non-ASCII text as its UTF-8 bytes in octal), `\\uXXXX`/`\\UXXXXXXXX` the character's
    UTF-8 bytes, decoded as UTF-8 (an invalid byte kept as a surrogate escape, which
    `c_escape` writes back as the byte). `_check_escapes` has rejected malformed escapes."""
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
            m = _ESCAPE.match(s, i)
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
# escaped backslash: then `_unescape` takes its general path, as for any other escape).
_NOT_SIMPLE_ESCAPE = re.compile(r"\\(?![abfnrtv\\?'\"])")


def _simple_escape(m: re.Match[str]) -> str:
    return _ESCAPES[m.group(1)]


_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|[xX]([0-9a-fA-F]*+)|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
    r"|([abfnrtv\\?'\"])|(.?))",
    re.S,
)
# From a place outside strings and comments to the next string that holds a backslash or
# is not closed (group 1): code, comments and plain strings are skipped inside one match
# (possessively, and by `match` at the place only: linear), not one Python step each.
_NEXT_ODD_STRING = re.compile(
    r'(?:[^"/]++|/(?![/*])|//[^\n]*+|/\*(?:.*?\*/|.*)|"[^"\\]*+")*+'
    r'("[^"\\]*+(?:\\.[^"\\]*+)*+"?)',
    re.S,
)


def _escape_error(m: re.Match[str]) -> str | None:
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


def _check_done_channel(
    parser: Any, name: str, opcode: str, operand: SSAValue, channel: Any, offset: int
) -> None:
    """XLA's parser rejects a send-done (recv-done) whose send (recv) has another
    channel_id, or none where it has one (found by the fuzzer: accepted, then XLA refused
    our print)."""
    start = operand.owner
    if getattr(start, "OPCODE", None) != opcode.removesuffix("-done"):
        return
    theirs = start.attr("channel_id")  # type: ignore[attr-defined]
    if theirs != channel:

        def has(c: Any) -> str:
            return "no channel_id" if c is None else f"channel_id={c}"

        parser.error(
            f"{opcode} {name} has {has(channel)}, its {start.OPCODE} has {has(theirs)}",  # type: ignore[attr-defined]
            offset,
        )


def _check_escapes(lx: Lexer) -> None:
    """XLA's lexer unescapes every string (absl::CUnescape) and rejects the module when
    one holds a malformed escape (`"\\main"`, `"\\400"`, `"\\x100"`); one linear pass."""
    text = lx.text
    at = 0
    while True:
        sm = _NEXT_ODD_STRING.match(text, at)
        if sm is None:
            return
        at = sm.end()
        if "\\" not in sm.group(1):
            continue  # (an unterminated string)
        pos, end = sm.start(1) + 1, at
        while True:
            pos = text.find("\\", pos, end)
            if pos < 0:
                break
            m = _ESCAPE.match(text, pos, end)
            assert m is not None  # group 6 matches any character
            why = _escape_error(m)
            if why is not None:
                lx.error_at(pos, f"invalid escape in a string: {why}")
            pos = m.end()


def _squash(text: str) -> str:
    """Whitespace outside strings collapsed the way XLA re-prints braced attributes."""
    if "\n" not in text and "  " not in text:
        return text
    parts = re.split(f"({STRING_RE})", text)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\s+", " ", parts[i])
    return "".join(parts)


_ORIGIN_TOKEN = re.compile(rf"\s*({STRING_RE}|\[synthetic_call\]|-?\d+|[{{}}(),]|\S)")


def _normalize_origin(text: str) -> str | None:
    """An `origin={...}` as XLA prints it (`{[synthetic_call]}` or a tuple tree of
    `{"name" {index}}` arrays, spaces and empty indices dropped), or None when XLA's
    parser rejects it."""
    toks = _ORIGIN_TOKEN.findall(text)
    pos = 0

    def take(t: str) -> bool:
        nonlocal pos
        if pos < len(toks) and toks[pos] == t:
            pos += 1
            return True
        return False

    def array() -> str | None:
        nonlocal pos
        if not (pos < len(toks) and toks[pos].startswith('"')):
            return None
        name = toks[pos]
        pos += 1
        index: list[str] = []
        if take("{"):
            while not take("}"):
                if index and not take(","):
                    return None
                if not (pos < len(toks) and toks[pos].lstrip("-").isdigit()):
                    return None
                index.append(toks[pos])
                pos += 1
        if not take("}"):
            return None
        return "{" + name + (" {" + ",".join(index) + "}" if index else "") + "}"

    def tree() -> str | None:
        if take("("):
            items: list[str] = []
            while not take(")"):
                if items and not take(","):
                    return None
                item = tree()
                if item is None:
                    return None
                items.append(item)
            return "(" + ", ".join(items) + ")"
        if take("{"):
            return array()
        return None

    if not take("{"):
        return None
    if take("}"):
        return "{()}" if pos == len(toks) else None  # (XLA reads `{}` as the empty tuple)
    out = "[synthetic_call]" if take("[synthetic_call]") else tree()
    if out is None or not take("}") or pos != len(toks):
        return None
    return "{" + out + "}"


_STAT_ITEM = re.compile(r"\s*([\w.\-]+)\s*=\s*([^,\s}]+)\s*(,|$)")


def _normalize_statistics(text: str) -> str | None:
    """`statistics={...}` as XLA keeps it: the first item's value (whatever its name) is
    the visualizing index, the others are named numbers printed as C++ prints a double
    (6 significant digits); "" when there are no statistics (XLA prints none), None when
    XLA's parser rejects the text."""
    body = text.strip()[1:-1].strip()
    items: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body):
        m = _STAT_ITEM.match(body, pos)
        if m is None:
            return None
        items.append((m.group(1), m.group(2)))
        pos = m.end()
    if not items:
        return ""
    try:
        index = int(items[0][1], 0)
        stats = [f"{k}={float(v):g}" for k, v in items[1:]]
    except ValueError:
        return None
    if not stats:
        return ""
    return "{" + ",".join([f"visualizing_index={index}", *stats]) + "}"


_ORIGINAL_ARRAY = rf"\{{\s*({STRING_RE})\s*(?:\{{([\d,\s]*)\}})?\s*\}}"
_RECOVERY_ENTRY = re.compile(
    rf"[\s,]*{_ORIGINAL_ARRAY}\s*:\s*{_ORIGINAL_ARRAY}(?:\s*,\s*({STRING_RE}))?", re.S
)


def _recovery_table(text: str) -> str:
    """A module's origin_recovery_table `{...}` as XLA prints it: entries sorted by their
    original array, each recovery module read and printed in full, indented; "" when
    empty. Raises ValueError (or the recovery module's parse error) on malformed text."""
    from hlopass.exporter import print_hlo

    body = text[1:-1]
    entries = []
    pos = 0
    while body[pos:].strip(" \t\r\n,"):
        m = _RECOVERY_ENTRY.match(body, pos)
        if m is None:
            raise ValueError('expected `{"name" {index}} : {"name" {index}}[, "module"]`')
        pos = m.end()
        keys = []
        for name, index in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
            idx = tuple(int(i) for i in index.replace(" ", "").split(",") if i) if index else ()
            keys.append(
                (
                    _unescape(name),
                    idx,
                    name + (" {" + ",".join(map(str, idx)) + "}" if index is not None else ""),
                )
            )
        line = "  {" + keys[0][2] + "} : {" + keys[1][2] + "}"
        if m.group(5) is not None:
            inner = print_hlo(parse_hlo(_unescape(m.group(5)), "<origin_recovery_table>"))
            indented = "\n".join("    " + ln if ln else "" for ln in inner.split("\n"))
            line += ',\n  "\n' + indented + '\n  "'
        entries.append(((keys[0][0], keys[0][1]), line))
    if not entries:
        return ""
    entries.sort(key=lambda e: e[0])
    return "{\n" + "".join(line + "\n" for _, line in entries) + "}\n"


def _single_tuple_sharding(text: str, shape: TupleShape) -> str:
    """One sharding `{s}` on a tuple-shaped instruction as XLA keeps it: a tuple sharding
    with `s` for every leaf (one element for a tuple without leaves); `{}` stays."""
    if text.replace(" ", "") == "{}":
        return text
    return "{" + ", ".join([text] * max(1, len(shape.leaves()))) + "}"


def _normalize_tuple_sharding(text: str) -> str:
    """A tuple sharding `{{a},{b}}` as XLA prints it: elements joined by `, `."""
    parts = _split_tuple_sharding(text)
    return text if parts is None else "{" + ", ".join(parts) + "}"


def _split_tuple_sharding(text: str) -> list[str] | None:
    """The elements of a tuple sharding `{{a},{b}}` (None if its braces do not balance)."""
    parts: list[str] = []
    depth = 0
    begin = 1
    in_str = False
    i = 1
    n = len(text) - 1  # the closing brace
    while i < n:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[begin:i].strip())
            begin = i + 1
        i += 1
    if depth != 0 or in_str or not text.endswith("}"):
        return None
    parts.append(text[begin:n].strip())
    return parts


_ASYNC_SUFFIXES = ("-start", "-update", "-done")
_SUGAR_SPECS: dict[str, Any] = {}


# Attributes XLA's parser reads but does not keep (when the test on opcode and value says
# so): the rolled-back collective `mode`, an empty convolution `sparsity_config`, and the
# `dimensions` of ragged-all-to-all.
_DROPPED: dict[str, Any] = {
    "mode": lambda opcode, v: True,
    "sparsity_config": lambda opcode, v: v.text == "{}",
    "dimensions": lambda opcode, v: opcode == "ragged-all-to-all",
}


def _async_sugar(opcode: str) -> tuple[str, str] | None:
    """(wrapped opcode, start|update|done) for XLA's async shorthand like `custom-call-start`."""
    for suffix in _ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            base = opcode[: -len(suffix)]
            if base in OPCODES and not base.startswith("async-"):
                return base, suffix[1:]
    return None


def _sugar_spec(spec: Any) -> Any:
    """`spec` plus the `async_execution_thread` attribute the shorthand start may carry."""
    out = _SUGAR_SPECS.get(spec.opcode)
    if out is None:
        from hlopass.dialects.opcodes import OpcodeSpec

        out = _SUGAR_SPECS[spec.opcode] = OpcodeSpec(
            spec.opcode, spec.arity, spec.traits,
            (AttrSpec("async_execution_thread", "str", False), *spec.attrs), spec.computations,
        )  # fmt: skip
    return out


# --- modules ------------------------------------------------------------------------------


class ModuleParser(_Parser):
    def __init__(self, text: str, filename: str | None = None):
        super().__init__(Lexer(text, filename))
        self.computation_names: dict[str, int] = {}
        self.root_shapes: dict[str, Shape] = {}
        self.computation_ops: dict[str, ComputationOp] = {}  # for `check_call`
        self.saw_stack_frame_id = False
        self.pending_computations: list[ComputationOp] = []
        self.pending_seen = False
        self.value_maps: list[dict[str, SSAValue]] = []  # name -> value, per computation

    def parse(self) -> ModuleOp:
        lx = self.lx
        module_name = "module"
        module_attrs: dict[str, Any] = {}
        kind, tok, start = lx.peek()
        has_header = kind == "NAME" and tok == "HloModule"
        if not has_header and tok != "ENTRY":
            # XLA reads headerless text as a module only when it starts with ENTRY or with
            # `name {`; anything else it takes for a single instruction.
            saved = (lx.pos, lx._peeked)
            lx.next()
            k2, t2, s2 = lx.next()
            lx.pos, lx._peeked = saved
            if t2 != "{" and kind != "EOF":
                self.error(
                    "a module without an HloModule header must start with ENTRY or with a "
                    f"computation `name {{` (got {_describe(k2, t2)} after {tok!r})",
                    s2,
                )
        if has_header:
            lx.next()
            module_name = self.name_or_string()
            while self.accept(","):
                k, key, kstart = lx.next()
                if k != "ATTR":
                    self.error(f"expected a module attribute, got {_describe(k, key)}", kstart)
                vkind = MODULE_ATTRS.get(key)
                if vkind is None:
                    self.error(f"unknown module attribute {key!r}", kstart)
                    raise AssertionError
                if key == "allow_spmd_sharding_propagation_to_output" or key == (
                    "allow_spmd_sharding_propagation_to_parameters"
                ):
                    k2, t2, _ = lx.peek()
                    if t2 != "{":
                        lx.next()
                        module_attrs[key] = A.Raw("{" + t2 + "}")
                    else:
                        module_attrs[key] = self.value(vkind, key)
                    if module_attrs[key].text.replace(" ", "") == "{false}":
                        del module_attrs[key]  # XLA does not print the default
                    continue
                if key == "origin_recovery_table" and lx.peek()[1] == "{":
                    # Kept verbatim: XLA prints it over several lines (with embedded module
                    # texts), ending with a newline of its own; an empty one not at all.
                    table, tstart = lx.take_balanced("{", "}")
                    try:
                        table = _recovery_table(table)
                    except (ValueError, HloParseError, HloShapeError) as e:
                        self.error(f"origin_recovery_table: {e}", tstart)
                    if table:
                        module_attrs[key] = A.Raw(table)
                    continue
                module_attrs[key] = self.value(vkind, key)
                if key == "frontend_attributes":
                    fa = self.frontend_attributes(module_attrs.pop(key), kstart)
                    if fa is not None:
                        module_attrs[key] = fa
                if key == "input_output_alias":
                    module_attrs[key] = A.Raw(_normalize_io_alias(module_attrs[key].text))
        tables = self.stack_frame_tables()
        comps: list[ComputationOp] = []
        entry_seen = False
        text = lx.text
        while True:
            if lx._peeked is None:
                # Where the next token starts, and whether it is the end, as `peek` tells
                # (without tokenizing the next computation's head: `computation` reads it).
                comp_start = lx.pos = _TRIVIA.match(text, lx.pos).end()  # type: ignore[union-attr]
                if comp_start == len(text):
                    break
            else:
                kind, _, comp_start = lx.peek()
                if kind == "EOF":
                    break
            comp = self.computation()
            if self.pending_computations:  # generated by async shorthand, defined first
                self.pending_seen = True
                comps.extend(self.pending_computations)
                self.pending_computations.clear()
            if comp.is_entry is not None:
                if entry_seen:
                    self.error("more than one ENTRY computation", comp_start)
                entry_seen = True
            comps.append(comp)
        if not comps:
            self.error("no computation in module")
        if not entry_seen:
            comps[-1].properties["is_entry"] = _UNIT
        if not has_header:
            entry = next(c for c in comps if c.is_entry is not None)
            module_name = "module_" + entry.comp_name
        if self.pending_seen or not _names_unique(self.value_maps):
            _uniquify_instruction_names(comps)
        # `ModuleOp(comps)`, the computations linked in as `_append_op` does (they are
        # fresh: no parent), without `Block.add_op`'s checks of each.
        module = ModuleOp(())
        body = module.regions[0].first_block
        assert body is not None
        for comp in comps:
            _append_op(body, comp)
        module.attributes["sym_name"] = StringAttr(module_name)
        for key, value in module_attrs.items():
            kind = MODULE_ATTRS[key]
            if kind == "program_shape":
                module.attributes["hlo." + key] = ATTR_CLASSES["shapes"].new(value)
            else:
                module.attributes["hlo." + key] = ATTR_CLASSES[kind].new(value)
        if tables or self.saw_stack_frame_id:
            tables = _renumber_stack_frames(tables, comps)
        if tables:
            module.attributes["hlo.stack_frames"] = ATTR_CLASSES["raw"].new(A.Raw(tables))
        return module

    def check_defined(self, names: Iterable[str], offset: int) -> None:
        """As XLA, a called computation must be defined before the instruction naming it."""
        for name in names:
            if name not in self.computation_names:
                self.error(f"computation {name!r} is not defined before this use", offset)

    def name_or_string(self) -> str:
        kind, tok, start = self.lx.next()
        if kind == "NAME" and tok not in ("ENTRY", "ROOT"):
            return tok[1:] if tok.startswith("%") else tok
        if kind == "STRING":
            return _unescape(tok)
        if kind == "LABEL":  # XLA's lexer reads `name:` as a name too (`HloModule m.1:`)
            return tok
        if kind == "ATTR":  # `HloModule m,` never lexes so; `HloModule m=` is malformed
            self.error("expected a module name", start)
        self.error(f"expected a module name, got {_describe(kind, tok)}", start)
        raise AssertionError

    def stack_frame_tables(self) -> str:
        """The FileNames/FunctionNames/FileLocations/StackFrames tables, kept verbatim."""
        lx = self.lx
        kind, tok, start = lx.peek()
        if kind != "NAME" or tok not in _TABLE_NAMES:
            return ""
        lx.rewind_to_peek()
        text = lx.text
        pos = start
        pat = re.compile(
            r"(FileNames|FunctionNames|FileLocations|StackFrames)[ \t]*\n((?:[ \t]*+\d[^\n]*+\n?)*+)"
        )
        chunks = []
        while True:
            m = pat.match(text, pos)
            if not m:
                break
            chunks.append(m.group(0).rstrip("\n"))
            pos = m.end()
            ws = re.compile(r"\s*").match(text, pos)
            pos = ws.end() if ws else pos
        lx.pos = pos
        return "\n\n".join(chunks)

    def fast_computation_head(self) -> tuple[bool, str, int, Shape, int] | None:
        """The common `[ENTRY] %name (p: f32[], ...) -> f32[] {` head, each parameter an
        array shape: (is entry, name, name offset, declared result, its offset), the
        lexer moved past the `{`. None (nothing consumed) when `computation` must read it
        token by token (or report its error)."""
        lx = self.lx
        text = lx.text
        m = _COMP_HEAD.match(text, lx.rewind_to_peek())
        if m is None:
            return None
        entry_kw, name = m.group(1, 2)
        if name in _NOT_NAMES or (entry_kw is None and name == "ENTRY"):
            return None  # `inf`/`nan` lex as numbers; a first `ENTRY` is the keyword
        pos = m.end()
        pm = _NO_PARAMS.match(text, pos)
        if pm is not None:
            pos = pm.end()
        else:
            while True:
                pm = _PARAM_HEAD.match(text, pos)
                if pm is None or pm.group(1) in _NOT_NAMES:  # (`inf:` lexes as a number)
                    return None
                try:
                    self.array_shape(pm.group(2))  # (cached: read again as a parameter)
                except ValueError:
                    return None
                pos = pm.end()
                if pm.group(3) == ")":
                    break
        rm = _RESULT_HEAD.match(text, pos)
        if rm is None:
            return None
        try:
            result = self.array_shape(rm.group(1))
        except ValueError:
            return None
        lx.pos = rm.end()
        return (
            entry_kw is not None,
            name[1:] if name[0] == "%" else name,
            m.start(2),
            result,
            rm.start(1),
        )

    def frontend_attributes(self, raw: A.Raw, start: int) -> A.Raw | None:
        """frontend_attributes (of the module or of an instruction) as XLA keeps them
        (`_normalize_frontend_attrs`); None for an empty map, which XLA does not print."""
        fa = _normalize_frontend_attrs(raw.text)
        if fa is None:
            self.error(_FA_FORM, start)
            raise AssertionError
        return A.Raw(fa) if fa != "{}" else None

    def computation(self) -> ComputationOp:
        lx = self.lx
        head = self.fast_computation_head()
        if head is not None:
            is_entry, name, start, declared_result, result_start = head
            self.declare_computation(name, start)
        else:
            is_entry, name, declared_result, result_start = self.computation_head()
            self.expect("{")
        block = new_block()
        comp = new_computation_op(name, block, is_entry)
        root_shape = self.instructions(comp, block)
        self.root_shapes[name] = root_shape  # for the shapes of callers left unwritten
        self.computation_ops[name] = comp
        # (`accept` when a `,` is next: tokenizing the next computation's name to see that
        # there is none costs more than a match)
        if (lx._peeked is not None or _COMMA_NEXT.match(lx.text, lx.pos)) and self.accept(","):
            k, key, kstart = lx.next()
            if key != "execution_thread":
                self.error(f"unknown computation attribute {key!r}", kstart)
            comp.properties["execution_thread"] = StringAttr(self.value("str", key))
        if declared_result is not None and not declared_result.compatible(root_shape):
            self.error(
                f"computation {name} declares result {declared_result.text(False)} but its ROOT "
                f"has shape {root_shape.text(False)}",
                result_start,
            )
        return comp

    def inline_computation(self) -> str:
        """`{ instructions }` written in place of a computation name (XLA names it `_`,
        `_.1`, ... and defines it before the computation using it); returns its name."""
        lx = self.lx
        start = lx.next()[2]  # `{`
        name, i = "_", 0
        while name in self.computation_names:
            i += 1
            name = f"_.{i}"
        self.computation_names[name] = start
        saved = (self.values, self.block, getattr(self, "current_computation", None))
        block = Block()
        comp = new_computation_op(name, block)
        self.root_shapes[name] = self.instructions(comp, block)
        self.values, self.block, self.current_computation = saved
        self.computation_ops[name] = comp
        self.pending_computations.append(comp)
        self.pending_seen = True  # XLA renames instructions module-wide: see `parse`
        return name

    def declare_computation(self, name: str, start: int) -> None:
        """The computation being read is `name` (at offset `start`), defined once."""
        if name in self.computation_names:
            self.error(f"computation {name!r} is defined twice", start)
        self.computation_names[name] = start
        self.current_computation = name

    def computation_head(self) -> tuple[bool, str, Shape | None, int]:
        """`[ENTRY] name [(p: shape, ...) -> shape]` up to the body's `{`, token by token:
        (is entry, name, declared result, its offset)."""
        lx = self.lx
        is_entry = self.accept("ENTRY")
        kind, tok, start = lx.peek()
        if kind == "NAME":
            name = self.name()
        elif tok == "{" and is_entry:
            name = "ENTRY"
        else:
            self.error(f"expected a computation, got {_describe(kind, tok)}", start)
            raise AssertionError
        self.declare_computation(name, start)
        declared_result: Shape | None = None
        result_start = start
        if self.accept("("):
            if not self.accept(")"):
                while True:
                    k, label, lstart = lx.next()
                    if k != "LABEL":
                        self.error(f"expected 'name: shape', got {_describe(k, label)}", lstart)
                    self.shape()  # read and checked only: the parameter instructions hold them
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect("->")
            result_start = lx.peek()[2]
            declared_result = self.shape()
        return is_entry, name, declared_result, result_start

    def instructions(self, comp: ComputationOp, block: Block) -> Shape:
        """The instructions of a computation, after its opening `{`; returns the shape of
        its ROOT."""
        lx = self.lx
        values: dict[str, SSAValue] = {}
        self.values = values
        self.value_maps.append(values)
        self.block = block
        root: HloOp | None = None
        last: HloOp | None = None
        params: dict[int, int] = {}
        self.params = params  # (nested parameters in operand lists count too)
        head = _HEAD.match
        text = lx.text
        while True:
            m = head(text, lx.pos if lx._peeked is None else lx.rewind_to_peek())
            if m is not None:
                op = self.fast_instruction(m, values, block)
                if op is not None:
                    if m.start(1) >= 0:  # ROOT
                        root = self._place(op, True, m.start(1), root, params)
                    elif type(op) is _PARAMETER_CLS:  # (else _place has nothing to do)
                        number = op.properties["number"].data  # type: ignore[attr-defined]
                        if number in params:  # (`_place`, inline: a fifth of all instructions)
                            self.error(f"parameter number {number} is used twice", m.start(2))
                        params[number] = m.start(2)
                    last = op
                    continue
            if lx._peeked is None:
                close = _CLOSE.match(text, lx.pos)
                if close is not None:  # (what `peek` would read as the `}` token)
                    lx.pos = close.end()
                    start = lx.pos - 1
                    break
            kind, tok, start = lx.peek()
            if tok == "}" and kind == "PUNCT":
                lx.next()
                break
            if kind == "EOF":
                self.error(f"computation {comp.comp_name} is missing its closing '}}'", start)
            is_root = False
            if kind == "NAME" and tok == "ROOT":
                lx.next()
                is_root = True
            op = self.instruction(values, block)
            root = self._place(op, is_root, start, root, params)
            last = op
        if last is None:
            self.error(f"computation {comp.comp_name} has no instructions", start)
        for i in range(len(params)):
            if i not in params:
                self.error(
                    f"computation {comp.comp_name} has no parameter({i})", params[max(params)]
                )
        result = (root or last).results[0]  # type: ignore[union-attr]
        _append_op(block, new_return_op(result))
        return result._type.data  # type: ignore[attr-defined]

    def _place(
        self, op: HloOp, is_root: bool, start: int, root: HloOp | None, params: dict[int, int]
    ) -> HloOp | None:
        """Record a parsed instruction's parameter number and ROOT mark; return the root."""
        if type(op) is _PARAMETER_CLS:
            number = op.properties["number"].data  # type: ignore[attr-defined]
            if number in params:
                self.error(f"parameter number {number} is used twice", start)
            params[number] = start
        if is_root:
            if root is not None:
                self.error("one computation should have only one ROOT", start)
            return op
        return root

    def instruction(self, values: dict[str, SSAValue], block: Block) -> HloOp:
        lx = self.lx
        kind, tok, start = lx.next()
        if kind == "ATTR":  # `name=` without a space
            if reserved_name(tok):
                self.error(f"expects name, got {tok!r}, which XLA reads as a keyword", start)
            name = tok
        elif kind == "NAME":
            if reserved_name(tok):
                self.error(f"expects name, got {tok!r}, which XLA reads as a keyword", start)
            name = tok[1:] if tok.startswith("%") else tok
            self.expect("=")
        else:
            self.error(f"expected an instruction, got {_describe(kind, tok)}", start)
            raise AssertionError
        if name in values:
            self.error(f"instruction name {name!r} is used twice", start)
        return self.instruction_rhs(name, values, block, start)

    def instruction_rhs(
        self,
        name: str,
        values: dict[str, SSAValue],
        block: Block,
        start: int,
        shape: Shape | None = None,
        nested: bool = False,
    ) -> HloOp:
        lx = self.lx
        if shape is None and not nested and self.at_shape():
            shape = self.shape()
        kind, opcode, ostart = lx.next()
        if kind != "NAME":
            self.error(f"expected an opcode, got {_describe(kind, opcode)}", ostart)
        spec = OPCODES.get(opcode)
        if spec is None and opcode == "b" and shape is None and not nested and lx.peek()[1] == "(":
            # A buffer result shape `b(f32[])` (no opcode is called `b`).
            lx.next()
            inner = self.shape()
            self.expect(")")
            if not isinstance(inner, ArrayShape):
                self.error("a buffer shape holds an array shape", ostart)
            shape = BufferShape(inner)  # type: ignore[arg-type]
            kind, opcode, ostart = lx.next()
            if kind != "NAME":
                self.error(f"expected an opcode, got {_describe(kind, opcode)}", ostart)
            spec = OPCODES.get(opcode)
        if spec is None and shape is None and lx.peek()[1] == "[":
            if opcode in ELEMENT_BITS or opcode == "opaque_type":
                self.error(f"malformed shape starting at {opcode!r}", ostart)
            self.error(f"unknown element type {opcode!r}", ostart)
        if spec is None:
            sugar = _async_sugar(opcode)
            if sugar is not None:
                self.expect("(")
                return self.async_sugar(name, sugar, shape, values, block, start, ostart)
            self.error(f"unknown opcode {opcode!r}", ostart)
            raise AssertionError
        self.expect("(")
        return self.instruction_body(
            name, opcode, spec, shape, values, block, start, ostart, nested
        )

    def async_sugar(
        self,
        name: str,
        sugar: tuple[str, str],
        shape: Shape | None,
        values: dict[str, SSAValue],
        block: Block,
        start: int,
        ostart: int,
    ) -> HloOp:
        """`X-start(...)`, `X-update(...)`, `X-done(...)`: XLA's shorthand for an async op
        calling a generated computation (`async_wrapped`) that holds one X instruction."""
        base, suffix = sugar
        if suffix != "start":
            opcode = "async-" + suffix
            op = self.instruction_body(
                name, opcode, OPCODES[opcode], shape, values, block, start, ostart
            )
            src = op.operands[0].owner
            callee = (
                src.attr("calls")
                if isinstance(src, HloOp) and src.opcode in ("async-start", "async-update")
                else None
            )
            if callee is None:
                self.error(f"{base}-{suffix} takes an async-start or async-update operand", ostart)
            if op.attr("calls") is None:
                op.set_attr("calls", callee)
            thread = src.attr("async_execution_thread")  # type: ignore[union-attr]
            if thread is not None and op.attr("async_execution_thread") is None:
                op.set_attr("async_execution_thread", thread)
            return op
        if shape is None or not shape.is_tuple or len(shape.elements) < 2:  # type: ignore[attr-defined]
            self.error(
                f"{base}-start needs its async tuple shape ((operands), result, ...)", ostart
            )
            raise AssertionError
        spec = OPCODES[base]
        wshape = shape.elements[1]  # type: ignore[attr-defined]
        scratch = Block()
        saved = values.get(name)
        self.sugar_thread = None
        wrapped = self.instruction_body(
            name, base, _sugar_spec(spec), wshape, values, scratch, start, ostart
        )
        if saved is not None:
            values[name] = saved
        operands = list(wrapped.operands)
        start_attrs: dict[str, Any] = {}
        wattrs: dict[str, Any] = {}
        for aspec, value in wrapped.hlo_attrs():
            if aspec.name == "async_execution_thread" or aspec.name in COMMON_BY_NAME:
                start_attrs[aspec.name] = value
            else:
                wattrs[aspec.name] = value
        sharding = start_attrs.get("sharding")
        if sharding is not None and not sharding.text.startswith("{{"):  # on the tuple
            start_attrs["sharding"] = A.Raw(_single_tuple_sharding(sharding.text, shape))  # type: ignore[arg-type]
        thread = self.sugar_thread
        if thread is not None:
            start_attrs = {"async_execution_thread": thread, **start_attrs}
        cname = "async_wrapped"
        i = 0
        while cname in self.computation_names:
            i += 1
            cname = f"async_wrapped.{i}"
        self.computation_names[cname] = ostart
        wblock = Block()
        params = []
        for j, v in enumerate(operands):
            p = create_op("parameter", [], v.type.data, "async_param", {"number": j}, self.intern)  # type: ignore[attr-defined]
            wblock.add_op(p)
            params.append(p.results[0])
        inner = create_op(base, params, wshape, base, wattrs, self.intern)
        wblock.add_op(inner)
        wblock.add_op(new_return_op(inner.results[0]))
        wcomp = new_computation_op(cname, wblock)
        if thread is not None:
            wcomp.properties["execution_thread"] = StringAttr(thread)
        self.pending_computations.append(wcomp)
        start_attrs["calls"] = cname
        op = create_op("async-start", operands, shape, name, start_attrs, self.intern)
        try:
            verify_instruction(op)
        except VerifyException as e:
            line, col = self.lx.line_col(start)
            raise HloShapeError(str(e), self.lx.filename, line, col) from None
        block.add_op(op)
        values[name] = op.results[0]
        return op

    def fast_instruction(
        self, m: re.Match[str], values: dict[str, SSAValue], block: Block
    ) -> HloOp | None:
        """The common `[ROOT] %name = f32[2]{0} opcode(` head, matched by `_HEAD`; None (and
        nothing consumed) when the slow path must handle it (or report its error)."""
        name, shape_tok, opcode = m.group(2, 3, 4)
        if name in _RESERVED:
            return None  # the slow path reports it (`inf`, `nan`, `ROOT` are no names)
        if name[0] == "%":
            name = name[1:]
        spec = OPCODES.get(opcode)
        if spec is None or name in values:
            return None
        stype = self.types.get(shape_tok) or self.head_type(shape_tok)
        if stype is None:
            return None
        lx = self.lx
        lx.pos = m.end()
        operands = None
        if opcode == "parameter":
            op = self.plain_parameter(name, stype, values, block)
            if op is not None:
                return op
        elif opcode not in _NOT_PLAIN:
            operands = self.fast_operands(values)
            if operands is not None:
                end = _NEXT_ATTR.match(lx.text, lx.pos)
                if end is not None and end.lastindex is None:  # no attributes
                    op = self.plain_instruction(name, opcode, spec, stype, operands, block, m)
                    if op is not None:
                        (values[name],) = op.results
                        return op
        return self.instruction_body(
            name,
            opcode,
            spec,
            stype.data,
            values,
            block,
            m.start(2),
            m.start(4),
            False,
            stype,
            operands,
        )

    def head_type(self, shape_tok: str) -> ShapeType | None:
        """The IR type of an instruction head's shape token not read yet; None where
        `shape` must read it (and report its error)."""
        try:
            return self.type_of(shape_tok) if shape_tok[0] != "(" else self.tuple_type(shape_tok)
        except ValueError:
            return None

    def plain_instruction(
        self,
        name: str,
        opcode: str,
        spec: Any,
        stype: ShapeType,
        operands: list[SSAValue],
        block: Block,
        m: re.Match[str],
    ) -> HloOp | None:
        """An instruction with plain operands and no attributes (about half of a large
        module's), once `fast_instruction` has read it: what `instruction_body` does for
        it, without its general steps; None when `instruction_body` must (to report an
        error)."""
        if spec.arity >= 0 and len(operands) != spec.arity:
            return None
        shape = stype.data
        if opcode in CHECKED_OPCODES and (
            # (`check_shapes`'s test for a rule that reads no attribute, inline)
            opcode in self.rule_reads
            or (opcode, (), id(shape), *map(id, map(_TYPE_OF, operands))) not in self.checked
        ):
            self.check_shapes(opcode, name, shape, operands, _NO_ATTRS, m.start(2))
        op = create_op(opcode, operands, shape, name, None, None, stype)
        _append_op(block, op)
        return op

    def plain_parameter(
        self, name: str, stype: ShapeType, values: dict[str, SSAValue], block: Block
    ) -> HloOp | None:
        """The rest of `parameter(N)` without attributes (a fifth of a large module's
        instructions), as `instruction_body` reads it, in two matches; None (nothing
        consumed) otherwise."""
        lx = self.lx
        text = lx.text
        pm = _PARAM_NUMBER.match(text, lx.pos)
        if pm is None:
            return None
        end = _NEXT_ATTR.match(text, pm.end())
        if end is None or end.lastindex is not None:
            return None  # attributes follow
        lx.pos = pm.end()
        attrs = {"number": int(pm.group(1))}
        op = create_op("parameter", (), stype.data, name, attrs, self.intern, stype)
        _append_op(block, op)
        (values[name],) = op.results
        return op

    def fast_value(self, kind: str, attr: str, vm: re.Match[str]) -> Any:
        """The value of attribute `attr` of `kind` from a match of `_FAST_VALUES[kind]`
        (group 1 starts at the value's first token), as `value` reads it; `_SLOW` when
        `value` must read it (or report its error)."""
        if kind == "ints":
            body = vm.group(1)
            return tuple(map(int, body[1:-1].split(","))) if len(body) > 2 else ()
        if kind == "comp":
            name = vm.group(1)
            if name in _NOT_NAMES:
                return _SLOW  # `inf`/`nan` lex as numbers
            return name[1:] if name[0] == "%" else name
        if kind == "int":
            return int(vm.group(1))
        if kind == "bool":
            return vm.group(1) == "true"
        if kind == "metadata":
            raw = vm.group(1)
            md = self.metadata_values.get(raw)  # (many instructions share one op_name)
            if md is None:
                fields: list[tuple[str, str]] = []
                for key, tok in _MD_FIELD.findall(raw, 1, len(raw) - 1):
                    if key == "inf" or key == "nan" or key not in METADATA_FIELDS:
                        return _SLOW  # (numbers, not `key=`; or an unknown field to report)
                    # (XLA drops fields at their default, but prints an empty payload)
                    if (tok != '""' or key == "metadata_payload") and tok != "0":
                        fields.append((key, tok if tok.isascii() else _escaped(tok)))
                    if key == "stack_frame_id":
                        self.saw_stack_frame_id = True
                md = self.metadata_values[raw] = A.Metadata(tuple(fields))
            return md
        if kind == "ident":
            tok = vm.group(1)
            allowed = IDENT_VALUES.get(attr)
            if tok == "inf" or tok == "nan" or (allowed is not None and tok not in allowed):
                return _SLOW
            return tok
        if kind == "raw":
            return A.Raw(_squash(vm.group(1)))
        if kind == "replica_groups":
            tok = vm.group(1)
            return A.Raw(tok if tok[0] == "[" else _BLANKS.sub("", tok))  # XLA prints {{0,1},{2,3}}
        if kind == "shapes":
            try:
                return tuple(map(self.array_shape, _SHAPE_TOKEN.findall(vm.group(1))))
            except ValueError:
                return _SLOW
        if kind == "slice":
            return tuple(
                A.SliceDim(int(a), int(b), int(c) if c else 1)
                for a, b, c in _SLICE_DIM.findall(vm.group(1))
            )
        raise AssertionError(kind)

    def fast_operands(self, values: dict[str, SSAValue]) -> list[SSAValue] | None:
        """A list of plain (optionally typed) operand names up to its `)`, or None (and nothing
        consumed) when the general parser must read it."""
        lx = self.lx
        text = lx.text
        pos = lx.pos
        m = _PLAIN_OPERANDS.match(text, pos)
        if m is not None:  # untyped names only: one match for the whole list
            body = m.group(1)
            if body is None:
                lx.pos = m.end()
                return []
            body = body.replace("%", "").replace(" ", "")  # (`%` starts a name only)
            if "\t" in body:
                body = body.replace("\t", "")
            try:
                operands = list(map(values.__getitem__, body.split(",")))
            except KeyError:
                return None
            lx.pos = m.end()
            return operands
        match = _OPERAND.match
        types = self.types
        operands: list[SSAValue] = []
        while True:
            m = match(text, pos)
            if m is None:
                return None
            shape_tok, name, end = m.group(1, 2, 3)
            value = values.get(name[1:] if name.startswith("%") else name)
            if value is None:
                return None
            # A typed operand whose token gives the value's (interned) type is compatible.
            if shape_tok is not None and types.get(shape_tok) is not value._type:  # type: ignore[attr-defined]
                typed = self.shapes.get(shape_tok)
                if typed is None or not typed.compatible(value._type.data):  # type: ignore[attr-defined]
                    return None
            operands.append(value)
            pos = m.end()
            if end == ")":
                lx.pos = pos
                return operands

    def instruction_body(
        self,
        name: str,
        opcode: str,
        spec: Any,
        shape: Shape | None,
        values: dict[str, SSAValue],
        block: Block,
        start: int,
        ostart: int,
        nested: bool = False,
        stype: ShapeType | None = None,
        read: list[SSAValue] | None = None,
    ) -> HloOp:
        """The rest of an instruction after its opening `(`; `stype`: the result shape's
        IR type when the caller has it at hand; `read`: the operands, when the caller has
        read them (up to the `)`)."""
        lx = self.lx
        attrs: dict[str, Any] = {}
        operands: list[SSAValue] = []
        text = lx.text
        if opcode == "parameter":
            m = _PARAM_NUMBER.match(text, lx.pos) if lx._peeked is None else None
            if m is not None:
                attrs["number"] = int(m.group(1))
                lx.pos = m.end()
            else:
                attrs["number"] = self.int_()
                self.expect(")")
        elif opcode == "constant":
            if shape is None:
                self.error("a constant needs its shape", ostart)
                raise AssertionError
            attrs["value"] = A.ShapedLiteral(shape, self.literal(shape))
            self.expect(")")
        else:
            fast = read
            if fast is None and not nested and lx._peeked is None:
                fast = self.fast_operands(values)
            if fast is not None:
                operands = fast
            elif not self.accept(")"):
                while True:
                    while self.accept(","):  # XLA skips empty items: add(, a,, b,)
                        pass
                    if self.accept(")"):
                        break
                    operands.append(self.operand(values, block))
                    if self.accept(")"):
                        break
                    self.expect(",")
        if spec.arity >= 0 and len(operands) != spec.arity:
            self.error(f"{opcode} takes {spec.arity} operand(s) but {len(operands)} given", ostart)
        while True:
            m = None
            if nested:
                # A nested instruction's attributes end where the enclosing operand list
                # goes on: take `, name=` only.
                saved = (lx.pos, lx._peeked)
                if not self.accept(","):
                    break
                if lx.peek()[0] != "ATTR":
                    lx.pos, lx._peeked = saved
                    break
            elif lx._peeked is None:
                m = _NEXT_ATTR.match(text, lx.pos)
                if m is None:
                    if not self.accept(","):
                        break
                elif m.lastindex is None:  # no `, name=`, and no comma next: the end
                    break
            elif not self.accept(","):
                break
            if m is not None:
                key = m.group(1)
                kstart = m.start(1)
                lx.pos = m.end()
            else:
                k, key, kstart = lx.next()
                if k != "ATTR":
                    self.error(f"expected an attribute, got {_describe(k, key)}", kstart)
            aspec: AttrSpec | None = spec.by_name.get(key) or COMMON_BY_NAME.get(key)
            if aspec is None:
                if key == "parameter_replication":
                    self.error(
                        "parameter_replication is valid on a parameter only (XLA's parser "
                        "aborts on it elsewhere)",
                        kstart,
                    )
                takes = sorted({*spec.by_name, *COMMON_BY_NAME})
                self.error(
                    f"unknown attribute {key!r} for {opcode}; it takes {', '.join(takes)}", kstart
                )
                raise AssertionError
            if key in attrs:
                self.error(f"attribute {key!r} given twice", kstart)
            akind = aspec.kind
            value: Any = _SLOW
            if m is not None:
                vre = _FAST_VALUES.get(akind)
                vm = None if vre is None else vre.match(text, lx.pos)
                if vm is not None:
                    value = self.fast_value(akind, key, vm)
                    if value is not _SLOW:
                        vstart = vm.start(1)
                        lx.pos = vm.end()
            if value is _SLOW:
                vstart = lx.peek()[2]
                value = self.value(akind, key, opcode)
            attrs[key] = value
            if key not in _SPECIAL_KEYS and akind != "result_accuracy":
                pass  # (one test for the attributes read as they are)
            elif key == "frontend_attributes":
                fa = self.frontend_attributes(attrs.pop(key), vstart)
                if fa is None:
                    continue
                attrs[key] = fa
            elif key == "origin":
                origin = _normalize_origin(attrs[key].text)
                if origin is None:
                    self.error(
                        "origin is {[synthetic_call]} or a tuple tree of original arrays "
                        '{"name" {index}}',
                        vstart,
                    )
                    raise AssertionError
                attrs[key] = A.Raw(origin)
            elif key == "statistics":
                stats = _normalize_statistics(attrs[key].text)
                if stats is None:
                    self.error("statistics are {visualizing_index=INT, name=NUMBER, ...}", vstart)
                    raise AssertionError
                if not stats:
                    del attrs[key]  # XLA prints statistics only when there are some
                    continue
                attrs[key] = A.Raw(stats)
            elif key == "sharding":
                if not _sharding_form_ok(attrs[key].text):
                    self.error(
                        "a sharding is {replicated}, {maximal device=N}, {devices=[...]...}, "
                        "{manual}, {unknown} or a tuple {{...}, ...} of them",
                        vstart,
                    )
                if attrs[key].text.startswith("{{"):
                    attrs[key] = A.Raw(_normalize_tuple_sharding(attrs[key].text))
            elif akind == "result_accuracy" and attrs[key].is_default:
                del attrs[key]  # XLA keeps no trace of the default mode
                continue
            elif key in _DROPPED and _DROPPED[key](opcode, attrs[key]):
                del attrs[key]  # read and dropped as XLA's parser does
                continue
            if aspec.kind == "comp":
                if attrs[key] == getattr(self, "current_computation", None):
                    self.error(f"computation {attrs[key]!r} cannot call itself", vstart)
                self.check_defined((attrs[key],), vstart)
            elif aspec.kind == "comps":
                self.check_defined(attrs[key], vstart)
        if opcode in _FIX_UP_OR_CHECK:  # (one test for the many plain opcodes)
            shape, stype = self.fix_up(name, opcode, ostart, operands, attrs, shape, stype)
        if shape is None:
            from hlopass.shape_inference import infer_shape

            try:
                shape = infer_shape(
                    opcode,
                    [v.type.data for v in operands],  # type: ignore[attr-defined]
                    attrs,
                    getattr(self, "root_shapes", {}).get,
                )
            except ValueError as e:
                self.error(f"cannot infer the shape of {name}: {e}", ostart)
                raise AssertionError from None
        if attrs:
            if "async_execution_thread" in attrs and not opcode.startswith("async-"):
                self.sugar_thread = attrs.pop("async_execution_thread")  # the shorthand
            sharding = attrs.get("sharding")
            if sharding is not None and shape.is_tuple and not sharding.text.startswith("{{"):
                attrs["sharding"] = A.Raw(_single_tuple_sharding(sharding.text, shape))
        if opcode == "call" or opcode == "fusion":
            callee = attrs.get("to_apply" if opcode == "call" else "calls")
            self.check_call(name, callee, operands, start, opcode == "fusion")
        if opcode in CHECKED_OPCODES:
            self.check_shapes(opcode, name, shape, operands, attrs, start)
        op = create_op(opcode, operands, shape, name, attrs, self.intern, stype)
        _append_op(block, op)
        (values[name],) = op.results  # (unpacked: `SSAValues.__getitem__` is Python code)
        return op

    def check_shapes(
        self,
        opcode: str,
        name: str,
        shape: Shape,
        operands: list[SSAValue],
        attrs: dict[str, Any],
        start: int,
    ) -> None:
        """verify_instruction(op) on the values at hand, before the op exists; once per
        parse for each combination of inputs the rule reads.

        `check_instruction` is a function of the result and operand shapes and of the
        attributes it reads (the name is only in its messages): once it passed, it passes
        for inputs equal in all it read. Which attributes those are is recorded per opcode
        (`rule_reads`, growing as rules read more), and a pass is kept under the shapes
        (by identity: interned per parse, held alive by the entry) and the values of those
        attributes."""
        reads = self.rule_reads.get(opcode, ())
        key: tuple[Any, ...] | None = (
            opcode,
            reads,
            id(shape),
            *map(id, map(_TYPE_OF, operands)),
            *map(attrs.get, reads),
        )
        try:
            if key in self.checked:
                return
        except TypeError:  # an unhashable attribute value: checked every time
            key = None
        shapes = list(map(_SHAPE_OF, operands))
        read: set[str] = set()

        def attr(k: str) -> Any:
            read.add(k)
            return attrs.get(k)

        try:
            check_instruction(opcode, name, shape, shapes, attr)
        except VerifyException as e:
            lx = self.lx
            line, col = lx.line_col(start)
            raise HloShapeError(str(e), lx.filename, line, col) from None
        if key is None:
            return
        if not read.issubset(reads):
            reads = self.rule_reads[opcode] = tuple(sorted(read.union(reads)))
            key = (opcode, reads, id(shape), *map(id, map(_TYPE_OF, operands)))
            key += tuple(map(attrs.get, reads))
        kept = (shape, list(map(_TYPE_OF, operands)))  # (alive, so no id is reused)
        with suppress(TypeError):  # (an unhashable attribute value: not kept)
            self.checked[key] = kept

    def check_call(
        self,
        name: str,
        callee: str | None,
        operands: list[SSAValue],
        start: int,
        is_fusion: bool = False,
    ) -> None:
        """XLA's verifier (`ShapeVerifier::HandleCall`, `HloVerifier`'s fusion check): a
        call or fusion passes as many operands as its computation has parameters, each
        compatible with its parameter's shape."""
        if isinstance(callee, tuple):
            callee = callee[0] if len(callee) == 1 else None
        comp = getattr(self, "computation_ops", {}).get(callee)
        if comp is None:
            return  # (not defined yet: `check_defined` reports it)
        params = comp.parameters()
        why = None
        # (XLA lets a fusion pass more operands than its computation takes, not fewer)
        extra = len(operands) - len(params)
        if extra < 0 or (extra and not is_fusion):
            why = f"passes {len(operands)} operand(s) to {callee}, which takes {len(params)}"
        else:
            for i, (p, v) in enumerate(zip(params, operands[: len(params)], strict=True)):
                want, got = p.shape, v.type.data  # type: ignore[attr-defined]
                if not got.compatible(want):
                    why = (
                        f"operand {i} {got.text(False)} does not match parameter {i} of "
                        f"{callee}, {want.text(False)}"
                    )
                    break
        if why is not None:
            line, col = self.lx.line_col(start)
            raise HloShapeError(f"{name}: {why}", self.lx.filename, line, col)

    def fix_up(
        self,
        name: str,
        opcode: str,
        ostart: int,
        operands: list[SSAValue],
        attrs: dict[str, Any],
        shape: Shape | None,
        stype: ShapeType | None,
    ) -> tuple[Shape | None, ShapeType | None]:
        """What XLA's parser adds to or changes in instructions of the `_FIXED_UP`
        opcodes, and the checks of required attributes (`_FIX_UP_OR_CHECK` opcodes only);
        returns the result shape and its type (None when it changed)."""
        if opcode in _FIXED_UP:  # (most opcodes here are only checked: one test for them)
            if (
                opcode == "broadcast"
                and "dimensions" not in attrs
                and len(operands) == 1
                and getattr(operands[0].type.data, "rank", None) == 0  # type: ignore[attr-defined]
            ):
                attrs["dimensions"] = ()  # a scalar broadcast may leave out dimensions={}
            elif opcode == "recv-done" and len(operands) == 1 and shape is not None:
                # XLA derives recv-done's shape from its recv (a declared shape is ignored; a
                # left-out one it cannot infer).
                rs = operands[0].type.data  # type: ignore[attr-defined]
                if rs.is_tuple and len(rs.elements) == 3:
                    shape = TupleShape((rs.elements[0], rs.elements[2]))
                    stype = None  # no longer the declared shape's type
            elif opcode == "send" and len(operands) == 2 and shape is not None:
                # XLA gives send (data, u32[], token[]) whatever shape the text declares.
                data = operands[0].type.data  # type: ignore[attr-defined]
                sent = TupleShape((data, self.array_shape("u32[]"), self.array_shape("token[]")))
                if shape != sent:
                    shape, stype = sent, None
            elif opcode in ("send-done", "after-all") and shape is not None:
                # XLA gives these a token[] whatever shape the text declares.
                token = self.array_shape("token[]")
                if shape != token:
                    shape, stype = token, None
            elif opcode == "add-dependency" and operands and shape is not None:
                # XLA gives add-dependency its first operand's shape (a declared one is ignored).
                data = operands[0].type.data  # type: ignore[attr-defined]
                if shape != data:
                    shape, stype = data, None
            elif (
                opcode == "custom-call"
                and "to_apply" in attrs
                and "called_computations" not in attrs
            ):
                # XLA keeps a custom-call's to_apply as its one called computation.
                attrs["called_computations"] = (attrs.pop("to_apply"),)
            elif opcode == "outfeed" and "outfeed_shape" not in attrs and operands:
                # XLA's outfeed always carries (and prints) the shape of what it sends.
                attrs["outfeed_shape"] = operands[0].type.data  # type: ignore[attr-defined]
        for a in _REQUIRED.get(opcode, ()):
            if a not in attrs:
                self.error(f"{opcode} {name} is missing attribute {a}", ostart)
        if opcode in ("send-done", "recv-done") and len(operands) == 1:
            _check_done_channel(self, name, opcode, operands[0], attrs.get("channel_id"), ostart)
        if (
            opcode == "conditional"
            and "branch_computations" not in attrs
            and not ("true_computation" in attrs and "false_computation" in attrs)
        ):
            self.error(
                f"conditional {name} needs branch_computations={{...}} or true_computation= "
                "and false_computation=",
                ostart,
            )
        return shape, stype

    def operand(self, values: dict[str, SSAValue], block: Block) -> SSAValue:
        lx = self.lx
        typed: Shape | None = None
        if self.at_shape():
            typed = self.shape()
        kind, tok, start = lx.next()
        if kind != "NAME":
            self.error(f"expected an operand name, got {_describe(kind, tok)}", start)
        if lx.peek()[1] == "(" and not tok.startswith("%") and tok in OPCODES:
            # A nested instruction: `add(f32[] multiply(a, b), c)`.
            lx.rewind_to_peek()
            base = f"{tok}.anon"
            name = base
            i = 0
            while name in values:
                i += 1
                name = f"{base}.{i}"
            lx.pos = start
            nested = self.instruction_rhs(name, values, block, start, typed, nested=True)
            if type(nested) is _PARAMETER_CLS:
                self._place(nested, False, start, None, self.params)
            return nested.results[0]
        name = tok[1:] if tok.startswith("%") else tok
        value = values.get(name)
        if value is None:
            self.error(f"instruction {name!r} is not defined", start)
            raise AssertionError
        if typed is not None and not typed.compatible(value.type.data):  # type: ignore[attr-defined]
            self.error(
                f"operand {name} is declared as {typed.text(False)} but has shape "
                f"{value.type.data.text(False)}",  # type: ignore[attr-defined]
                start,
            )
        return value


_FA_FORM = 'frontend_attributes are {name="value", name={...}, ...}'
_STRING_BODY = r'"([^"\\]*+(?:\\.[^"\\]*+)*+)"'  # STRING_RE, the text between the quotes a group
_FA_KEY = re.compile(rf"\s*+(?:{_STRING_BODY}|([\w.\-$]++))\s*+=\s*+")
_FA_STRING = re.compile(_STRING_BODY)


def _normalize_frontend_attrs(text: str) -> str | None:
    """frontend_attributes as XLA re-prints them: sorted by key, `k="v"` joined by commas,
    values that are themselves `{...}` unquoted; None where XLA's parser rejects the text
    (a quoted or missing key, an unquoted value, a missing or trailing comma)."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    body = body[1:-1]
    pairs: dict[str, str] = {}
    pos = 0
    n = len(body)
    while True:
        while pos < n and body[pos] in " \t\r\n":
            pos += 1
        if pos == n:
            if pairs:
                return None  # a trailing comma
            break
        m = _FA_KEY.match(body, pos)
        if not m or m.group(2) is None:
            return None
        key = m.group(2)
        pos = m.end()
        if pos < n and body[pos] == '"':
            sm = _FA_STRING.match(body, pos)
            if not sm:
                return None
            raw = sm.group(1)
            pos = sm.end()
            value = _unescape('"' + raw + '"')
            if value.startswith("{") and value.endswith("}"):
                pairs[key] = value
            elif raw.isascii():
                pairs[key] = '"' + raw + '"'
            else:  # XLA writes non-ASCII as octal UTF-8 bytes
                pairs[key] = '"' + A.c_escape(value) + '"'
        elif pos < n and body[pos] == "{":
            i = find_closing(body, pos)
            if i < 0:
                return None
            pairs[key] = body[pos : i + 1]
            pos = i + 1
        else:
            return None
        while pos < n and body[pos] in " \t\r\n":
            pos += 1
        if pos == n:
            break
        if body[pos] != ",":
            return None
        pos += 1
    return "{" + ",".join(f"{k}={pairs[k]}" for k in sorted(pairs)) + "}"


_IO_ALIAS_ENTRY = re.compile(
    r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}\s*(?:,\s*([\w-]+)\s*)?\)"
)


def _normalize_io_alias(text: str) -> str:
    """`input_output_alias` as XLA re-prints it: spaced braces, the alias kind always given."""
    entries = []
    for out, param, pidx, kind in _IO_ALIAS_ENTRY.findall(text):
        out = ",".join(x.strip() for x in out.split(",") if x.strip())
        pidx = ",".join(x.strip() for x in pidx.split(",") if x.strip())
        entries.append(f"{{{out}}}: ({param}, {{{pidx}}}, {kind or 'may-alias'})")
    if not entries:
        return text
    return "{ " + ", ".join(entries) + " }"


class _NameUniquer:
    """XLA's NameUniquer: `root.N` names share one id pool per root; clashes get fresh ids."""

    def __init__(self) -> None:
        self.used: dict[str, tuple[set[int], list[int]]] = {}

    def unique(self, name: str) -> str:
        root, sep, suffix = name.rpartition(".")
        has_suffix = bool(sep) and bool(root) and suffix.isdigit()
        if has_suffix:
            number = int(suffix)
        else:
            root, number = name, 0
        entry = self.used.get(root)
        if entry is None:
            entry = self.used[root] = (set(), [0])
        ids, nxt = entry
        if number in ids:
            while nxt[0] in ids:
                nxt[0] += 1
            number = nxt[0]
            nxt[0] += 1
        ids.add(number)
        if number == 0:
            return f"{root}.0" if has_suffix else root
        return f"{root}.{number}"


# A name whose last `.` part has a leading 0 or a non-ASCII character: `_NameUniquer` may
# rewrite it (`a.01` -> `a.1`) or give it another name's id (`a.01` and `a.1`).
# (The lookahead first checks, possessively, that no `.` follows on the line; then either a
# `0` and one more character, or a non-ASCII character after a run of ASCII ones: linear.
# `[^.\n]*[^\x00-\x7f][^.\n]*$` backtracked over every split of a non-ASCII suffix.)
_RISKY_SUFFIX = re.compile(
    r"\.(?=[^.\n]*+$)(?:0[^.\n]|[\x00-\x09\x0b-\x2d\x2f-\x7f]*+[^\x00-\x7f])", re.M
)
_ZERO_SUFFIX = re.compile(r"^(.*)\.0$", re.M)  # `a.0` has the id of `a`
# The same two searches for ASCII names: a last `.` part `0X...`; a name ending in `.0`.
_RISKY_ASCII = re.compile(r"\.0[^.\n][^.\n]*+$", re.M)
_ZERO_END = re.compile(r"\.0$", re.M)


def _append_op(block: Block, op: Operation) -> None:
    """`block.add_op(op)` for a fresh op: link it after the block's last op."""
    last = block._last_op  # pyright: ignore[reportPrivateUsage]
    op.parent = block
    if last is None:
        block._first_op = op  # pyright: ignore[reportPrivateUsage]
    else:
        last._next_op = op  # pyright: ignore[reportPrivateUsage]
        op._prev_op = last  # pyright: ignore[reportPrivateUsage]
    block._last_op = op  # pyright: ignore[reportPrivateUsage]


def _names_unique(value_maps: list[dict[str, SSAValue]]) -> bool:
    """True when `_uniquify_instruction_names` would rename nothing, checked in bulk: the
    names are distinct module-wide, none has a risky suffix, and no `a.0` meets an `a`.
    Then each name maps to its own (root, id) pair and back (`root.N` with N canonical, or
    a root alone for id 0), so no two names share an id and the uniquer keeps them all."""
    names: set[str] = set()
    total = 0
    for values in value_maps:
        names.update(values)
        total += len(values)
    if len(names) != total:
        return False
    text = "\n".join(names)
    if not text.isascii():
        return _RISKY_SUFFIX.search(text) is None and names.isdisjoint(_ZERO_SUFFIX.findall(text))
    # ASCII names: both searches start at a `.0`, found by a literal scan (few names have one).
    if _RISKY_ASCII.search(text) is not None:
        return False
    roots = []
    for m in _ZERO_END.finditer(text):
        roots.append(text[text.rfind("\n", 0, m.start()) + 1 : m.start()])
    return names.isdisjoint(roots)


def _uniquify_instruction_names(comps: list[ComputationOp]) -> None:
    """Rename instructions as XLA does when it adds the parsed computations to the module:
    names are made unique module-wide, computations and instructions in text order."""
    uniquer = _NameUniquer()
    unique = uniquer.unique
    for comp in comps:
        renamed: dict[str, str] = {}
        op = comp.regions[0].first_block.first_op  # type: ignore[union-attr]
        while op is not None:
            if type(op) is not ReturnOp:
                props = op.properties
                old = props["name"].data  # type: ignore[attr-defined]
                new = unique(old)
                if new != old:
                    props["name"] = StringAttr(new)
                    renamed[old] = new
            op = op._next_op  # pyright: ignore[reportPrivateUsage]
        if renamed:
            for op in comp.instructions:
                preds = op.attr("control-predecessors")
                if preds:
                    op.set_attr("control-predecessors", tuple(renamed.get(p, p) for p in preds))


_TABLE_NAMES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_TABLE_ROW = re.compile(r"[ \t]*(\d+)[ \t]+([^\n]*)")
_TABLE_FIELD = re.compile(r"(\w+)=(-?\d+)")


def _renumber_stack_frames(tables: str, comps: list[ComputationOp]) -> str:
    """Rebuild the stack-frame tables the way XLA does on parse.

    XLA resolves each instruction's `stack_frame_id` to its full call stack and re-adds the
    stacks, computations and instructions in text order, outermost frame first, into a
    fresh de-duplicated index: unused rows disappear and ids are renumbered in first-use
    order. A `parent_frame_id` of p in the text names frame p-1 (0: no parent). Stacks that
    cannot be resolved lose their `stack_frame_id`.
    """
    files: list[str] = []
    funcs: list[str] = []
    locs: list[dict[str, int]] = []
    frames: list[tuple[int, int]] = []
    section = ""
    for line in tables.splitlines():
        head = line.strip()
        if head in _TABLE_NAMES:
            section = head
            continue
        m = _TABLE_ROW.match(line)
        if not m:
            continue
        body = m.group(2).strip()
        if section == "FileNames":
            files.append(body)
        elif section == "FunctionNames":
            funcs.append(body)
        elif section == "FileLocations":
            locs.append(dict((k, int(v)) for k, v in _TABLE_FIELD.findall(body)))
        elif section == "StackFrames":
            f = dict((k, int(v)) for k, v in _TABLE_FIELD.findall(body))
            frames.append((f.get("file_location_id", 0), f.get("parent_frame_id", 0)))
    new_files: dict[str, int] = {}
    new_funcs: dict[str, int] = {}
    new_locs: dict[tuple[int, ...], int] = {}
    new_frames: dict[tuple[int, int], int] = {}
    memo: dict[int, int | None] = {}

    def intern(table: dict[Any, int], key: Any) -> int:
        i = table.get(key)
        if i is None:
            i = table[key] = len(table) + 1
        return i

    def resolve(fid: int) -> int | None:
        if fid in memo:
            return memo[fid]
        chain: list[int] = []
        cur = fid
        while True:
            if cur < 1 or cur > len(frames) or len(chain) > len(frames):
                memo[fid] = None
                return None
            chain.append(cur)
            parent = frames[cur - 1][1] - 1
            if parent == 0:
                break
            cur = parent
        new_parent = 0
        for old in reversed(chain):
            lid = frames[old - 1][0]
            if lid < 1 or lid > len(locs):
                memo[fid] = None
                return None
            loc = locs[lid - 1]
            fn, fu = loc.get("file_name_id", 0), loc.get("function_name_id", 0)
            if not (1 <= fn <= len(files) and 1 <= fu <= len(funcs)):
                memo[fid] = None
                return None
            key = (
                intern(new_files, files[fn - 1]),
                intern(new_funcs, funcs[fu - 1]),
                loc.get("line", 0),
                loc.get("end_line", 0),
                loc.get("column", 0),
                loc.get("end_column", 0),
            )
            new_parent = intern(new_frames, (intern(new_locs, key), new_parent))
        memo[fid] = new_parent
        return new_parent

    for comp in comps:
        for op in comp.instructions:
            md = op.properties.get("metadata")
            if md is None:
                continue
            fields = md.data.fields  # type: ignore[attr-defined]
            for i, (k, v) in enumerate(fields):
                if k != "stack_frame_id":
                    continue
                try:
                    new = resolve(int(v))
                except ValueError:
                    new = None
                if new is None:
                    nf = fields[:i] + fields[i + 1 :]
                else:
                    nf = fields[:i] + ((k, str(new)),) + fields[i + 1 :]
                op.set_attr("metadata", A.Metadata(nf))
                break
    if not new_frames:
        return ""
    out = ["FileNames"]
    out += [f"{i} {s}" for s, i in new_files.items()]
    out += ["", "FunctionNames"]
    out += [f"{i} {s}" for s, i in new_funcs.items()]
    out += ["", "FileLocations"]
    out += [
        f"{i} {{file_name_id={k[0]} function_name_id={k[1]} line={k[2]} end_line={k[3]} "
        f"column={k[4]} end_column={k[5]}}}"
        for k, i in new_locs.items()
    ]
    out += ["", "StackFrames"]
    out += [
        f"{i} {{file_location_id={k[0]} parent_frame_id={k[1] + 1}}}" for k, i in new_frames.items()
    ]
    return "\n".join(out)


_UNIT = UnitAttr()
_PARAMETER_CLS = OP_CLASSES["parameter"]
_NAME_RE = r"%?[A-Za-z_$][\w.\-$]*"
# One operand of a plain operand list: `[/*index=N*/][SHAPE ]name` and `,` or `)`.
_OPERAND = re.compile(
    rf"[ \t]*(?:/\*index=\d+\*/[ \t]*)?(?:({SHAPE_RE})[ \t]+)?({_NAME_RE})[ \t]*([,)])"
)
# A whole operand list of untyped names (group 1; None when empty) up to its `)`. The
# names are possessive: the last one is not given back character by character to look
# for a comma (that cannot be in a name).
_NAME_ATOM = r"%?+[A-Za-z_$][\w.\-$]*+"
_PLAIN_OPERANDS = re.compile(rf"[ \t]*+((?:{_NAME_ATOM}[ \t]*+,[ \t]*+)*+{_NAME_ATOM})?+[ \t]*+\)")
_NOT_NAMES = frozenset({"inf", "nan", "ROOT"})
_SHAPE_OF = attrgetter("_type.data")  # an SSA value's shape
_TYPE_OF = attrgetter("_type")  # an SSA value's (per parse interned) type
_CLOSE = re.compile(TRIVIA_RE + r"\}", re.S)  # a computation's closing brace
_COMMA_NEXT = re.compile(TRIVIA_RE + ",", re.S)  # a `,` is the next token
_TRIVIA = re.compile(TRIVIA_RE, re.S)  # what the lexer skips before a token
# Words XLA's lexer reads as keywords, never as an instruction's name ("expects name"):
# element types even after `%`, the other keywords only without it (checked with jaxlib).
_TYPE_WORDS = frozenset(ELEMENT_BITS)
_KEYWORDS = frozenset({
    "true", "false", "nan", "inf", "maximal", "replicated", "manual", "unknown",
    "ENTRY", "ROOT", "HloModule", "last_tile_dim_replicate",
})  # fmt: skip


# Name tokens (`%` included) that `reserved_name` rejects, as one set for the fast path.
_RESERVED = _TYPE_WORDS | _KEYWORDS | {"%" + w for w in _TYPE_WORDS}


def reserved_name(tok: str) -> bool:
    """Whether the name token `tok` (with its `%`, if any) is a keyword to XLA."""
    return tok in _RESERVED


_SKIP = TRIVIA_RE  # what the lexer skips between tokens
_PARAM_NUMBER = re.compile(r"[ \t]*(-?\d+)[ \t]*\)")
# `, name=` (group 1: the name), or else the end of the attributes: no comma comes next.
_NEXT_ATTR = re.compile(rf"[ \t]*,[ \t]*([A-Za-z_][\w.\-]*)=|(?>{_SKIP})(?!,)", re.S)
_INTS = re.compile(r"(\{(?:-?\d++(?:,-?\d++)*+)?+\})")
# A called computation's name, not followed by what would make it another token.
_COMP_NAME = re.compile(rf"({_NAME_RE})(?![\w.\-$=:(\[])")
# Attributes (and called computations) an instruction of each opcode must have, for the
# opcodes that have some.
_REQUIRED: dict[str, tuple[str, ...]] = {
    op: req
    for op, spec in OPCODES.items()
    if (
        req := tuple(
            [a.name for a in spec.attrs if a.required and a.name not in ("number", "value")]
            + [a.name for a in spec.computations if a.required]
        )
    )
}
_FIXED_UP = frozenset(
    {
        "broadcast",
        "recv-done",
        "send",
        "send-done",
        "after-all",
        "add-dependency",
        "outfeed",
        "custom-call",
    }
)  # `instruction_body` fixes them up
_FIX_UP_OR_CHECK = _FIXED_UP | _REQUIRED.keys() | {"conditional", "send-done", "recv-done"}
_SHAPE_ATOM = f"(?>{SHAPE_RE})"  # no backtracking into a shape: the lexer takes it whole
_SHAPE_TOKEN = re.compile(_SHAPE_ATOM)
_ELEMENT = rf"(?:/\*index=\d++\*/\s*+)?+{_SHAPE_ATOM}\s*+"  # XLA numbers every 5th element
# Lists as `item(?:,item)*+`, possessive: an item starts where the loop could stop, so giving
# an item back can never let what follows match, and no backtracking state piles up.
_ELEMENTS = rf"(?:{_ELEMENT}(?:,\s*+{_ELEMENT})*+)?+"
_FLAT_TUPLE = re.compile(rf"\(\s*+{_ELEMENTS}\)")
# `[ROOT] name = SHAPE opcode(`: the head of most instructions, SHAPE an array shape on one
# line or a tuple of array shapes (`fast_instruction` reads the latter as `shape` would).
_HEAD = re.compile(
    TRIVIA_RE  # possessive: no backtracking into the blanks
    + rf"(ROOT[ \t]+)?({_NAME_RE})[ \t]*=[ \t]*({SHAPE_RE}|\(\s*+{_ELEMENTS}\))"
    + r"[ \t]+([A-Za-z_][\w\-]*)\(",
    re.S,
)
# Opcodes `plain_instruction` leaves to `instruction_body` (their operands are no plain
# list, or it reads more than operands for them).
# Attributes `instruction_body` normalizes, checks or drops once read.
_SPECIAL_KEYS = frozenset({"frontend_attributes", "origin", "statistics", "sharding", *_DROPPED})
_NOT_PLAIN = _FIX_UP_OR_CHECK | {"parameter", "constant", "call", "fusion"}
_NO_ATTRS: dict[str, Any] = {}
_SLOW = object()  # `fast_value`: leave this value to `value`
# Values `fast_value` reads, each directly after `name=`: patterns that match only where
# the lexer would read the same tokens (else `value` reads them). Group 1 is the value.
_STRING = STRING_RE
_INT = r"-?\d++(?![\w.])"  # an INT token: not the start of a float, padding, 2x2, ...
_WORD_END = r"(?=[\s,})]|\Z)"  # a NAME token ends here (not an attribute name or label)
_MD_FIELD = re.compile(rf"\s*+([A-Za-z_][\w.\-]*+)=\s*+({_STRING}|{_INT})\s*+,?+", re.S)
_BRACED = (
    rf"\{{(?:[^{{}}\"]++|{_STRING}|\{{(?:[^{{}}\"]++|{_STRING})*+\}})*+\}}"  # two levels at most
)
_SLICE_RANGE = r"\[\s*+\d++\s*+:\s*+\d++\s*+(?::\s*+\d++\s*+)?+\]\s*+"
_SLICE_DIM = re.compile(r"\[\s*(\d+)\s*:\s*(\d+)\s*(?::\s*(\d+)\s*)?\]")
_BLANKS = re.compile(r"\s+")
_FAST_VALUES: dict[str, re.Pattern[str]] = {
    "ints": _INTS,
    "comp": _COMP_NAME,
    "int": re.compile(rf"\s*({_INT})"),
    "bool": re.compile(rf"\s*(true|false){_WORD_END}"),
    "metadata": re.compile(
        rf"\s*(\{{(?:\s*+[A-Za-z_][\w.\-]*+=\s*+(?:{_STRING}|{_INT})\s*+,?+)*+\s*+\}})", re.S
    ),
    "ident": re.compile(rf"\s*([A-Za-z_]\w*){_WORD_END}"),
    "raw": re.compile(rf"\s*({_BRACED})", re.S),
    "replica_groups": re.compile(rf"\s*(\[[\d,]*\]<=\[[\d,]*\](?:T\([\d,]*\))?|{_BRACED})", re.S),
    "shapes": re.compile(rf"\s*(\{{\s*+{_ELEMENTS}\}})"),
    "slice": re.compile(rf"\s*(\{{\s*+(?:{_SLICE_RANGE}(?:,\s*+{_SLICE_RANGE})*+)?+\}})"),
}
# A computation head, as `fast_computation_head` reads it: name and `(`, then each
# parameter `label: SHAPE` with its `,` or `)` (or just `)`), then `-> SHAPE {`.
_COMP_HEAD = re.compile(rf"(ENTRY\s+)?({_NAME_RE})\s*\(")
_NO_PARAMS = re.compile(r"\s*\)")
_PARAM_HEAD = re.compile(rf"\s*([A-Za-z_][\w.\-]*):\s*({_SHAPE_ATOM})\s*([,)])")
_RESULT_HEAD = re.compile(rf"\s*->\s*({_SHAPE_ATOM})\s*\{{")


# A string, a comment, or a non-ASCII character (which XLA's lexer takes for neither a
# name character nor white space: `pé` or a no-break space is an error there). An
# unterminated string or comment runs to the end (one linear pass whatever the input).
_NON_ASCII = re.compile(r'"(?:[^"\\]|\\.)*+"?|//[^\n]*|/\*(?:.*?\*/|.*)|([^\x00-\x7f])', re.S)


def _check_ascii(lx: Lexer) -> None:
    for m in _NON_ASCII.finditer(lx.text):
        if m.group(1) is not None:
            lx.error_at(
                m.start(1),
                f"unexpected non-ASCII character {m.group(1)!r} (U+{ord(m.group(1)):04X})",
            )


def parse_hlo(text: str, filename: str | None = None) -> ModuleOp:
    """Parse HLO module text (either print style) into an xDSL module of `hlo` ops.

    Raises `HloParseError` (with `.line`, `.col`) on malformed input.
    """
    parser = ModuleParser(text, filename)
    if not text.isascii():
        _check_ascii(parser.lx)
    if "\\" in text:
        _check_escapes(parser.lx)
    try:
        with gc_paused():
            return as_hlo_module(parser.parse())
    except RecursionError:
        line, col = parser.lx.line_col(parser.lx.pos)
        raise HloParseError("input nests too deeply", filename, line, col) from None


def parse_attribute_value(kind: str, text: str) -> Any:
    """Parse one attribute value of `kind` from its HLO text (used by the xDSL form)."""
    p = _Parser(Lexer(text))
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
