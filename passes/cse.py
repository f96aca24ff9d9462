"""`cse`: common-subexpression elimination (XLA's HloCSE).

Two instructions are merged when they have the same opcode, result shape (layout
included), operands (in either order for commutative ops) and attributes, the HLO name
aside (and, by default, the debug metadata, which XLA's comparison ignores too). Called
computations are compared by structure, not by name. Identical constants merge too.
Never merged: parameters, side-effecting or random-number instructions (also inside the
computations they call), instructions with control predecessors or named as one.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, op_list
from hlopass.driver.worklist import Driver, Journal, Touches, WalkResult, tracking_rewriter
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.rewriting import (
    ByClass,
    RewriteContext,
    Scope,
    TrackedPass,
    calls_side_effect,
    forget_cached_state,
    fusion_computations,
    has_side_effect,
    hlo_class,
    instructions,
    is_commutative,
    is_control_predecessor,
    is_hlo,
    is_random,
    module_of,
)

_NEVER_KEYED = frozenset({"name", "metadata", "control-predecessors"})


_EFFECT_FREE_WHEN_CALLEES_ARE = frozenset({"while", "conditional", "call", "custom-call"})
"""Not marked pure, but identical ones compute the same value when they (and everything
they call) have no side effect and draw no random numbers: XLA's HloCSE merges them."""


_COLLECTIVES = frozenset(
    {"all-reduce", "all-gather", "all-to-all", "reduce-scatter", "collective-permute"}
)
"""Collectives XLA's `HasSideEffect` counts as side-effect free without a channel id (and,
but for collective-permute, without `constrain_layout`): identical ones compute the same."""


def _effect_free_collective(op: HloOp) -> bool:
    return (
        op.OPCODE in _COLLECTIVES
        and op.attr("channel_id") is None
        and not op.attr("constrain_layout")
    )


def _eligible(op: HloOp, comps: dict[str, ComputationOp],
              effects: dict[tuple[str, bool], bool] | None = None,
              ignore_control: bool = False) -> bool:  # fmt: skip
    """Never parameters, side effects or random numbers (in `op` or anything it calls),
    nor (as XLA's `ShouldEliminateInstruction`) a custom-call without operands unless it
    carries `_xla_cse_safe_zero_operand`, nor an instruction that must be fused."""
    if op.OPCODE == "parameter" or is_random(op):
        return False
    if has_side_effect(op) and not _effect_free_collective(op):
        return False
    if op.attr("control-predecessors") and not ignore_control:
        return False
    if not (
        "pure" in op.spec.traits
        or op.OPCODE in ("replica-id", "partition-id", "domain")
        or op.OPCODE in _COLLECTIVES
        or op.OPCODE in _EFFECT_FREE_WHEN_CALLEES_ARE
    ):
        return False
    attrs = op.attr("frontend_attributes")
    text = str(getattr(attrs, "text", attrs)) if attrs is not None else ""
    if "_xla_must_fuse" in text:
        return False
    if op.OPCODE == "custom-call" and not op.operands and "_xla_cse_safe_zero_operand" not in text:
        return False
    if not op.callees():
        return True
    if _effect_free_collective(op):  # (its own trait says side effect: ask its reducer)
        return not any(
            name not in comps
            or any(calls_side_effect(i, comps, random=True, memo=effects)
                   for i in instructions(comps[name]))
            for name in op.callees()
        )  # fmt: skip
    return not calls_side_effect(op, comps, random=True, memo=effects)


@dataclass
class Fingerprints:
    """Structural keys of computations, so `to_apply=%add.1` equals `to_apply=%add.2`."""

    comps: dict[str, ComputationOp]
    ignore_metadata: bool
    layout_sensitive: bool = True
    memo: dict[str, object] = field(default_factory=dict)
    effects: dict[tuple[str, bool], bool] = field(default_factory=dict)
    """`calls_side_effect`'s answers per called computation, for this run."""

    def of(self, name: str) -> object:
        if name in self.memo:
            return self.memo[name]
        self.memo[name] = ("cycle", name)
        comp = self.comps.get(name)
        if comp is None:
            key: object = ("missing", name)
        else:
            index: dict[SSAValue, int] = {}
            items = []
            for i, op in enumerate(instructions(comp)):
                index[op.result] = i
                operands = tuple(index.get(v, -1) for v in op.operands)
                items.append(self.attrs_key(op, operands))
            key = (tuple(items), index.get(comp.root.result, -1))
        self.memo[name] = key
        return key

    def attrs_key(self, op: HloOp, operands: tuple[object, ...]) -> tuple[object, ...]:
        props = []
        called = op.spec.by_name
        for k, v in op.properties.items():
            if k == "name" or k in _NEVER_KEYED and (k != "metadata" or self.ignore_metadata):
                continue
            if k in called and called[k] in op.spec.computations:
                continue  # compared structurally below
            props.append((k, v))
        props.sort(key=lambda kv: kv[0])
        callees = tuple(self.of(c) for c in op.callees())
        extra = (op.attr("number"),) if op.OPCODE == "parameter" else ()
        shape = op.shape if self.layout_sensitive else op.shape.without_layout()
        return (op.OPCODE, shape, operands, tuple(props), callees, extra)


