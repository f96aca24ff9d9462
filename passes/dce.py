"""`dce`: dead-code elimination (XLA's HloDCE).

Removes instructions whose value is unused (never parameters, the root, instructions
with side effects or with control dependencies), unused outputs of multi-output fusions,
unused parameters of computations only `call`s and `call-start`s reference, and
computations no longer reachable from the entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import Rewriter

from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    computations,
    create_op,
    entry_computation,
    shape_type,
)
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.ir.shape import TupleShape
from hlopass.rewriting import (
    RewriteContext,
    Scope,
    TrackedPass,
    call_instructions,
    calls_side_effect,
    comps_by_name,
    erase_dead,
    forget_cached_state,
    has_side_effect,
    hlo_ops,
    is_control_predecessor,
    is_hlo,
    is_removable,
    is_root,
    owner,
    reachable_computations,
    run_patterns,
)


def is_dead(op: Operation, comps: dict[str, ComputationOp],
            effects: dict[tuple[str, bool], bool] | None = None) -> bool:  # fmt: skip
    """No users (the root counts as used), removable, and nothing with effects called.

    As XLA's HloDCE: never an instruction with control predecessors (nor one named as
    one: `is_removable`), a while marked `xla_disable_while_loop_dce`, or a "Sharding"
    custom-call whose operand is the root, a parameter or used elsewhere too (the
    annotation is all that holds its sharding)."""
    if not is_hlo(op) or op.result.first_use is not None:  # (`.uses` builds a view)
        return False
    if _while_dce_disabled(op) or _pins_sharding(op):
        return False
    if op.attr("control-predecessors"):
        return False  # XLA's IsSafelyRemovable: control edges keep an instruction, both ends
    if is_removable(op):
        return True
    # while/call/conditional (and async pairs) without side effects anywhere inside are
    # removable too
    if op.OPCODE == "async-done":
        start = _async_start(op)
        return start is not None and not calls_side_effect(start, comps, memo=effects)
    return (
        op.OPCODE in ("while", "call", "conditional", "async-start")
        and not calls_side_effect(op, comps, memo=effects)
        and not is_control_predecessor(op)
    )


def _async_start(done: HloOp) -> HloOp | None:
    """The async-start an async-done ends (through any async-updates)."""
    op = owner(done.operands[0]) if done.operands else None
    while op is not None and op.OPCODE == "async-update":
        op = owner(op.operands[0])
    return op if op is not None and op.OPCODE == "async-start" else None


def _while_dce_disabled(op: HloOp) -> bool:
    """XLA's `xla_disable_while_loop_dce="true"` frontend attribute."""
    attrs = op.attr("frontend_attributes")
    return attrs is not None and 'xla_disable_while_loop_dce="true"' in str(
        getattr(attrs, "text", attrs)
    )


def _pins_sharding(op: HloOp) -> bool:
    """A "Sharding" custom-call XLA keeps though unused: its operand is the root, a
    parameter, or has other users."""
    if op.OPCODE != "custom-call" or op.attr("custom_call_target") != "Sharding":
        return False
    src = owner(op.operands[0]) if op.operands else None
    if src is None:
        return True
    return is_root(src) or src.OPCODE == "parameter" or src.result.uses.get_length() != 1


def _erase_dead_operands(rewriter: PatternRewriter, values: list, comps: dict[str, ComputationOp],
                         effects: dict[tuple[str, bool], bool]) -> None:  # fmt: skip
    """`erase_dead` with dce's notion of dead (async pairs, calls, guards above)."""
    stack = [v.owner for v in values]
    while stack:
        op = stack.pop()
        if is_hlo(op) and op.parent is not None and is_dead(op, comps, effects):
            operands = list(op.operands)
            rewriter.erase(op)
            stack.extend(v.owner for v in operands)


def _may_go(ops: list[Operation]) -> list[Operation]:
    """The unused instructions of `ops` and the fusions (whose unused outputs may go), in
    order: what dce's walks start from."""
    return [
        op
        for op in hlo_ops(ops)
        if op.results[0].first_use is None or op.OPCODE == "fusion"  # type: ignore[attr-defined]
    ]


