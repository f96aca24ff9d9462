"""Pass options in users' words: checking `-p 'pass{option=value}'` and describing options.

xDSL converts option values by the dataclass field's type and, on a mismatch, reports
Python's types (`expected <class 'bool'>`). Here each given value is checked first and a
mismatch becomes one line naming the pass, the option, the value and what is expected
(`expected true or false`, `expected a whole number >= 0`).

Every `int` option counts or sizes something (iterations, elements, bytes, trials), so a
negative value is refused, except the value a docstring gives a meaning to (`(-1: no
limit)`), or any negative value where the field is declared `signed(...)` (an offset, a
delta). Floats (thresholds, factors) may be negative.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import types
import typing
from typing import Any

SIGNED = "hlopass.signed"
"""Field metadata key: this `int` option may be negative (see `signed`)."""


def signed(default: int) -> Any:
    """`offset: int = signed(0)`: an `int` option that may be negative (not a count)."""
    return dataclasses.field(default=default, metadata={SIGNED: True})


class OptionValueError(ValueError):
    """A value that does not fit its option; `str()` is `name=value: expected ...`."""


_SPECIAL = re.compile(r"(?<![\w-])(-\d+): ([^);.]*)")  # `(-1: no limit)` in a docstring


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of a pass: its spelling, type, default and docstring."""

    name: str  # as spelt on the command line: max-elements
    type: Any
    default: Any
    doc: str
    signed: bool = False

    @property
    def special(self) -> tuple[int, str] | None:
        """A negative value the docstring names, with its meaning (`-1`, `no limit`)."""
        m = _SPECIAL.search(self.doc)
        return (int(m.group(1)), m.group(2)) if m else None

    def expected(self) -> str:
        """What a value must be, in words."""
        base, optional = _unwrap_optional(self.type)
        words = _words(base, self.signed)
        special = self.special
        if base is int and not self.signed and special is not None:
            words += f", or {special[0]} ({special[1]})"
        return words + (", or nothing" if optional else "")

    def convert(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        """The values to hand to xDSL; OptionValueError when they do not fit."""
        base, optional = _unwrap_optional(self.type)
        if not values:
            if optional:
                return values
            raise OptionValueError(f"{self.name}: needs a value ({self.expected()})")
        if typing.get_origin(base) is tuple:
            (item,) = typing.get_args(base)[:1] or (Any,)
            return tuple(self._one(v, item, values) for v in values)
        if len(values) != 1:
            raise self._bad(values)
        return (self._one(values[0], base, values),)

    def _one(self, v: Any, kind: Any, values: tuple[Any, ...]) -> Any:
        if kind is bool:
            if isinstance(v, bool):
                return v
        elif kind is int:
            if isinstance(v, int) and not isinstance(v, bool):
                special = self.special
                if v >= 0 or self.signed or (special is not None and v == special[0]):
                    return v
        elif kind is float:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
            if isinstance(v, str):  # `1e3`: xDSL's lexer leaves exponents as text
                try:
                    return float(v)
                except ValueError:
                    pass
        elif kind is str:
            if isinstance(v, str):
                return v
        else:
            return v  # a type we have no words for: xDSL checks it
        raise self._bad(values)

    def _bad(self, values: tuple[Any, ...]) -> OptionValueError:
        return OptionValueError(f"{self.name}={spell(values)}: expected {self.expected()}")


def _unwrap_optional(t: Any) -> tuple[Any, bool]:
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return t, False


def _words(t: Any, is_signed: bool) -> str:
    if t is bool:
        return "true or false"
    if t is int:
        return "a whole number" if is_signed else "a whole number >= 0"
    if t is float:
        return "a number"
    if t is str:
        return "a name"
    if typing.get_origin(t) is tuple:
        item = (typing.get_args(t) or (Any,))[0]
        plural = {bool: "true/false values", int: "whole numbers", float: "numbers"}
        return f"a comma-separated list of {plural.get(item, 'names')}"
    return getattr(t, "__name__", str(t))


def spell(values: tuple[Any, ...]) -> str:
    """Values as they are written in a pipeline (`true`, `3`, `a,b`)."""
    return ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


def options_of(cls: type) -> list[Option]:
    """The options of pass class `cls`, in declaration order."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a plug-in's annotation we cannot resolve: xDSL will say
        hints = {}
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "name" or not f.init:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        out.append(Option(f.name.replace("_", "-"), hints.get(f.name, Any), default,
                          field_doc(cls, f.name), bool(f.metadata.get(SIGNED))))  # fmt: skip
    return out


def default_text(option: Option) -> str:
    if option.default is dataclasses.MISSING:
        return "(required)"
    if option.default is None:
        return ""
    if isinstance(option.default, tuple):
        return spell(option.default)
    return spell((option.default,))


def field_doc(cls: type, field: str) -> str:
    """The docstring under a dataclass field, read from the source of `cls` or of the
    base class that declares it ('' when there is none)."""
    for klass in cls.__mro__:
        if field in getattr(klass, "__annotations__", {}):
            doc = _docs_of(klass).get(field)
            if doc is not None:
                return doc
    return ""


_DOCS: dict[type, dict[str, str]] = {}


def _docs_of(cls: type) -> dict[str, str]:
    docs = _DOCS.get(cls)
    if docs is None:
        docs = _DOCS[cls] = _read_docs(cls)
    return docs


def _read_docs(cls: type) -> dict[str, str]:
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, nxt in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


# --- help text ------------------------------------------------------------------------------


def _width() -> int:
    import shutil

    return max(60, min(100, shutil.get_terminal_size((88, 24)).columns))


def _paragraphs(doc: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", doc.strip()) if p.strip()]


def _wrapped(text: str, indent: str, width: int, first: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, initial_indent=first or indent, subsequent_indent=indent,
                         break_on_hyphens=False, break_long_words=False) or [first.rstrip()]  # fmt: skip


def summary(cls: type) -> str:
    """The first paragraph of the pass's docstring, on one line."""
    import inspect

    paras = _paragraphs(inspect.cleandoc(cls.__doc__ or ""))
    return paras[0] if paras else ""


def list_text(name: str, cls: type, width: int | None = None) -> list[str]:
    """`--list-passes`: the pass's summary and each option with its default and the first
    paragraph of its docstring, wrapped (never cut)."""
    width = width or _width()
    lines = _wrapped(summary(cls), "    ", width, f"{name}: ")
    for option in options_of(cls):
        head = f"  {option.name}={default_text(option)}"
        paras = _paragraphs(option.doc)
        if paras:
            lines += _wrapped(paras[0], "      ", width, head + "  ")
        else:
            lines.append(head)
    return lines


def help_text(name: str, cls: type, width: int | None = None) -> str:
    """`--help-pass NAME`: the whole docstring of the pass and of each option, with what
    each option's value must be."""
    import inspect

    width = width or _width()
    lines = [name]
    for para in _paragraphs(inspect.cleandoc(cls.__doc__ or "")):
        lines += _wrapped(para, "  ", width) + [""]
    options = options_of(cls)
    lines.append("options:" if options else "options: none")
    for option in options:
        lines.append(f"  {option.name}={default_text(option)}  ({option.expected()})")
        for para in _paragraphs(option.doc):
            lines += _wrapped(para, "      ", width)
    return "\n".join(lines).rstrip() + "\n"