_MERGEABLE = ByClass(lambda t: hlo_class(t) and t.OPCODE != "parameter")  # type: ignore[attr-defined]
"""Instructions a walk visits: parameters are never merged."""


def _bucket(op: HloOp) -> tuple[object, ...]:
    """(opcode, operand ids in order of id): equal for instructions with equal keys (a key
    holds the opcode and the operand ids, in order or sorted), so most pairs that differ
    are told apart without their keys."""
    operands = op.operands  # (an instruction's: a tuple, unpacked in C)
    # one or two operands without `sorted` and its generator, which cost more than the
    # rest of most visits
    n = len(operands)
    if n == 2:
        v0, v1 = operands
        a, b = id(v0), id(v1)
        return (op.OPCODE, a, b) if a < b else (op.OPCODE, b, a)
    if n == 1:
        (v0,) = operands
        return (op.OPCODE, id(v0))
    return (op.OPCODE, *sorted(map(id, operands)))


def _single_candidate(block: Block) -> bool:
    """At most one instruction of `block` the walk would visit (`wants`): no pair to merge.
    Stops at the second (most of Mixtral's 4002 computations are reducers, with one)."""
    seen = 0
    op = block.first_op
    while op is not None:
        if _MERGEABLE(op):
            seen += 1
            if seen > 1:
                return False
        op = op.next_op
    return True


@dataclass
class EliminateCommonSubexpression(RewritePattern):
    """`op2 = f(a, b)` with an identical earlier `op1 = f(a, b)` (or `f(b, a)`, f commutative) -> op1.

    The table is per computation; the walker visits instructions in order, so operands
    are already canonical when an instruction is keyed (and its key no longer changes).
    An instruction with operands is first filed by its opcode and operands alone: its
    whole key (attributes, shape, callees' structure) is worked out only when another
    instruction of that opcode uses the same operands, which most never meet.
    """

    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    ctx: RewriteContext
    prints: Fingerprints
    table: dict[object, HloOp] = field(default_factory=dict)
    """Whole key -> the first instruction filed with it (instructions without operands)."""
    by_operands: dict[tuple[object, ...], list[HloOp]] = field(default_factory=dict)
    """(opcode, operand ids in order of id) -> the instructions filed with it, in order."""
    keys: dict[HloOp, object] = field(default_factory=dict)
    ignore_control: bool = False
    """XLA's `ignore_control_dependencies`: instructions with control dependencies merge
    too (the edges to the merged-away one are dropped, as XLA's removal drops them)."""

    def wants(self, op: Operation) -> bool:
        """Parameters are never merged: `worklist.Driver` does not visit them."""
        return _MERGEABLE(op)

    def select(self, ops: list[Operation]) -> list[Operation]:
        """`wants` over a list (a test per op class)."""
        return _MERGEABLE.ops(ops)

    def key(self, op: Operation) -> object:
        """What identical instructions share (None: never merged, or not hashable)."""
        if not is_hlo(op) or not _eligible(
            op,  # type: ignore[arg-type]
            self.prints.comps,
            self.prints.effects,
            self.ignore_control,
        ):
            return None
        operands: tuple[object, ...] = tuple(id(v) for v in op.operands)
        if is_commutative(op) and len(operands) == 2:
            operands = tuple(sorted(operands))  # type: ignore[type-var]
        key = (id(op.parent_op()), self.prints.attrs_key(op, operands))
        try:
            hash(key)
        except TypeError:  # an unhashable attribute value: leave the instruction alone
            return None
        return key

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not is_hlo(op):
            return
        if op.operands:
            self._filed_by_operands(op, rewriter)
            return
        key = self.key(op)
        if key is None:
            return
        rep = self.table.get(key)
        if rep is None or rep.parent is None:
            self.table[key] = op
            return
        self.merge(op, rep, rewriter)

    def _filed_by_operands(self, op: HloOp, rewriter: PatternRewriter) -> None:
        """The table lookup of `match_and_rewrite` for an instruction with operands: the
        first instruction filed with the same whole key, among those of its bucket."""
        filed = _bucket(op)
        bucket = self.by_operands.get(filed)
        if bucket is None:
            self.by_operands[filed] = [op]  # its key, if another comes
            return
        key = self._key_of(op)
        if key is None:
            return
        for rep in bucket:
            if rep.parent is not None and self._key_of(rep) == key:
                self.merge(op, rep, rewriter)
                return
        bucket.append(op)

    def _key_of(self, op: HloOp) -> object:
        if op in self.keys:
            return self.keys[op]
        key = self.keys[op] = self.key(op)
        return key

    def merge(self, op: HloOp, rep: HloOp, rewriter: PatternRewriter) -> bool:
        """Replace `op` by the identical earlier `rep`, unless a guard keeps it."""
        if is_control_predecessor(op):
            if not self.ignore_control:
                return False  # named in another instruction's control-predecessors: keep it
            _drop_control_edges_to(op)
        self.ctx.note(self, op, f"-> {rep.inst_name}")
        rewriter.replace_all_uses_with(op.result, rep.result)
        rewriter.erase(op)
        return True


