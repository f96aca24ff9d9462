"""`async-collective-creator` (XLA's AsyncCollectiveCreator): synchronous collectives
become start/done pairs, per opcode as the options say.

all-reduce, all-gather and collective-permute get their own `-start`/`-done` opcodes
(unless `use-generic-async-start-done`); every other converted collective (and every
converted collective fusion) is wrapped in a computation of its own, run by
`async-start`/`async-done` (printed as XLA's `reduce-scatter-start` etc. shorthand). The
pair takes the collective's place in the instruction order, so a scheduled module stays
scheduled; its metadata, frontend attributes and backend config go to both halves,
control predecessors to the start and control successors to the done. Computations run
by async ops are left alone (what they hold already runs asynchronously).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import (
    HloOp,
    computations,
    create_op,
    new_return_op,
)
from hlopass.ir.attrs import Raw
from hlopass.ir.shape import Shape, TupleShape, byte_size
from hlopass.passes.collectives.decomposers import async_computations
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    forget_cached_state,
    fusion_computations,
    hlo_ops,
    insert_computation,
    module_of,
    new_op,
    run_patterns,
    value_shape,
)

_LEGACY = frozenset({"all-reduce", "all-gather", "collective-permute"})
_COLLECTIVE_OPCODES = frozenset({"collective-broadcast", "all-to-all", "reduce-scatter",
                                 "ragged-all-to-all"}) | _LEGACY  # fmt: skip
_BOTH_HALVES = ("metadata", "frontend_attributes", "backend_config")
_COLLECTIVE_FIELDS = ("channel_id", "replica_groups", "constrain_layout", "use_global_device_ids",
                      "to_apply", "dimensions", "source_target_pairs", "slice_sizes")  # fmt: skip


def shape_bytes(shape: Shape) -> int:
    """XLA's `ByteSizeOfElements`, summed over a tuple's leaves."""
    return sum(leaf.num_elements * byte_size(leaf.element_type) for leaf in shape.leaves())


def holds_collective(op: HloOp) -> bool:
    """A fusion whose fused computation holds a collective (our reading of XLA's
    per-backend `convert_collective_fusion` predicate)."""
    module = module_of(op)
    comps = comps_by_name(module) if module is not None else {}
    for name in op.callees():
        comp = comps.get(name)
        if comp is not None and any(i.OPCODE in _COLLECTIVE_OPCODES for i in comp.instructions):
            return True
    return False


@dataclass
class SyncToAsync(RewritePattern):
    """`collective(x)` -> `collective-done(collective-start(x))` (or `async-done(async-start
    (x), calls=wrapped)`), for the opcodes the pass's options convert.

    Guards: the opcode's `convert-*` option on, and for all-reduce, all-gather and
    reduce-scatter a result of at least the opcode's threshold in bytes (unless
    `should-ignore-size-check`); a fusion must hold a collective."""

    # those `AsyncCollectiveCreatorPass.converts` has an option for
    OPCODES: ClassVar[tuple[str, ...]] = (*sorted(_COLLECTIVE_OPCODES), "fusion")

    ctx: RewriteContext
    config: AsyncCollectiveCreatorPass

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or not self.config.converts(op):
            return
        if op.OPCODE in _LEGACY and not self.config.use_generic_async_start_done:
            start, done_opcode = self._legacy_start(rewriter, op), f"{op.OPCODE}-done"
        else:
            start, done_opcode = self._generic_start(rewriter, op), "async-done"
        done = new_op(rewriter, self.ctx, done_opcode, [start.result], op.shape,
                      self._both(op) | _sharding(op), op)  # fmt: skip
        if done_opcode == "async-done":  # XLA names the pair after the wrapped opcode
            start.inst_name = self.ctx.names.fresh(f"{op.OPCODE}-start")
            done.inst_name = self.ctx.names.fresh(f"{op.OPCODE}-done")
        _relay_control(op, start, done)
        self.ctx.note(self, op, f"into {start.opcode} / {done.opcode}")
        rewriter.replace_all_uses_with(op.result, done.result)
        rewriter.erase(op)
        forget_cached_state(self.ctx.module)  # control predecessors were renamed

    def _both(self, op: HloOp) -> dict[str, Any]:
        return {k: op.attr(k) for k in _BOTH_HALVES if op.attr(k) is not None}

    def _legacy_start(self, rewriter: PatternRewriter, op: HloOp) -> HloOp:
        """all-reduce-start (the result's shape), all-gather-start ((operands), result),
        collective-permute-start (operand, result) / ((operands), (operands)) / in place:
        (input, output buffers)."""
        shapes = [v.type.data for v in op.operands]  # type: ignore[attr-defined]
        packed = shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))
        if op.OPCODE == "all-reduce":
            shape: Shape = op.shape
        elif op.OPCODE == "all-gather":
            shape = TupleShape((packed, op.shape))
        elif op.attr("slice_sizes") is not None:  # in place: (input, output, offsets...)
            shape = TupleShape((shapes[0], shapes[1]))
        else:
            shape = TupleShape((packed, packed))
        attrs = {k: op.attr(k) for k in _COLLECTIVE_FIELDS if op.attr(k) is not None}
        return new_op(rewriter, self.ctx, f"{op.OPCODE}-start", list(op.operands), shape,
                      attrs | self._both(op), op)  # fmt: skip

    def _generic_start(self, rewriter: PatternRewriter, op: HloOp) -> HloOp:
        """`async-start` of a new computation holding a copy of `op` over parameters;
        an all-reduce's (or in-place permute's) result aliases its buffer operand."""
        name = self._wrap(op)
        shapes = tuple(v.type.data for v in op.operands)  # type: ignore[attr-defined]
        attrs = {"calls": name} | self._both(op)
        aliasing = _aliasing(op)
        if aliasing is not None:
            attrs["output_to_operand_aliasing"] = Raw(aliasing)
        return new_op(rewriter, self.ctx, "async-start", list(op.operands),
                      TupleShape((TupleShape(shapes), op.shape)), attrs, op)  # fmt: skip

    def _wrap(self, op: HloOp) -> str:
        """A computation `(param_0, ...) -> copy of op`, placed before `op`'s own."""
        params = [
            create_op(
                "parameter", [], value_shape(v), self.ctx.names.fresh(f"param_{i}"), {"number": i}
            )
            for i, v in enumerate(op.operands)
        ]
        attrs = {s.name: v for s, v in op.hlo_attrs() if s.name != "control-predecessors"}
        root = create_op(op.OPCODE, [p.results[0] for p in params], op.shape,
                         self.ctx.names.fresh(op.inst_name), attrs)  # fmt: skip
        block = Block()
        for o in (*params, root):
            block.add_op(o)
        block.add_op(new_return_op(root.results[0]))
        return insert_computation(self.ctx, op, "async_computation", block)


