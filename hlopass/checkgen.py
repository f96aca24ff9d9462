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

_DEF = re.compile(r"^(\s*(?:ROOT )?)(%?)([A-Za-z_][\w.\-]*)( = )")
_USE = re.compile(r"(?<![\w.\-%])(%?)([A-Za-z_][\w.\-]*)(?![\w.\-])")
_HEAD = re.compile(r"^(ENTRY )?%?[\w.\-]+ [(]|^HloModule ")
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
    """Operand names already captured become `[[VAR]]`; all other text is escaped."""
    out: list[str] = []
    pos = 0
    for m in _USE.finditer(rest):
        name = m.group(2)
        if name not in names or not _is_operand_position(rest, m.start()):
            continue
        out.append(_escape(rest[pos : m.start()]))
        out.append(m.group(1) + f"[[{names[name]}]]")
        pos = m.end()
    out.append(_escape(rest[pos:]))
    return "".join(out)


def _is_operand_position(text: str, at: int) -> bool:
    """A name right after `(`, `, ` or `={`: an operand or control predecessor, not an
    attribute key or a word inside a string."""
    before = text[:at].rstrip(" %")
    return before.endswith(("(", ",", "{", "}", "]")) and text.count('"', 0, at) % 2 == 0
