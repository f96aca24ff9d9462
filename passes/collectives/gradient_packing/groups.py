"""Which all-reduces are gradients this pass may rewrite, and their device groups split by
host (XLA's BlueConnect shape: devices numbered host by host, `gpus_per_host` each)."""

from __future__ import annotations

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.passes.collectives.combine_utils import reduction_kind, waited_on
from hlopass.passes.collectives.decomposers import explicit_groups, group_mode, module_int


def is_gradient(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """A single-array sum all-reduce (not of pred, not empty) without control dependencies either
    way, without a constrained layout, over groups of one size this pass can name: cross
    replica with one partition (replica ids are device ids) or flattened device ids."""
    if op.OPCODE != "all-reduce" or len(op.operands) != 1 or op.attr("constrain_layout"):
        return False
    shape = op.shape
    if not isinstance(shape, ArrayShape) or shape.element_type == "pred" or not shape.num_elements:
        return False
    if op.attr("control-predecessors") or op.inst_name in waited_on(op):
        return False
    if reduction_kind(op, comps) != "sum":
        return False
    groups = device_groups(op)
    return groups is not None and len({len(g) for g in groups}) == 1 and len(groups[0]) > 1


def device_groups(op: HloOp) -> list[list[int]] | None:
    """The groups of device ids, `{}` expanded; None for a mode left alone."""
    mode = group_mode(op)
    groups = explicit_groups(op)
    if mode == "flattened-id":
        return groups or None
    if mode is None or module_int(op, "num_partitions") != 1:
        return None
    return groups or [list(range(module_int(op, "replica_count")))]


def split_by_host(groups: list[list[int]], gpus_per_host: int
                  ) -> tuple[list[list[int]], list[list[int]]] | None:  # fmt: skip
    """(groups inside each host, groups across hosts) of a hierarchical all-reduce: each
    group's devices on one host, in group order, and the devices at the same place of
    their host's part; None when some group sits on one host or hosts hold unequal parts."""
    intra: list[list[int]] = []
    inter: list[list[int]] = []
    for g in groups:
        parts: dict[int, list[int]] = {}
        for d in g:
            parts.setdefault(d // gpus_per_host, []).append(d)
        rows = list(parts.values())
        if len(rows) < 2 or len({len(r) for r in rows}) != 1:
            return None
        intra.extend(rows)
        inter.extend([r[k] for r in rows] for k in range(len(rows[0])))
    return intra, inter