def _drop_control_edges_to(op: HloOp) -> None:
    """Remove `op` from every control-predecessors list of its computation."""
    block = op.parent_block()
    if block is None:
        return
    for other in op_list(block):
        waits = other.attr("control-predecessors") if is_hlo(other) else None
        if waits and op.inst_name in waits:
            kept = tuple(w for w in waits if w != op.inst_name)
            other.set_attr("control-predecessors", kept if kept else None)  # type: ignore[attr-defined]
    forget_cached_state_of(op)


def forget_cached_state_of(op: HloOp) -> None:
    module = module_of(op)
    if module is not None:
        forget_cached_state(module)


def _repeats_output(comp: ComputationOp) -> bool:
    """`comp`'s root is a tuple that repeats an operand."""
    root = comp.root
    return root.OPCODE == "tuple" and len(set(root.operands)) < len(root.operands)


def _dedup_fusion_outputs(comp: ComputationOp, module: ModuleOp) -> dict[ComputationOp, list]:
    """XLA's last step per fused computation: where the tuple root of a multi-output fusion
    repeats an operand, the fusion's get-tuple-elements read its first index. Returns the
    renumbered get-tuple-elements per computation holding them."""
    root = comp.root
    first: dict[SSAValue, int] = {}
    for i, v in enumerate(root.operands):
        first.setdefault(v, i)
    moved: dict[ComputationOp, list] = {}
    for host in computations(module):
        for op in instructions(host):
            if op.OPCODE != "fusion" or comp.comp_name not in op.callees():
                continue
            for use in op.result.uses:
                gte = use.operation
                if not isinstance(gte, HloOp) or gte.OPCODE != "get-tuple-element":
                    continue
                index = first[root.operands[gte.attr("index")]]
                if index != gte.attr("index"):
                    gte.set_attr("index", index)
                    moved.setdefault(host, []).append(gte)
    return moved


