"""Both fusion cost models price a dot kernel as a library GEMM (hlopass/cost/fusion_gemm.py),
so that a search's plan prices see what removing or adding a GEMM costs:

* `default`: exactly as the module estimate prices that dot (`hlopass.cost.estimate`,
  gemm.py's fitted model, pinned against XLA's measured matmul table by
  tests/test_cost_vs_measured.py);
* `roofline`: launch + gemm.py's fixed cost + the larger of its DRAM bytes and its
  tensor-core flops at the device's peak, written out here from the device's numbers;
* neither moves a fusion decision (a dot is never fused): tests/test_cost_structure_unchanged.py
  pins the fused modules of the corpus under both models.
"""

from __future__ import annotations

import pytest

import hlopass
import hlopass.cost
from hlopass.cost.devices import get_device
from hlopass.cost.fusion_models import fusion_cost_model
from hlopass.cost.gemm import SM90
from hlopass.dialects.hlo import entry_computation

SHAPES = [("f32", 4, 32, 32), ("f32", 1024, 8, 1024), ("bf16", 4096, 4096, 4096)]
ELEMENT_BYTES = {"f32": 4, "bf16": 2}


def _dot_module(ty: str, m: int, k: int, n: int) -> str:
    return (
        f"HloModule m\nENTRY e {{\n  a = {ty}[{m},{k}] parameter(0)\n"
        f"  b = {ty}[{k},{n}] parameter(1)\n"
        f"  ROOT d = {ty}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, "
        "rhs_contracting_dims={0}\n}\n"
    )


def _dot(module):  # type: ignore[no-untyped-def]
    return next(op for op in entry_computation(module).instructions if op.opcode == "dot")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_default_model_prices_a_dot_as_the_module_estimate(shape: tuple) -> None:
    module = hlopass.parse_hlo(_dot_module(*shape))
    want = hlopass.cost.estimate(module, "h100_sxm").time_us
    d = _dot(module)
    assert fusion_cost_model("default").kernel_time_us([d], [d]) == pytest.approx(want, rel=1e-9)
    assert want > SM90.fixed_us  # every GEMM pays its fixed cost


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_roofline_model_prices_a_dot_as_launch_fixed_cost_and_its_roofline(shape: tuple) -> None:
    ty, m, k, n = shape
    dev = get_device("h100_sxm")
    nbytes = (m * k + k * n + m * n) * ELEMENT_BYTES[ty]
    flops = 2.0 * m * n * k
    body = max(nbytes / dev.hbm_bandwidth, flops / dev.matrix_peak(ty)) * 1e6
    want = dev.launch_overhead_us + SM90.fixed_us + body
    d = _dot(hlopass.parse_hlo(_dot_module(*shape)))
    assert fusion_cost_model("roofline").kernel_time_us([d], [d]) == pytest.approx(want, rel=1e-9)


def test_roofline_model_prices_elementwise_kernels_by_bytes_alone() -> None:
    text = "HloModule m\nENTRY e {\n  a = f32[1024] parameter(0)\n  ROOT t = f32[1024] tanh(a)\n}\n"
    t = next(op for op in entry_computation(hlopass.parse_hlo(text)).instructions
             if op.opcode == "tanh")  # fmt: skip
    dev = get_device("h100_sxm")
    want = dev.launch_overhead_us + 2 * 4096 / dev.hbm_bandwidth * 1e6
    assert fusion_cost_model("roofline").kernel_time_us([t], [t]) == pytest.approx(want, rel=1e-9)
