"""Which devices a collective runs over: XLA's four group modes (`collective_ops_utils.cc`,
GetCollectiveOpGroupMode and GetParticipatingDevices).

The mode follows from `channel_id` and, for the all-reduce and all-gather families,
`use_global_device_ids`:

    no channel_id                          cross-replica: groups of replica ids, within
                                           this device's partition
    channel_id, no use_global_device_ids   cross-partition (all-to-all, collective-permute,
                                           collective-broadcast, ragged-all-to-all, send and
                                           recv): groups of partition ids, within this replica
    channel_id, use_global_device_ids=false  cross-replica-and-partition: groups of replica
                                           ids, each with every partition of its replicas
    channel_id, use_global_device_ids=true   flattened id: groups of device ids
                                           (replica * partitions + partition)

Empty `replica_groups` is one group of every replica (or partition); listed groups must
hold each id of the mode once (XLA's verifier: a device in no group is an error).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from hlopass.errors import HloInputError
from hlopass.interpreter.core import unsupported
from hlopass.interpreter.replicas import (
    device_id,
    listed_groups,
    partition_count,
    partition_id,
    replica_count,
    replica_id,
)


class Mode(Enum):
    CROSS_REPLICA = "cross-replica"
    CROSS_PARTITION = "cross-partition"
    CROSS_REPLICA_AND_PARTITION = "cross-replica-and-partition"
    FLATTENED_ID = "flattened-id"


# the collectives whose mode also depends on use_global_device_ids (XLA's all-gather and
# all-reduce instruction classes; reduce-scatter is one of the latter)
_GLOBAL_IDS = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter", "all-gather",
                         "all-gather-start"})  # fmt: skip


def group_mode(op: Any) -> Mode:
    # send and recv carry channel_id=0 when they have none (XLA's P2P config tests > 0)
    if not op.attr("channel_id"):
        if op.attr("use_global_device_ids"):
            raise HloInputError(
                f"error: instruction {op.inst_name}: use_global_device_ids=true needs a "
                "channel_id (XLA refuses it)"
            )
        return Mode.CROSS_REPLICA
    if op.opcode not in _GLOBAL_IDS:
        return Mode.CROSS_PARTITION
    return Mode.FLATTENED_ID if op.attr("use_global_device_ids") else (
        Mode.CROSS_REPLICA_AND_PARTITION
    )  # fmt: skip


def participants(op: Any) -> list[int]:
    """The device ids of this device's group for the collective `op`, in group order (the
    order its contributions are combined and concatenated in)."""
    mode = group_mode(op)
    groups = listed_groups(op.attr("replica_groups"))
    n_r, n_p = replica_count(), partition_count()
    r, p = replica_id(), partition_id()
    if mode is Mode.CROSS_PARTITION:
        return [r * n_p + q for q in _my_group(op, groups, p, n_p, "partition")]
    if mode is Mode.FLATTENED_ID:
        if not groups:
            raise HloInputError(
                f"error: instruction {op.inst_name}: use_global_device_ids=true needs "
                "replica_groups listing the devices (XLA refuses {})"
            )
        return _my_group(op, groups, device_id(), n_r * n_p, "device")
    replicas = _my_group(op, groups, r, n_r, "replica")
    if mode is Mode.CROSS_REPLICA:
        return [i * n_p + p for i in replicas]
    return [i * n_p + q for i in replicas for q in range(n_p)]


def _my_group(op: Any, groups: list[list[int]], me: int, count: int, what: str) -> list[int]:
    """The listed group holding `me` (all `count` ids when none are listed), every id
    checked to be below `count`."""
    if not groups:
        return list(range(count))
    need = 1 + max(max(g) for g in groups)
    if need > count:
        size = max(len(g) for g in groups)
        raise unsupported(op, f"replica groups of {size} {what}s name {what} {need - 1}, the "
                              f"run has {count} (evaluate with {_flag(what)}={need} or more)")  # fmt: skip
    listed = sorted(i for g in groups for i in g)
    if listed != list(range(len(listed))) or (count > 1 and len(listed) != count):
        # XLA's verifier: the groups hold each of the ids 0..count-1 once
        raise HloInputError(
            f"error: instruction {op.inst_name}: replica groups must hold each of {count} "
            f"{what} ids once, they hold {len(listed)} ids {_brief(listed)}"
        )
    for g in groups:
        if me in g:
            return g
    raise HloInputError(
        f"error: instruction {op.inst_name}: {what} {me} is in none of its replica groups"
    )


def _brief(ids: list[int]) -> str:
    return "{" + ",".join(map(str, ids[:16])) + (",..." if len(ids) > 16 else "") + "}"


def _flag(what: str) -> str:
    return {"replica": "replicas", "partition": "partitions"}.get(what, "replicas x partitions")


def domain(op: Any) -> tuple[list[int], int, int]:
    """For a point-to-point collective (collective-permute, send, recv): the devices its
    source/target ids index (this partition's replicas, or with a channel this replica's
    partitions), and this device's own id among them and their count."""
    n_p = partition_count()
    r, p = replica_id(), partition_id()
    if group_mode(op) is Mode.CROSS_PARTITION:
        return [r * n_p + q for q in range(n_p)], p, n_p
    n_r = replica_count()
    return [i * n_p + p for i in range(n_r)], r, n_r


def peers(op: Any, pairs: list[tuple[int, int]]) -> tuple[list[int], list[int], list[int]]:
    """The point-to-point domain's devices, and the device ids this device sends to and
    receives from under `pairs` (ids within the domain)."""
    devices, me, count = domain(op)
    need = 1 + max((max(s, t) for s, t in pairs), default=0)
    if need > count:
        what = "partition" if group_mode(op) is Mode.CROSS_PARTITION else "replica"
        raise unsupported(op, f"source_target_pairs name {need} {what}s, the run has "
                              f"{count} (evaluate with {_flag(what)}={need} or more)")  # fmt: skip
    targets = [devices[t] for s, t in pairs if s == me]
    sources = [devices[s] for s, t in pairs if t == me]
    return devices, targets, sources
