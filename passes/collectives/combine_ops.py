"""The rewrites of XLA's collective combiners: N collectives of one group -> one
tuple-shaped collective of their N operands, and N get-tuple-elements in their place.

Each class is one combining function of `combine_utils.combine_by_key`; the passes that
choose the groups are in `combiners`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import ComputationOp, HloOp, create_op
from hlopass.ir.shape import ArrayShape, Shape
from hlopass.rewriting import RewriteContext

from .combine_merge import (
    merged_frontend_attributes,
    merged_metadata,
    most_frequent_dim,
    permuted,
    relay_control_dependencies,
    tuple_of,
    tuple_sharding,
)
from .combine_utils import is_pipelined


@dataclass
class CombineInstructions:
    """Shared steps: insert the combined instruction, put get-tuple-elements (and bitcasts
    back) in the members' places, relay their control dependencies, erase them."""

    ctx: RewriteContext
    gpu: bool = False
    """Merge the members' GPU backend configs (is_pipelined) into the combined one."""

    def __call__(self, group: list[HloOp]) -> list[HloOp]:
        """Combine `group` (a `CombineFn`); each subclass emits its own opcode."""
        raise NotImplementedError

    def emit(self, group: list[HloOp], opcode: str, operands: list[SSAValue],
             shapes: list[Shape], attrs: dict[str, Any]) -> HloOp:  # fmt: skip
        first = group[0]
        for name in ("replica_groups", "channel_id", "to_apply"):
            if first.attr(name) is not None:
                attrs.setdefault(name, first.attr(name))
        if first.attr("use_global_device_ids"):
            attrs["use_global_device_ids"] = True
        self._merge_annotations(group, attrs)
        combined = create_op(opcode, operands, tuple_of(shapes), self.ctx.names.fresh(opcode),
                             {k: v for k, v in attrs.items() if v is not None})  # fmt: skip
        # anywhere in the block: `combine_by_key` puts the block in post order at the end
        self._insert_after(combined, group[-1])
        relay_control_dependencies(group, combined)
        self.ctx.note(self, combined, "combined " + ", ".join(m.inst_name for m in group))
        return combined

    def _merge_annotations(self, group: list[HloOp], attrs: dict[str, Any]) -> None:
        attrs["metadata"] = merged_metadata(group)
        attrs["frontend_attributes"] = merged_frontend_attributes(group)
        attrs.setdefault("sharding", tuple_sharding(group))
        if self.gpu:
            pipelined = "true" if any(is_pipelined(m) for m in group) else "false"
            attrs["backend_config"] = (
                '{"collective_backend_config":{"is_pipelined":' + pipelined + "}}"
            )

    def replace(self, group: list[HloOp], combined: HloOp,
                swaps: list[tuple[int, int] | None] | None = None) -> list[HloOp]:  # fmt: skip
        """Member i becomes get-tuple-element i of `combined` (bitcast back when its
        dimensions were swapped by `swaps[i]`); the instructions made, in order."""
        anchor: HloOp = combined
        made: list[HloOp] = []
        shapes = combined.shape.elements  # type: ignore[attr-defined]
        for i, member in enumerate(group):
            gte = create_op("get-tuple-element", [combined.result], shapes[i],
                            self.ctx.names.fresh("get-tuple-element"), {"index": i})  # fmt: skip
            anchor = self._insert_after(gte, anchor)
            made.append(gte)
            value = gte
            if swaps and swaps[i] is not None:
                value = create_op("bitcast", [gte.result], member.shape,
                                  self.ctx.names.fresh("bitcast"))  # fmt: skip
                anchor = self._insert_after(value, anchor)
                made.append(value)
            member.result.replace_all_uses_with(value.result)
            member.detach()
            member.erase()
        return made

    @staticmethod
    def _insert_after(op: HloOp, anchor: HloOp) -> HloOp:
        block = anchor.parent_block()
        assert block is not None
        block.insert_op_after(op, anchor)
        return op

    def aligned(self, group: list[HloOp], made: list[HloOp]) -> tuple[
        int, list[SSAValue], list[Shape], list[tuple[int, int] | None]
    ]:  # fmt: skip
        """All-gather and reduce-scatter: the most frequent dimension, and each member's
        operand and shape, bitcast to swap its dimension with that one where they differ
        (the bitcasts go into `made`)."""
        dim = most_frequent_dim(group)
        operands: list[SSAValue] = []
        shapes: list[Shape] = []
        swaps: list[tuple[int, int] | None] = []
        for member in group:
            d = int(member.attr("dimensions")[0])
            operand = member.operands[0]
            shape = member.shape
            if d == dim:
                swaps.append(None)
            else:
                src = operand.type.data  # type: ignore[attr-defined]
                assert isinstance(src, ArrayShape) and isinstance(shape, ArrayShape)
                cast = create_op("bitcast", [operand], permuted(src, d, dim),
                                 self.ctx.names.fresh("bitcast"))  # fmt: skip
                self._insert_after(cast, owner_or_first(member))
                made.append(cast)
                operand = cast.result
                shape = permuted(shape, d, dim)
                swaps.append((d, dim))
            operands.append(operand)
            shapes.append(shape)
        return dim, operands, shapes, swaps


