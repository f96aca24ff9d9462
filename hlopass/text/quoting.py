"""Quoted strings inside raw HLO text: where one ends, for scanners that step over strings
while counting brackets (tuple shardings, attribute lists of printed text)."""

from __future__ import annotations

import re

# The rest of a string after its opening quote: a backslash takes the next character with it.
_STRING_TAIL = re.compile(r'(?:[^"\\]|\\.)*+"', re.S)


def string_end(text: str, start: int, stop: int) -> int:
    """Index of the quote closing the string opened by the quote at `start`, or -1 when it
    does not close before `stop`."""
    m = _STRING_TAIL.match(text, start + 1, stop)
    return -1 if m is None else m.end() - 1
