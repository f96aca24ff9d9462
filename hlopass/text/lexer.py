"""Tokens of HLO text, following the context rules of XLA's lexer (`hlo_lexer.cc`).

An identifier directly followed by `=` is an attribute name and one directly followed by
`:` is a label; a whole shape (`f32[2,3]{1,0}`) is one token so it can be looked up in a
cache. The lexer is lazy: the parser can take raw balanced text (JSON dicts, big literals)
straight from the source.
"""

from __future__ import annotations

import re
from typing import NoReturn

from hlopass.errors import HloParseError

_ELEMENT = (
    r"(?:pred|bf16|f8e4m3b11fnuz|f8e5m2fnuz|f8e4m3fnuz|f8e4m3fn|f8e8m0fnu|f8e5m2|f8e4m3|f8e3m4"
    r"|f4e2m1fn|[su](?:1|2|4|8|16|32|64)|f(?:16|32|64)|c64|c128|token|opaque_type|opaque)"
)

# Blanks and comments between tokens. Each loop is possessive and its alternatives start
# differently (a blank, `//`, `/*`), so a failed match after a long run of blanks is never
# retried by splitting the run another way (the earlier `(?:\s+|...)*` tried all 2**n splits).
# XLA's lexer ends a `//` comment at '\r' too (what follows is code again) and reads NUL
# as the end of its input (an error anywhere but in a string).
TRIVIA_RE = r"\s*+(?:(?://[^\n\r\x00]*+|/\*.*?\*/)\s*+)*+"
"""What the lexer skips between tokens: linear time, constant memory."""

# A quoted string with C escapes, as an "unrolled loop": runs of plain characters and single
# escapes. The possessive repeats keep no backtracking state per character: the plain
# `"(?:[^"\\]|\\.)*"` kept one per character (about 170 bytes of memory per input byte).
STRING_RE = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
"""One quoted string token: linear time, constant memory."""

SHAPE_RE = rf"{_ELEMENT}\[[^\]\n]*\](?:\{{(?=[\d:}}])[^}}\n]*\}})?"
"""One array shape token (`f32[2,3]{1,0}`), as the lexer reads it."""

_TOKEN = re.compile(
    TRIVIA_RE + r"(?:"
    rf"(?P<STRING>{STRING_RE})"
    rf"|(?P<SHAPE>{SHAPE_RE})"
    r"|(?P<DIMLABELS>[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,})"
    r"|(?P<PAD>-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*)"
    r"|(?P<DXD>\d+(?:x\d+)+)(?![\w.])"
    r"|(?P<FLOAT>-?(?:(?:\d+|\d+\.\d*|\d*\.\d+)[eE][+-]?\d+|\d+\.\d*|\d*\.\d+))(?![\w.])"
    r"|(?P<INT>-?\d+)(?![\w.])"
    r"|(?P<NANINF>-?(?:inf|nan(?:\(0x[0-9a-fA-F]+\))?))(?![\w.\-])"
    r"|(?P<ATTR>[A-Za-z_][\w.\-]*)="
    r"|(?P<LABEL>[A-Za-z_][\w.\-]*):"
    r"|(?P<NAME>%?[A-Za-z_$][\w.\-$]*)"
    r"|(?P<PUNCT>->|<=|\.\.\.|[=,:*#+~\[\]{}()?<>])"
    r"|(?P<EOF>\Z)"
    r")",
    re.S,
)

_TRIVIA = re.compile(TRIVIA_RE, re.S)
_INT_MIN, _UINT_MAX = -(1 << 63), (1 << 64) - 1

EOF = "EOF"


def find_closing(text: str, start: int, open_ch: str = "{", close_ch: str = "}") -> int:
    """Index of the bracket closing the one at `start` (quoted strings skipped), or -1.
    The regular expression steps from bracket to bracket (a string is one step): a large
    literal's digits are not a Python loop."""
    events = _BRACKET_EVENTS.get(open_ch + close_ch)
    if events is None:
        events = _BRACKET_EVENTS[open_ch + close_ch] = re.compile(
            r'"(?:[^"\\]++|\\.)*+"?|[' + re.escape(open_ch + close_ch) + "]", re.S
        )
    depth = 0
    for m in events.finditer(text, start):
        c = m.group()
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return m.start()
    return -1


# Per bracket pair: a quoted string (to its closing quote, or the end), or a bracket.
_BRACKET_EVENTS: dict[str, re.Pattern[str]] = {}

_RAW_DICT_START = re.compile(r"backend_config=" + TRIVIA_RE + r"\{", re.S)


def raw_dict_end(text: str, pos: int) -> int:
    """The end of the `backend_config={...}` around `pos`, or -1 where there is none.

    XLA's lexer takes a braced backend config as raw text (brace-balanced, strings skipped)
    and never unescapes the strings in it: MLIR attribute dictionaries spell bytes `\\7F`,
    which C's escapes reject. Only the check of a bad escape asks (not the hot path)."""
    at = text.rfind("backend_config=", 0, pos)
    m = _RAW_DICT_START.match(text, at) if at >= 0 else None
    if m is None:
        return -1
    end = find_closing(text, m.end() - 1)
    return end + 1 if end >= pos else -1


class Lexer:
    __slots__ = ("text", "filename", "pos", "_peeked", "_match")

    def __init__(self, text: str, filename: str | None = None):
        self.text = text
        self.filename = filename
        self.pos = 0
        self._peeked: tuple[str, str, int] | None = None
        self._match = _TOKEN.match

    def peek(self) -> tuple[str, str, int]:
        """(kind, text, start offset) of the next token without consuming it."""
        if self._peeked is None:
            m = self._match(self.text, self.pos)
            if m is None:
                start = self._skip_space(self.pos)
                if self.text.startswith('"', start):
                    self.error_at(start, "unterminated string")
                if self.text.startswith("/*", start):
                    self.error_at(start, "unterminated comment")
                self.error_at(start, f"unexpected character {self.text[start]!r}")
            kind = m.lastgroup
            assert kind is not None
            if kind == "INT" and not _INT_MIN <= int(m.group(kind)) <= _UINT_MAX:
                # XLA's lexer reads integers as s64 or u64 and refuses any other
                self.error_at(m.start(kind), f"integer {m.group(kind)} out of range")
            self._peeked = (kind, m.group(kind), m.start(kind))
            self.pos = m.end()
        return self._peeked

    def next(self) -> tuple[str, str, int]:
        tok = self.peek()
        self._peeked = None
        return tok

    def _skip_space(self, pos: int) -> int:
        m = _TRIVIA.match(self.text, pos)
        return m.end() if m else pos

    def rewind_to_peek(self) -> int:
        """Drop a peeked token; return the offset where it started."""
        if self._peeked is not None:
            self.pos = self._peeked[2]
            self._peeked = None
        return self.pos

    def take_balanced(self, open_ch: str, close_ch: str) -> tuple[str, int]:
        """Consume raw text from the next `open_ch` to its matching `close_ch` (strings skipped)."""
        start = self._skip_space(self.rewind_to_peek())
        text = self.text
        if not text.startswith(open_ch, start):
            self.error_at(start, f"expected '{open_ch}'")
        end = find_closing(text, start, open_ch, close_ch)
        if end >= 0:
            self.pos = end + 1
            return text[start : end + 1], start
        self.error_at(start, f"unbalanced '{open_ch}': no matching '{close_ch}'")
        raise AssertionError  # unreachable

    def line_col(self, offset: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return line, col

    def error_at(self, offset: int, message: str) -> NoReturn:
        line, col = self.line_col(offset)
        raise HloParseError(message, self.filename, line, col)