def owner_or_first(member: HloOp) -> HloOp:
    """Where a bitcast of `member`'s operand may go: right before `member` (after the
    instruction standing before it, or as the block's first)."""
    prev = member.prev_op
    return prev if isinstance(prev, HloOp) else member  # (a parameter is never first-less)


@dataclass
class CombineAllReduces(CombineInstructions):
    """`all-reduce(x1), ..., all-reduce(xN)` -> `gte(all-reduce(x1, ..., xN), i)`: one
    all-reduce of the first member's reduction, replica groups and channel."""

    def __call__(self, group: list[HloOp]) -> list[HloOp]:
        operands = [m.operands[0] for m in group]
        combined = self.emit(group, "all-reduce", operands, [m.shape for m in group], {})
        return [combined, *self.replace(group, combined)]


@dataclass
class CombineAllGathers(CombineInstructions):
    """`all-gather(x1), ..., all-gather(xN)` -> `gte(all-gather(x1, ..., xN), i)` on the
    most frequent gather dimension; a member gathering another dimension goes through a
    bitcast swapping it with that one, and back."""

    def __call__(self, group: list[HloOp]) -> list[HloOp]:
        made: list[HloOp] = []
        dim, operands, shapes, swaps = self.aligned(group, made)
        combined = self.emit(group, "all-gather", operands, shapes, {"dimensions": (dim,)})
        return [*made, combined, *self.replace(group, combined, swaps)]


@dataclass
class CombineReduceScatters(CombineInstructions):
    """`reduce-scatter(x1), ..., reduce-scatter(xN)` -> `gte(reduce-scatter(x1, ..., xN),
    i)` on the most frequent scatter dimension (others bitcast as for all-gather); the
    combined one keeps the first member's sharding."""

    def __call__(self, group: list[HloOp]) -> list[HloOp]:
        made: list[HloOp] = []
        dim, operands, shapes, swaps = self.aligned(group, made)
        attrs: dict[str, Any] = {"dimensions": (dim,), "sharding": group[0].attr("sharding")}
        combined = self.emit(group, "reduce-scatter", operands, shapes, attrs)
        return [*made, combined, *self.replace(group, combined, swaps)]


@dataclass
class CombineCollectivePermutes(CombineInstructions):
    """`collective-permute(x1), ..., collective-permute(xN)` -> `gte(collective-permute(x1,
    ..., xN), i)`: the first member's source-target pairs and channel id."""

    def __call__(self, group: list[HloOp]) -> list[HloOp]:
        first = group[0]
        attrs: dict[str, Any] = {"source_target_pairs": first.attr("source_target_pairs")}
        operands = [m.operands[0] for m in group]
        combined = self.emit(group, "collective-permute", operands, [m.shape for m in group],
                             attrs)  # fmt: skip
        # XLA's combined collective-permute carries no sharding of its members
        combined.properties.pop("sharding", None)
        return [combined, *self.replace(group, combined)]


def computation_of(op: HloOp) -> ComputationOp:
    comp = op.parent_op()
    assert isinstance(comp, ComputationOp)
    return comp