@dataclass
class RemoveDeadInstruction(RewritePattern):
    """`unused(x)` -> nothing: erase an unused instruction and operands it leaves unused."""

    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    ctx: RewriteContext
    comps: dict[str, ComputationOp]
    effects: dict[tuple[str, bool], bool] = field(default_factory=dict)
    """`calls_side_effect`'s answers per called computation, for this run."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_dead(op, self.comps, self.effects):
            return
        assert is_hlo(op)  # is_dead says so
        self.ctx.note(self, op, "removed")
        operands = list(op.operands)
        rewriter.erase(op)
        _erase_dead_operands(rewriter, operands, self.comps, self.effects)


@dataclass
class RemoveUnusedFusionOutput(RewritePattern):
    """`gte(fusion(...){tuple root}, i)` unused for some i -> fusion with a smaller tuple.

    Guards: every user of the fusion is a get-tuple-element, its fused computation is
    called only by this fusion and has a `tuple` root.
    """

    OPCODES: ClassVar[tuple[str, ...]] = ("fusion",)

    ctx: RewriteContext
    comps: dict[str, ComputationOp]
    callers: dict[str, int]
    edited: set[ComputationOp] | None = None
    """Where the fused computations this shrinks are noted (the walker sees only the caller)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_hlo(op) or op.OPCODE not in self.OPCODES or not self._may_shrink(op):
            return
        shape = op.shape
        assert isinstance(shape, TupleShape)  # _may_shrink says so
        users = [u.operation for u in op.result.uses]
        (callee,) = op.callees()
        comp = self.comps[callee]
        root = comp.root
        # an output computed by an instruction with side effects stays, used or not
        used = sorted(
            {u.attr("index") for u in users}  # type: ignore[union-attr]
            | {i for i, v in enumerate(root.operands) if _has_effect(v)}
        )
        if len(used) == len(shape.elements):
            return
        if self.edited is not None:
            self.edited.add(comp)
        old_operands = list(root.operands)
        if len(used) == 1:
            # one output left: the fusion returns it, no longer a tuple
            new_shape = shape.elements[used[0]]
            kept = root.operands[used[0]]
            root.result.replace_all_uses_with(kept)
            kept_op = kept.owner
            assert isinstance(kept_op, Operation)  # (computations take no block arguments)
            inner = PatternRewriter(kept_op)
        else:
            new_shape = TupleShape(tuple(shape.elements[i] for i in used))
            new_root = create_op("tuple", [root.operands[i] for i in used], new_shape,
                                 root.inst_name, dict((s.name, v) for s, v in root.hlo_attrs()))  # fmt: skip
            Rewriter_insert_before(new_root, root)
            root.result.replace_all_uses_with(new_root.result)
            inner = PatternRewriter(new_root)
        root.detach()
        root.erase()
        erase_dead(inner, old_operands)
        # XLA's verifier wants every non-root fused instruction used: drop the parameters
        # only the removed outputs read, and the fusion operands that fed them
        operands = _drop_unused_parameters(comp, list(op.operands))
        # the fusion itself, renumbering its GTEs
        attrs = {s.name: v for s, v in op.hlo_attrs()}
        new_fusion = create_op("fusion", operands, new_shape, op.inst_name, attrs)
        rewriter.insert(new_fusion)
        if len(used) == 1:
            for u in users:
                assert isinstance(u, HloOp)
                _relay_control_dependencies(u, new_fusion)
                rewriter.replace_all_uses_with(u.result, new_fusion.result)
                rewriter.erase(u)
            forget_cached_state(self.ctx.module)  # control predecessors were renamed
        else:
            remap = {old: new for new, old in enumerate(used)}
            for u in users:
                assert isinstance(u, HloOp)
                u.set_attr("index", remap[u.attr("index")])
                u.operands = [new_fusion.result]
                rewriter.notify_op_modified(u)
        rewriter.erase(op)
        self.ctx.note(self, new_fusion, f"kept outputs {used}")

    def _may_shrink(self, op: HloOp) -> bool:
        """XLA's guards: a tuple-shaped fusion, not the root, not custom, without output
        aliasing or control dependencies, read only through get-tuple-elements, whose fused
        computation (called by it alone) has an unsharded tuple root used only as root."""
        if not isinstance(op.shape, TupleShape) or not op.result.uses or is_root(op):
            return False
        if op.attr("kind") == "kCustom" or op.attr("output_to_operand_aliasing"):
            return False
        if op.attr("control-predecessors") or is_control_predecessor(op):
            return False
        for u in op.result.uses:
            if not isinstance(u.operation, HloOp) or u.operation.OPCODE != "get-tuple-element":
                return False
        (callee,) = op.callees()
        comp = self.comps.get(callee)
        if comp is None or self.callers.get(callee, 0) != 1:
            return False
        root = comp.root
        return (
            root.OPCODE == "tuple"
            and not root.attr("sharding")
            and root.result.uses.get_length() == 1
        )