def _sharding(op: HloOp) -> dict[str, Any]:
    s = op.attr("sharding")
    return {"sharding": s} if s is not None else {}


def _aliasing(op: HloOp) -> str | None:
    """XLA's aliasing for an async all-reduce (result i reuses operand i) or in-place
    collective-permute (the result reuses the output buffer, operand 1)."""
    if op.OPCODE == "all-reduce":
        if isinstance(op.shape, TupleShape):
            return (
                "{"
                + ", ".join(f"{{1,{i}}}: ({i}, {{}})" for i in range(len(op.shape.elements)))
                + "}"
            )
        return "{{1}: (0, {})}"
    if op.OPCODE == "collective-permute" and op.attr("slice_sizes") is not None:
        return "{{1}: (1, {})}"
    return None


def _relay_control(old: HloOp, start: HloOp, done: HloOp) -> None:
    """XLA's `CopyAllControlDepsTo(start, done)` then `DropAllControlDeps`: `old`'s
    predecessors precede the start, and whatever waited for `old` waits for the done."""
    preds = old.attr("control-predecessors")
    if preds:
        start.set_attr("control-predecessors", tuple(preds))
    block = old.parent_block()
    assert block is not None
    for other in hlo_ops(list(block.ops)):
        waits = other.attr("control-predecessors")  # type: ignore[attr-defined]
        if waits and old.inst_name in waits and other is not start:
            renamed = tuple(
                dict.fromkeys(done.inst_name if w == old.inst_name else w for w in waits)
            )
            other.set_attr("control-predecessors", renamed)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class AsyncCollectiveCreatorPass(HloModulePass):
    """Split the chosen synchronous collectives into start/done pairs."""

    name: ClassVar[str] = "async-collective-creator"

    convert_all_reduce: bool = False
    """Split all-reduce (into all-reduce-start / -done)."""
    convert_all_gather: bool = False
    """Split all-gather (into all-gather-start / -done)."""
    convert_collective_broadcast: bool = False
    """Split collective-broadcast (into an async pair)."""
    convert_collective_permute: bool = False
    """Split collective-permute (into collective-permute-start / -done)."""
    convert_all_to_all: bool = False
    """Split all-to-all (into an async pair)."""
    convert_reduce_scatter: bool = False
    """Split reduce-scatter (into an async pair)."""
    convert_ragged_all_to_all: bool = False
    """Split ragged-all-to-all (into an async pair)."""
    convert_collective_fusion: bool = False
    """Split fusions whose fused computation holds a collective (into an async pair)."""
    should_ignore_size_check: bool = False
    """Split all-reduce, all-gather and reduce-scatter whatever their size."""
    all_reduce_min_threshold_in_bytes: int = 0
    """Split only all-reduces whose result holds at least this many bytes."""
    all_gather_min_threshold_in_bytes: int = 0
    """Split only all-gathers whose result holds at least this many bytes."""
    reduce_scatter_min_threshold_in_bytes: int = 0
    """Split only reduce-scatters whose result holds at least this many bytes."""
    use_generic_async_start_done: bool = False
    """Wrap all-reduce, all-gather and collective-permute in async-start / -done too,
    rather than their own -start / -done opcodes (XLA:GPU's choice)."""

    def converts(self, op: HloOp) -> bool:
        """XLA's `MatchCollectives` for one instruction."""
        opcode = op.OPCODE
        flag = {
            "all-reduce": self.convert_all_reduce, "all-gather": self.convert_all_gather,
            "collective-broadcast": self.convert_collective_broadcast,
            "collective-permute": self.convert_collective_permute,
            "all-to-all": self.convert_all_to_all, "reduce-scatter": self.convert_reduce_scatter,
            "ragged-all-to-all": self.convert_ragged_all_to_all,
            "fusion": self.convert_collective_fusion,
        }.get(opcode, False)  # fmt: skip
        if not flag:
            return False
        threshold = {
            "all-reduce": self.all_reduce_min_threshold_in_bytes,
            "all-gather": self.all_gather_min_threshold_in_bytes,
            "reduce-scatter": self.reduce_scatter_min_threshold_in_bytes,
        }.get(opcode)  # fmt: skip
        if threshold is not None and not self.should_ignore_size_check:
            return shape_bytes(op.shape) >= threshold
        return opcode != "fusion" or holds_collective(op)

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        skip = fusion_computations(module) | async_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in skip]
        return run_patterns(module, [SyncToAsync(rctx, self)], comps)
