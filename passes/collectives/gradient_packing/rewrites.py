"""The rewrites of `gradient-packing`, one per class. Each takes an all-reduce the plan
(`Lowering.todo`) gave a band, and hands the all-reduces it makes to the next rewrite
through the same table: shards first, then the hierarchy, then the ring."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape, array
from hlopass.passes.collectives.combine_utils import reorder_block
from hlopass.rewriting import replace_op
from hlopass.text.exporter import instruction_post_order

from .build import Builder, Lowering
from .groups import device_groups, split_by_host
from .plan import Pack
from .spec import Band


def _planned(state: Lowering, op: Operation) -> Band | None:
    return state.todo.get(op) if isinstance(op, HloOp) else None  # type: ignore[arg-type]


@dataclass
class ShardAllReduce(RewritePattern):
    """`all-reduce(x)` -> `reshape(concatenate(all-reduce(slice_1(reshape(x))), ...))`:
    `#n` shards, each a contiguous piece of the flattened gradient reduced on its own.

    Guards: a band with more than one shard (at most one shard per element)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    state: Lowering

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        band = _planned(self.state, op)
        if band is None or band.shards == 1:
            return
        assert isinstance(op, HloOp) and isinstance(op.shape, ArrayShape)
        n = op.shape.num_elements
        one = replace(band, shards=1)
        if n == 1:  # one element is one shard: the next rewrites take it as it is
            self.state.todo[op] = one
            return
        b = Builder(self.state, rewriter, op)
        step = -(-n // min(band.shards, n))
        flat = b.flat(op.operands[0])
        pieces = []
        for start in range(0, n, step):
            piece = b.slice(flat, start, min(start + step, n))
            ar = b.emit("all-reduce", [piece], piece.type.data, _attrs(op, self.state))  # type: ignore[attr-defined]
            self.state.todo[ar] = one
            pieces.append(ar.result)
        whole = b.emit("concatenate", pieces, array(b.et, (n,)), {"dimensions": (0,)}).result
        del self.state.todo[op]
        self.state.ctx.note(self, op, f"into {len(pieces)} shards")
        replace_op(rewriter, op, b.back(whole, op.shape))


def _attrs(op: HloOp, state: Lowering) -> dict:
    """What an all-reduce made from `op`'s operand keeps: its groups, reduction, global
    ids and frontend attributes, and a fresh channel where it had one."""
    keep = ("replica_groups", "use_global_device_ids", "to_apply", "frontend_attributes")
    attrs = {k: op.attr(k) for k in keep if op.attr(k) is not None}
    if op.attr("channel_id") is not None:
        attrs["channel_id"] = state.channels.take()
    return attrs


@dataclass
class HierarchicalAllReduce(RewritePattern):
    """`all-reduce(x)` over groups spanning hosts -> inside each host a reduce-scatter
    (`xring/...`, XLA's BlueConnect shape) or an all-reduce (`nccl/...`), then an
    all-reduce across hosts of the devices at the same place in their host, reduced by
    the inner algorithm, then (after a reduce-scatter) an all-gather inside each host.

    Guards: a hierarchical band; groups that sit on one host or on unequal parts of hosts
    take the outer algorithm alone."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    state: Lowering

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        band = _planned(self.state, op)
        if band is None or band.inner is None or band.shards != 1:
            return
        assert isinstance(op, HloOp) and isinstance(op.shape, ArrayShape)
        groups = device_groups(op)
        split = split_by_host(groups, self.state.gpus_per_host) if groups else None
        if split is None:
            self.state.todo[op] = Band(band.alg)
            if band.alg == "xring":
                RingAllReduce(self.state).match_and_rewrite(op, rewriter)
            return
        intra, inter = split
        b = Builder(self.state, rewriter, op)
        flat = b.flat(op.operands[0])
        n = op.shape.num_elements
        total = n
        if band.alg == "xring":
            g = len(intra[0])
            padded = b.pad(flat, g)
            total = padded.type.data.dims[0]  # type: ignore[attr-defined]
            part = array(b.et, (total // g,))
            local = b.collective("reduce-scatter", padded, part, intra)
        else:
            part = array(b.et, (n,))
            local = b.collective("all-reduce", flat, part, intra)
        across = b.collective("all-reduce", local.result, part, inter)
        self.state.todo[across] = Band(band.inner)
        out = across.result
        if band.alg == "xring":
            gathered = b.collective("all-gather", out, array(b.et, (total,)), intra)
            out = b.slice(gathered.result, 0, n)
        del self.state.todo[op]
        self.state.ctx.note(self, op, f"{band.alg} in hosts, {band.inner} across")
        replace_op(rewriter, op, b.back(out, op.shape))


@dataclass
class RingAllReduce(RewritePattern):
    """`all-reduce(x)` -> `reshape(slice(all-gather(reduce-scatter(pad(reshape(x))))))`:
    the seed's `xring` over the same groups, zero-padded to a multiple of the group size.

    Guards: a flat `xring` band of one shard."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    state: Lowering

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        band = _planned(self.state, op)
        if band is None or band.alg != "xring" or band.inner or band.shards != 1:
            return
        assert isinstance(op, HloOp) and isinstance(op.shape, ArrayShape)
        groups = device_groups(op)
        assert groups is not None
        b = Builder(self.state, rewriter, op)
        out = b.ring(b.flat(op.operands[0]), groups)
        del self.state.todo[op]
        self.state.ctx.note(self, op, f"ring over groups of {len(groups[0])}")
        replace_op(rewriter, op, b.back(out, op.shape))


@dataclass
class PackRange:
    """`all-reduce(a), ..., all-reduce(z)` -> `reshape(slice_i(all-reduce(concatenate(
    reshape(a), ..., reshape(z)))))`: the seed's `pack_range` / `unpack_grad_tuple`, one
    all-reduce of the flattened, concatenated small gradients, sliced back; the packed
    all-reduce takes the members' band. (A group rewrite: the plan chose the members.)"""

    state: Lowering

    def __call__(self, pack: Pack) -> HloOp:
        last = pack.members[-1]
        rewriter = PatternRewriter(last)
        b = Builder(self.state, rewriter, last)
        flats = [b.flat(m.operands[0]) for m in pack.members]
        sizes = [m.shape.num_elements for m in pack.members]  # type: ignore[attr-defined]
        total = sum(sizes)
        concat = b.emit("concatenate", flats, array(b.et, (total,)), {"dimensions": (0,)})
        reduced = b.emit("all-reduce", [concat.result], concat.shape, _attrs(last, self.state))
        self.state.todo[reduced] = pack.band
        start = 0
        for m, size in zip(pack.members, sizes, strict=True):
            piece = b.slice(reduced.result, start, start + size)
            m.result.replace_all_uses_with(b.back(piece, m.shape))  # type: ignore[arg-type]
            start += size
        for m in pack.members:
            self.state.todo.pop(m, None)
            m.detach()
            m.erase()
        self.state.ctx.note(self, reduced, f"packed {len(sizes)} gradients")
        return reduced


def topological(comp: ComputationOp) -> None:
    """Put `comp`'s instructions in post order (a pack's uses may stand before it)."""
    reorder_block(comp, instruction_post_order(comp))
