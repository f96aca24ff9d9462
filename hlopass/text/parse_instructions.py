"""HLO text, the instruction layer: one instruction (`name = shape opcode(operands),
attributes`), its fast paths, its attribute list, the checks XLA's parser makes of it,
and the fix-ups it applies (`InstructionParser`, which `importer.ModuleParser` extends
with computations and the module)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import suppress
from operator import attrgetter
from typing import Any, cast

from xdsl.dialects.builtin import StringAttr, UnitAttr
from xdsl.ir import Block, SSAValue
from xdsl.utils.exceptions import VerifyException

from hlopass.checking.verifier import CHECKED_OPCODES, check_instruction, verify_instruction
from hlopass.dialects.hlo import (
    OP_CLASSES,
    ComputationOp,
    HloOp,
    ShapeType,
    create_op,
    new_computation_op,
    new_return_op,
)
from hlopass.dialects.opcodes import COMMON_BY_NAME, IDENT_VALUES, OPCODES, AttrSpec
from hlopass.errors import HloShapeError
from hlopass.ir import attrs as A
from hlopass.ir.names import first_free
from hlopass.ir.shape import (
    ELEMENT_BITS,
    ArrayShape,
    BufferShape,
    Shape,
    TupleShape,
)
from hlopass.text.lexer import SHAPE_RE, STRING_RE, TRIVIA_RE
from hlopass.text.parse_normalize import (
    DROPPED,
    FA_FORM,
    append_op,
    async_sugar_of,
    check_done_channel,
    normalize_frontend_attrs,
    normalize_origin,
    normalize_statistics,
    normalize_tuple_sharding,
    single_tuple_sharding,
    sugar_spec,
)
from hlopass.text.parse_values import (
    ELEMENTS,
    METADATA_FIELDS,
    SHAPE_TOKEN,
    ValueParser,
    describe,
    escaped_string,
    sharding_form_ok,
    squash,
)

UNIT = UnitAttr()
_PARAMETER_CLS = OP_CLASSES["parameter"]
NAME_RE = r"%?[A-Za-z_$][\w.\-$]*"
# One operand of a plain operand list: `[/*index=N*/][SHAPE ]name` and `,` or `)`.
_OPERAND = re.compile(
    rf"[ \t]*(?:/\*index=\d+\*/[ \t]*)?(?:({SHAPE_RE})[ \t]+)?({NAME_RE})[ \t]*([,)])"
)
# A whole operand list of untyped names (group 1; None when empty) up to its `)`. The
# names are possessive: the last one is not given back character by character to look
# for a comma (that cannot be in a name).
_NAME_ATOM = r"%?+[A-Za-z_$][\w.\-$]*+"
_PLAIN_OPERANDS = re.compile(rf"[ \t]*+((?:{_NAME_ATOM}[ \t]*+,[ \t]*+)*+{_NAME_ATOM})?+[ \t]*+\)")
NOT_NAMES = frozenset({"inf", "nan", "ROOT"})
_SHAPE_OF = attrgetter("_type.data")  # an SSA value's shape
_TYPE_OF = attrgetter("_type")  # an SSA value's (per parse interned) type
_CLOSE = re.compile(TRIVIA_RE + r"\}", re.S)  # a computation's closing brace
COMMA_NEXT = re.compile(TRIVIA_RE + ",", re.S)  # a `,` is the next token
TRIVIA = re.compile(TRIVIA_RE, re.S)  # what the lexer skips before a token
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
_COMP_NAME = re.compile(rf"({NAME_RE})(?![\w.\-$=:(\[])")
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
# `[ROOT] name = SHAPE opcode(`: the head of most instructions, SHAPE an array shape on one
# line or a tuple of array shapes (`fast_instruction` reads the latter as `shape` would).
_HEAD = re.compile(
    TRIVIA_RE  # possessive: no backtracking into the blanks
    + rf"(ROOT[ \t]+)?({NAME_RE})[ \t]*=[ \t]*({SHAPE_RE}|\(\s*+{ELEMENTS}\))"
    + r"[ \t]+([A-Za-z_][\w\-]*)\(",
    re.S,
)
# Opcodes `plain_instruction` leaves to `instruction_body` (their operands are no plain
# list, or it reads more than operands for them).
# Attributes `instruction_body` normalizes, checks or drops once read.
_SPECIAL_KEYS = frozenset({"frontend_attributes", "origin", "statistics", "sharding", *DROPPED})
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
    "shapes": re.compile(rf"\s*(\{{\s*+{ELEMENTS}\}})"),
    "slice": re.compile(rf"\s*(\{{\s*+(?:{_SLICE_RANGE}(?:,\s*+{_SLICE_RANGE})*+)?+\}})"),
}


# One unit on purpose: the parse hot path (benchmarks/io_bench.py, first parse): its methods share
# the scanner state as attributes instead of passing it through calls.
class InstructionParser(ValueParser):
    """The instruction layer of `importer.ModuleParser` (the state it reads is set up there)."""

    computation_names: dict[str, int]
    root_shapes: dict[str, Shape]
    computation_ops: dict[str, ComputationOp]
    value_maps: list[dict[str, SSAValue]]
    pending_computations: list[ComputationOp]

    def check_defined(self, names: Iterable[str], offset: int) -> None:
        """As XLA, a called computation must be defined before the instruction naming it."""
        for name in names:
            if name not in self.computation_names:
                self.error(f"computation {name!r} is not defined before this use", offset)

    def frontend_attributes(self, raw: A.Raw, start: int) -> A.Raw | None:
        """frontend_attributes (of the module or of an instruction) as XLA keeps them
        (`normalize_frontend_attrs`); None for an empty map, which XLA does not print."""
        fa = normalize_frontend_attrs(raw.text)
        if fa is None:
            self.error(FA_FORM, start)
            raise AssertionError
        return A.Raw(fa) if fa != "{}" else None

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
        append_op(block, new_return_op(result))
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
            self.error(f"expected an instruction, got {describe(kind, tok)}", start)
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
            self.error(f"expected an opcode, got {describe(kind, opcode)}", ostart)
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
                self.error(f"expected an opcode, got {describe(kind, opcode)}", ostart)
            spec = OPCODES.get(opcode)
        if spec is None and shape is None and lx.peek()[1] == "[":
            if opcode in ELEMENT_BITS or opcode == "opaque_type":
                self.error(f"malformed shape starting at {opcode!r}", ostart)
            self.error(f"unknown element type {opcode!r}", ostart)
        if spec is None:
            sugar = async_sugar_of(opcode)
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
            name, base, sugar_spec(spec), wshape, values, scratch, start, ostart
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
            start_attrs["sharding"] = A.Raw(single_tuple_sharding(sharding.text, shape))  # type: ignore[arg-type]
        thread = self.sugar_thread
        if thread is not None:
            start_attrs = {"async_execution_thread": thread, **start_attrs}
        start_attrs["calls"] = self.async_wrapped(base, operands, wshape, wattrs, thread, ostart)
        op = create_op("async-start", operands, shape, name, start_attrs, self.intern)
        try:
            verify_instruction(op)
        except VerifyException as e:
            line, col = self.lx.line_col(start)
            raise HloShapeError(str(e), self.lx.filename, line, col) from None
        block.add_op(op)
        values[name] = op.results[0]
        return op

    def async_wrapped(
        self,
        base: str,
        operands: list[SSAValue],
        wshape: Shape,
        wattrs: dict[str, Any],
        thread: str | None,
        ostart: int,
    ) -> str:
        """Generates the `async_wrapped` computation of an `X-start` (its parameters, the
        one X instruction, on `thread`), queued to be defined before its user; its name."""
        cname = first_free("async_wrapped", self.computation_names)
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
        return cname

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
                        values[name] = op.results[0]
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
        append_op(block, op)
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
        append_op(block, op)
        values[name] = op.results[0]
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
            if name in NOT_NAMES:
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
                        fields.append((key, tok if tok.isascii() else escaped_string(tok)))
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
            return A.Raw(squash(vm.group(1)))
        if kind == "replica_groups":
            tok = vm.group(1)
            return A.Raw(tok if tok[0] == "[" else _BLANKS.sub("", tok))  # XLA prints {{0,1},{2,3}}
        if kind == "shapes":
            try:
                return tuple(map(self.array_shape, SHAPE_TOKEN.findall(vm.group(1))))
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

    # One function on purpose: the per-instruction hot path (benchmarks/io_bench.py, first parse).
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
            attrs["value"] = self.constant_value(shape)
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
                    self.error(f"expected an attribute, got {describe(k, key)}", kstart)
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
                origin = normalize_origin(attrs[key].text)
                if origin is None:
                    self.error(
                        "origin is {[synthetic_call]} or a tuple tree of original arrays "
                        '{"name" {index}}',
                        vstart,
                    )
                    raise AssertionError
                attrs[key] = A.Raw(origin)
            elif key == "statistics":
                stats = normalize_statistics(attrs[key].text)
                if stats is None:
                    self.error("statistics are {visualizing_index=INT, name=NUMBER, ...}", vstart)
                    raise AssertionError
                if not stats:
                    del attrs[key]  # XLA prints statistics only when there are some
                    continue
                attrs[key] = A.Raw(stats)
            elif key == "sharding":
                if not sharding_form_ok(attrs[key].text):
                    self.error(
                        "a sharding is {replicated}, {maximal device=N}, {devices=[...]...}, "
                        "{manual}, {unknown} or a tuple {{...}, ...} of them",
                        vstart,
                    )
                if attrs[key].text.startswith("{{"):
                    attrs[key] = A.Raw(normalize_tuple_sharding(attrs[key].text))
            elif akind == "result_accuracy" and attrs[key].is_default:
                del attrs[key]  # XLA keeps no trace of the default mode
                continue
            elif key in DROPPED and DROPPED[key](opcode, attrs[key]):
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
                tuple_shape = cast(TupleShape, shape)  # is_tuple: only TupleShape sets it
                attrs["sharding"] = A.Raw(single_tuple_sharding(sharding.text, tuple_shape))
        if opcode == "call" or opcode == "fusion":
            callee = attrs.get("to_apply" if opcode == "call" else "calls")
            self.check_call(name, callee, operands, start, opcode == "fusion")
        if opcode in CHECKED_OPCODES:
            self.check_shapes(opcode, name, shape, operands, attrs, start)
        op = create_op(opcode, operands, shape, name, attrs, self.intern, stype)
        append_op(block, op)
        values[name] = op.results[0]  # (`Results` indexes in C)
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
            check_done_channel(self, name, opcode, operands[0], attrs.get("channel_id"), ostart)
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
            self.error(f"expected an operand name, got {describe(kind, tok)}", start)
        if lx.peek()[1] == "(" and not tok.startswith("%") and tok in OPCODES:
            # A nested instruction: `add(f32[] multiply(a, b), c)`.
            lx.rewind_to_peek()
            name = first_free(f"{tok}.anon", values)
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
