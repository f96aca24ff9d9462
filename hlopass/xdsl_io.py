"""xDSL's own text form of hlo modules: print with xDSL's printer, read with xDSL's parser."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from hlopass.dialects.hlo import HLO
from hlopass.errors import HloParseError


def context() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(HLO)
    return ctx


def parse_xdsl(text: str, filename: str | None = None) -> ModuleOp:
    try:
        module = Parser(context(), text, filename or "<input>").parse_module()
    except ParseError as e:
        first = str(e).strip().splitlines()
        raise HloParseError(first[-1] if first else "invalid xDSL IR", filename, 1, 1) from None
    return module
