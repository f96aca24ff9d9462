"""Several replicas of one program: `evaluate(..., replicas=N)` runs N program instances,
one thread each, and collectives exchange their operands at a rendezvous.

Every replica runs the same instruction sequence (XLA requires collectives to be reached
in the same order by all participants), so one exchange slot is enough: each replica puts
its value in its own slot, waits for all, reads every slot, and waits again before the
slots are reused. A replica that fails breaks the barrier so the others stop too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlopass.errors import HloInputError

_LOCAL = threading.local()
# a rendezvous nobody reaches means the replicas took different paths (a deadlock in XLA)
_WAIT_S = 600.0


@dataclass
class _World:
    n: int
    barrier: threading.Barrier
    slots: list[Any] = field(default_factory=list)


def replica_count() -> int:
    world = getattr(_LOCAL, "world", None)
    return 1 if world is None else world.n


def replica_id() -> int:
    return getattr(_LOCAL, "replica", 0)


def exchange(value: Any) -> list[Any]:
    """Every replica's `value`, indexed by replica id (this replica's alone when N = 1)."""
    world: _World | None = getattr(_LOCAL, "world", None)
    if world is None:
        return [value]
    world.slots[replica_id()] = value
    world.barrier.wait(_WAIT_S)
    everything = list(world.slots)
    world.barrier.wait(_WAIT_S)
    return everything


_IOTA = re.compile(r"\[([\d,]*)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def replica_groups(raw: Any, n: int) -> list[list[int]]:
    """The groups of a `replica_groups` attribute (`{}` is one group of all `n` replicas;
    the iota form `[G,S]<=[dims]T(perm)` lists iota(dims) transposed by perm, G rows)."""
    text = str(getattr(raw, "text", raw) or "{}").replace(" ", "")
    m = _IOTA.fullmatch(text)
    if m:
        shape, dims = _ints(m.group(1)), _ints(m.group(2))
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if m.group(3):
            ids = ids.transpose(_ints(m.group(3)))
        return ids.reshape(shape).tolist()
    groups = [_ints(g) for g in re.findall(r"\{([\d,]*)\}", text[1:-1])]
    groups = [g for g in groups if g]
    return groups or [list(range(n))]


def my_group(raw: Any) -> list[int]:
    """The replica ids of this replica's group, in group order."""
    n, me = replica_count(), replica_id()
    for g in replica_groups(raw, n):
        if me in g:
            return g
    return [me]  # a replica in no group takes part alone


def run_replicas(n: int, body: Callable[[int], Any]) -> list[Any]:
    """`body(replica)` for replicas 0..n-1 in n threads sharing one rendezvous."""
    if n < 1:
        raise HloInputError(f"replicas must be at least 1, got {n}")
    world = _World(n, threading.Barrier(n), [None] * n)
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def run(r: int) -> None:
        _LOCAL.world, _LOCAL.replica = world, r
        try:
            results[r] = body(r)
        except BaseException as e:  # reported below, from the first replica that failed
            errors[r] = e
            world.barrier.abort()
        finally:
            _LOCAL.world = None

    threads = [threading.Thread(target=run, args=(r,), name=f"replica-{r}") for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not _broken(e)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        if _broken(first):
            raise HloInputError("the replicas reached different collectives (no rendezvous)")
        raise first
    return results


def _broken(e: BaseException) -> bool:
    return isinstance(e, threading.BrokenBarrierError)


def per_replica(args: Sequence[Any], n: int) -> list[Sequence[Any]]:
    """The same arguments for each of `n` replicas."""
    return [args] * n


_GROUPED = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                      "ragged-all-to-all", "collective-broadcast", "all-reduce-start",
                      "all-gather-start"})  # fmt: skip


def replicas_needed(module: Any) -> int:
    """How many replicas the module's collectives name (its `replica_count` at least):
    the largest replica id in any group or permute pair, plus one, or for all-gather /
    reduce-scatter over all replicas (`{}`) the ratio of result to operand size."""
    from hlopass.dialects.hlo import computations

    attr = module.attributes.get("hlo.replica_count") if hasattr(module, "attributes") else None
    need = int(str(getattr(attr, "text", None) or _int_text(attr) or 1))
    for comp in computations(module):
        for op in comp.instructions:
            if op.opcode in _GROUPED:
                groups = replica_groups(op.attr("replica_groups"), 1)
                need = max(need, 1 + max((max(g) for g in groups if g), default=0))
                need = max(need, _gather_ratio(op))
            elif op.opcode in ("collective-permute", "collective-permute-start") and (
                op.attr("channel_id") is None  # with a channel the pairs name partitions
            ):
                pairs = op.attr("source_target_pairs") or ()
                need = max(need, 1 + max((max(int(s), int(t)) for s, t in pairs), default=0))
    return need


def _int_text(attr: Any) -> str | None:
    if attr is None:
        return None
    m = re.search(r"-?\d+", str(attr))
    return m.group(0) if m else None


def _gather_ratio(op: Any) -> int:
    if op.opcode not in ("all-gather", "reduce-scatter") or op.shape.is_tuple:
        return 1
    operand = op.operands[0].type.data
    if operand.is_tuple:
        return 1
    dims = op.attr("dimensions")
    d = int(dims[0]) if dims else 0
    a, b = operand.dims[d], op.shape.dims[d]
    return max(a, b) // max(1, min(a, b))
