"""Errors the library reports to users (one line each, with a location where there is one)."""

from __future__ import annotations


class HloError(Exception):
    """Base of hlopass's user-facing errors."""


class HloParseError(HloError):
    """Malformed HLO text. `str()` is `file:line:col: error: message`."""

    def __init__(self, message: str, filename: str | None, line: int, col: int):
        self.message = message
        self.filename = filename or "<input>"
        self.line = line
        self.col = col
        super().__init__(f"{self.filename}:{line}:{col}: error: {message}")


class HloVerifyError(HloError):
    """A module that parsed but breaks an HLO rule (shape, arity, reference)."""


class HloShapeError(HloParseError, HloVerifyError):
    """Text that parses but breaks a shape rule of XLA's verifier (an elementwise op on
    different shapes, a bad broadcast or slice...). XLA's parser alone accepts such text;
    `.line`/`.col` point at the instruction."""


class UnsupportedOpError(HloError):
    """The interpreter cannot run an instruction."""


class HloInputError(HloError, ValueError):
    """Arguments that do not fit the entry computation's parameters (count, shape, dtype)."""


class HloResourceError(HloError):
    """An instruction needs more memory than the interpreter may take (named in the message)."""
