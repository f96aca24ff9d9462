"""xDSL's own text form of hlo modules: print with xDSL's printer, read with xDSL's parser.

What xDSL's parser and verifier accept is not yet an HLO module: reading also checks what
the rest of hlopass relies on (computations, one entry, numbered parameters, a return),
so a bad input is one `HloParseError` at its place, never a crash later.
"""

from __future__ import annotations

from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

import hlopass.text.parse_values  # noqa: F401  (installs the dialect's reader of HLO attribute text)
from hlopass.dialects.hlo import ComputationOp, HloOp, ReturnOp, hlo_context
from hlopass.errors import HloError, HloParseError


def context() -> Context:
    """An xDSL context with the builtin and hlo dialects (hlo loaded when first needed)."""
    return hlo_context()


def parse_xdsl(text: str, filename: str | None = None) -> ModuleOp:
    """One HLO module in xDSL IR (an outer module holding exactly one is unwrapped)."""
    modules = parse_xdsl_modules(text, filename)
    if len(modules) != 1:
        raise HloParseError(
            f"expected one module, the input holds {len(modules)} (use --split-input-file)",
            filename,
            1,
            1,
        )
    return modules[0]


def parse_xdsl_modules(text: str, filename: str | None = None) -> list[ModuleOp]:
    """The HLO modules of xDSL IR: the module itself, or each module nested in an outer
    `builtin.module` (how `xdsl-opt` prints the chunks of a split input)."""
    name = filename or "<input>"
    _check_strings(text, name)
    try:
        top = Parser(context(), text, name).parse_module()
    except ParseError as e:
        loc = e.span.get_location()
        raise HloParseError(e.msg.strip().splitlines()[0] or "invalid xDSL IR", name,
                            loc.line, loc.col) from None  # fmt: skip
    ops = list(top.ops)
    if ops and all(isinstance(op, ModuleOp) for op in ops):
        modules = []
        for op in ops:
            assert isinstance(op, ModuleOp)
            op.detach()
            modules.append(op)
    else:
        modules = [top]
    for module in modules:
        _check_module(module, text, name)
    return modules


def _check_strings(text: str, filename: str) -> None:
    """Report an unterminated string literal ourselves, in linear time: xDSL 0.74's string
    pattern `"(?:[^"\\\n]+|...)*"` backtracks exponentially on one (a truncated file)."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            if j >= n or text[j] != '"':
                raise _fail_at("unterminated string literal", filename, text, i)
            i = j
        i += 1


def _fail_at(message: str, filename: str, text: str, at: int) -> HloParseError:
    line = text.count("\n", 0, at) + 1
    return HloParseError(message, filename, line, at - (text.rfind("\n", 0, at) + 1) + 1)


def _fail(message: str, filename: str, text: str, needle: str | None = None) -> HloParseError:
    at = text.find(needle) if needle else -1
    line = text.count("\n", 0, at) + 1 if at >= 0 else 1
    col = at - (text.rfind("\n", 0, at) + 1) + 1 if at >= 0 else 1
    return HloParseError(message, filename, line, col)


def _check_module(module: ModuleOp, text: str, filename: str) -> None:
    comps = [op for op in module.ops if isinstance(op, ComputationOp)]
    others = [op for op in module.ops if not isinstance(op, ComputationOp)]
    if others:
        raise _fail(
            f"a module holds hlo.computation ops, not {others[0].name}",
            filename,
            text,
            others[0].name,
        )
    if not comps:
        raise _fail("the module holds no hlo.computation", filename, text, "builtin.module")
    entries = [c for c in comps if c.properties.get("is_entry") is not None]
    if len(entries) != 1:
        raise _fail(
            f"a module needs exactly one entry computation (is_entry), found {len(entries)}",
            filename,
            text,
            "hlo.computation",
        )
    names = {_data(c.properties.get("sym_name")) for c in comps}
    for comp in comps:
        _check_computation(comp, text, filename, names)
    try:
        module.verify()
    except (VerifyException, HloError, ValueError) as e:
        lines = str(e).strip().splitlines()
        raise _fail(lines[0] if lines else "the module does not verify", filename, text) from None


def _check_computation(comp: ComputationOp, text: str, filename: str, names: set[str]) -> None:
    cname = comp.properties.get("sym_name")
    label = f"computation {_data(cname)!r}"
    blocks = list(comp.regions[0].blocks) if comp.regions else []
    if len(blocks) != 1:
        raise _fail(f"{label} needs one block", filename, text, _data(cname))
    ops = list(blocks[0].ops)
    if not ops or not isinstance(ops[-1], ReturnOp):
        raise _fail(f"{label} must end with hlo.return", filename, text, _data(cname))
    numbers: set[int] = set()
    for op in ops[:-1]:
        if not isinstance(op, HloOp):
            raise _fail(f"{label} holds {op.name}, not an hlo instruction", filename, text, op.name)
        if op.properties.get("name") is None:
            raise _fail(f"{op.name} in {label} has no name", filename, text, op.name)
        for callee in op.callees():
            if callee not in names:
                raise _fail(
                    f"{op.inst_name!r} calls computation {callee!r}, which is not defined",
                    filename,
                    text,
                    f"@{callee}",
                )
        if op.opcode == "parameter":
            number = op.properties.get("number")
            if number is None:
                raise _fail(
                    f"parameter {op.inst_name!r} in {label} has no number",
                    filename,
                    text,
                    f'"{op.inst_name}"',
                )
            numbers.add(op.attr("number"))
    if numbers != set(range(len(numbers))):
        raise _fail(f"{label}: parameters are not numbered 0..N-1", filename, text, _data(cname))


def _data(attr: Any) -> str:
    return str(getattr(attr, "data", attr))
