"""The roofline fusion cost model: a kernel costs its launch plus its DRAM bytes (distinct
inputs read, outputs written) over the device's bandwidth; no caches, and no flops except a
library GEMM's.

A kernel holding a dot is a library GEMM (priority fusion never fuses a dot), whose launch
cost is gemm.py's measured fixed cost on top of the launch (nothing in XLA's matmul table is
under ~5 µs), and whose body is the roofline of its tensor-core flops at the device's peak
against its bytes: the one kernel whose flops a bytes-only model cannot leave out, since a
dot's flops grow with its contraction while its bytes do not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import hlopass.cost.gemm as gemm
from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.cost.fusion_gemm import gemm_facts
from hlopass.cost.model import KernelRow
from hlopass.cost.sibling import BytesSummary, shape_bytes
from hlopass.kernel_structure.emitter import EmitterFacts

# the estimate's kinds of a library GEMM kernel: a dot or cuBLAS call, a Triton GEMM fusion
GEMM_KINDS = frozenset({"gemm", "triton_gemm"})


class RooflineFusionCostModel(FusionCostModel):
    """Bytes only: launch + (distinct inputs read + outputs written) / DRAM bandwidth."""

    name = "roofline"

    def kernel_time_us(self, members: Sequence[Any], outputs: Sequence[Any]) -> float:
        t = self._bytes_time(self.sibling_summary(members, outputs, id))
        g = gemm_facts(members)
        if g is None:
            return t
        dev = self.device
        flops_us = g.flops / dev.matrix_peak(g.dtype, g.precision) * 1e6
        return g.fixed_us(dev) + self.launch_us + max(t - self.launch_us, flops_us)

    def sibling_summary(self, members: Sequence[Any], outputs: Sequence[Any],
                        key_of: Callable[[Any], Any]) -> BytesSummary:  # fmt: skip
        """Inputs: values read from outside, and a fused computation's parameters."""
        ids = {id(m) for m in members}
        inputs: dict[Any, float] = {}
        for m in members:
            if m.opcode == "parameter":
                inputs.setdefault(key_of(m), shape_bytes(m.shape))
            for v in m.operands:
                if id(v.owner) not in ids:
                    inputs.setdefault(key_of(v.owner), shape_bytes(v.type.data))
        return BytesSummary(inputs, sum(shape_bytes(o.shape) for o in outputs))

    def sibling_time_us(self, summary: BytesSummary, facts: EmitterFacts) -> float:
        return self._bytes_time(summary)

    def _bytes_time(self, summary: BytesSummary) -> float:
        nbytes = sum(summary.inputs.values()) + summary.written
        return self.launch_us + nbytes / self.device.hbm_bandwidth * 1e6


def roofline_row_us(row: KernelRow) -> float:
    """An estimated kernel (`hlopass.cost.estimate`'s row, all its executions) as this model
    prices a kernel: launch plus the estimate's DRAM time, and a GEMM's fixed cost (the
    common one: the row keeps no operand type, so an fp8 GEMM is priced as bf16's)."""
    t = row.launch_us + row.memory_us
    if row.kind in GEMM_KINDS:
        t += gemm.SM90.fixed_us
    return t * row.count
