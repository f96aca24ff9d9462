"""`latency-hiding-scheduler` (XLA's LatencyHidingScheduler, much simplified): each
computation's instructions reordered so that async collectives overlap independent compute.

A start is issued as early as its operands allow and its done sinks to just before its first
user, with at most `parallel-collective-overlap-limit` async collectives of a kind in flight;
competing starts are ordered by the cost model's estimates (`hlopass.cost.schedule_steps`,
the two-stream model whose critical path `Estimate.step_us` prices). Data and control
dependencies are kept: the result is a topological order, so every value is unchanged.
What the list scheduler leaves out of XLA's is in `list_scheduler`.

Fusion computations and the computations async ops run are left alone (their instructions
run as one kernel, or on the async stream, in whatever order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.cost import schedule_steps
from hlopass.dialects.hlo import ATTR_CLASSES, ComputationOp, HloOp, computations
from hlopass.passes.collectives.combine_utils import reorder_block
from hlopass.passes.collectives.decomposers import async_computations
from hlopass.rewriting import (
    HloModulePass,
    TraceHook,
    comps_by_name,
    forget_cached_state,
    fusion_computations,
)

from .list_scheduler import Node, schedule

ASYNC_OPCODES = (
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done", "async-start", "async-done",
)  # fmt: skip


def collective_kind(op: HloOp, comps: dict[str, ComputationOp]) -> str:
    """The collective an async start runs: `all-reduce` for `all-reduce-start`, the wrapped
    computation's root opcode for an `async-start`."""
    if op.OPCODE != "async-start":
        return op.OPCODE.removesuffix("-start")
    comp = comps.get(str(op.attr("calls")))
    return comp.root.OPCODE if comp is not None else "async"


def computation_nodes(comp: ComputationOp, comps: dict[str, ComputationOp], device: str,
                      topology: Any) -> list[Node]:  # fmt: skip
    """`comp`'s instructions as the scheduler's `Node`s: the cost model's times and streams,
    operands and control predecessors as dependencies."""
    ops = {op.inst_name: op for op in comp.instructions}
    out = []
    for step in schedule_steps(comp, device, topology):
        op = ops[step.name]
        deps = step.deps + tuple(op.attr("control-predecessors") or ())
        kind = ""
        if step.stream == "async":
            kind = collective_kind(op, comps)
        elif step.stream == "done" and step.deps:
            kind = step.deps[0]  # its start
        out.append(Node(step.name, step.us, step.stream, deps, kind))
    return out


@dataclass(frozen=True)
class LatencyHidingSchedulerPass(HloModulePass):
    """Reorder each computation so async collective starts come early and their dones
    late, overlapping the transfers with independent compute."""

    name: ClassVar[str] = "latency-hiding-scheduler"
    # what it moves (every other instruction moves only to make room)
    OPCODES: ClassVar[tuple[str, ...]] = ASYNC_OPCODES

    parallel_collective_overlap_limit: int = 1
    """XLA's xla_gpu_experimental_parallel_collective_overlap_limit: at most this many async
    collectives of one kind in flight at once."""
    device: str = "h100_sxm"
    """The GPU whose cost model estimates the instructions' and transfers' times."""
    topology: str = "auto"
    """The links collectives are priced on (`1x8`, `2x8`, ...; `auto`: 1x8 on several
    devices)."""

    def __post_init__(self) -> None:
        if self.parallel_collective_overlap_limit < 1:
            raise ValueError("parallel-collective-overlap-limit must be at least 1")

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        comps = comps_by_name(module)
        skip = fusion_computations(module) | async_computations(module)
        changed = seen = False
        for comp in computations(module):
            if comp.comp_name in skip:
                continue
            ops = list(comp.instructions)
            if not any(op.OPCODE in ASYNC_OPCODES for op in ops):
                continue  # nothing to overlap: the order stays as it is
            seen = True
            nodes = computation_nodes(comp, comps, self.device, self.topology)
            names = schedule(nodes, comp.root.inst_name, self.parallel_collective_overlap_limit)
            if names == [op.inst_name for op in ops]:
                continue
            by_name = {op.inst_name: op for op in ops}
            reorder_block(comp, [by_name[n] for n in names])
            changed = True
        if seen and not _scheduled(module):
            # as XLA's scheduler, the result is a scheduled module: printed (and parsed
            # back) in this order rather than in post order
            module.attributes["hlo.is_scheduled"] = ATTR_CLASSES["bool"].new(True)
            changed = True
        if changed:
            forget_cached_state(module)
        return changed


def _scheduled(module: ModuleOp) -> bool:
    attr = module.attributes.get("hlo.is_scheduled")
    return bool(attr is not None and attr.data)  # type: ignore[attr-defined]
