"""Several devices running one program: `evaluate(..., replicas=R, partitions=P)` runs
R x P instances of it, one thread each. Device d is replica d // P, partition d % P (XLA's
default device assignment, `arange(R * P).reshape(R, P)`).

Collectives meet at a rendezvous of the devices taking part, keyed by the instruction, by
how many times this device has reached it before (a collective in a loop meets once per
iteration) and by the participants: groups that do not overlap meet apart, so devices may
take different paths as long as each group reaches its collectives in the same order, as
XLA requires. A device that fails breaks every rendezvous; a device that ends breaks those
still waiting for it, so a program whose devices disagree stops with one error instead of
hanging. Send and recv go through mailboxes keyed by channel, sender and receiver.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlopass.errors import HloInputError

_LOCAL = threading.local()
# a rendezvous nobody reaches means the devices took different paths (a deadlock in XLA)
_WAIT_S = 600.0


@dataclass
class _Meeting:
    participants: tuple[int, ...]
    barrier: threading.Barrier
    slots: dict[int, Any] = field(default_factory=dict)
    left: int = 0
    folded: list[Any] = field(default_factory=list)  # meet_folded's result, once computed
    fold_lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class _World:
    replicas: int
    partitions: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    meetings: dict[tuple, _Meeting] = field(default_factory=dict)
    mail: dict[tuple[int, int, int], deque] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)
    failed: bool = False
    # devices blocked at a rendezvous or recv nothing can complete yet, and the recvs
    waiting: int = 0
    receiving: set[tuple[int, int, int]] = field(default_factory=set)
    deadlock: bool = False

    def __post_init__(self) -> None:
        self.posted = threading.Condition(self.lock)

    def block(self) -> None:
        """One more device waits (caller holds the lock); when every device still running
        waits, none can ever wake the others: a deadlock, broken at once."""
        self.waiting += 1
        if self.waiting == self.replicas * self.partitions - len(self.finished):
            self.deadlock = self.failed = True
            self.stop_waiting_for(None)

    def stop_waiting_for(self, device: int | None) -> None:
        """Break the rendezvous that can no longer complete (caller holds the lock): all of
        them after a failure, else those `device` takes part in but has not joined."""
        for m in self.meetings.values():
            if device is None or (device in m.participants and device not in m.slots):
                m.barrier.abort()
        self.posted.notify_all()


class NoRendezvous(threading.BrokenBarrierError):
    """A rendezvous or a recv that cannot complete: a device failed, or ended first."""


def _world() -> _World | None:
    return getattr(_LOCAL, "world", None)


def replica_count() -> int:
    world = _world()
    return 1 if world is None else world.replicas


def partition_count() -> int:
    world = _world()
    return 1 if world is None else world.partitions


def device_id() -> int:
    return getattr(_LOCAL, "device", 0)


def replica_id() -> int:
    return device_id() // partition_count()


def partition_id() -> int:
    return device_id() % partition_count()


def device_state(name: str) -> dict:
    """A dict of this device's own, by `name`, fresh for each multi-device run (a
    single-device run keeps the calling thread's)."""
    state: dict[str, dict] = _LOCAL.__dict__.setdefault("state", {})
    return state.setdefault(name, {})


def _occurrence(key: tuple) -> int:
    """How many times this device has reached `key` before (0 the first time)."""
    seen: dict[tuple, int] = _LOCAL.seen
    n = seen.get(key, 0)
    seen[key] = n + 1
    return n


def meet(site: Any, participants: Sequence[int], value: Any) -> list[Any]:
    """Every participant's `value`, in the order of `participants` (device ids, this
    device's among them), once all of them have reached the same `site`."""
    return _meet(site, participants, value, None)


def meet_folded(
    site: Any, participants: Sequence[int], value: Any, fold: Callable[[list[Any]], Any]
) -> Any:
    """`fold` of what `meet` returns, computed by the first participant to get there and
    handed to every one (the same object): a group's reduction is the same on each of its
    members, so 8 devices reduce 16 MiB once, not 8 times."""
    return _meet(site, participants, value, fold)