def _has_effect(value: SSAValue) -> bool:
    o = owner(value)
    return o is not None and has_side_effect(o)


def _relay_control_dependencies(old: HloOp, new: HloOp) -> None:
    """`new` takes `old`'s place in control dependencies: its predecessors become `new`'s,
    and instructions that waited for `old` wait for `new`."""
    preds = old.attr("control-predecessors")
    if preds:
        mine = tuple(new.attr("control-predecessors") or ())
        new.set_attr("control-predecessors", mine + tuple(p for p in preds if p not in mine))
    block = old.parent_block()
    if block is None:
        return
    for other in hlo_ops(list(block.ops)):
        waits = other.attr("control-predecessors")  # type: ignore[attr-defined]
        if waits and old.inst_name in waits:
            renamed = tuple(
                dict.fromkeys(new.inst_name if w == old.inst_name else w for w in waits)
            )
            other.set_attr("control-predecessors", renamed)  # type: ignore[attr-defined]


def _drop_unused_parameters(comp: ComputationOp, operands: list) -> list:
    """Erase `comp`'s unused parameters, renumber the rest; the operands that remain."""
    kept = []
    for param in comp.parameters():
        number = param.attr("number")
        if param.result.uses:
            if number != len(kept):
                param.set_attr("number", len(kept))
            kept.append(operands[number])
        else:
            param.detach()
            param.erase()
    return kept


def _parameter_sites(module: ModuleOp, scope: Scope | None) -> dict[str, _Sites | None]:
    """Per called computation: the instructions passing its parameters (`call`s and
    `async-start`s without side effects, XLA's callers whose operands can be fixed) and the
    async-updates of those starts (their shapes repeat the start's); None when anything
    else calls it. An async-done only names its start's computation: it passes nothing."""
    out: dict[str, _Sites | None] = {}
    for _, op, names in call_instructions(module, scope):
        opcode = op.OPCODE
        passes = opcode in ("call", "async-start") and not has_side_effect(op)
        refers = opcode in ("async-update", "async-done")
        for name in names:
            sites = out.setdefault(name, _Sites())
            if sites is None:
                continue
            if passes:
                sites.callers.append(op)
            elif opcode == "async-update":
                sites.updates.append(op)
            elif not refers:
                out[name] = None
    return out


@dataclass
class _Sites:
    callers: list[HloOp] = field(default_factory=list)
    updates: list[HloOp] = field(default_factory=list)


def _drop_unused_call_parameters(
    module: ModuleOp,
    ctx: RewriteContext,
    edited: set[ComputationOp] | None = None,
    scope: Scope | None = None,
) -> bool:
    """Unused parameters of computations that only `call`s and `async-start`s pass
    arguments to go, with the matching operand of every caller (an async-start's and its
    async-updates' shapes lose that operand's shape). The operands left unused are then
    dead code, or unused parameters of the computation around the caller (an async
    wrapper's): those go in the next round. The computations edited (the callee and those
    holding the callers) go into `edited`."""
    sites = _parameter_sites(module, scope)
    by_name = comps_by_name(module)
    changed = False
    progress = True
    while progress:
        progress = False
        for name, found in sites.items():
            comp = by_name.get(name)
            if found is None or not found.callers or comp is None or comp.is_entry is not None:
                continue
            params = comp.parameters()
            if all(p.result.uses or is_control_predecessor(p) for p in params):
                continue
            keep = [p.attr("number") for p in params if p.result.uses or is_control_predecessor(p)]
            for call in found.callers:
                call.operands = [call.operands[k] for k in keep]
                if call.OPCODE == "async-start":
                    _drop_async_operand_shapes(call, keep, found.updates)
                if edited is not None:
                    host = call.parent_op()
                    assert isinstance(host, ComputationOp)
                    edited.add(host)
            if edited is not None:
                edited.add(comp)
            _drop_unused_parameters(comp, list(range(len(params))))
            ctx.note(RemoveUnusedCallParameters(), None, f"{name}: kept parameters {keep}")
            changed = progress = True
    return changed


