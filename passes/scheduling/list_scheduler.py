"""A top-down list scheduler over the two-stream step model of `hlopass.cost.overlap`.

The scheduler walks a simulated clock of the compute stream and the communication stream
(the model `critical_path_us` prices) and places one ready instruction at a time, in this
order of preference (parameters and constants, which cost nothing, first as they stand):

1. an async collective start whose kind has fewer than `limit` collectives in flight (the
   most urgent first: the one whose done's first user comes earliest in the original order,
   then the longer transfer): collectives are issued as early as their operands allow;
2. a done whose transfer has already finished on the simulated clock, while a start of its
   kind waits for the slot it holds: retiring it costs no stall and frees the slot;
3. any other instruction, those that lead to a not yet issued start first (the earliest such
   start), then in the original order: the operands of the next collective are computed
   before compute that can hide it;
4. a done (the one whose transfer ends first): only when nothing else is ready, so dones
   sink to just before their first user.

The computation's root is placed last. Only data and control dependencies order the
result (every instruction after all its operands and control predecessors).

Left out of XLA's LatencyHidingScheduler (which schedules bottom-up, with resource and
memory-pressure tracking and many tie-breaking rules): memory pressure (live ranges are not
tracked: issuing starts early and sinking dones keeps buffers alive longer), the
selective/non-extendable resource kinds, scheduling annotations, send/recv pipelining,
async compute (only collectives run on the second stream) and re-runs with smaller limits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """One instruction as the scheduler sees it."""

    name: str
    us: float  # its time on the stream it runs on
    stream: str  # as `overlap.Step.stream`: "compute", "async", "done", "sync" or "free"
    deps: tuple[str, ...]  # operands and control predecessors (in this computation)
    kind: str = ""  # a start's collective opcode (its slot); a done's: its start's name


@dataclass
class _State:
    compute: float = 0.0  # when each stream is next free on the simulated clock
    comm: float = 0.0


def schedule(nodes: Sequence[Node], root: str | None, limit: int) -> list[str]:
    """The names of `nodes` in the scheduler's order (see the module's docstring)."""
    index = {n.name: i for i, n in enumerate(nodes)}
    by_name = {n.name: n for n in nodes}
    deps = {n.name: tuple(d for d in dict.fromkeys(n.deps) if d in index) for n in nodes}
    users: dict[str, list[str]] = {n.name: [] for n in nodes}
    for name, ds in deps.items():
        for d in ds:
            users[d].append(name)
    urgency = _urgency(nodes, index, users)
    feeds = _feeds_start(nodes, index, deps)
    waiting = {n.name: len(deps[n.name]) for n in nodes}
    ready = {n for n, k in waiting.items() if k == 0}
    unissued: dict[str, int] = {}
    for n in nodes:
        if n.stream == "async":
            unissued[n.kind] = unissued.get(n.kind, 0) + 1
    in_flight: dict[str, int] = {}
    finish: dict[str, float] = {}
    clock = _State()
    order: list[str] = []
    while ready:
        pick = _pick(ready, by_name, root, limit, in_flight, unissued, finish, clock,
                     urgency, feeds, index)  # fmt: skip
        ready.discard(pick)
        order.append(pick)
        node = by_name[pick]
        _advance(node, deps[pick], finish, clock)
        if node.stream == "async":
            in_flight[node.kind] = in_flight.get(node.kind, 0) + 1
            unissued[node.kind] -= 1
        elif node.stream == "done" and node.kind in by_name:
            kind = by_name[node.kind].kind
            in_flight[kind] = in_flight.get(kind, 1) - 1
        for u in users[pick]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.add(u)
    assert len(order) == len(nodes), "dependency cycle"
    return order


def _pick(ready: set[str], by_name: dict[str, Node], root: str | None, limit: int,
          in_flight: dict[str, int], unissued: dict[str, int], finish: dict[str, float],
          clock: _State, urgency: dict[str, float], feeds: dict[str, float],
          index: dict[str, int]) -> str:  # fmt: skip
    """The next instruction to place (the rules of the module's docstring, in order)."""
    if len(ready) > 1 and root in ready:
        ready = ready - {root}
    leaves = [n for n in ready if by_name[n].stream == "free" and not by_name[n].deps]
    if leaves:  # parameters and constants first, in their order: they cost nothing
        return min(leaves, key=lambda n: index[n])
    starts = [n for n in ready if by_name[n].stream == "async"]
    free = [n for n in starts if in_flight.get(by_name[n].kind, 0) < limit]
    if free:
        return min(free, key=lambda n: (urgency[n], -by_name[n].us, index[n]))
    dones = [n for n in ready if by_name[n].stream == "done"]
    retire = [
        n
        for n in dones
        if finish.get(by_name[n].kind, 0.0) <= clock.compute
        and unissued.get(kind := _kind_of_done(by_name, n), 0) > 0
        and in_flight.get(kind, 0) >= limit
    ]
    if retire:
        return min(retire, key=lambda n: index[n])
    other = [n for n in ready if by_name[n].stream not in ("async", "done")]
    if other:
        return min(other, key=lambda n: (feeds[n], index[n]))
    if dones:
        return min(dones, key=lambda n: (finish.get(by_name[n].kind, 0.0), index[n]))
    return min(ready, key=lambda n: index[n])  # starts waiting for a slot held elsewhere


def _kind_of_done(by_name: dict[str, Node], done: str) -> str:
    start = by_name.get(by_name[done].kind)
    return start.kind if start is not None else ""


def _advance(node: Node, deps: Sequence[str], finish: dict[str, float], clock: _State) -> None:
    """`critical_path_us`'s clock, one instruction on."""
    ready = max((finish.get(d, 0.0) for d in deps), default=0.0)
    if node.stream == "free":
        finish[node.name] = ready
    elif node.stream == "compute":
        clock.compute = max(clock.compute, ready) + node.us
        finish[node.name] = clock.compute
    elif node.stream == "async":
        clock.comm = max(clock.comm, clock.compute, ready) + node.us
        finish[node.name] = clock.comm
    elif node.stream == "done":
        clock.compute = max(clock.compute, ready)
        finish[node.name] = clock.compute
    else:
        clock.compute = clock.comm = max(clock.compute, clock.comm, ready) + node.us
        finish[node.name] = clock.compute


def _urgency(nodes: Sequence[Node], index: dict[str, int],
             users: dict[str, list[str]]) -> dict[str, float]:  # fmt: skip
    """Per start: the original position of the first user of its done(s)."""
    out: dict[str, float] = {}
    for n in nodes:
        if n.stream == "async":
            later = [u for d in users[n.name] for u in users[d]] or users[n.name]
            out[n.name] = min((index[u] for u in later), default=math.inf)
    return out


def _feeds_start(nodes: Sequence[Node], index: dict[str, int],
                 deps: dict[str, tuple[str, ...]]) -> dict[str, float]:  # fmt: skip
    """Per instruction: the original position of the earliest start that needs it (inf
    when none does)."""
    out = {n.name: math.inf for n in nodes}
    for n in reversed(nodes):  # users stand after their operands in the original order
        if n.stream == "async":
            out[n.name] = min(out[n.name], index[n.name])
        for d in deps[n.name]:
            out[d] = min(out[d], out[n.name])
    return out
