"""`all-reduce-simplifier`: collectives that exchange nothing new (XLA's
`AllReduceSimplifier`).

An all-gather or reduce-scatter whose result has its operand's shape (groups of one) is
its operand. An array all-reduce over groups of one device is its operand; one whose
operand holds the same value on every replica (replication analysis, across replicas
only) is `x * group size` for a sum and `x` for min, max, and, or. An all-reduce with a
channel (cross-partition) goes only over groups of one and only in an SPMD-partitioned
module: HLO text cannot say a module is one, so the pass takes XLA's module flag
`use_spmd_partitioning` as its option. Async computations holding only such an
all-gather or reduce-scatter go with their async-start and async-done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.ir.shape import ArrayShape, scalar
from hlopass.passes.collectives.all_reduce_folder import (
    explicit_groups,
    is_trivial_reducer,
    module_int,
    reducer,
)
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    call_instructions,
    comps_by_name,
    has_side_effect,
    is_random,
    module_of,
    new_op,
    owner,
    replace_op,
    run_patterns,
    scalar_constant,
)

# opcodes whose value may differ between replicas whatever their operands
_DEVICE_DEPENDENT = frozenset({
    "replica-id", "parameter", "all-gather", "reduce-scatter", "all-to-all",
    "collective-permute", "collective-permute-start", "collective-permute-done",
    "collective-broadcast", "ragged-all-to-all", "all-reduce-start", "all-reduce-done",
    "all-gather-start", "all-gather-done", "async-start", "async-update", "async-done",
    "while", "call", "conditional", "fusion", "custom-call", "infeed", "recv", "recv-done",
    "rng-get-and-update-state", "get-tuple-element", "tuple",
})  # fmt: skip


def participants(op: HloOp) -> int | None:
    """XLA's participant count per group under the op's group mode, when all groups have
    one size (None when they differ or the mode is invalid)."""
    module = module_of(op)
    replicas, partitions = module_int(module, "replica_count"), module_int(module, "num_partitions")
    groups = explicit_groups(op)
    sizes = {len(g) for g in groups} if groups else None
    if sizes is not None and len(sizes) != 1:
        return None
    size = sizes.pop() if sizes else None
    has_channel, global_ids = (
        op.attr("channel_id") is not None,
        bool(op.attr("use_global_device_ids")),
    )
    if not has_channel:
        return None if global_ids else (size or replicas)
    if global_ids:
        return size  # flattened ids: the groups name devices
    return (size or replicas) * partitions


@dataclass
class Replication:
    """XLA's `HloReplicationAnalysis` across replicas (not partitions), conservatively:
    constants, iota, partition-id, parameters marked `parameter_replication={true}` of the
    entry, all-reduces over one group of every replica, and deterministic instructions of
    replicated operands are replicated; anything it cannot see through is not."""

    comps: dict[str, ComputationOp]
    replicas: int
    memo: dict[int, bool] = field(default_factory=dict)

    def replicated(self, value: SSAValue) -> bool:
        o = owner(value)
        if o is None:
            return False
        key = id(o)
        if key not in self.memo:
            self.memo[key] = False  # (cycles cannot occur; a safe answer meanwhile)
            self.memo[key] = self._compute(o)
        return self.memo[key]

    def _compute(self, op: HloOp) -> bool:
        opcode = op.opcode
        if opcode == "parameter":
            comp = op.parent_op()
            flags = op.attr("parameter_replication") or ()
            entry = isinstance(comp, ComputationOp) and comp.is_entry is not None
            return entry and isinstance(op.shape, ArrayShape) and bool(flags) and all(flags)
        if opcode == "all-reduce":
            return self._everyone(op) and self._pure_callees(op)
        if opcode in _DEVICE_DEPENDENT or has_side_effect(op) or is_random(op):
            return False
        return self._pure_callees(op) and all(self.replicated(v) for v in op.operands)

    def _everyone(self, op: HloOp) -> bool:
        """One group holding every replica (across replicas: the result is the same)."""
        if op.attr("use_global_device_ids"):
            return False
        groups = explicit_groups(op)
        return groups is None or (len(groups) == 1 and len(groups[0]) == self.replicas)

    def _pure_callees(self, op: HloOp) -> bool:
        for name in op.callees():
            comp = self.comps.get(name)
            if comp is None or any(i.opcode in _DEVICE_DEPENDENT - {"parameter"}
                                   or has_side_effect(i) or is_random(i)
                                   or i.callees() for i in comp.instructions):  # fmt: skip
                return False
        return True


def _collective_identity(op: HloOp) -> bool:
    shape, operand = op.shape, op.operands[0].type.data  # type: ignore[attr-defined]
    return isinstance(shape, ArrayShape) and shape.compatible(operand)


@dataclass
class RemoveShapePreservingGather(RewritePattern):
    """`all-gather(x)` or `reduce-scatter(x)` of x's own shape -> x (groups of one)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-gather", "reduce-scatter")

    ctx: RewriteContext

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if not op.operands or not _collective_identity(op):
            return
        self.ctx.note(self, op, "same shape as its operand")
        replace_op(rewriter, op, op.operands[0])


