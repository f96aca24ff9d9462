"""HLO text, the attribute-text layer: the canonical text of the attributes kept as text
(sharding, frontend attributes, origins, statistics, aliasing, stack frames) as XLA's
printer writes them back, the escapes of a module's strings checked, async shorthand,
instruction name uniquing."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, SSAValue

from hlopass.dialects.hlo import (
    ComputationOp,
    ReturnOp,
)
from hlopass.dialects.opcodes import OPCODES, AttrSpec
from hlopass.ir import attrs as A
from hlopass.ir.shape import (
    TupleShape,
)
from hlopass.text.lexer import STRING_RE, Lexer, find_closing, raw_dict_end
from hlopass.text.parse_values import (
    ESCAPE,
    NEXT_ODD_STRING,
    escape_error,
    split_tuple_sharding,
    unescape,
)


def check_done_channel(
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


# A string's text whose every escape is a simple one (`\"`, `\\`, `\n`, ...), always valid.
_ONLY_SIMPLE_ESCAPES = re.compile(r"[^\\]*+(?:\\[abfnrtv\\?'\"][^\\]*+)*+")


def check_escapes(lx: Lexer) -> None:
    """XLA's lexer unescapes every string (absl::CUnescape) and rejects the module when
    one holds a malformed escape (`"\\main"`, `"\\400"`, `"\\x100"`); one linear pass."""
    text = lx.text
    at = 0
    while True:
        sm = NEXT_ODD_STRING.match(text, at)
        if sm is None:
            return
        at = sm.end()
        if "\\" not in sm.group(1):
            continue  # (an unterminated string)
        pos, end = sm.start(1) + 1, at
        if _ONLY_SIMPLE_ESCAPES.match(text, pos, end).end() == end:  # type: ignore[union-attr]
            continue  # (the usual `\"` and `\\` of a backend config: no loop over them)
        while True:
            pos = text.find("\\", pos, end)
            if pos < 0:
                break
            m = ESCAPE.match(text, pos, end)
            assert m is not None  # group 6 matches any character
            why = escape_error(m)
            if why is not None:
                at = raw_dict_end(text, pos)  # (a braced backend config is raw text to XLA)
                if at < 0:
                    lx.error_at(pos, f"invalid escape in a string: {why}")
                break
            pos = m.end()


_ORIGIN_TOKEN = re.compile(rf"\s*({STRING_RE}|\[synthetic_call\]|-?\d+|[{{}}(),]|\S)")


def normalize_origin(text: str) -> str | None:
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


def normalize_statistics(text: str) -> str | None:
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


def recovery_table(text: str, reprint: Callable[[str], str]) -> str:
    """A module's origin_recovery_table `{...}` as XLA prints it: entries sorted by their
    original array, each recovery module read and printed in full by `reprint` (module
    text in, XLA's print out: the importer's and exporter's work, a layer above), indented;
    "" when empty. Raises ValueError (or the recovery module's parse error) on malformed
    text."""
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
                    unescape(name),
                    idx,
                    name + (" {" + ",".join(map(str, idx)) + "}" if index is not None else ""),
                )
            )
        line = "  {" + keys[0][2] + "} : {" + keys[1][2] + "}"
        if m.group(5) is not None:
            inner = reprint(unescape(m.group(5)))
            indented = "\n".join("    " + ln if ln else "" for ln in inner.split("\n"))
            line += ',\n  "\n' + indented + '\n  "'
        entries.append(((keys[0][0], keys[0][1]), line))
    if not entries:
        return ""
    entries.sort(key=lambda e: e[0])
    return "{\n" + "".join(line + "\n" for _, line in entries) + "}\n"


def single_tuple_sharding(text: str, shape: TupleShape) -> str:
    """One sharding `{s}` on a tuple-shaped instruction as XLA keeps it: a tuple sharding
    with `s` for every leaf (one element for a tuple without leaves); `{}` stays."""
    if text.replace(" ", "") == "{}":
        return text
    return "{" + ", ".join([text] * max(1, len(shape.leaves()))) + "}"


def normalize_tuple_sharding(text: str) -> str:
    """A tuple sharding `{{a},{b}}` as XLA prints it: elements joined by `, `."""
    parts = split_tuple_sharding(text)
    return text if parts is None else "{" + ", ".join(parts) + "}"


_ASYNC_SUFFIXES = ("-start", "-update", "-done")
_SUGAR_SPECS: dict[str, Any] = {}


# Attributes XLA's parser reads but does not keep (when the test on opcode and value says
# so): the rolled-back collective `mode`, an empty convolution `sparsity_config`, and the
# `dimensions` of ragged-all-to-all.
DROPPED: dict[str, Any] = {
    "mode": lambda opcode, v: True,
    "sparsity_config": lambda opcode, v: v.text == "{}",
    "dimensions": lambda opcode, v: opcode == "ragged-all-to-all",
}


def async_sugar_of(opcode: str) -> tuple[str, str] | None:
    """(wrapped opcode, start|update|done) for XLA's async shorthand like `custom-call-start`."""
    for suffix in _ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            base = opcode[: -len(suffix)]
            if base in OPCODES and not base.startswith("async-"):
                return base, suffix[1:]
    return None


def sugar_spec(spec: Any) -> Any:
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


FA_FORM = 'frontend_attributes are {name="value", name={...}, ...}'
_STRING_BODY = r'"([^"\\]*+(?:\\.[^"\\]*+)*+)"'  # STRING_RE, the text between the quotes a group
_FA_KEY = re.compile(rf"\s*+(?:{_STRING_BODY}|([\w.\-$]++))\s*+=\s*+")
_FA_STRING = re.compile(_STRING_BODY)


def normalize_frontend_attrs(text: str) -> str | None:
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
            value = unescape('"' + raw + '"')
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


def normalize_io_alias(text: str) -> str:
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


def append_op(block: Block, op: Operation) -> None:
    """`block.add_op(op)` for a fresh op: link it after the block's last op."""
    last = block._last_op  # pyright: ignore[reportPrivateUsage]
    op.parent = block
    if last is None:
        block._first_op = op  # pyright: ignore[reportPrivateUsage]
    else:
        last._next_op = op  # pyright: ignore[reportPrivateUsage]
        op._prev_op = last  # pyright: ignore[reportPrivateUsage]
    block._last_op = op  # pyright: ignore[reportPrivateUsage]


def names_unique(value_maps: list[dict[str, SSAValue]]) -> bool:
    """True when `uniquify_instruction_names` would rename nothing, checked in bulk: the
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


def uniquify_instruction_names(comps: list[ComputationOp]) -> None:
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


TABLE_NAMES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_TABLE_ROW = re.compile(r"[ \t]*(\d+)[ \t]+([^\n]*)")
_TABLE_FIELD = re.compile(r"(\w+)=(-?\d+)")


def read_frame_tables(
    tables: str,
) -> tuple[list[str], list[str], list[dict[str, int]], list[tuple[int, int]]]:
    """The rows of the text's stack-frame tables, in text order: file names, function names,
    file locations (their fields) and frames as (file_location_id, parent_frame_id)."""
    files: list[str] = []
    funcs: list[str] = []
    locs: list[dict[str, int]] = []
    frames: list[tuple[int, int]] = []
    section = ""
    for line in tables.splitlines():
        head = line.strip()
        if head in TABLE_NAMES:
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
    return files, funcs, locs, frames


def _intern(table: dict[Any, int], key: Any) -> int:
    i = table.get(key)
    if i is None:
        i = table[key] = len(table) + 1
    return i


class StackFrameIndex:
    """The fresh de-duplicated stack-frame index XLA builds on parse: old frame ids are
    resolved to their full call stack and re-added, outermost frame first, so rows get ids
    in first-use order and unused rows never appear."""

    def __init__(
        self,
        files: list[str],
        funcs: list[str],
        locs: list[dict[str, int]],
        frames: list[tuple[int, int]],
    ) -> None:
        self.files, self.funcs, self.locs, self.frames = files, funcs, locs, frames
        self.new_files: dict[str, int] = {}
        self.new_funcs: dict[str, int] = {}
        self.new_locs: dict[tuple[int, ...], int] = {}
        self.new_frames: dict[tuple[int, int], int] = {}
        self.memo: dict[int, int | None] = {}

    def resolve(self, fid: int) -> int | None:
        """The new id of old frame `fid`, or None when its stack cannot be resolved."""
        if fid not in self.memo:
            self.memo[fid] = self._add_chain(self._chain(fid))
        return self.memo[fid]

    def _chain(self, fid: int) -> list[int] | None:
        """Old frame ids from `fid` out to its outermost frame (None: a bad id or a loop)."""
        frames = self.frames
        chain: list[int] = []
        cur = fid
        while True:
            if cur < 1 or cur > len(frames) or len(chain) > len(frames):
                return None
            chain.append(cur)
            parent = frames[cur - 1][1] - 1
            if parent == 0:
                return chain
            cur = parent

    def _add_chain(self, chain: list[int] | None) -> int | None:
        """Adds the stack, outermost frame first; the new id of its innermost frame."""
        if chain is None:
            return None
        files, funcs, locs = self.files, self.funcs, self.locs
        new_parent = 0
        for old in reversed(chain):
            lid = self.frames[old - 1][0]
            if lid < 1 or lid > len(locs):
                return None
            loc = locs[lid - 1]
            fn, fu = loc.get("file_name_id", 0), loc.get("function_name_id", 0)
            if not (1 <= fn <= len(files) and 1 <= fu <= len(funcs)):
                return None
            key = (
                _intern(self.new_files, files[fn - 1]),
                _intern(self.new_funcs, funcs[fu - 1]),
                loc.get("line", 0),
                loc.get("end_line", 0),
                loc.get("column", 0),
                loc.get("end_column", 0),
            )
            new_parent = _intern(self.new_frames, (_intern(self.new_locs, key), new_parent))
        return new_parent

    def text(self) -> str:
        """The new tables as XLA prints them ("" when no frame is used)."""
        if not self.new_frames:
            return ""
        out = ["FileNames"]
        out += [f"{i} {s}" for s, i in self.new_files.items()]
        out += ["", "FunctionNames"]
        out += [f"{i} {s}" for s, i in self.new_funcs.items()]
        out += ["", "FileLocations"]
        out += [
            f"{i} {{file_name_id={k[0]} function_name_id={k[1]} line={k[2]} end_line={k[3]} "
            f"column={k[4]} end_column={k[5]}}}"
            for k, i in self.new_locs.items()
        ]
        out += ["", "StackFrames"]
        out += [
            f"{i} {{file_location_id={k[0]} parent_frame_id={k[1] + 1}}}"
            for k, i in self.new_frames.items()
        ]
        return "\n".join(out)


def renumber_stack_frames(tables: str, comps: list[ComputationOp]) -> str:
    """Rebuild the stack-frame tables the way XLA does on parse.

    XLA resolves each instruction's `stack_frame_id` to its full call stack and re-adds the
    stacks, computations and instructions in text order, outermost frame first, into a
    fresh de-duplicated index: unused rows disappear and ids are renumbered in first-use
    order. A `parent_frame_id` of p in the text names frame p-1 (0: no parent). Stacks that
    cannot be resolved lose their `stack_frame_id`.
    """
    index = StackFrameIndex(*read_frame_tables(tables))
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
                    new = index.resolve(int(v))
                except ValueError:
                    new = None
                if new is None:
                    nf = fields[:i] + fields[i + 1 :]
                else:
                    nf = fields[:i] + ((k, str(new)),) + fields[i + 1 :]
                op.set_attr("metadata", A.Metadata(nf))
                break
    return index.text()
