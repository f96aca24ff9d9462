"""`algsimp` family: collectives of a broadcast constant.

Every participant holds the same `broadcast(c)` (c a constant, so it cannot differ between
devices, unlike a parameter), so what the collective exchanges is known: gathering or
exchanging blocks gives the broadcast again, a min/max reduction gives c, a sum gives
`c * group size`. Array-shaped (single-operand) collectives only, as XLA does.
"""

from __future__ import annotations

import re

import numpy as np
from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import is_float, is_integral, scalar
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, reducer_opcode, src
from hlopass.rewriting import const_array, module_of


def broadcast_constant(value: SSAValue) -> np.ndarray | None:
    """c when `value` is `broadcast(c)` of a scalar constant c (XLA's
    `Broadcast(ConstantScalar())`), else None."""
    b = src(value, "broadcast")
    if b is None or src(b.operands[0], "constant") is None:
        return None
    c = const_array(b.operands[0])
    return c if c is not None and c.ndim == 0 else None


def _single_array(op: HloOp) -> bool:
    return len(op.operands) == 1 and array(op.shape) is not None


def _module_int(op: HloOp, key: str) -> int:
    """The module header's `key` (`replica_count`, `num_partitions`); 1 when absent."""
    module = module_of(op)
    attr = None if module is None else module.attributes.get("hlo." + key)
    m = re.search(r"\d+", str(getattr(attr, "data", attr))) if attr is not None else None
    return int(m.group(0)) if m else 1


def group_size(op: HloOp) -> int | None:
    """How many devices each of `op`'s groups holds, by XLA's collective group modes
    (cross-replica without a channel; with one, cross-replica-and-partition, or flattened
    ids with `use_global_device_ids`); None when the groups differ in size or are unknown."""
    text = str(op.attr("replica_groups") or "{}").replace(" ", "")
    if text.startswith("["):  # iota form `[G,S]<=[...]`: G groups of S
        m = re.match(r"\[(\d+),(\d+)\]", text)
        if m is None:
            return None
        sizes = {int(m.group(2))}
    else:
        groups = re.findall(r"\{([\d,]*)\}", text[1:-1])
        sizes = {len([x for x in g.split(",") if x]) for g in groups}
    if len(sizes) > 1:
        return None
    n = sizes.pop() if sizes else None
    if op.attr("channel_id") is None:
        return n if n is not None else _module_int(op, "replica_count")
    if op.attr("use_global_device_ids"):
        return n  # flattened ids: the groups name devices (empty groups are invalid)
    partitions = _module_int(op, "num_partitions")
    return (n if n is not None else _module_int(op, "replica_count")) * partitions


class AllGatherOfBroadcast(Simplification):
    """`all-gather(broadcast(c)) -> broadcast(c)` of the gathered shape (c a scalar
    constant: every participant contributes the same block of c)."""

    OPCODES = ("all-gather",)

    def rewrite(self, op: HloOp):
        if not _single_array(op) or broadcast_constant(op.operands[0]) is None:
            return None
        c = src(op.operands[0], "broadcast").operands[0]  # type: ignore[union-attr]
        return self.new("broadcast", [c], op.shape, {"dimensions": ()}, like=op)


class AllToAllOfBroadcast(Simplification):
    """`all-to-all(broadcast(c)) -> broadcast(c)` (c a scalar constant: every block that
    is sent and received holds c)."""

    OPCODES = ("all-to-all",)

    def rewrite(self, op: HloOp):
        if not _single_array(op) or broadcast_constant(op.operands[0]) is None:
            return None
        return op.operands[0]


class AllReduceMinMaxOfBroadcast(Simplification):
    """`all-reduce(broadcast(c)), to_apply=max|min -> broadcast(c)`, and likewise for
    `reduce-scatter` (c a scalar constant: the min or max of equal values is that value)."""

    OPCODES = ("all-reduce", "reduce-scatter")

    def rewrite(self, op: HloOp):
        if not _single_array(op) or broadcast_constant(op.operands[0]) is None:
            return None
        if reducer_opcode(op) not in ("maximum", "minimum"):
            return None
        c = src(op.operands[0], "broadcast").operands[0]  # type: ignore[union-attr]
        return self.new("broadcast", [c], op.shape, {"dimensions": ()}, like=op)


class AllReduceSumOfBroadcast(Simplification):
    """`all-reduce(broadcast(c)), to_apply=add -> broadcast(c * n)`, and likewise for
    `reduce-scatter`, n the size of each replica group (all groups of one size; integers
    wrap as the sum does; for floats `c * n` rounds once where the sum rounds n - 1 times,
    so floats need `enable-floats-are-real` unless n is 1)."""

    OPCODES = ("all-reduce", "reduce-scatter")

    def rewrite(self, op: HloOp):
        c = broadcast_constant(op.operands[0]) if _single_array(op) else None
        if c is None or reducer_opcode(op) != "add":
            return None
        t = array(op.shape).element_type  # type: ignore[union-attr]
        n = group_size(op)
        if n is None or not (is_integral(t) or is_float(t)) or t == "pred":
            return None
        if is_float(t) and n != 1 and not self.opts.floats_are_real:
            return None
        with np.errstate(over="ignore"):
            total = (c * np.asarray(n).astype(c.dtype)).astype(c.dtype)
        k = self.array_const(total, scalar(t))
        return self.new("broadcast", [k.result], op.shape, {"dimensions": ()}, like=op)


PATTERNS: tuple[type[Simplification], ...] = (
    AllGatherOfBroadcast, AllToAllOfBroadcast, AllReduceMinMaxOfBroadcast,
    AllReduceSumOfBroadcast,
)  # fmt: skip
"""This family's rewrites, in the order they fire."""
