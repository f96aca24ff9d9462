"""Bring a module after fusion to the state its own print would parse back to, in place.

What prints depends on more than the graph: instructions print in XLA's DFS post order,
computations in an order derived from their callers' instructions, and the importer
renumbers the stack-frame tables in text order (as XLA's parser does). After fusion the
block orders are no longer the printed ones, so the fusion passes settle the module: its
block orders become the printed ones (until printing would reorder nothing more), then the
instructions are renamed, the use lists re-threaded and the stack frames renumbered as the
parser would.

`settle_by_reparse` does the same by replacing the module with the parse of its print (a
print and two parses of the whole module: 23 s of a 176 s profile of priority fusion on
Mixtral 8x7B, benchmarks/fusion_scale.py). `settle` takes it where the in-place steps do not
cover what the round trip does (scheduled modules, async shorthand) and, under `HLOPASS_CHECK_SETTLE`, checks its print against it.
"""

from __future__ import annotations

import os

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from hlopass.dialects.hlo import ATTR_CLASSES, ComputationOp, HloOp, computations
from hlopass.ir import attrs as A
from hlopass.text.exporter import computation_post_order, instruction_post_order, print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.parse_normalize import (
    names_unique,
    renumber_stack_frames,
    uniquify_instruction_names,
)

CHECK_SETTLE = bool(os.environ.get("HLOPASS_CHECK_SETTLE"))
"""Also settle a clone by print and parse and require the same print (a test aid)."""
_ASYNC = frozenset({"async-start", "async-update", "async-done"})
_MAX_ROUNDS = 4


def settle(module: ModuleOp) -> None:
    """Make `module` what the parse of its print would be (see the module docstring)."""
    if _in_place_applies(module):
        settle_in_place(module)
    else:
        settle_by_reparse(module)


def adopt(module: ModuleOp, source: ModuleOp) -> None:
    """Make `module` hold `source`'s settled computations and attributes (a pass that
    planned on a copy keeps the caller's module object)."""
    settle(source)
    _take_body(module, source)


def _take_body(module: ModuleOp, source: ModuleOp) -> None:
    """`module`'s computations and attributes replaced by `source`'s (moved, not copied)."""
    block = module.body.block
    for op in list(block.ops):
        op.detach()
        op.erase(safe_erase=False)
    for op in list(source.body.block.ops):
        op.detach()
        block.add_op(op)
    module.attributes.clear()
    module.attributes.update(source.attributes)


def settle_in_place(module: ModuleOp) -> None:
    """`settle` of an unscheduled module without async ops, by moving, renaming and
    re-threading what the round trip would change."""
    expected = _reparsed(module) if CHECK_SETTLE else None
    todo = computations(module)
    for _ in range(_MAX_ROUNDS):
        # a computation whose block is its post order keeps it: only those that moved are
        # ordered again (the computations' own order reads their instructions' callees)
        todo = [c for c in todo if _reorder(c.body.block, instruction_post_order(c))]
        moved = _reorder(module.body.block, computation_post_order(module))
        if not moved and not todo:
            break
    comps = computations(module)
    if not names_unique([{op.inst_name: op.result for op in c.instructions} for c in comps]):
        uniquify_instruction_names(comps)  # as the parser renames, in text order
    _thread_uses(comps)
    _renumber_frames(module)
    if expected is not None:
        assert print_hlo(module) == print_hlo(expected), "settled print differs from the parse's"
        assert _users(module) == _users(expected), "settled use lists differ from the parse's"


def _in_place_applies(module: ModuleOp) -> bool:
    """Whether the in-place steps are all a round trip would change: an unscheduled module
    without async ops (whose shorthand the parser expands into new computations)."""
    sched = module.attributes.get("hlo.is_scheduled")
    if sched is not None and sched.data:  # type: ignore[attr-defined]
        return False
    return not any(op.opcode in _ASYNC for c in computations(module) for op in c.instructions)


