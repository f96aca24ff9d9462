"""HLO text -> xDSL IR (`parse_hlo`). Builds ops directly; no MLIR text in between.

Layers: the module and its computations (`ModuleParser`, here); instructions
(`parse_instructions`); values: shapes, literals, strings, attribute values
(`parse_values`); the canonical text of attributes kept as text, and name uniquing
(`parse_normalize`)."""

from __future__ import annotations

import re
from typing import Any

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, SSAValue

from hlopass.dialects.hlo import (
    ATTR_CLASSES,
    ComputationOp,
    new_block,
    new_computation_op,
)
from hlopass.dialects.opcodes import MODULE_ATTRS
from hlopass.errors import HloParseError, HloShapeError
from hlopass.ir import attrs as A
from hlopass.ir.gcutil import gc_paused
from hlopass.ir.module import as_hlo_module
from hlopass.ir.names import first_free
from hlopass.ir.shape import (
    Shape,
)
from hlopass.text.lexer import Lexer
from hlopass.text.parse_instructions import (
    COMMA_NEXT,
    NAME_RE,
    NOT_NAMES,
    TRIVIA,
    UNIT,
    InstructionParser,
)
from hlopass.text.parse_normalize import (
    TABLE_NAMES,
    append_op,
    check_escapes,
    names_unique,
    normalize_io_alias,
    recovery_table,
    renumber_stack_frames,
    uniquify_instruction_names,
)
from hlopass.text.parse_values import (
    SHAPE_ATOM,
    describe,
    unescape,
)


def _reprint_recovery_module(text: str) -> str:
    """An origin_recovery_table's module, read and printed as XLA prints it."""
    from hlopass.text.exporter import print_hlo  # (printing is needed only for such tables)

    return print_hlo(parse_hlo(text, "<origin_recovery_table>"))


def build_module(
    module_name: str, module_attrs: dict[str, Any], comps: list[ComputationOp]
) -> ModuleOp:
    """The module op of `comps`, named, with its attributes."""
    # `ModuleOp(comps)`, the computations linked in as `append_op` does (they are
    # fresh: no parent), without `Block.add_op`'s checks of each.
    module = ModuleOp(())
    body = module.regions[0].first_block
    assert body is not None
    for comp in comps:
        append_op(body, comp)
    module.attributes["sym_name"] = StringAttr(module_name)
    for key, value in module_attrs.items():
        kind = MODULE_ATTRS[key]
        if kind == "program_shape":
            module.attributes["hlo." + key] = ATTR_CLASSES["shapes"].new(value)
        else:
            module.attributes["hlo." + key] = ATTR_CLASSES[kind].new(value)
    return module


