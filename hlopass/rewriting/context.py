"""What the patterns of one pass run share: fresh instruction names (`NameUniquer`), the
trace hook, the module's pinned names (`RewriteContext`), and the rewrite texts traced."""

from __future__ import annotations

import functools
import re
from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import HloOp, computations, op_list
from hlopass.ir.names import claim_name
from hlopass.rewriting.effects import (
    control_predecessor_names,
    forget_effects,
    set_control_predecessor_names,
)

if TYPE_CHECKING:
    from hlopass.rewriting.base import Scope, TraceHook


_SUFFIX = re.compile(r"^(.*?)\.(\d+)$")


class NameUniquer:
    """Unique instruction names in XLA's style: `prefix`, then `prefix.1`, `prefix.2`, ...

    The module's names are collected on the first `fresh` call, not up front: most pass
    runs of a fixpoint pipeline create nothing, and the walk costs one visit per instruction.
    """

    def __init__(self, module: ModuleOp | None = None):
        self._module = module
        self._used: set[str] | None = None if module is not None else set()
        self.next: dict[str, int] = {}

    @property
    def used(self) -> set[str]:
        """Every name taken: the module's instruction names and those `fresh` gave."""
        if self._used is None:
            assert self._module is not None
            used: set[str] = set()
            add = used.add
            for comp in computations(self._module):
                # the `name` property itself (the return has none); `op_list`, not xDSL's
                # iterator, which makes two Python calls per op
                for op in op_list(comp.block):
                    p = op.properties
                    if "name" in p:
                        add(p["name"].data)  # type: ignore[attr-defined]
            self._used = used
            self._module = None
        return self._used

    def fresh(self, base: str) -> str:
        """A name not yet used, taken now: `base` without its `.N` suffix if free, else
        that root with the lowest free `.N` (`add.3` may give `add`, `add.1`, ...)."""
        m = _SUFFIX.match(base)
        return claim_name(m.group(1) if m else base, self.used, self.next)

    def fresh_outside(self, base: str, taken: Container[str]) -> str:
        """`fresh(base)` until the name is not in `taken` either (a new computation's name,
        kept apart from both instruction and computation names); every try stays taken."""
        name = self.fresh(base)
        while name in taken:
            name = self.fresh(base)
        return name


@dataclass
class RewriteContext:
    """State shared by the patterns of one pass run."""

    module: ModuleOp
    """The module the pass runs on."""
    names: NameUniquer
    """Fresh instruction names for what the patterns create (`new_op` takes them here)."""
    trace: TraceHook | None = None
    """Told of each rewrite (`note`); None when nobody listens."""
    float_op_memo: list[Any] = field(default_factory=lambda: [None, None, False])
    """algsimp's float-unsafe guard, kept for the instruction visit it was computed for."""

    @functools.cached_property
    def pinned(self) -> frozenset[str]:
        """`control_predecessor_names(module)`: fixed for the run, asked per pattern."""
        return control_predecessor_names(self.module)

    @staticmethod
    def of(module: ModuleOp, trace: TraceHook | None = None,
           scope: Scope | None = None) -> RewriteContext:  # fmt: skip
        """The context for one run of a pass over `module`: a fresh `NameUniquer`, the
        `trace` hook (`--trace-rewrites`), what `scope`'s call index already knows."""
        forget_effects(module)  # recomputed for this run
        index = scope.index if scope is not None else None
        if index is not None:
            comps = computations(module)
            if all(c in index for c in comps):
                set_control_predecessor_names(
                    module, frozenset().union(*(index[c].pinned for c in comps))
                )
        return RewriteContext(module, NameUniquer(module), trace)

    def note(self, pattern: object, op: HloOp | None, what: str = "") -> None:
        """Tell the trace hook, if any, that `pattern` rewrites `op` (`what`: a few words on
        how); `--trace-rewrites` shows the pattern's docstring's first line as the rule."""
        if self.trace is not None:
            label = op.inst_name if op is not None else ""
            name = type(pattern).__name__
            if name not in _REWRITE_TEXT:
                _REWRITE_TEXT[name] = _first_doc_line(type(pattern))
            self.trace(name, f"{label} {what}".strip())


_REWRITE_TEXT: dict[str, str] = {}


def _first_doc_line(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0].rstrip(".").replace("`", "") if doc else ""


def rewrite_text(pattern_name: str) -> str:
    """The rewrite a traced pattern performs (its docstring's first line, e.g.
    `add(x, 0) -> x`), or '' for a pattern not yet traced or without a docstring."""
    return _REWRITE_TEXT.get(pattern_name, "")
