"""Analytical GPU cost model for HLO: work counts (XLA's HloCostAnalysis conventions) and
per-kernel time estimates on a `DeviceSpec`.

    >>> from hlopass.cost import estimate, rank, estimate_group
    >>> est = estimate(module, "h100_sxm")       # module, computation, HLO text or path
    >>> print(est)                               # per-kernel table
    >>> est.time_us, est.totals
    >>> rank([module_a, module_b], "h100_sxm")  # [(index, time_us), ...] fastest first
    >>> estimate_group([producer, consumer], "h100_sxm").time_us   # a candidate fusion

Fused computations are analysed once per device launch limits (SM count, threads per SM:
the launch grid XLA's emitters pick depends on them) and cached by identity (`clear_cache()`
after editing one in place); `estimate_group` prices a set of instructions as one fused kernel
without building the fusion, for fusion passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hlopass.cost.devices import DEVICES, DeviceSpec, get_device
from hlopass.cost.model import (
    Estimate,
    KernelRow,
    KernelWork,
    _Analyzer,
    kernel_time,
    module_kernels,
)
from hlopass.cost.work import Work, XlaCostAnalysis, xla_cost

__all__ = [
    "DEVICES", "DeviceSpec", "Estimate", "KernelRow", "KernelWork", "Work", "XlaCostAnalysis",
    "clear_cache", "estimate", "estimate_group", "get_device", "group_work", "rank", "xla_cost",
]  # fmt: skip

# module identity -> (module, analyzer, {(fused computation, SMs, threads/SM): KernelWork})
_CACHE: dict[int, tuple[Any, _Analyzer, dict[tuple, KernelWork]]] = {}
_CACHE_LIMIT = 64


def clear_cache() -> None:
    _CACHE.clear()


def _module_of(op: Any) -> Any:
    from xdsl.dialects.builtin import ModuleOp

    while op is not None and not isinstance(op, ModuleOp):
        op = op.parent_op()
    return op


def _state(module: Any) -> tuple[_Analyzer, dict[tuple, KernelWork]]:
    entry = _CACHE.get(id(module))
    if entry is None or entry[0] is not module:
        from hlopass.dialects import hlo

        comps = {c.comp_name: c for c in hlo.computations(module)} if module is not None else {}
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        entry = (module, _Analyzer(comps), {})
        _CACHE[id(module)] = entry
    return entry[1], entry[2]


def _load(x: Any) -> Any:
    if isinstance(x, Path) or (isinstance(x, str) and "\n" not in x and Path(x).is_file()):
        import hlopass
        from hlopass.cli import _read  # one line for unreadable or non-UTF-8 files

        return hlopass.parse_hlo(_read(str(x)), str(x))
    if isinstance(x, str):
        import hlopass

        return hlopass.parse_hlo(x)
    return x


def estimate(module_or_computation: Any, device: str | DeviceSpec = "h100_sxm") -> Estimate:
    """Per-kernel estimate of a module (its entry computation) or of one computation."""
    from hlopass.dialects import hlo

    dev = get_device(device)
    x = _load(module_or_computation)
    if isinstance(x, hlo.ComputationOp):
        module, comp = _module_of(x), x
    else:
        module, comp = x, hlo.entry_computation(x)
    an, cache = _state(module)
    if not an.comps:
        an.comps[comp.comp_name] = comp
    return Estimate(dev.name, module_kernels(comp, an.comps, dev, an, 1, cache))


def group_work(instructions: list[Any], device: str | DeviceSpec = "h100_sxm") -> KernelWork:
    """Work of `instructions` (of one computation) as one fused kernel; only the launch grid
    (blocks, threads per block) depends on `device`."""
    instructions = list(instructions)
    if not instructions:
        return KernelWork()
    an, _ = _state(_module_of(instructions[0]))
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