def _reorder(block: Block, order: list[HloOp] | list[ComputationOp]) -> bool:
    """Put `order`'s ops first in `block`, in that order (whatever else the block holds,
    a computation's return, stays after them); whether anything moved."""
    first = block.first_op
    op: Operation | None = first
    same = True
    for want in order:
        if op is not want:
            same = False
            break
        op = want.next_op
    if same:
        return False
    anchor = first
    for want in order:
        if want is anchor:
            anchor = want.next_op
            continue
        want.detach()
        if anchor is None:
            block.add_op(want)
        else:
            block.insert_op_before(want, anchor)
    return True


def _thread_uses(comps: list[ComputationOp]) -> None:
    """Every value's use list in the parser's order. Not printed, but passes walk users in
    it (multi-output fusion on Mixtral 8x7B merges other siblings when it differs): the
    parser adds each operand's use at the head of its value's list, in text order."""
    for comp in comps:
        block = comp.body.block
        ops = list(block.ops)
        pos = {id(op): i for i, op in enumerate(ops)}
        try:
            for v in block.args:
                _thread(v, pos)
            for op in ops:
                for r in op.results:
                    _thread(r, pos)
        except KeyError:  # a reader outside the block: every reader's uses made again
            for op in ops:
                if op.operands:
                    op.operands = tuple(op.operands)


def _thread(value: SSAValue, pos: dict[int, int]) -> None:
    """`value`'s uses in the parser's order: last reader in text order first, a reader's
    later operands before its earlier ones (relinked only when out of that order)."""
    if value.first_use is None or value.has_one_use():  # (most values: nothing to order)
        return
    uses = list(value.uses)
    keys = [(pos[id(u.operation)], u.index) for u in uses]
    if all(a > b for a, b in zip(keys, keys[1:], strict=False)):
        return
    ordered = [u for _, u in sorted(zip(keys, uses, strict=True), key=lambda ku: ku[0])]
    for u in ordered:
        value.remove_use(u)
    for u in ordered:  # each at the head: the last one added leads
        value.add_use(u)


def _renumber_frames(module: ModuleOp) -> None:
    """The parser's renumbering of the stack-frame tables, in text order."""
    attr = module.attributes.get("hlo.stack_frames")
    comps = computations(module)
    if attr is None and not _any_frame_id(comps):
        return
    tables = renumber_stack_frames(str(attr.data) if attr is not None else "", comps)  # type: ignore[attr-defined]
    if tables:
        module.attributes["hlo.stack_frames"] = ATTR_CLASSES["raw"].new(A.Raw(tables))
    elif attr is not None:
        del module.attributes["hlo.stack_frames"]


def _any_frame_id(comps: list[ComputationOp]) -> bool:
    for comp in comps:
        for op in comp.instructions:
            md = op.properties.get("metadata")
            if md is not None and any(k == "stack_frame_id" for k, _ in md.data.fields):  # type: ignore[attr-defined]
                return True
    return False


def _reparsed(module: ModuleOp) -> ModuleOp:
    """What `settle_by_reparse` would make of the module, the module left as it is."""
    text = print_hlo(module)
    fresh = parse_hlo(text)
    for _ in range(_MAX_ROUNDS):
        again = print_hlo(fresh)
        if again == text:
            break
        text, fresh = again, parse_hlo(again)
    return fresh


def _users(module: ModuleOp) -> dict[str, list[tuple[str, int]]]:
    """Each instruction's uses in list order, (user, operand index), by name."""
    return {
        f"{c.comp_name}/{op.inst_name}": [
            (getattr(u.operation, "inst_name", "return"), u.index) for u in op.result.uses
        ]
        for c in computations(module)
        for op in c.instructions
    }


def settle_by_reparse(module: ModuleOp) -> None:
    """Replace the module by the parse of its own print (until the print is a fixed point)."""
    text = print_hlo(module)
    fresh = parse_hlo(text)
    for _ in range(3):
        again = print_hlo(fresh)
        if again == text:
            break
        text, fresh = again, parse_hlo(again)
    _take_body(module, fresh)
