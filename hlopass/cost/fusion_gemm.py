"""The library GEMM inside a fusion cost model's kernel: the largest dot among its members,
as the module estimate's kernel rules see it (`work.OPCODE_WORK`), so that both fusion
cost models price a dot kernel as a GEMM and not as elementwise work.

Why: priority fusion never fuses a dot (XLA's IsFusible), so how a dot kernel is priced
moves no fusion decision; but a search that compares plans by their summed kernel prices
(`hlopass.search`) must see what every GEMM kernel pays whatever its size (gemm.py's fixed
cost: nothing in XLA's measured matmul table is under ~5 µs), or a plan that trades two
GEMMs for one plus two copies (rnn_scan's `h.W + x.U = [h x].[W; U]`) prices slower to the
fusion models and faster to the module estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import hlopass.cost.gemm as gemm
from hlopass.cost.devices import DeviceSpec
from hlopass.cost.model import KernelWork
from hlopass.cost.work import OPCODE_WORK


@dataclass(frozen=True)
class GemmFacts:
    """A kernel's largest dot or convolution: what `model.kernel_time` prices it from.
    `shape` (b, m, n, k) is empty for a convolution (gemm.py measures GEMMs only)."""

    flops: float  # tensor-core flops of all its dots and convolutions
    dtype: str
    precision: str
    tiles: int
    shape: tuple[int, ...]

    def into(self, w: KernelWork) -> KernelWork:
        """`w` with these facts, as the module estimate's kernel rules set them."""
        w.tensor_dtype, w.tensor_precision = self.dtype, self.precision
        w.gemm_tiles, w.gemm_shape = self.tiles, self.shape
        return w

    def fixed_us(self, dev: DeviceSpec) -> float:
        """The GEMM's fixed cost on `dev` (0 for a convolution, which the table lacks)."""
        return gemm.fixed_cost_us(dev, self.dtype, gemm.SM90) if self.shape else 0.0


def gemm_facts(members: Sequence[Any]) -> GemmFacts | None:
    """The largest dot or convolution of a kernel's members (None if it holds none)."""
    w = KernelWork()
    for op in members:
        rule = OPCODE_WORK.get(op.opcode)
        if rule is not None and rule.tensor is not None and rule.kernel is not None:
            rule.kernel(None, op, w, 1.0)  # the dot and convolution rules read no analyzer
    if not w.tensor_flops:
        return None
    return GemmFacts(w.tensor_flops, w.tensor_dtype, w.tensor_precision, w.gemm_tiles,
                     tuple(w.gemm_shape))  # fmt: skip
