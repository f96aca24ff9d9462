"""Collectives over the devices of `evaluate(..., replicas=R, partitions=P)`
(`hlopass.interpreter.replicas`; which devices take part: `hlopass.interpreter.groups`).

Each collective meets the devices of its group (in group order) and keeps what they
contribute: all-reduce folds the contributions with the combiner in group order, all-gather
concatenates them, reduce-scatter keeps its block of the reduction, all-to-all sends block
j of its operand (or operand j of the tuple form) to the j-th member, collective-broadcast
takes the group's first member's value, collective-permute receives from the device whose
`source_target_pairs` names it (zeros when none does), ragged-all-to-all moves the ragged
row ranges its offsets and sizes name. `-start`/`-done` pairs do the exchange at the start.
A group naming more devices than the run has is refused with the count it needs.
"""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.apply import apply_computation
from hlopass.interpreter.core import handler, unsupported
from hlopass.interpreter.groups import participants, peers
from hlopass.interpreter.replicas import (
    device_id,
    meet,
    meet_folded,
    partition_id,
    replica_id,
)
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, TupleShape


def _gathered(op, values) -> tuple[list[int], list]:
    """This device's group and each member's `values`, in group order."""
    group = participants(op)
    return group, meet(id(op), group, values)


def _reduce(interp, op, contributions: list[np.ndarray]) -> np.ndarray:
    acc = contributions[0]
    reducer = interp.comp(op.attr("to_apply"))
    root = reducer.root.shape
    # XLA's verifier lets a reducer of another type through (its code-motion tests build
    # bf16 all-reduces with f32 adds), but no backend defines the arithmetic: refuse it
    if isinstance(root, ArrayShape) and numpy_dtype(root.element_type) != acc.dtype:
        raise unsupported(
            op,
            f"its reducer {reducer.comp_name} adds {root.element_type}, the operand is "
            f"{np.dtype(acc.dtype).name}; XLA-CPU does not run this either",
        )
    for x in contributions[1:]:
        (acc,) = apply_computation(interp, op.attr("to_apply"), [acc, x])
    return np.asarray(acc).astype(contributions[0].dtype)


def _reduced(interp, op, args) -> list[np.ndarray]:
    """Each operand reduced over this device's group, once per group (`meet_folded`)."""

    def fold(members):
        return [_reduce(interp, op, [m[i] for m in members]) for i in range(len(args))]

    return meet_folded(id(op), participants(op), args, fold)


def _all_reduce(interp, op, args):
    out = _reduced(interp, op, args)
    return out[0] if len(out) == 1 else tuple(out)


def _dim(op) -> int:
    dims = op.attr("dimensions")
    return int(dims[0]) if dims else 0


def _all_gather(interp, op, args):
    _, members = _gathered(op, args)
    d = _dim(op)
    out = [np.concatenate([m[i] for m in members], axis=d) for i in range(len(args))]
    return out[0] if len(out) == 1 else tuple(out)


def _reduce_scatter(interp, op, args):
    group = participants(op)
    d, k = _dim(op), group.index(device_id())
    out = []
    for total in _reduced(interp, op, args):
        out.append(np.array_split(total, len(group), axis=d)[k].copy())
    return out[0] if len(out) == 1 else tuple(out)


def _all_to_all(interp, op, args):
    group = participants(op)
    k = group.index(device_id())
    if op.attr("dimensions"):  # array form: block j of the split dimension goes to member j
        d = _dim(op)
        blocks = [np.array_split(a, len(group), axis=d) for a in args]
        members = meet(id(op), group, blocks)
        out = [np.concatenate([m[i][k] for m in members], axis=d) for i in range(len(args))]
        return out[0] if len(out) == 1 else tuple(out)
    if len(args) != len(group):  # tuple form: operand j goes to member j
        raise unsupported(op, f"the tuple form sends one operand to each member: "
                              f"{len(args)} operands, groups of {len(group)}")  # fmt: skip
    members = meet(id(op), group, args)
    return tuple(np.array(m[k]) for m in members)


def _broadcast(interp, op, args):
    _, members = _gathered(op, args)
    return members[0][0].copy() if len(args) == 1 else tuple(x.copy() for x in members[0])


_COLLECTIVES = {"all-reduce": _all_reduce, "all-gather": _all_gather,
                "reduce-scatter": _reduce_scatter, "all-to-all": _all_to_all,
                "collective-broadcast": _broadcast}  # fmt: skip