def _drop_async_operand_shapes(start: HloOp, keep: list[int], updates: list[HloOp]) -> None:
    """An async-start's shape is (operand shapes, result, context...): keep the operand
    shapes of `keep`, in the start and in the updates of its chain."""
    shape = start.shape
    assert isinstance(shape, TupleShape) and isinstance(shape.elements[0], TupleShape)
    operands = shape.elements[0].elements
    kept = TupleShape(tuple(operands[k] for k in keep))
    new = shape_type(TupleShape((kept, *shape.elements[1:])))
    chain = {start} | {u for u in updates if _async_start(u) is start}
    for op in chain:
        # (a new result value, which takes over the uses: an async op's one user)
        Rewriter.replace_value_with_new_type(op.result, new)


def _drop_unused_entry_parameters(module: ModuleOp, ctx: RewriteContext,
                                  edited: set[ComputationOp] | None) -> bool:  # fmt: skip
    """Erase the entry's unused parameters (not ones named as control predecessors),
    renumber the rest, and drop their entries of `entry_computation_layout`."""
    entry = entry_computation(module)
    params = entry.parameters()
    dead = {p.attr("number") for p in params if not p.result.uses and not is_control_predecessor(p)}
    if not dead:
        return False
    _drop_unused_parameters(entry, list(range(len(params))))
    layout = module.attributes.get("hlo.entry_computation_layout")
    if layout is not None:
        shapes = layout.data  # type: ignore[attr-defined]
        kept = tuple(s for i, s in enumerate(shapes[:-1]) if i not in dead) + (shapes[-1],)
        module.attributes["hlo.entry_computation_layout"] = type(layout)(kept)  # type: ignore[call-arg]
    if edited is not None:
        edited.add(entry)
    ctx.note(RemoveUnusedCallParameters(), None, f"entry: removed parameters {sorted(dead)}")
    return True


class RemoveUnusedCallParameters:
    """Trace label: unused parameters of a called computation removed."""


def Rewriter_insert_before(new: Operation, anchor: Operation) -> None:  # noqa: N802
    block = anchor.parent_block()
    assert block is not None
    block.insert_op_before(new, anchor)


@dataclass(frozen=True)
class DCEPass(TrackedPass):
    """Remove dead instructions, unused multi-output fusion outputs and dead computations."""

    name: ClassVar[str] = "dce"

    remove_dead_computations: bool = True
    """Also delete computations not reachable from the entry computation."""

    remove_unused_call_parameters: bool = True
    """Drop parameters a computation never reads when only `call`s and `async-start`s pass
    it arguments (the operands go from every caller, and from an async-start's shape)."""

    remove_dead_parameters_from_entry_computation: bool = False
    """XLA's option: the entry computation's unused parameters go too, and with them their
    entries of `entry_computation_layout` (the module's signature changes)."""

    def run_tracked(self, module: ModuleOp, scope: Scope, rctx: RewriteContext) -> bool:
        comps = comps_by_name(module)
        callers: dict[str, int] = {}
        for _, _, names in call_instructions(module, scope):
            for name in names:
                callers[name] = callers.get(name, 0) + 1
        changed = False
        if self.remove_unused_call_parameters:
            changed = _drop_unused_call_parameters(module, rctx, scope.changed, scope)
        patterns = [
            RemoveDeadInstruction(rctx, comps),
            RemoveUnusedFusionOutput(rctx, comps, callers, scope.changed),
        ]
        # radius 0: an instruction turns dead only by losing users, which the driver notes;
        # a walk starts from the instructions without users (and fusions, which may have
        # unused outputs): one that loses its last user during the walk is pushed then
        changed |= run_patterns(module, patterns, scope.select(comps.values()), scope,
                                radius=0, start=_may_go)  # fmt: skip
        if self.remove_dead_parameters_from_entry_computation:
            changed |= _drop_unused_entry_parameters(module, rctx, scope.changed)
        if self.remove_dead_computations:
            live = reachable_computations(module, scope, scope.edited())
            for c in computations(module):
                if c.comp_name not in live:
                    rctx.note(self, None, f"removed computation {c.comp_name}")
                    c.detach()
                    c.erase(safe_erase=False)
                    changed = True
        return changed
