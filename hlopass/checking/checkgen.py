"""`hlopass-opt --generate-checks`: FileCheck lines for a golden test, from an output.

As MLIR's generate-test-checks.py does for MLIR, every instruction name is captured where
it is defined (`%[[ADD:[^ ]+]]` takes whatever the pass named it) and matched by variable
where it is used, so a test keeps passing when a pass renames instructions but still fails
when the graph changes. Computation names and shapes
stay literal. One `CHECK-LABEL` per computation header anchors the matching; the lines of a
computation are `CHECK-NEXT`, so nothing extra can slip in between.
"""

from __future__ import annotations

import re

from hlopass.text.quoting import string_end

_DEF = re.compile(r"^(\s*(?:ROOT )?)(%?)([A-Za-z_][\w.\-]*)( = )")
# `ENTRY main {` without a signature is how hand-written (and XLA's short) text heads one.
_HEAD = re.compile(r"^(ENTRY )?%?[\w.\-]+ (?:[(]|\{$)|^HloModule ")
_SPLIT = "// -----"
_FILECHECK_SPECIAL = re.compile(r"(\[\[|\{\{)")


def _var(name: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", name).upper().strip("_") or "V"
    if base[0].isdigit():
        base = "V" + base
    var, n = base, 0
    while var in taken:
        n += 1
        var = f"{base}_{n}"
    taken.add(var)
    return var


def _escape(text: str) -> str:
    """Literal text as FileCheck reads it: `[[`/`{{` would start a variable or regex."""
    return _FILECHECK_SPECIAL.sub(
        lambda m: "{{\\" + m.group(1)[0] + "\\" + m.group(1)[0] + "}}", text
    )


def generate_checks(output: str, prefix: str = "CHECK") -> str:
    """CHECK lines matching `output` (one printed module), names captured as variables."""
    lines_out: list[str] = []
    names: dict[str, str] = {}
    taken: set[str] = set()
    for line in output.splitlines():
        if not line.strip():
            continue
        if line.strip() == _SPLIT:  # `--split-input-file` output: a new module, kept bare
            names.clear()
            lines_out.append(_SPLIT)
            continue
        if _HEAD.match(line):
            names.clear()  # instruction names are per computation
            lines_out.append(f"// {prefix}-LABEL: {_escape(line)}")
            continue
        m = _DEF.match(line)
        if m is None:
            lines_out.append(f"// {prefix}-NEXT: {_escape(line.strip())}")
            continue
        lead, sigil, name, eq = m.groups()
        rest = line[m.end() :]
        var = _var(name, taken)
        head = f"{lead.strip()} " if lead.strip() else ""
        body = _substitute_uses(rest, names)
        names[name] = var
        lines_out.append(f"// {prefix}-NEXT: {head}{sigil}[[{var}:[^ ]+]]{eq}{body}")
    return "\n".join(lines_out) + "\n"


def _substitute_uses(rest: str, names: dict[str, str]) -> str:
    """`rest` is `shape opcode(operands), attributes`. Only the names of the operand list and
    of `control-predecessors={...}` become `[[VAR]]`: the shape, the opcode (XLA names an
    instruction after its opcode, `%add = f32[] add(...)`), attribute keys and values
    (called computations stay literal, as their headers are) are escaped text."""
    spans = _operand_spans(rest)
    out: list[str] = []
    pos = 0
    for start, end in spans:
        sigil, name = _split_name(rest[start:end])
        if name not in names:
            continue
        name_at = end - len(name) - len(sigil)
        out.append(_escape(rest[pos:name_at]))
        out.append(sigil + f"[[{names[name]}]]")
        pos = end
    out.append(_escape(rest[pos:]))
    return "".join(out)


# `/*index=5*/%x`: the printer numbers every fifth operand of a long list.
_NAME_TAIL = re.compile(r"(?:^|(?<=[ (])|(?<=\*/))(%?)([A-Za-z_][\w.\-]*)$")
_OPCODE = re.compile(r" ([a-z][\w\-]*)\(")
_CONTROL = ", control-predecessors={"


def _split_name(operand: str) -> tuple[str, str]:
    """(`%` or ``, name) of one operand (`%x`, `x`, or old-style `f32[4]{0} %x`); the name is
    the last word, so a shape before it never counts."""
    m = _NAME_TAIL.search(operand)
    return (m.group(1), m.group(2)) if m else ("", "")


def _operand_spans(rest: str) -> list[tuple[int, int]]:
    """(start, end) of each operand and control predecessor in `rest`, trailing blanks
    excluded. A constant's parentheses hold a literal (`true`, `inf`), not operands."""
    shape_end = _find_depth0(rest, " ", 0)
    m = _OPCODE.match(rest, shape_end) if shape_end is not None else None
    if m is None:
        return []
    spans: list[tuple[int, int]] = []
    close = _find_depth0(rest, ")", m.end())
    if close is None:
        return []
    if m.group(1) != "constant":
        spans += _items(rest, m.end(), close)
    at = _find_depth0(rest, _CONTROL, close + 1)
    if at is not None:
        inner = at + len(_CONTROL)
        end = _find_depth0(rest, "}", inner)
        if end is not None:
            spans += _items(rest, inner, end)
    return spans


def _items(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of the comma-separated items of text[start:end] at bracket depth 0."""
    spans: list[tuple[int, int]] = []
    while start < end:
        comma = _find_depth0(text, ",", start, end)
        stop = end if comma is None else comma
        a, b = start, stop
        while a < b and text[a] == " ":
            a += 1
        while b > a and text[b - 1] == " ":
            b -= 1
        if a < b:
            spans.append((a, b))
        start = stop + 1
    return spans


_OPEN, _CLOSE = "([{", ")]}"


def _find_depth0(text: str, needle: str, start: int, end: int | None = None) -> int | None:
    """Index of the first `needle` at depth 0 from `start`, brackets and strings skipped (a
    closing bracket of the enclosing list, or an attribute rather than text inside another
    attribute's value); None past `end` or once a bracket closes what `start` was inside."""
    depth, i = 0, start
    stop = len(text) if end is None else end
    while i < stop:
        c = text[i]
        if depth == 0 and text.startswith(needle, i):
            return i
        if c == '"':
            i = string_end(text, i, stop)
            if i < 0:
                return None  # a string open to the end: nothing after it is at depth 0
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        i += 1
    return None
