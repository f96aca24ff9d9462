"""Questions asked of every instruction a pass looks at, answered per op class or per module
from a table: is it HLO, its defining instruction, its module, a computation by name."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeGuard

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, op_list

_HLO_CLASS: dict[type, bool] = {}
"""op class -> whether it is an `HloOp`: `isinstance` against xDSL's abstract op classes
goes through `ABCMeta.__instancecheck__`, several times slower than this lookup, and is
asked for every operand a pattern looks at."""


def is_hlo(o: object) -> TypeGuard[HloOp]:
    """`isinstance(o, HloOp)`, quickly."""
    t = type(o)
    found = _HLO_CLASS.get(t)
    if found is None:
        found = _HLO_CLASS[t] = issubclass(t, HloOp)
    return found


class ByClass:
    """A test of ops answered once per op class: `self(op)` is `test(type(op))`, and
    `self.ops(ops)` keeps the ops that pass, in order. The drivers filter whole
    computations with it: a look-up per instruction, not a Python call (Mixtral's fixpoint
    pipeline filters ~200k instructions)."""

    __slots__ = ("answers", "test")

    def __init__(self, test: Callable[[type], bool], answers: dict[type, bool] | None = None):
        self.test = test
        self.answers: dict[type, bool] = {} if answers is None else answers

    def __call__(self, op: Operation) -> bool:
        t = type(op)
        found = self.answers.get(t)
        if found is None:
            found = self.answers[t] = self.test(t)
        return found

    def ops(self, ops: list[Operation]) -> list[Operation]:
        """The ops of `ops` that pass the test, in order (one test per new class)."""
        answers = self.answers
        for t in set(map(type, ops)).difference(answers):
            answers[t] = self.test(t)
        return [op for op in ops if answers[type(op)]]


def hlo_class(t: type) -> bool:
    """Whether `t` is an `HloOp` class (`is_hlo` of its instances)."""
    found = _HLO_CLASS.get(t)
    if found is None:
        found = _HLO_CLASS[t] = issubclass(t, HloOp)
    return found


hlo_ops = ByClass(hlo_class, _HLO_CLASS).ops
"""The HLO instructions of a list of ops (`is_hlo`), in order."""


def instructions(comp: ComputationOp) -> list[HloOp]:
    """`comp.instructions` as a list, without `isinstance`'s cost per op (the module-wide
    scans of a pass run, e.g. for fused computations, look at every instruction)."""
    known = _HLO_CLASS
    out = []
    for o in op_list(comp.block):
        t = type(o)
        found = known.get(t)
        if found is None:
            found = known[t] = issubclass(t, HloOp)
        if found:
            out.append(o)
    return out


def owner(value: SSAValue) -> HloOp | None:
    """`value`'s defining instruction (None for a block argument or a non-HLO op); asked
    for every operand a pattern looks at, so `is_hlo` is inlined, and a result's `op`
    field is read without `owner`'s property call."""
    try:
        o = value.op  # type: ignore[attr-defined]
    except AttributeError:  # a block argument
        o = value.owner
    t = type(o)
    found = _HLO_CLASS.get(t)
    if found is None:
        found = _HLO_CLASS[t] = issubclass(t, HloOp)
    return o if found else None  # type: ignore[return-value]


_COMPS: weakref.WeakKeyDictionary[ModuleOp, dict[str, ComputationOp]] = weakref.WeakKeyDictionary()
"""Per module: computations by name, as last seen (checked on every hit, see below)."""


def computation_named(module: ModuleOp, name: str) -> ComputationOp | None:
    """The computation of `module` called `name` (None when there is none).

    The table is rebuilt only when a hit is stale (the computation left the module or was
    renamed) or on a miss, so passes that add, drop or rename computations still get the
    truth, and a pass asking once per instruction does not walk the module each time.
    """
    table = _COMPS.get(module)
    if table is not None:
        c = table.get(name)
        # (the module's block without the IRDL accessors: asked per reduce a pattern reads)
        if c is not None and c.parent is module.regions[0].first_block and c.comp_name == name:
            return c
    table = _COMPS[module] = comps_by_name(module)
    return table.get(name)


def module_of(op: Operation) -> ModuleOp | None:
    """The module around `op` (None when it is detached). Asked for every instruction a
    pattern looks at, so it follows the `parent` fields, not the `parent_op()` calls."""
    p: Any = op
    while True:
        block = p.parent
        region = block.parent if block is not None else None
        p = region.parent if region is not None else None
        if p is None:
            return None
        t = type(p)
        found = _MODULE_CLASS.get(t)
        if found is None:
            found = _MODULE_CLASS[t] = issubclass(t, ModuleOp)
        if found:
            return p


_MODULE_CLASS: dict[type, bool] = {}
"""op class -> whether it is a `ModuleOp` (as `_HLO_CLASS`, without `isinstance`'s cost)."""


def comps_by_name(module: ModuleOp) -> dict[str, ComputationOp]:
    """The computations of `module` by name (a snapshot: edits after it are not seen)."""
    return {c.comp_name: c for c in computations(module)}
