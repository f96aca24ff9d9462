"""What may not be removed or reordered: side effects (in an instruction or anything it calls),
random numbers, control predecessors; answered from per-class and per-module caches that
last until a pass ends."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.traits import Commutative

from hlopass.dialects.hlo import ComputationOp, HasSideEffect, HloOp, RandomNumber, computations
from hlopass.rewriting.lookup import (
    comps_by_name,
    computation_named,
    instructions,
    is_hlo,
    module_of,
)


def is_removable(op: Operation) -> bool:
    """Pure (or a removable impure opcode), not a parameter, without side effects in it
    or in any computation it calls: safe to delete once unused."""
    if not is_hlo(op):
        return False
    if not (
        op.opcode != "parameter"
        and not has_side_effect(op)
        and (op.spec.traits & {"pure"} or op.opcode in _REMOVABLE_IMPURE)
    ):
        return False
    if is_control_predecessor(op):
        return False
    if not op.callees():
        return True
    module = module_of(op)
    if module is None:
        return True
    memo = vars(module).setdefault(_EFFECTS, {})
    return not calls_side_effect(op, _ModuleComps(module), memo=memo)


_EFFECTS = "_hlopass_side_effect_memo"
"""The module's attribute holding `is_removable`'s answers per called computation (cached
until a pass ends, as `_PINNED`: no pass adds a side effect)."""


_PINNED = "_hlopass_control_predecessor_names"
"""The module's attribute caching `control_predecessor_names` (asked for each instruction a
pattern looks at: an attribute read is several times cheaper than a weak-dictionary one)."""


def control_predecessor_names(module: ModuleOp) -> frozenset[str]:
    """Instructions named in some `control-predecessors={...}` (cached until a pass ends)."""
    names = module.__dict__.get(_PINNED)
    if names is None:
        found: set[str] = set()
        for comp in computations(module):
            for op in instructions(comp):
                preds = op.attr("control-predecessors")
                if preds:
                    found.update(preds)
        names = frozenset(found)
        setattr(module, _PINNED, names)
    return names


def set_control_predecessor_names(module: ModuleOp, names: frozenset[str]) -> None:
    """Cache `names` as `control_predecessor_names(module)`: the fixpoint's call index already
    knows them, and a pass run then needs no walk of the module for them."""
    setattr(module, _PINNED, names)


def forget_effects(module: ModuleOp) -> None:
    """Drop the module's cached side-effect answers and control-predecessor names (a pass
    ended, or a new run starts, and either may have edited it)."""
    # (`vars`: the instance's dict, typed as one; pyright takes `__dict__` for a class's)
    cache = vars(module)
    cache.pop(_PINNED, None)
    cache.pop(_EFFECTS, None)


def is_control_predecessor(op: HloOp) -> bool:
    """Some instruction lists `op` as a control predecessor: it must not disappear."""
    module = module_of(op)
    return module is not None and op.inst_name in control_predecessor_names(module)


class _ModuleComps(Mapping[str, ComputationOp]):
    """`comps_by_name(module)` read through `computation_named` (no walk per question)."""

    def __init__(self, module: ModuleOp):
        self.module = module

    def __getitem__(self, name: str) -> ComputationOp:
        c = computation_named(self.module, name)
        if c is None:
            raise KeyError(name)
        return c

    def __iter__(self) -> Iterator[str]:
        return iter(comps_by_name(self.module))

    def __len__(self) -> int:
        return len(computations(self.module))


def calls_side_effect(
    op: HloOp, comps: Mapping[str, ComputationOp], seen: set[str] | None = None,
    random: bool = False, memo: dict[tuple[str, bool], bool] | None = None,
) -> bool:  # fmt: skip
    """XLA's `HasSideEffect`: `op` or anything in the computations it calls (recursively)
    has a side effect; with `random`, random-number instructions count too. With `memo`
    (kept by the caller for one pass run), each computation's answer is worked out once:
    a pass asks for every `reduce`, and most of them call the same few reducers."""
    if has_side_effect(op) or (random and is_random(op)):
        return True
    if memo is not None:
        return any(_computation_effect(name, comps, random, memo) for name in op.callees())
    seen = set() if seen is None else seen
    for name in op.callees():
        if name in seen:
            continue
        seen.add(name)
        comp = comps.get(name)
        if comp is None:
            return True  # unknown callee: assume the worst
        for inner in instructions(comp):
            if calls_side_effect(inner, comps, seen, random):
                return True
    return False


def _computation_effect(
    name: str, comps: Mapping[str, ComputationOp], random: bool,
    memo: dict[tuple[str, bool], bool],
) -> bool:  # fmt: skip
    """Something in computation `name` (or what it calls) has a side effect (an unknown
    computation is assumed to); `memo` holds the answers found so far."""
    key = (name, random)
    found = memo.get(key)
    if found is not None:
        return found
    memo[key] = False  # a call cycle (invalid HLO) adds nothing new, as `seen` above
    comp = comps.get(name)
    found = comp is None or any(
        calls_side_effect(inner, comps, None, random, memo) for inner in instructions(comp)
    )
    memo[key] = found
    return found


_REMOVABLE_IMPURE = frozenset({"replica-id", "partition-id", "custom-call"})
"""Not marked pure, but removable when unused and without side effects (XLA's HloDCE)."""


_CLASS_TRAITS: dict[tuple[type, type], bool] = {}
"""(op class, trait class) -> whether the class has the trait: traits belong to the class,
and xDSL's `has_trait` scans the class's list with `isinstance` on every call."""


def _class_has(op: Operation, trait: type) -> bool:
    key = (type(op), trait)
    found = _CLASS_TRAITS.get(key)
    if found is None:
        found = _CLASS_TRAITS[key] = op.has_trait(trait)
    return found


def has_side_effect(op: HloOp) -> bool:
    """XLA's `HasSideEffectNoRecurse`, from the traits and custom-call's flag."""
    if _class_has(op, HasSideEffect):
        return True
    if op.opcode == "custom-call":
        return bool(op.attr("custom_call_has_side_effect"))
    return False


def is_random(op: HloOp) -> bool:
    """`op` draws random numbers (`rng`): CSE must not merge two, folding must not run one."""
    return _class_has(op, RandomNumber)


def is_commutative(op: Operation) -> bool:
    """`op.has_trait(Commutative)`, from the class's cached answer."""
    return _class_has(op, Commutative)
