"""XLA's collective decomposers `all-gather-decomposer` and `reduce-scatter-decomposer`
(xla/service; XLA:GPU's `all-reduce-decomposer` is in `all_reduce_decomposer`). Each turns
one collective into another collective plus local slicing:

- all-gather(x) -> all-reduce(dynamic-update-slice(zeros, x, my offset)) with a sum;
- reduce-scatter(x) -> dynamic-slice(all-reduce(x), my offset).

"My offset" is this participant's index in its replica group times the shard size, from
`replica-id` / `partition-id` and, for groups that are not `{0,1,...}`, a u32 table
(XLA's `CreateStartIndicesForCollectiveDecomposition`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import (
    HloOp,
    computations,
    create_op,
    new_return_op,
)
from hlopass.ir.shape import ArrayShape, TupleShape, array, scalar
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    call_instructions,
    constant_from_numpy,
    fusion_computations,
    insert_computation,
    module_of,
    new_op,
    replace_op,
    run_patterns,
    scalar_constant,
)

U32 = scalar("u32")

# --- replica groups and group modes ----------------------------------------------------


def explicit_groups(op: HloOp) -> list[list[int]]:
    """`replica_groups` as lists of ids (the iota form expanded; `{}` is `[]`)."""
    from hlopass.interpreter.replicas import replica_groups

    raw = op.attr("replica_groups")
    text = str(getattr(raw, "text", raw) or "{}").replace(" ", "")
    return [] if text == "{}" else replica_groups(raw, 0)


def group_mode(op: HloOp) -> str | None:
    """XLA's `GetCollectiveOpGroupMode` for a collective with `use_global_device_ids`:
    no channel -> cross-replica; a channel -> cross-replica-and-partition, or flattened-id
    with global ids. None for global ids without a channel (XLA rejects it)."""
    has_channel = op.attr("channel_id") is not None
    global_ids = bool(op.attr("use_global_device_ids"))
    if not has_channel:
        return None if global_ids else "cross-replica"
    return "flattened-id" if global_ids else "cross-replica-and-partition"


def module_int(op: Operation, key: str) -> int:
    """`replica_count` / `num_partitions` of `op`'s module (1 when not given)."""
    module = module_of(op)
    attr = module.attributes.get(f"hlo.{key}") if module is not None else None
    return int(getattr(attr, "data", 1) or 1)


def index_table(groups: list[list[int]]) -> list[int] | None:
    """Per id, its position in its group; None when XLA's check would fail (an id out of
    range of groups x group size, or listed twice)."""
    n = len(groups) * len(groups[0])
    table = [-1] * n
    for g in groups:
        for k, i in enumerate(g):
            if not 0 <= i < n or table[i] != -1:
                return None
            table[i] = k
    return [t if t >= 0 else 2**32 - 1 for t in table]  # ids no group names: u32 max


def trivial(groups: list[list[int]]) -> bool:
    """No groups, or one group `{0,1,...}`."""
    return not groups or (len(groups) == 1 and groups[0] == list(range(len(groups[0]))))


def can_index(op: HloOp) -> bool:
    """The start indices below can be built for `op` (what XLA checks, or errors on)."""
    if group_mode(op) is None:
        return False
    groups = explicit_groups(op)
    if trivial(groups):
        return not (len(groups) == 1 and len(groups[0]) == 1 and groups[0][0] != 0)
    return len({len(g) for g in groups}) == 1 and index_table(groups) is not None


@dataclass
class _Builder:
    """Inserts the u32 scalar arithmetic of the start indices before the matched op."""

    rewriter: PatternRewriter
    ctx: RewriteContext
    op: HloOp

    def emit(
        self, opcode: str, operands: list[SSAValue], shape: Any = U32, **attrs: Any
    ) -> SSAValue:
        return new_op(self.rewriter, self.ctx, opcode, operands, shape, attrs, self.op).result

    def const(self, value: int) -> SSAValue:
        return scalar_constant(self.rewriter, self.ctx, value, "u32").result

    def flattened(self, index: SSAValue | None) -> SSAValue:
        """`index * num_partitions + partition-id` (just partition-id for index 0)."""
        pid = self.emit("partition-id", [])
        if index is None:
            return pid
        mul = self.emit("multiply", [index, self.const(module_int(self.op, "num_partitions"))])
        return self.emit("add", [mul, pid])


