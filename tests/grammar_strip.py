"""Leave out the result shapes XLA's parser can infer (for the shape-inference tests)."""

from __future__ import annotations

import re

from hlopass.dialects.opcodes import OPCODES
from hlopass.text.lexer import STRING_RE

# Every opcode whose result shape the text may try to leave out (parameters and constants
# always need theirs: XLA reads the number or literal by it).
LEAVABLE = frozenset(OPCODES) - {"parameter", "constant"}

# `[ROOT] name = shape opcode(`: the shape is everything between ` = ` and the opcode.
_INSTRUCTION = re.compile(r"^(\s*(?:ROOT\s+)?[%\w.\-]+\s*=\s*)(.+?)\s([a-z][a-z0-9\-]*)\(", re.M)


def strip_shapes(text: str, opcodes: frozenset[str] = LEAVABLE) -> str:
    """`text` with the result shape of every instruction whose opcode is in `opcodes` left
    out (computation signatures and other instructions untouched)."""

    def repl(m: re.Match[str]) -> str:
        if m.group(3) not in opcodes:
            return m.group(0)
        return f"{m.group(1)}{m.group(3)}("

    # (not inside strings: the modules of an origin_recovery_table stay as written)
    parts = re.split(f"({STRING_RE})", text)
    return "".join(p if i % 2 else _INSTRUCTION.sub(repl, p) for i, p in enumerate(parts))
