"""Computations and calls: each computation's calling instructions (`CallIndex`, kept by the
fixpoint across pass runs), and the module-wide questions read from it (fused, called only by
`call`, reachable from the entry)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, entry_computation, op_list

if TYPE_CHECKING:
    from hlopass.rewriting.base import Scope


_MAY_CALL: dict[type, bool] = {}
"""op class -> whether its opcode has computation attributes (`to_apply`, `calls`, ...)."""


class CallIndex:
    """One computation's instructions that call computations, with their opcodes and
    callee names, and the names its instructions list as control predecessors: what the
    module-wide questions of a pass run read, from one walk over the computation (or from
    the previous index and the instructions a pass run touched: `updated`)."""

    __slots__ = ("block", "calls", "pinned", "pinners", "sites")

    def __init__(self, comp: ComputationOp):
        calls: list[tuple[HloOp, list[str]]] = []
        pinners: list[HloOp] = []
        may_call = _MAY_CALL
        # (`_callees` inline, over `op_list`: the fixpoint indexes every instruction)
        for op in op_list(comp.block):
            calls_some = may_call.get(type(op))
            if calls_some is None:
                calls_some = _may_call(type(op))
            if calls_some:
                names = op.callees()  # type: ignore[attr-defined]
                if names:
                    calls.append((op, names))  # type: ignore[arg-type]
            if "control-predecessors" in op.properties:
                pinners.append(op)  # type: ignore[arg-type]
        self._set(comp, calls, pinners)

    def _set(self, comp: ComputationOp, calls: list[tuple[HloOp, list[str]]],
             pinners: list[HloOp]) -> None:  # fmt: skip
        self.block = comp.block
        self.calls = calls
        self.pinners = pinners
        """The instructions with control predecessors."""
        self.pinned = frozenset(n for op in pinners for n in op.attr("control-predecessors") or ())
        self.sites = {(op.opcode, name) for op, names in calls for name in names}
        """(opcode, callee name) of each call."""

    def updated(self, comp: ComputationOp, touched: Iterable[Operation]) -> CallIndex:
        """The index of `comp` after a pass run that edited it only through a tracking
        rewriter, `touched` being what it touched (created, or modified in place: operands,
        attributes): an instruction not touched and still there kept its callees and
        control predecessors, one gone is dropped, a touched one is read again. Walking the
        whole computation again is left for a touched instruction that calls and did not
        before (its place among the calls would need the walk): rebuilt after every pass
        run that edits Mixtral's 29k-instruction entry, the walk was a twentieth of the
        fixpoint pipeline."""
        block = comp.block
        if block is not self.block:
            return CallIndex(comp)
        touched = {op for op in touched if op.parent is block}
        calls: list[tuple[HloOp, list[str]]] = []
        was_calling: set[Operation] = set()
        for op, names in self.calls:
            if op.parent is not block:
                continue  # erased
            if op in touched:
                was_calling.add(op)
                names = _callees(op)
                if not names:
                    continue
            calls.append((op, names))
        if any(_callees(op) for op in touched if op not in was_calling):
            return CallIndex(comp)  # a new call: its place in the order needs the walk
        pinners = [op for op in self.pinners if op.parent is block and op not in touched]
        # (a computation's block holds only instructions: the isinstance only narrows)
        pinners += [op for op in touched
                    if "control-predecessors" in op.properties and isinstance(op, HloOp)]  # fmt: skip
        index = CallIndex.__new__(CallIndex)
        index._set(comp, calls, pinners)
        return index


def _may_call(t: type) -> bool:
    """Whether instructions of op class `t` may call computations (kept in `_MAY_CALL`)."""
    spec = getattr(t, "SPEC", None)
    found = _MAY_CALL[t] = spec is not None and bool(spec.computations)
    return found


def _callees(op: Operation) -> list[str]:
    """The computations `op` calls (none for an op whose opcode calls none)."""
    t = type(op)
    calls_some = _MAY_CALL.get(t)
    if calls_some is None:
        calls_some = _may_call(t)
    return op.callees() if calls_some else []  # type: ignore[attr-defined]


def call_instructions(
    module: ModuleOp, scope: Scope | None = None, fresh: Iterable[ComputationOp] = ()
) -> Iterator[tuple[ComputationOp, HloOp, list[str]]]:
    """(computation, instruction, callee names) of every instruction calling a computation,
    in module order; from `scope.index` where it has the computation and it is not in
    `fresh` (computations edited since the index was taken), else from a walk over it."""
    index = scope.index if scope is not None else None
    fresh = set(fresh)
    for comp in computations(module):
        known = index.get(comp) if index is not None and comp not in fresh else None
        calls = known.calls if known is not None else CallIndex(comp).calls
        for op, names in calls:
            yield comp, op, names


def call_sites_only(
    module: ModuleOp, scope: Scope | None = None, keep: Callable[[HloOp], bool] | None = None
) -> dict[str, list[HloOp] | None]:
    """Per called computation: the `call` instructions calling it, or None when anything
    else calls it (another opcode, or a call `keep` refuses)."""
    out: dict[str, list[HloOp] | None] = {}
    for _, op, names in call_instructions(module, scope):
        ok = op.OPCODE == "call" and (keep is None or keep(op))
        for name in names:
            if not ok:
                out[name] = None
            elif out.get(name, []) is not None:
                out.setdefault(name, []).append(op)  # type: ignore[union-attr]
    return out


def fusion_computations(module: ModuleOp, scope: Scope | None = None) -> set[str]:
    """Names of computations called by `fusion` instructions (XLA's fusion computations)."""
    out: set[str] = set()
    for _, op, names in call_instructions(module, scope):
        if op.OPCODE == "fusion":
            out.update(names)
    return out


def unfused_computations(module: ModuleOp, scope: Scope | None = None) -> list[ComputationOp]:
    """The computations no fusion calls, in module order: XLA's MakeNonfusionComputations,
    where the GPU rewriters (GEMM, convolution, TopK, dot canonicalization) look."""
    fused = fusion_computations(module, scope)
    return [c for c in computations(module) if c.comp_name not in fused]


def reachable_computations(
    module: ModuleOp, scope: Scope | None = None, fresh: Iterable[ComputationOp] = ()
) -> set[str]:
    """Names of the computations the entry calls, transitively, and the entry's."""
    callees: dict[str, list[str]] = {}
    for comp, _, names in call_instructions(module, scope, fresh):
        callees.setdefault(comp.comp_name, []).extend(names)
    entry = entry_computation(module)
    seen = {entry.comp_name}
    stack = [entry.comp_name]
    known = {c.comp_name for c in computations(module)}
    while stack:
        for name in callees.get(stack.pop(), ()):
            if name not in seen and name in known:
                seen.add(name)
                stack.append(name)
    return seen