def start_indices(rewriter: PatternRewriter, ctx: RewriteContext, op: HloOp,
                  rank: int, dim: int, shard: int) -> list[SSAValue]:  # fmt: skip
    """u32 start indices of this participant's shard along `dim` (zero elsewhere): its
    position in its group (XLA's participant order for the group mode) times `shard`."""
    b = _Builder(rewriter, ctx, op)
    mode, groups = group_mode(op), explicit_groups(op)
    zero = b.const(0)
    if mode == "flattened-id":
        participant = b.flattened(b.emit("replica-id", []))
    else:
        participant = b.emit("replica-id", [])
    index: SSAValue | None
    if trivial(groups):
        # a single group of one id: every participant is at position 0
        index = None if len(groups) == 1 and len(groups[0]) == 1 else participant
    else:
        table = np.array(index_table(groups), np.uint32)
        lit = constant_from_numpy(rewriter, ctx, table, array("u32", (len(table),))).result
        ds = b.emit("dynamic-slice", [lit, participant], array("u32", (1,)),
                    dynamic_slice_sizes=(1,))  # fmt: skip
        index = b.emit("reshape", [ds])
    if mode == "cross-replica-and-partition":
        # groups hold replica ids; each replica's partitions follow one another
        index = b.flattened(index)
    scaled = b.emit("multiply", [index if index is not None else zero, b.const(shard)])
    return [scaled if d == dim else zero for d in range(rank)]


def _dim(op: HloOp) -> int:
    dims = op.attr("dimensions")
    return int(dims[0]) if dims else 0


def copied(op: HloOp, *names: str) -> dict[str, Any]:
    return {n: op.attr(n) for n in names if op.attr(n) is not None}


COLLECTIVE_ATTRS = ("channel_id", "replica_groups", "constrain_layout", "use_global_device_ids")

# --- all-gather-decomposer ---------------------------------------------------------------


def binary_computation(ctx: RewriteContext, near: HloOp, opcode: str, element_type: str) -> str:
    """A new computation `(x, y) -> opcode(x, y)` over scalars, inserted before `near`'s."""
    s = scalar(element_type)
    x = create_op("parameter", [], s, ctx.names.fresh("x"), {"number": 0})
    y = create_op("parameter", [], s, ctx.names.fresh("y"), {"number": 1})
    root = create_op(opcode, [x.results[0], y.results[0]], s, ctx.names.fresh(opcode))
    block = Block()
    for o in (x, y, root):
        block.add_op(o)
    block.add_op(new_return_op(root.results[0]))
    return insert_computation(ctx, near, opcode, block)


@dataclass
class AllGatherToAllReduce(RewritePattern):
    """`all-gather(x)` -> `all-reduce(dynamic-update-slice(zeros, x, my offset))` summing
    (`or` for pred), one all-reduce per operand (a tuple of them for several).

    Guards: a valid group mode (no global ids without a channel) and replica groups XLA
    can index (ids in range, none twice, equal sizes). Exact: every position but one
    participant's adds zeros (a -0.0 gathered comes back +0.0)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-gather",)

    ctx: RewriteContext
    reducers: dict[str, str] = field(default_factory=dict)
    """The add (or `or`) computation made per element type, shared by this run."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.OPCODE not in self.OPCODES or not can_index(op):
            return
        shape = op.shape
        outs = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
        arrays = [s for s in outs if isinstance(s, ArrayShape)]
        if len(arrays) != len(outs):
            return  # a nested tuple output
        dim = _dim(op)
        results = [
            self._one(rewriter, op, x, s, dim) for x, s in zip(op.operands, arrays, strict=True)
        ]
        if isinstance(shape, TupleShape):
            results = [new_op(rewriter, self.ctx, "tuple", results, shape, None, op).result]
        self.ctx.note(self, op, f"into {len(outs)} all-reduce(s)")
        replace_op(rewriter, op, results[0])

    def _one(self, rewriter: PatternRewriter, op: HloOp, x: SSAValue, out: ArrayShape,
             dim: int) -> SSAValue:  # fmt: skip
        et = out.element_type
        zero = scalar_constant(rewriter, self.ctx, 0, et).result
        zeros = new_op(rewriter, self.ctx, "broadcast", [zero], out, {"dimensions": ()}, op).result
        shard = x.type.data.dims[dim]  # type: ignore[attr-defined]
        starts = start_indices(rewriter, self.ctx, op, out.rank, dim, shard)
        dus = new_op(rewriter, self.ctx, "dynamic-update-slice", [zeros, x, *starts], out, None, op)
        name = self.reducers.get(et)
        if name is None:
            name = self.reducers[et] = binary_computation(
                self.ctx, op, "or" if et == "pred" else "add", et)  # fmt: skip
        attrs = copied(op, *COLLECTIVE_ATTRS) | {"to_apply": name}
        return new_op(rewriter, self.ctx, "all-reduce", [dus.result], out, attrs, op).result


