"""`HloModule`: the module `parse_hlo` returns, an xDSL `ModuleOp` that shows as HLO text.

In a REPL or a notebook a module displays as its HLO (the first `REPR_LINES` lines for large
modules, with how to see the rest) instead of xDSL's object repr. It is a `ModuleOp` in every
other respect: passes, verification, cloning and xDSL's printer treat it as one, and xDSL's
text form still reads and writes `builtin.module`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

REPR_LINES = 60


class HloModule(ModuleOp):
    """A `builtin.module` of `hlo` computations that displays as HLO text."""

    def _text(self) -> str:
        from hlopass.text.exporter import print_hlo

        text = print_hlo(self)
        lines = text.splitlines()
        if len(lines) <= REPR_LINES:
            return text.rstrip("\n")
        more = len(lines) - REPR_LINES
        return "\n".join(
            [*lines[:REPR_LINES], f"... ({more} more lines: print(hlopass.print_hlo(module)))"]
        )

    def __repr__(self) -> str:
        return self._text()

    def _repr_html_(self) -> str:
        import html  # (only notebooks ask: not on the import path of parse_hlo)

        return f"<pre>{html.escape(self._text())}</pre>"


def as_hlo_module(module: ModuleOp) -> ModuleOp:
    """`module`, now displaying as HLO (its class becomes HloModule; nothing else changes)."""
    if type(module) is ModuleOp:
        module.__class__ = HloModule
    return module
