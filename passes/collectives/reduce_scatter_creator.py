"""`reduce-scatter-creator`: an all-reduce whose only use is a dynamic-slice taking each
device's own shard becomes a reduce-scatter (XLA's GPU `ReduceScatterCreator`, on
`collective_opt_utils`' `MatchReduceScatter` with one split dimension and an optional
reshape between the all-reduce and the slice).

The slice must take, on the j-th device of every group, the block at `j * shard size` of
one dimension; the offset may be the device's id (replica-id without a channel,
partition-id with one, their flattened combination with `use_global_device_ids`) through
multiplies by constants, table lookups (a dynamic-slice of a constant or iota table),
clamps that provably change nothing, value-preserving converts, reshapes and copies: each
device's offset is evaluated and compared. When the groups do not divide the dimension
the all-reduce's operand is sliced to a multiple first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.attrs import SliceDim
from hlopass.ir.shape import ArrayShape, common_factors
from hlopass.passes.collectives.all_reduce_folder import (
    ChannelIds,
    explicit_groups,
    module_int,
    unique_users,
)
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    const_array,
    fusion_computations,
    module_of,
    new_op,
    owner,
    run_patterns,
)

_NO_OPS = ("reshape", "bitcast", "copy")


def _scalar_int(op: HloOp | None) -> int | None:
    """The value of an effective-scalar integral constant."""
    arr = const_array(op.result) if op is not None else None
    if arr is None or arr.size != 1 or arr.dtype.kind not in "iub":
        return None
    return int(arr.reshape(()))


def _strip(op: HloOp, opcodes: tuple[str, ...] = _NO_OPS) -> HloOp:
    while op.opcode in opcodes:
        inner = owner(op.operands[0])
        if inner is None:
            break
        op = inner
    return op


def is_table_lookup(op: HloOp) -> bool:
    """A dynamic-slice of a rank-1 s32/u32 constant or iota (XLA's `IsTableLookup`)."""
    op = _strip(op)
    table = owner(op.operands[0]) if op.opcode == "dynamic-slice" else None
    shape = table.shape if table is not None else None
    return (table is not None and table.opcode in ("constant", "iota")
            and isinstance(shape, ArrayShape) and len(shape.dims) == 1
            and shape.element_type in ("s32", "u32"))  # fmt: skip


def _table_entry(lookup: HloOp, index: int) -> int | None:
    table = owner(lookup.operands[0])
    assert table is not None
    if table.opcode == "iota":
        return index
    arr = const_array(table.result)
    return int(arr[index]) if arr is not None and 0 <= index < arr.size else None


def _known_range(op: HloOp) -> tuple[int, int] | None:
    """XLA's `GetKnownRange`: a constant table's min and max, or a scalar constant."""
    cur = _strip(op, ("convert", *_NO_OPS))
    if is_table_lookup(cur):
        table = owner(cur.operands[0])
        arr = const_array(table.result) if table is not None else None
        if arr is not None:
            return int(arr.min()), int(arr.max())
    v = _scalar_int(cur) if cur.opcode == "constant" else None
    return None if v is None else (v, v)


def _bits(et: str) -> int:
    return {"pred": 1, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32,
            "s64": 64, "u64": 64}.get(et, 0)  # fmt: skip


def backtrack(op: HloOp) -> HloOp:
    """XLA's `BacktrackToBase`: through reshape, bitcast, copy, widening integer converts
    and clamps whose operand provably lies within the bounds."""
    while True:
        inner = owner(op.operands[0]) if op.operands else None
        if op.opcode in _NO_OPS and inner is not None:
            op = inner
            continue
        if op.opcode == "convert" and inner is not None:
            src, dst = inner.shape.element_type, op.shape.element_type  # type: ignore[attr-defined]
            if 0 < _bits(src) <= _bits(dst) and src != "pred" and dst != "pred":
                op = inner
                continue
        if op.opcode == "clamp":
            lo, x, hi = (owner(v) for v in op.operands)
            known = _known_range(x) if x is not None else None
            a, b = _scalar_int(lo), _scalar_int(hi)
            if known and a is not None and b is not None and known[0] >= a and known[1] <= b:
                op = x  # type: ignore[assignment]
                continue
        return op


@dataclass
class IdMap:
    """XLA's `CreateMapIdFn`: which instruction is the device id a group member is named
    by, in the op's group mode; `of(op, id)` its value there, or -1."""

    cross_module: bool
    global_ids: bool
    partitions: int
    replicas: int
    orthogonal: bool = True

    def of(self, op: HloOp, ident: int) -> int:
        if not self.cross_module:
            return ident if op.opcode == "replica-id" else -1
        if not self.global_ids:
            return ident if op.opcode == "partition-id" else -1
        if op.opcode == "replica-id":
            return ident if self.partitions == 1 else -1
        if op.opcode == "partition-id":
            if self.replicas == 1:
                return ident
            return ident % self.partitions if self.orthogonal else -1
        if op.opcode == "add" and any(
            self._is(a, "partition-id") and self._replica_times_partitions(b)
            for a, b in (op.operands, op.operands[::-1])
        ):
            return ident
        return -1

    @staticmethod
    def _is(value: SSAValue, opcode: str) -> bool:
        o = owner(value)
        return o is not None and o.opcode == opcode

    def _replica_times_partitions(self, value: SSAValue) -> bool:
        o = owner(value)
        if o is None or o.opcode != "multiply":
            return False
        a, b = o.operands
        return any(self._is(r, "replica-id") and _scalar_int(owner(c)) == self.partitions
                   for r, c in ((a, b), (b, a)))  # fmt: skip


def orthogonal_replicas(groups: list[list[int]], partitions: int) -> bool:
    """Each partition sits at one position of every group, and a group stays within
    one replica's partitions (XLA's check for partition-id under flattened ids)."""
    where = [-1] * partitions
    for g in groups:
        for i, gid in enumerate(g):
            p = gid % partitions
            if where[p] == -1:
                where[p] = i
            elif where[p] != i or gid // partitions != g[0] // partitions:
                return False
    return True


def index_for(op: HloOp, ident: int, ids: IdMap) -> int:
    """XLA's `GetIndexForId`: the id itself, or a chain of table lookups of it; -1."""
    mapped = ids.of(op, ident)
    if mapped >= 0:
        return mapped
    if not is_table_lookup(op):
        return -1
    op = _strip(op)
    inner_op = owner(op.operands[1])
    inner = index_for(inner_op, ident, ids) if inner_op is not None else -1
    if inner < 0:
        return -1
    entry = _table_entry(op, inner)
    return -1 if entry is None else entry


def evaluate_offset(op: HloOp, ident: int, ids: IdMap) -> int | None:
    """XLA's `EvaluateOffset`: the offset `op` computes on device `ident`."""
    operands = [owner(v) for v in op.operands]
    if op.opcode == "multiply":
        if not isinstance(op.shape, ArrayShape) or any(d != 1 for d in op.shape.dims):
            return None
        k = next((i for i in (0, 1) if operands[i] is not None
                  and operands[i].opcode == "constant"), None)  # type: ignore[union-attr]  # fmt: skip
        m = _scalar_int(operands[k]) if k is not None else None
        other = operands[1 - k] if k is not None else None
        if not m or other is None:
            return None
        inner = evaluate_offset(backtrack(other), ident, ids)
        return None if inner is None else inner * m
    if op.opcode == "clamp":
        x = operands[1]
        inner = evaluate_offset(backtrack(x), ident, ids) if x is not None else None
        lo, hi = _scalar_int(operands[0]), _scalar_int(operands[2])
        if inner is None or lo is None or hi is None:
            return None
        return max(lo, min(inner, hi))
    if op.opcode == "subtract":
        return _evaluate_subtract(operands, ident, ids)
    if is_table_lookup(op):
        index_op = owner(_strip(op).operands[1])
        index = index_for(index_op, ident, ids) if index_op is not None else -1
        return None if index < 0 else _table_entry(_strip(op), index)
    mapped = ids.of(op, ident)
    return mapped if mapped >= 0 else None


def _evaluate_subtract(operands: list[HloOp | None], ident: int, ids: IdMap) -> int | None:
    """`a - b`; when it is `id * c - table(id')` both must read the same id (XLA's
    structural guard)."""
    if operands[0] is None or operands[1] is None:
        return None
    lhs, rhs = backtrack(operands[0]), backtrack(operands[1])
    if lhs.opcode == "multiply" and is_table_lookup(rhs):
        a, b = (owner(v) for v in lhs.operands)
        id_operand = b if a is not None and a.opcode == "constant" else (
            a if b is not None and b.opcode == "constant" else None)  # fmt: skip
        index = owner(rhs.operands[1])
        if (
            id_operand is not None
            and index is not None
            and backtrack(id_operand) is not backtrack(index)
        ):
            return None
    x, y = evaluate_offset(lhs, ident, ids), evaluate_offset(rhs, ident, ids)
    return None if x is None or y is None else x - y


def split_dim(ds: HloOp) -> int | None:
    """XLA's `ExtractSplitDimSpec` with one split dimension: the one dimension the slice
    shrinks, else the one non-trivial dimension whose offset is not a constant 0."""
    src = ds.operands[0].type.data.dims  # type: ignore[attr-defined]
    out = ds.shape.dims  # type: ignore[attr-defined]
    shrunk = [d for d in range(len(src)) if src[d] != out[d]]
    if len(shrunk) == 1:
        return shrunk[0]
    dims = []
    for d in range(len(src)):
        offset = owner(ds.operands[d + 1])
        zero = offset is not None and offset.opcode == "constant" and _scalar_int(offset) == 0
        if src[d] != 1 and not zero:
            dims.append(d)
    return dims[0] if len(dims) == 1 else None


def unmodified_dims(src: tuple[int, ...], dst: tuple[int, ...]) -> dict[int, int]:
    """XLA's `DimensionsUnmodifiedByReshape`, output dim -> input dim: the common
    factors of one dimension on both sides."""
    factors = common_factors(src, dst)
    i = 0
    while i < len(factors) - 1:
        (a0, b0), (a1, b1) = factors[i], factors[i + 1]
        if a1 - a0 != 1 or b1 - b0 != 1:
            del factors[i]
        else:
            i += 1
    return {b: a for a, b in factors[:-1]}


@dataclass(frozen=True)
class ScatterSpec:
    ds: HloOp
    reshape: HloOp | None
    dim: int
    """The split dimension, in the all-reduce's shape."""
    group_size: int


def _group_size(ar: HloOp, cross: bool, global_ids: bool, partitions: int,
                replicas: int) -> int | None:  # fmt: skip
    """XLA's `GetGroupSize` and its checks of the cross-partition modes."""
    groups = explicit_groups(ar)
    if not cross:
        return replicas if groups is None else len(groups[0])
    if global_ids:
        return len(groups[0]) if groups else None
    # cross-partition without global ids: groups must be one per replica, of one replica
    if groups is None or len(groups) != replicas or len(groups[0]) != 1:
        return None
    return partitions


def match_reduce_scatter(ar: HloOp) -> ScatterSpec | None:
    """XLA's `MatchReduceScatter(ar, allow_multiple_split_dims=false,
    allow_intervening_reshape=true)`, in its order of checks."""
    shape = ar.shape
    if not isinstance(shape, ArrayShape) or ar.attr("constrain_layout"):
        return None
    if sum(d != 1 for d in shape.dims) < 1 or len(unique_users(ar.result)) != 1:
        return None
    groups = explicit_groups(ar)
    if groups is not None and len({len(g) for g in groups}) != 1:
        return None
    user, reshape = unique_users(ar.result)[0], None
    if isinstance(user, HloOp) and user.opcode == "reshape":
        if len(unique_users(user.result)) != 1:
            return None
        reshape, user = user, unique_users(user.result)[0]
    if not isinstance(user, HloOp) or user.opcode != "dynamic-slice":
        return None
    module = module_of(ar)
    partitions, replicas = module_int(module, "num_partitions"), module_int(module, "replica_count")
    cross, global_ids = ar.attr("channel_id") is not None, bool(ar.attr("use_global_device_ids"))
    size = _group_size(ar, cross, global_ids, partitions, replicas)
    if size is None or size < 2:
        return None
    ortho = orthogonal_replicas(groups, partitions) if cross and global_ids and groups else True
    ids = IdMap(cross, global_ids, partitions, replicas, ortho)
    dim = split_dim(user)
    if dim is None:
        return None
    src = user.operands[0].type.data.dims  # type: ignore[attr-defined]
    shard = user.attr("dynamic_slice_sizes")[dim]
    if shard <= 0 or src[dim] // shard != size:
        return None
    if not _per_id_offsets(user, dim, shard, size, groups, ids, cross and not global_ids):
        return None
    if reshape is not None:
        unmodified = unmodified_dims(shape.dims, reshape.shape.dims)  # type: ignore[attr-defined]
        if dim not in unmodified:
            return None
        dim = unmodified[dim]
    return ScatterSpec(user, reshape, dim, size)


def _per_id_offsets(ds: HloOp, dim: int, shard: int, size: int,
                    groups: list[list[int]] | None, ids: IdMap, partition_mode: bool) -> bool:  # fmt: skip
    """XLA's `IsPerIdOffset`: member j of every group slices at `j * shard`."""
    offset = owner(ds.operands[dim + 1])
    if offset is None:
        return False
    offset = backtrack(offset)
    iota = groups is None or partition_mode
    for group in [list(range(size))] if iota else groups:  # type: ignore[union-attr]
        for j in range(size):
            if evaluate_offset(offset, group[j], ids) != shard * j:
                return False
    return True


@dataclass
class AllReduceToReduceScatter(RewritePattern):
    """`dynamic-slice(all-reduce(x), shard offsets)` -> `reduce-scatter(x)` (reshaped
    to the slice's shape when a reshape stood between them).

    Guards: `match_reduce_scatter` (XLA's `MatchReduceScatter`)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    ctx: RewriteContext
    channels: ChannelIds

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES or len(op.operands) != 1:
            return
        spec = match_reduce_scatter(op)
        if spec is None:
            return
        shape = op.shape
        assert isinstance(shape, ArrayShape)
        dims = list(shape.dims)
        scatter = dims[spec.dim] // spec.group_size
        x = op.operands[0]
        if dims[spec.dim] % spec.group_size:
            # the groups do not divide the dimension: scatter its leading multiple
            dims[spec.dim] = scatter * spec.group_size
            window = tuple(SliceDim(0, d, 1) for d in dims)
            x = new_op(rewriter, self.ctx, "slice", [x], shape.with_dims(tuple(dims)),
                       {"slice": window}, like=op, before=op).result  # fmt: skip
        dims[spec.dim] = scatter
        attrs = {k: v for k, v in ((s.name, v) for s, v in op.hlo_attrs())
                 if k in ("replica_groups", "to_apply", "constrain_layout",
                          "use_global_device_ids", "backend_config", "frontend_attributes",
                          "metadata")}  # fmt: skip
        attrs["dimensions"] = (spec.dim,)
        if op.attr("channel_id") is not None:
            attrs["channel_id"] = self.channels.take()  # a reduce-scatter needs its own
        rs = new_op(rewriter, self.ctx, "reduce-scatter", [x], shape.with_dims(tuple(dims)),
                    attrs, like=op, before=op)  # fmt: skip
        result = rs.result
        if spec.reshape is not None:
            result = new_op(rewriter, self.ctx, "reshape", [result], spec.ds.shape, like=op,
                            before=op).result  # fmt: skip
        self.ctx.note(self, op, f"dimension {spec.dim}, groups of {spec.group_size}")
        rewriter.replace_all_uses_with(spec.ds.result, result)
        rewriter.erase(spec.ds)  # (its offset computation stays, as in XLA: dce's to drop)
        if spec.reshape is not None:
            rewriter.erase(spec.reshape)
        rewriter.erase(op)


@dataclass(frozen=True)
class ReduceScatterCreatorPass(HloModulePass):
    """`dynamic-slice(all-reduce(x))` taking each device's shard -> `reduce-scatter(x)`."""

    name: ClassVar[str] = "reduce-scatter-creator"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        pattern = AllReduceToReduceScatter(rctx, ChannelIds.of(module))
        return run_patterns(module, [pattern], comps)