def _walk(module: ModuleOp, patterns: list[RewritePattern], skip: set[str]) -> bool:
    comps = [c for c in computations(module) if c.comp_name not in skip]
    return run_patterns(module, patterns, comps)


@dataclass(frozen=True)
class AllGatherDecomposerPass(HloModulePass):
    """Rewrite every all-gather as an all-reduce of its operand placed in zeros."""

    name: ClassVar[str] = "all-gather-decomposer"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        return _walk(module, [AllGatherToAllReduce(rctx)], fusion_computations(module))


# --- reduce-scatter-decomposer -----------------------------------------------------------


def next_channel_id(module: ModuleOp) -> int:
    """One more than the largest channel id of the module (XLA's `NextChannelId`)."""
    ids = [op.attr("channel_id") for c in computations(module) for op in c.instructions]
    return max([int(i) for i in ids if i is not None], default=0) + 1


@dataclass
class ReduceScatterToAllReduce(RewritePattern):
    """`reduce-scatter(x)` -> `dynamic-slice(all-reduce(x), my offset)`.

    Guards: an array result (one operand), a valid group mode and groups XLA can index.
    The all-reduce takes a fresh channel id when the reduce-scatter has one, its
    frontend attributes and (here, not a clone) the same reduction computation."""

    OPCODES: ClassVar[tuple[str, ...]] = ("reduce-scatter",)

    ctx: RewriteContext
    channel: list[int]
    """The next free channel id, taken as reduce-scatters are rewritten."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.OPCODE not in self.OPCODES:
            return
        shape = op.shape
        if not isinstance(shape, ArrayShape) or not can_index(op):
            return
        attrs = copied(op, *COLLECTIVE_ATTRS, "frontend_attributes", "to_apply")
        if op.attr("channel_id") is not None:
            attrs["channel_id"] = self.channel[0]
            self.channel[0] += 1
        full = op.operands[0].type.data  # type: ignore[attr-defined]
        ar = new_op(rewriter, self.ctx, "all-reduce", [op.operands[0]], full, attrs, op)
        dim = _dim(op)
        starts = start_indices(rewriter, self.ctx, op, shape.rank, dim, shape.dims[dim])
        ds = new_op(rewriter, self.ctx, "dynamic-slice", [ar.result, *starts], shape,
                    {"dynamic_slice_sizes": shape.dims}, op)  # fmt: skip
        self.ctx.note(self, op, "into all-reduce + dynamic-slice")
        replace_op(rewriter, op, ds.result)


def async_computations(module: ModuleOp) -> set[str]:
    """Computations an async op runs (XLA's `IsAsyncComputation`)."""
    return {
        name
        for _, op, names in call_instructions(module)
        if op.OPCODE in ("async-start", "async-update", "async-done")
        for name in names
    }


@dataclass(frozen=True)
class ReduceScatterDecomposerPass(HloModulePass):
    """Rewrite every reduce-scatter as an all-reduce and a dynamic-slice of this
    participant's block (not inside async computations, as XLA)."""

    name: ClassVar[str] = "reduce-scatter-decomposer"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        skip = fusion_computations(module) | async_computations(module)
        pattern = ReduceScatterToAllReduce(rctx, [next_channel_id(module)])
        return _walk(module, [pattern], skip)
