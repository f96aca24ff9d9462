"""Collectives on one replica (the interpreter runs one program instance).

With one participant per replica group every collective is a local operation: all-reduce,
all-gather, reduce-scatter, all-to-all and collective-broadcast return their operand
(reduced with itself once: XLA applies the combiner to the one contribution, i.e. returns
it), collective-permute copies the operand where replica 0 sends to itself and yields
zeros where nobody sends to it, and ragged-all-to-all copies its own ragged rows into the
output buffer. The `-start`/`-done` pairs do the same across the two instructions. A
module whose replica groups name more than one replica needs several program instances
and is reported as unsupported with that reason.
"""

from __future__ import annotations

import re

import numpy as np

from hlopass.interpreter.core import handler, unsupported
from hlopass.shape import TupleShape

_IOTA = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")


def _group_sizes(op) -> list[int]:
    raw = op.attr("replica_groups")
    text = getattr(raw, "text", raw) or "{}"
    text = str(text).strip()
    m = _IOTA.match(text)
    if m:
        return [int(m.group(2))] * int(m.group(1))
    inner = text.strip()[1:-1]
    groups = re.findall(r"\{([^{}]*)\}", inner)
    return [len([x for x in g.split(",") if x.strip()]) for g in groups]


def _single_replica(op) -> None:
    sizes = _group_sizes(op)
    if any(s > 1 for s in sizes):
        raise unsupported(op, f"replica groups of {max(sizes)} replicas (runs on one replica)")


def _local(op, args):
    _single_replica(op)
    return args[0] if len(args) == 1 else tuple(args)


@handler("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-broadcast")
def _collective(interp, op, args):
    out = _local(op, args)
    gathers = op.opcode in ("all-gather", "reduce-scatter") and not isinstance(out, tuple)
    if gathers and out.shape != tuple(op.shape.dims):
        raise unsupported(op, "operand and result shapes differ (more than one replica)")
    return out


@handler("all-reduce-start", "all-gather-start")
def _collective_start(interp, op, args):
    out = _local(op, args)
    if op.opcode == "all-gather-start" and isinstance(op.shape, TupleShape):
        return (out, out)  # (operand, result)
    return out


@handler("all-reduce-done", "all-gather-done")
def _collective_done(interp, op, args):
    (x,) = args
    if op.opcode == "all-gather-done" and isinstance(x, tuple) and len(x) == 2:
        return x[1]
    return x


def _permute(op, x):
    sources = [s for s, t in (op.attr("source_target_pairs") or ()) if t == 0]
    if not sources:
        return np.zeros_like(x)  # nobody sends to replica 0
    if sources != [0]:
        raise unsupported(op, f"replica 0 receives from replica {sources[0]}")
    return x.copy()


@handler("collective-permute")
def _collective_permute(interp, op, args):
    if len(args) != 1:
        raise unsupported(op, "in-place (buffer) form")
    return _permute(op, args[0])


@handler("collective-permute-start")
def _collective_permute_start(interp, op, args):
    if len(args) != 1:
        raise unsupported(op, "in-place (buffer) form")
    x = args[0]
    shape = op.shape
    if not isinstance(shape, TupleShape):  # the start's result is the permuted value itself
        return _permute(op, x)
    extra = [np.zeros(s.dims, np.uint32) for s in shape.elements[2:]]
    return (x, _permute(op, x), *extra)


@handler("collective-permute-done")
def _collective_permute_done(interp, op, args):
    return args[0][1] if isinstance(args[0], tuple) else args[0]


@handler("ragged-all-to-all")
def _ragged_all_to_all(interp, op, args):
    """Rows input[in_off[i] : +size[i]] go to output[out_off[i] : ...] of replica i; on one
    replica only i = 0 exists."""
    _single_replica(op)
    data, output, in_off, send, out_off, _recv = args
    out = output.copy()
    for i in range(in_off.reshape(-1).size):
        a, n, b = (int(v.reshape(-1)[i]) for v in (in_off, send, out_off))
        if n > 0:
            out[b : b + n] = data[a : a + n]
    return out