@handler(*_COLLECTIVES)
def _collective(interp, op, args):
    out = _COLLECTIVES[op.opcode](interp, op, args)
    _check_shape(op, out)
    return out


def _check_shape(op, out) -> None:
    """With `replica_groups={}` the group is every replica (or partition): on too few or
    too many, all-gather and reduce-scatter give the wrong shape; say which group size
    the shapes imply."""
    shape = op.shape
    if isinstance(shape, TupleShape) or isinstance(out, tuple):
        return
    if out.shape != tuple(shape.dims):
        d, group = _dim(op), len(participants(op))
        operand = op.operands[0].type.data.dims[d]
        want = max(operand, shape.dims[d]) // max(1, min(operand, shape.dims[d]))
        raise unsupported(op, f"operand and result shapes imply groups of {want} devices, "
                              f"the run's are of {group}")  # fmt: skip


@handler("all-reduce-start", "all-gather-start")
def _collective_start(interp, op, args):
    out = _COLLECTIVES[op.opcode.removesuffix("-start")](interp, op, args)
    if op.opcode == "all-gather-start" and isinstance(op.shape, TupleShape):
        operands = args[0] if len(args) == 1 else tuple(args)
        return (operands, out)  # (operand, result)
    return out


@handler("all-reduce-done", "all-gather-done")
def _collective_done(interp, op, args):
    (x,) = args
    if op.opcode == "all-gather-done" and isinstance(x, tuple) and len(x) == 2:
        return x[1]
    return x


def _permute(op, x):
    """`x` sent to this device's targets; what its source sent (zeros when none does)."""
    pairs = [(int(s), int(t)) for s, t in (op.attr("source_target_pairs") or ())]
    devices, _, sources = peers(op, pairs)
    # every device of the domain runs the permute, so all of them meet
    everything = meet(id(op), devices, x)
    if not sources:
        return np.zeros_like(x)  # nobody sends to this device
    return np.array(everything[devices.index(sources[0])])


@handler("collective-permute")
def _collective_permute(interp, op, args):
    if op.attr("slice_sizes") is not None or any(isinstance(a, tuple) for a in args):
        raise unsupported(op, "in-place (buffer) form")
    if len(args) > 1:  # combined: each operand permuted alike
        return tuple(_permute(op, a) for a in args)
    return _permute(op, args[0])


@handler("collective-permute-start")
def _collective_permute_start(interp, op, args):
    if op.attr("slice_sizes") is not None or any(isinstance(a, tuple) for a in args):
        raise unsupported(op, "in-place (buffer) form")
    shape = op.shape
    if not isinstance(shape, TupleShape):  # the start's result is the permuted value itself
        return _permute(op, args[0])
    # (operands, results[, the u32 context words XLA keeps beside the buffers]); combined:
    # ((operands...), (each permuted alike...))
    extra = [np.zeros((), np.uint32) for _ in shape.elements[2:]]
    if len(args) > 1:
        return (tuple(args), tuple(_permute(op, a) for a in args), *extra)
    return (args[0], _permute(op, args[0]), *extra)


@handler("collective-permute-done")
def _collective_permute_done(interp, op, args):
    return args[0][1] if isinstance(args[0], tuple) else args[0]


@handler("ragged-all-to-all")
def _ragged_all_to_all(interp, op, args):
    """Sender s puts its rows input[in_off[j] : +send[j]] at output[out_off[j] :] of its
    group's j-th member (offsets and sizes hold one entry per member)."""
    group, members = _gathered(op, args[:1] + args[2:5])
    k = group.index(device_id())
    out = args[1].copy()
    for data, in_off, send, out_off in members:
        # offsets and sizes are [members] or [members, updates per member]: row k is ours
        rows = [v.reshape(len(group), -1)[k] for v in (in_off, send, out_off)]
        for a, n, b in zip(*(r.astype(np.int64).tolist() for r in rows), strict=True):
            # rows that fall outside either buffer are dropped (out-of-range offsets and
            # sizes are the program's error; the rows that do fit still move)
            n = min(n, len(data) - a, len(out) - b) if a >= 0 and b >= 0 else 0
            if n > 0:
                out[b : b + n] = data[a : a + n]
    return out


@handler("replica-id")
def _replica_id(interp, op, args):
    return np.array(replica_id(), np.uint32)


@handler("partition-id")
def _partition_id(interp, op, args):
    return np.array(partition_id(), np.uint32)
