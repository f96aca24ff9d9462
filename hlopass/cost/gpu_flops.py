"""Flops of single instructions as XLA's `GpuHloCostAnalysis` counts them (the ALU work that
XLA's default GPU performance model prices): elementwise ops at the measured H100 cost per
element (`profiles.py`), reductions, windows, maps and scatters at their reducer's flops per
element, concatenates 6 per element (or XLA's 400 anti-fusion hack), sorts n log n; dots and
convolutions apart (tensor-core flops, `FlopCounter.tensor`). The opcode-specific rules are
`work.OPCODE_WORK[opcode].gpu_flops` and `.tensor`.
"""

from __future__ import annotations

from typing import Any

from hlopass.cost.profiles import flops_per_element
from hlopass.cost.work import OPCODE_WORK
from hlopass.kernel_structure.emitter import is_elementwise
from hlopass.kernel_structure.shapes import elements, first_array


class FlopCounter:
    """Flops of single instructions and of called computations, cached per computation."""

    def __init__(self, comps: dict[str, Any]):
        self.comps = comps
        self._sub: dict[str, float] = {}

    def sub(self, name: str | None) -> float:
        if not name or name not in self.comps:
            return float(flops_per_element("add", "f32"))
        v = self._sub.get(name)
        if v is None:
            self._sub[name] = 0.0  # recursion guard
            v = sum(self.alu(op) for op in self.comps[name].instructions)
            self._sub[name] = v
        return v

    def alu(self, op: Any) -> float:
        """ALU flops of one execution of `op` (dots and convolutions: 0, see `tensor`)."""
        if is_elementwise(op) and op.opcode != "copy":
            et = getattr(first_array(op.shape), "element_type", "f32")
            return float(flops_per_element(op.opcode, et) * elements(op.shape))
        rule = OPCODE_WORK.get(op.opcode)
        if rule is not None and rule.gpu_flops is not None:
            return rule.gpu_flops(self, op)
        return 0.0

    @staticmethod
    def tensor(op: Any) -> float:
        """Tensor-core flops of one execution of `op` (dots and convolutions)."""
        rule = OPCODE_WORK.get(op.opcode)
        if rule is not None and rule.tensor is not None:
            return rule.tensor(op)
        return 0.0