def _meet(site: Any, participants: Sequence[int], value: Any, fold: Any) -> Any:
    world = _world()
    if world is None or len(participants) == 1:
        return [value] if fold is None else fold([value])
    who = tuple(participants)
    key = (site, who, _occurrence((site, who)))
    with world.lock:
        m = world.meetings.get(key)
        if m is None:
            m = world.meetings[key] = _Meeting(who, threading.Barrier(len(who)))
            if world.failed or any(d in world.finished for d in who):
                m.barrier.abort()
        m.slots[device_id()] = value
        if len(m.slots) < len(who):
            world.block()
        else:  # the last to arrive releases the others
            world.waiting -= len(who) - 1
    m.barrier.wait(_WAIT_S)
    everything = [m.slots[d] for d in who]
    with world.lock:
        m.left += 1
        if m.left == len(who):
            del world.meetings[key]
    if fold is None:
        return everything
    with m.fold_lock:  # a fold that raises leaves it to the next one, which raises too
        if not m.folded:
            m.folded.append(fold(everything))
    return m.folded[0]


def post(channel: int, target: int, value: Any) -> None:
    """Send `value` from this device to device `target` on `channel` (does not wait)."""
    world = _world()
    if world is None:
        raise HloInputError(f"error: a send to device {target} needs several devices")
    with world.lock:
        box = (channel, device_id(), target)
        world.mail.setdefault(box, deque()).append(value)
        if box in world.receiving:  # its receiver waits for it
            world.receiving.discard(box)
            world.waiting -= 1
        world.posted.notify_all()


def collect(channel: int, source: int) -> Any:
    """The next value device `source` sent this device on `channel` (waits for it)."""
    world = _world()
    if world is None:
        raise HloInputError(f"error: a recv from device {source} needs several devices")
    box = (channel, source, device_id())

    def ready() -> bool:
        return bool(world.mail.get(box)) or world.failed or source in world.finished

    with world.lock:
        if not world.mail.get(box) and not ready():
            world.receiving.add(box)
            world.block()
        if not world.posted.wait_for(ready, _WAIT_S) or not world.mail.get(box):
            raise NoRendezvous(f"no send from device {source} on channel {channel}")
        return world.mail[box].popleft()


def run_devices(replicas: int, partitions: int, body: Callable[[int], Any]) -> list[Any]:
    """`body(device)` for devices 0..R*P-1, one thread each, sharing one world."""
    if replicas < 1 or partitions < 1:
        raise HloInputError(
            f"error: replicas and partitions must be at least 1, got {replicas} x {partitions}"
        )
    n = replicas * partitions
    world = _World(replicas, partitions)
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def run(d: int) -> None:
        _LOCAL.world, _LOCAL.device, _LOCAL.seen, _LOCAL.state = world, d, {}, {}
        try:
            results[d] = body(d)
            with world.lock:
                world.finished.add(d)
                world.stop_waiting_for(d)
                if world.waiting and world.waiting == n - len(world.finished):
                    world.deadlock = world.failed = True
                    world.stop_waiting_for(None)
        except BaseException as e:  # reported below, from the first device that failed
            errors[d] = e
            with world.lock:
                world.failed = True
                world.stop_waiting_for(None)
        finally:
            _LOCAL.world = None

    threads = [threading.Thread(target=run, args=(d,), name=f"device-{d}") for d in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((e for e in errors if e is not None and not _broken(e)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        if _broken(first):
            why = str(first) or "a device ended or failed before its peers met it"
            if world.deadlock:
                why = "every device waits at a collective or recv the others never reach"
            raise HloInputError(
                f"error: the devices reached different collectives (no rendezvous): {why}"
            )
        raise first
    return results


def _broken(e: BaseException) -> bool:
    return isinstance(e, threading.BrokenBarrierError)


_IOTA = re.compile(r"\[([\d,]*)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def listed_groups(raw: Any) -> list[list[int]]:
    """The groups a `replica_groups` attribute lists: [] for `{}` (every participant, as
    the group mode counts them); the iota form `[G,S]<=[dims]T(perm)` is iota(dims)
    transposed by perm, in G rows of S."""
    text = str(getattr(raw, "text", raw) or "{}").replace(" ", "")
    m = _IOTA.fullmatch(text)
    if m:
        shape, dims = _ints(m.group(1)), _ints(m.group(2))
        ids = np.arange(int(np.prod(dims))).reshape(dims)
        if m.group(3):
            ids = ids.transpose(_ints(m.group(3)))
        return ids.reshape(shape).tolist()
    groups = [_ints(g) for g in re.findall(r"\{([\d,]*)\}", text[1:-1])]
    return [g for g in groups if g]


def replica_groups(raw: Any, n: int) -> list[list[int]]:
    """The groups of a `replica_groups` attribute, `{}` being one group of all `n`."""
    return listed_groups(raw) or [list(range(n))]


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