class ModuleParser(InstructionParser):
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
        """The module: its header, stack-frame tables and computations, in text order."""
        lx = self.lx
        module_name = "module"
        module_attrs: dict[str, Any] = {}
        kind, tok, _ = lx.peek()
        has_header = kind == "NAME" and tok == "HloModule"
        if not has_header and tok != "ENTRY":
            self.check_headerless_start(kind, tok)
        if has_header:
            lx.next()
            module_name = self.name_or_string()
            module_attrs = self.module_attributes()
        tables = self.stack_frame_tables()
        comps = self.computations()
        if not has_header:
            entry = next(c for c in comps if c.is_entry is not None)
            module_name = "module_" + entry.comp_name
        if self.pending_seen or not names_unique(self.value_maps):
            uniquify_instruction_names(comps)
        module = build_module(module_name, module_attrs, comps)
        if tables or self.saw_stack_frame_id:
            tables = renumber_stack_frames(tables, comps)
        if tables:
            module.attributes["hlo.stack_frames"] = ATTR_CLASSES["raw"].new(A.Raw(tables))
        return module

    def check_headerless_start(self, kind: str, tok: str) -> None:
        """XLA reads headerless text as a module only when it starts with ENTRY or with
        `name {`; anything else it takes for a single instruction."""
        lx = self.lx
        saved = (lx.pos, lx._peeked)
        lx.next()
        k2, t2, s2 = lx.next()
        lx.pos, lx._peeked = saved
        if t2 != "{" and kind != "EOF":
            self.error(
                "a module without an HloModule header must start with ENTRY or with a "
                f"computation `name {{` (got {describe(k2, t2)} after {tok!r})",
                s2,
            )

    def module_attributes(self) -> dict[str, Any]:
        """The `, key=value` attributes after the module's name, as XLA prints them back
        (defaults XLA does not print dropped)."""
        lx = self.lx
        module_attrs: dict[str, Any] = {}
        while self.accept(","):
            k, key, kstart = lx.next()
            if k != "ATTR":
                self.error(f"expected a module attribute, got {describe(k, key)}", kstart)
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
                    table = recovery_table(table, _reprint_recovery_module)
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
                module_attrs[key] = A.Raw(normalize_io_alias(module_attrs[key].text))
        return module_attrs

    def computations(self) -> list[ComputationOp]:
        """The module's computations in text order, those the async shorthand generates
        before the computation using them; the last is the entry when none is marked."""
        lx = self.lx
        comps: list[ComputationOp] = []
        entry_seen = False
        text = lx.text
        while True:
            if lx._peeked is None:
                # Where the next token starts, and whether it is the end, as `peek` tells
                # (without tokenizing the next computation's head: `computation` reads it).
                comp_start = lx.pos = TRIVIA.match(text, lx.pos).end()  # type: ignore[union-attr]
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
            comps[-1].properties["is_entry"] = UNIT
        return comps

    def name_or_string(self) -> str:
        kind, tok, start = self.lx.next()
        if kind == "NAME" and tok not in ("ENTRY", "ROOT"):
            return tok[1:] if tok.startswith("%") else tok
        if kind == "STRING":
            return unescape(tok)
        if kind == "LABEL":  # XLA's lexer reads `name:` as a name too (`HloModule m.1:`)
            return tok
        if kind == "ATTR":  # `HloModule m,` never lexes so; `HloModule m=` is malformed
            self.error("expected a module name", start)
        self.error(f"expected a module name, got {describe(kind, tok)}", start)
        raise AssertionError

    def stack_frame_tables(self) -> str:
        """The FileNames/FunctionNames/FileLocations/StackFrames tables, kept verbatim."""
        lx = self.lx
        kind, tok, start = lx.peek()
        if kind != "NAME" or tok not in TABLE_NAMES:
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
        if name in NOT_NAMES or (entry_kw is None and name == "ENTRY"):
            return None  # `inf`/`nan` lex as numbers; a first `ENTRY` is the keyword
        pos = m.end()
        pm = _NO_PARAMS.match(text, pos)
        if pm is not None:
            pos = pm.end()
        else:
            while True:
                pm = _PARAM_HEAD.match(text, pos)
                if pm is None or pm.group(1) in NOT_NAMES:  # (`inf:` lexes as a number)
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
        if (lx._peeked is not None or COMMA_NEXT.match(lx.text, lx.pos)) and self.accept(","):
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
        name = first_free("_", self.computation_names)
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
            self.error(f"expected a computation, got {describe(kind, tok)}", start)
            raise AssertionError
        self.declare_computation(name, start)
        declared_result: Shape | None = None
        result_start = start
        if self.accept("("):
            if not self.accept(")"):
                while True:
                    k, label, lstart = lx.next()
                    if k != "LABEL":
                        self.error(f"expected 'name: shape', got {describe(k, label)}", lstart)
                    self.shape()  # read and checked only: the parameter instructions hold them
                    if self.accept(")"):
                        break
                    self.expect(",")
            self.expect("->")
            result_start = lx.peek()[2]
            declared_result = self.shape()
        return is_entry, name, declared_result, result_start


# A computation head, as `fast_computation_head` reads it: name and `(`, then each
# parameter `label: SHAPE` with its `,` or `)` (or just `)`), then `-> SHAPE {`.
_COMP_HEAD = re.compile(rf"(ENTRY\s+)?({NAME_RE})\s*\(")
_NO_PARAMS = re.compile(r"\s*\)")
_PARAM_HEAD = re.compile(rf"\s*([A-Za-z_][\w.\-]*):\s*({SHAPE_ATOM})\s*([,)])")
_RESULT_HEAD = re.compile(rf"\s*->\s*({SHAPE_ATOM})\s*\{{")


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


class UnverifiedModuleParser(ModuleParser):
    """What XLA's parser reads, without XLA's shape verifier: the shapes and calls of XLA's
    own test inputs that `hlo-opt` reads unverified are taken as written (`verify=False`)."""

    def check_shapes(self, *args: Any, **kwargs: Any) -> None:
        return None

    def check_call(self, *args: Any, **kwargs: Any) -> None:
        return None


def parse_hlo(text: str, filename: str | None = None, verify: bool = True) -> ModuleOp:
    """Parse HLO module text (either print style) into an xDSL module of `hlo` ops.

    Raises `HloParseError` (with `.line`, `.col`) on malformed input, `HloShapeError` on
    shapes XLA's verifier refuses (unless `verify=False`, as `hlopass-opt --no-verify`).
    """
    parser = (ModuleParser if verify else UnverifiedModuleParser)(text, filename)
    if not text.isascii():
        _check_ascii(parser.lx)
    if "\\" in text:
        check_escapes(parser.lx)
    try:
        with gc_paused():
            return as_hlo_module(parser.parse())
    except RecursionError:
        line, col = parser.lx.line_col(parser.lx.pos)
        raise HloParseError("input nests too deeply", filename, line, col) from None