@dataclass
class SimplifyReplicatedAllReduce(RewritePattern):
    """`all-reduce(x)` -> x over groups of one; over n devices of a replicated x, add ->
    `x * n` and min, max, and, or -> x.

    Guards: an array all-reduce, groups of one size, with a channel only groups of one
    (the replication analysis is across replicas) in an SPMD module, a reducer of two
    parameters."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    ctx: RewriteContext
    replication: Replication
    spmd: bool

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES or len(op.operands) != 1:
            return
        shape = op.shape
        n = participants(op) if isinstance(shape, ArrayShape) else None
        if n is None or (op.attr("channel_id") is not None and (n != 1 or not self.spmd)):
            return
        x = op.operands[0]
        if n == 1:
            self.ctx.note(self, op, "groups of one")
            replace_op(rewriter, op, x)
            return
        comp = reducer(op)
        if not self.replication.replicated(x) or not is_trivial_reducer(comp):
            return
        assert comp is not None and isinstance(shape, ArrayShape)
        kind = comp.root.opcode
        if kind in ("minimum", "maximum", "and", "or"):
            self.ctx.note(self, op, f"replicated operand, {kind}")
            replace_op(rewriter, op, x)
        elif kind == "add":
            self.ctx.note(self, op, f"replicated operand, sum of {n}")
            replace_op(rewriter, op, self._times(rewriter, op, x, n, shape))
        self.replication.memo.clear()  # (keyed by object id: erased ops may be reused)

    def _times(self, rewriter: PatternRewriter, op: HloOp, x: SSAValue, n: int,
               shape: ArrayShape) -> SSAValue:  # fmt: skip
        """XLA's `x * broadcast(convert(s32 n))` (no convert for s32, no broadcast for a
        scalar)."""
        c: HloOp = scalar_constant(rewriter, self.ctx, n, "s32", before=op)
        et = shape.element_type
        if et != "s32":
            c = new_op(rewriter, self.ctx, "convert", [c.result], scalar(et), before=op)
        if shape.dims:
            c = new_op(rewriter, self.ctx, "broadcast", [c.result], shape,
                       {"dimensions": ()}, before=op)  # fmt: skip
        return new_op(rewriter, self.ctx, "multiply", [x, c.result], shape, like=op,
                      before=op).result  # fmt: skip


@dataclass(frozen=True)
class AllReduceSimplifierPass(HloModulePass):
    """Drop collectives over groups of one; all-reduce of a replicated value -> x or x * n."""

    name: ClassVar[str] = "all-reduce-simplifier"

    use_spmd_partitioning: bool = False
    """XLA's module flag (`HloModuleConfig::use_spmd_partitioning`, not in HLO text): with
    it, all-reduces with a channel over groups of one device are dropped too."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        # XLA looks into an async computation only at its root (the async pair goes)
        wrapped = {n for c in computations(module) for o in c.instructions
                   if o.opcode == "async-start" for n in o.callees()}  # fmt: skip
        plain = [c for c in computations(module) if c.comp_name not in wrapped]
        changed = run_patterns(module, [RemoveShapePreservingGather(rctx)], plain)
        changed |= _drop_async_identities(module, rctx)
        replication = Replication(comps_by_name(module), module_int(module, "replica_count"))
        pattern = SimplifyReplicatedAllReduce(rctx, replication, self.use_spmd_partitioning)
        changed |= run_patterns(module, [pattern])
        return changed


def _drop_async_identities(module: ModuleOp, ctx: RewriteContext) -> bool:
    """`async-done(async-start(x), calls=c)` -> x where c's root is a shape-preserving
    all-gather or reduce-scatter (XLA's async computations; the start must feed only its
    done); c goes too."""
    comps = comps_by_name(module)
    refs: dict[str, int] = {}
    for _, op, names in call_instructions(module):
        if op.opcode == "async-start":
            for n in names:
                refs[n] = refs.get(n, 0) + 1
    changed = False
    for comp in list(comps.values()):
        for done in [o for o in comp.instructions if o.opcode == "async-done"]:
            start = owner(done.operands[0])
            if start is None or start.opcode != "async-start" or len(start.callees()) != 1:
                continue
            if refs.get(start.callees()[0], 0) != 1:
                continue  # (XLA expects one async-start per async computation)
            called = comps.get(start.callees()[0])
            root = called.root if called is not None else None
            if root is None or root.opcode not in ("all-gather", "reduce-scatter"):
                continue
            users = {u.operation for u in start.result.uses}
            if not root.operands or not _collective_identity(root) or users != {done}:
                continue
            ctx.note(RemoveShapePreservingGather(ctx), done, "async, same shape")
            done.result.replace_all_uses_with(start.operands[0])
            done.detach()
            done.erase()
            start.detach()
            start.erase()
            assert called is not None
            called.detach()
            called.erase(safe_erase=False)
            changed = True
    return changed
