"""Analytical GPU cost model for HLO: work counts (XLA's HloCostAnalysis conventions) and
per-kernel time estimates on a `DeviceSpec`.

    >>> from hlopass.cost import estimate, rank, estimate_group
    >>> est = estimate(module, "h100_sxm")       # module, computation, HLO text or path
    >>> print(est)                               # per-kernel table
    >>> est.time_us, est.totals
    >>> est.step_us            # async collectives overlapped with compute (overlap.py)
    >>> rank([module_a, module_b], "h100_sxm")  # [(index, time_us), ...] fastest first
    >>> estimate_group([producer, consumer], "h100_sxm").time_us   # a candidate fusion

Each call analyses its module afresh (`analysis.ModuleCostAnalysis`): fused computations
are analysed once per call and device launch limits (SM count, threads per SM: the launch
grid XLA's emitters pick depends on them), so a module edited in place needs nothing
cleared; `estimate_group` prices a set of instructions as one fused kernel without building
the fusion, for fusion passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hlopass.cost.analysis import ModuleCostAnalysis, module_of
from hlopass.cost.collectives import resolve_topology
from hlopass.cost.counts import Work
from hlopass.cost.devices import DEVICES, DeviceSpec, get_device
from hlopass.cost.hlo_cost_analysis import XlaCostAnalysis, xla_cost
from hlopass.cost.model import (
    Estimate,
    KernelRow,
    KernelWork,
    kernel_time,
    op_kernels,
)
from hlopass.cost.overlap import Step, computation_steps, critical_path_us

__all__ = [
    "DEVICES", "DeviceSpec", "Estimate", "KernelRow", "KernelWork", "Work", "XlaCostAnalysis",
    "Step", "clear_cache", "critical_path_us", "estimate", "estimate_group", "get_device",
    "group_work", "rank", "schedule_steps", "xla_cost",
]  # fmt: skip


def clear_cache() -> None:
    """Nothing to clear: the cost model keeps no analysis between calls (kept so that code
    written for the earlier per-module cache still runs)."""


def _load(x: Any) -> Any:
    if isinstance(x, Path) or (isinstance(x, str) and "\n" not in x and Path(x).is_file()):
        import hlopass
        from hlopass.commands.cli import read_input  # one line for unreadable or non-UTF-8 files

        return hlopass.parse_hlo(read_input(str(x)), str(x))
    if isinstance(x, str):
        import hlopass

        return hlopass.parse_hlo(x)
    return x


def estimate(module_or_computation: Any, device: str | DeviceSpec = "h100_sxm",
             topology: Any = "auto") -> Estimate:  # fmt: skip
    """Per-kernel estimate of a module (its entry computation) or of one computation.
    `topology` prices collectives on links (`collectives.py`): "1x8", "2x8", a
    `topology.Topology`, "auto" (1x8 for a module on more than one device) or None (a
    collective costs as a local copy)."""
    dev, comp, per_op, steps = _priced(module_or_computation, device, topology)
    kernels = [r for rows in per_op.values() for r in rows]
    return Estimate(dev.name, kernels, critical_path_us(steps))


def schedule_steps(computation: Any, device: str | DeviceSpec = "h100_sxm",
                   topology: Any = "auto") -> list[Step]:  # fmt: skip
    """One computation's instructions as the two-stream step model sees them (`overlap.Step`:
    time, stream, operands), in its order: what a scheduler reorders to shorten
    `critical_path_us`."""
    return _priced(computation, device, topology)[3]


def _priced(x: Any, device: str | DeviceSpec, topology: Any) -> tuple[Any, Any, Any, list[Step]]:
    from hlopass.dialects import hlo

    dev = get_device(device)
    x = _load(x)
    if isinstance(x, hlo.ComputationOp):
        module, comp = module_of(x), x
    else:
        module, comp = x, hlo.entry_computation(x)
    analysis = ModuleCostAnalysis(module)
    an = analysis.analyzer
    if not an.comps:
        an.comps[comp.comp_name] = comp
    an.topology = resolve_topology(topology, module, dev.name)
    per_op = {op.inst_name: op_kernels(op, an.comps, dev, an, 1, analysis.kernels)
              for op in comp.instructions}  # fmt: skip
    steps = computation_steps(comp, an.comps, lambda op: _rows_us(per_op[op.inst_name]))
    return dev, comp, per_op, steps


def _rows_us(rows: list[KernelRow]) -> float | None:
    return sum(r.time_us * r.count for r in rows) if rows else None


def group_work(instructions: list[Any], device: str | DeviceSpec = "h100_sxm") -> KernelWork:
    """Work of `instructions` (of one computation) as one fused kernel; only the launch grid
    (blocks, threads per block) depends on `device`."""
    instructions = list(instructions)
    if not instructions:
        return KernelWork()
    an = ModuleCostAnalysis.of_op(instructions[0]).analyzer
    return an.group_work(instructions, dev=get_device(device))


def estimate_group(instructions: list[Any], device: str | DeviceSpec = "h100_sxm",
                   name: str = "group") -> KernelRow:  # fmt: skip
    """Estimated time of `instructions` fused into one kernel, without building the fusion.

    Inputs are the values used but not defined by the group (read once from DRAM);
    outputs are members used outside the group or by nothing (the root)."""
    dev = get_device(device)
    w = group_work(instructions, dev)
    kinds = {op.opcode for op in instructions}
    if "dot" in kinds:
        w.kind = "gemm"
    elif "convolution" in kinds:
        w.kind = "conv"
    return kernel_time(w, dev, name)


def rank(alternatives: list[Any], device: str | DeviceSpec = "h100_sxm") -> list[tuple[int, float]]:
    """(index, estimated µs) of each alternative (module, text or path), fastest first."""
    times = [(i, estimate(a, device).time_us) for i, a in enumerate(alternatives)]
    return sorted(times, key=lambda t: (t[1], t[0]))
