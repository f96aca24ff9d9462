"""The cost model's analysis of one module, owned by whoever prices it.

A `ModuleCostAnalysis` holds a module's computations by name, the kernel analyzer (each
reducer's flops counted once) and the work of each fused computation per device launch
limits (SM count, threads per SM: the launch grid XLA's emitters pick depends on them). It
lives as long as its owner: one `estimate` call, or one fusion pass's cost model. Nothing
is cached per module at module level, so a module edited in place is never priced from a
stale entry, and a module no longer used is not kept alive by the cost model.
"""

from __future__ import annotations

from typing import Any

from hlopass.cost.model import KernelAnalyzer, KernelWork


def module_of(op: Any) -> Any:
    """The module `op` belongs to, None for a detached computation or instruction."""
    from xdsl.dialects.builtin import ModuleOp

    while op is not None and not isinstance(op, ModuleOp):
        op = op.parent_op()
    return op


class ModuleCostAnalysis:
    """What pricing one module's kernels remembers while it prices them."""

    def __init__(self, module: Any):
        from hlopass.dialects import hlo

        comps = {c.comp_name: c for c in hlo.computations(module)} if module is not None else {}
        self.analyzer = KernelAnalyzer(comps)
        # (fused computation, SMs, threads per SM) -> its kernel's work
        self.kernels: dict[tuple, KernelWork] = {}

    @staticmethod
    def of_op(op: Any) -> ModuleCostAnalysis:
        """The analysis of the module `op` (an instruction or computation) belongs to."""
        return ModuleCostAnalysis(module_of(op))
