"""Step time of a computation: async collectives overlapped with the compute around them.

The instructions run in schedule (text) order. Kernels run one after another on one compute
stream; a collective runs on the communication stream. The step time is the critical path
of that two-stream schedule, not the sum of the kernel times:

* an async collective (`all-reduce-start` ... `all-reduce-done`, or an `async-start` of a
  computation holding a collective) is issued when the compute stream reaches its start and
  its operands are ready, then runs on the communication stream while the compute stream
  goes on; its `-done` blocks the compute stream until the transfer has finished, so only
  compute scheduled between start and done (and independent of the transfer) hides it;
* collectives share one communication stream, so several in flight queue behind one
  another: XLA's GPU latency-hiding scheduler allows one async collective of a kind in
  flight by default (`xla_gpu_experimental_parallel_collective_overlap_limit` = 1);
* a synchronous collective holds both streams: nothing overlaps it;
* a `while`, `call` or `conditional` is one block on the compute stream (its kernels' serial
  time): overlap inside a loop body is not modelled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hlopass.cost.collectives import PRICED

ASYNC_DONE = frozenset({
    "all-reduce-done", "all-gather-done", "collective-permute-done", "async-done",
})  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One instruction as the schedule sees it."""

    name: str
    us: float  # its time on the stream it runs on
    stream: str  # "compute", "async" (a collective start), "done", "sync" or "free"
    deps: tuple[str, ...] = ()  # names of the instructions whose results it reads


def critical_path_us(steps: Sequence[Step]) -> float:
    """µs from the first instruction's start to the last one's end on the two streams."""
    finish: dict[str, float] = {}
    compute = comm = 0.0  # when each stream is next free
    for s in steps:
        ready = max((finish.get(d, 0.0) for d in s.deps), default=0.0)
        if s.stream == "free":  # no kernel: ready as soon as its operands are
            finish[s.name] = ready
        elif s.stream == "compute":
            compute = max(compute, ready) + s.us
            finish[s.name] = compute
        elif s.stream == "async":  # issued in order from the compute stream
            comm = max(comm, compute, ready) + s.us
            finish[s.name] = comm
        elif s.stream == "done":  # the compute stream waits for the transfer
            compute = max(compute, ready)
            finish[s.name] = compute
        else:  # "sync": both streams busy for its whole time
            compute = comm = max(compute, comm, ready) + s.us
            finish[s.name] = compute
    return max([compute, comm, *finish.values()])


def holds_collective(op: Any, comps: dict[str, Any]) -> bool:
    """An `async-start` whose computation runs a collective."""
    name = op.attr("calls")
    comp = comps.get(name) if isinstance(name, str) else None
    return comp is not None and any(i.opcode in PRICED for i in comp.instructions)


def stream_of(op: Any, comps: dict[str, Any], has_kernel: bool) -> str:
    opc = op.opcode
    if opc in ASYNC_DONE:
        return "done"
    if opc.endswith("-start") and (opc in PRICED or holds_collective(op, comps)):
        return "async"
    if opc in PRICED:
        return "sync"
    return "compute" if has_kernel else "free"


def computation_steps(comp: Any, comps: dict[str, Any],
                      op_us: Callable[[Any], float | None]) -> list[Step]:  # fmt: skip
    """The `Step`s of `comp`'s instructions; `op_us(op)` is an instruction's time (the
    sum of its kernel rows), None when it launches no kernel."""
    out = []
    for op in comp.instructions:
        us = op_us(op)
        deps = tuple(v.owner.inst_name for v in op.operands if hasattr(v.owner, "inst_name"))
        stream = stream_of(op, comps, us is not None)
        out.append(Step(op.inst_name, us or 0.0, stream, deps))
    return out