def eliminate_from(pattern: EliminateCommonSubexpression, block: Block,
                   seeds: Touches) -> WalkResult:  # fmt: skip
    """What the in-order walk with a table gives, visiting only where it can differ.

    Left by an earlier run with no two identical instructions, a block gains a pair only
    where an instruction was created or its operands (or callees) changed: the `seeds`.
    An identical instruction uses the same values, so it is among the users of the
    seed's least-used operand (or, without operands, among the block's operand-less
    instructions of its opcode). Visited in program order (a heap of positions), a seed
    merges into the earliest identical instruction before it, as the table would hold
    it; identical ones after it are queued to merge into it; the users of a merged
    instruction are queued, as their operands changed."""
    pos = {id(op): i for i, op in enumerate(op_list(block))}  # by id: xDSL hashes ops in Python
    start = seeds.content | seeds.uses  # a key reads the operands, a guard the users
    heap = [(pos[id(op)], id(op), op) for op in start if op.parent is block]
    heapq.heapify(heap)
    queued = {entry[1] for entry in heap}
    leaves: dict[str, list[Operation]] | None = None
    result = WalkResult()
    if block.last_op is None:
        return result
    journal = Journal()
    rewriter = tracking_rewriter(block.last_op, journal)

    def queue(op: Operation) -> None:
        k = id(op)
        if k not in queued and k in pos:
            queued.add(k)
            heapq.heappush(heap, (pos[k], k, op))

    while heap:
        at, _, op = heapq.heappop(heap)
        if op.parent is not block or not is_hlo(op):
            continue
        operands = op.operands
        if operands:
            least = min(operands, key=lambda v: v.uses.get_length())
            # a peer with another opcode or other operands has another key: those are
            # dropped before any key is worked out (a parameter's users run to hundreds)
            bucket = _bucket(op)
            peers = []
            for use in least.uses:
                p = use.operation
                if p is not op and is_hlo(p) and _bucket(p) == bucket:
                    peers.append(p)
        else:
            if leaves is None:
                leaves = {}
                for o in op_list(block):
                    if is_hlo(o) and not o.operands:
                        leaves.setdefault(o.OPCODE, []).append(o)
            peers = [p for p in leaves.get(op.OPCODE, ()) if p is not op]  # type: ignore[attr-defined]
        if not peers:
            continue  # (nothing to merge with, whatever op's key: as a None key)
        key = pattern.key(op)
        if key is None:
            continue
        same = sorted((p for p in peers if p.parent is block and pattern.key(p) == key),
                      key=lambda p: pos[id(p)])  # fmt: skip
        earlier = [p for p in same if pos[id(p)] < at]
        if earlier:
            users = [u.operation for u in op.results[0].uses]
            if pattern.merge(op, earlier[0], rewriter):  # type: ignore[arg-type]
                result.changed = True
                for u in users:
                    queue(u)
            continue
        for p in same:
            queue(p)
    result.touched.update(journal.touches())
    return result


@dataclass(frozen=True)
class CSEPass(TrackedPass):
    """Merge identical instructions and identical constants."""

    name: ClassVar[str] = "cse"

    ignore_metadata: bool = True
    """Treat instructions that differ only in `metadata={...}` as identical (XLA does)."""

    is_layout_sensitive: bool = True
    """XLA's option: instructions whose results differ only in layout are distinct. False
    merges them too, as XLA does, also where a user (a root tuple, say) then declares a
    layout its operand lacks: layouts are not yet binding then (XLA's layout-insensitive
    verifier compares shapes without them)."""

    ignore_control_dependencies: bool = False
    """XLA's option: merge instructions with control dependencies too (the edges to the
    merged-away instruction are dropped)."""

    def run_tracked(self, module: ModuleOp, scope: Scope, rctx: RewriteContext) -> bool:
        comps = computations(module)
        prints = Fingerprints({c.comp_name: c for c in comps}, self.ignore_metadata,
                              self.is_layout_sensitive)  # fmt: skip
        changed = False
        renumbered: dict[ComputationOp, list] = {}
        fused: set[str] | None = None
        # one driver (and rewriter) for all computations: a pattern's `wants` reads no
        # state, so the driver may keep the first one's
        driver: Driver | None = None
        for comp in scope.select(comps):
            seeds = scope.seeds_of(comp)
            block = comp.block
            if seeds is None and _single_candidate(block):
                continue  # nothing to merge (a reducer: its parameters and their root)
            # a table per computation
            pattern = EliminateCommonSubexpression(
                rctx, prints, ignore_control=self.ignore_control_dependencies
            )
            if seeds is None:
                if driver is None:
                    driver = Driver(pattern, recursive=False, exhaustive=True)
                driver.pattern = pattern
                walk = driver.rewrite(block)
            else:
                walk = eliminate_from(pattern, block, seeds)
            changed |= scope.record(comp, walk)
            if _repeats_output(comp):
                if fused is None:
                    fused = fusion_computations(module, scope)
                if comp.comp_name in fused:
                    for host, gtes in _dedup_fusion_outputs(comp, module).items():
                        renumbered.setdefault(host, []).extend(gtes)
        # get-tuple-elements that now read the same output may merge
        for host, gtes in renumbered.items():
            changed = True
            scope.touched.setdefault(host, Touches()).update(Touches(gtes))
            pattern = EliminateCommonSubexpression(
                rctx, prints, ignore_control=self.ignore_control_dependencies
            )
            scope.record(host, eliminate_from(pattern, host.block, Touches(gtes)))
        return changed
