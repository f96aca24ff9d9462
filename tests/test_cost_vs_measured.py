"""The cost model against XLA's measured tables (benchmarks/cost_vs_measured.py), and hand
checks of the GEMM model (hlopass/cost/gemm.py) and the per-device op profiles."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import cost_vs_measured as cvm  # noqa: E402

from hlopass.cost import estimate, gemm, profiles  # noqa: E402
from hlopass.cost.devices import get_device  # noqa: E402

H100 = get_device("h100_sxm")


@pytest.fixture(scope="module")
def sm90():
    return cvm.gemm_stats("sm_90")


def test_extracted_table_matches_xla_text():
    # XLA's txtpb, sm_90, b1 256x256x256 bf16: flops 6721641025641 -> 2*256^3*1e9/flops ns
    rows = cvm.load_matmul("sm_90")
    assert len(rows) == 1875
    r = next(
        x for x in rows if (x["b"], x["m"], x["n"], x["k"], x["lhs"]) == (1, 256, 256, 256, "bf16")
    )
    assert r["time_ns"] == round(2 * 256**3 * 1e9 / 6721641025641) == 4992


def test_sm90_gemms_against_measured(sm90):
    # issue targets: >= 85% within 1.25x (met), Spearman >= 0.97 (not reached yet: 0.93);
    # these are the levels reached, so a regression fails
    assert 0.9 <= sm90["median"] <= 1.1
    assert sm90["within_1.25"] >= 0.85
    assert sm90["spearman"] >= 0.92


def test_unseen_b200_figures_are_computed():
    s = cvm.gemm_stats("sm_100_B200")
    assert s["n"] == 1875
    assert all(math.isfinite(v) for v in s.values())
    assert 0.5 < s["median"] < 2.0 and s["spearman"] > 0.9


def test_split_k_for_long_k_skinny_gemm():
    # b1 256x256x4096 bf16: 4 tiles of 128x128 leave 128 of 132 SMs idle; measured 5.9 us
    c = gemm.SM90
    g = gemm.gemm_compute(H100, 1, 256, 256, 4096, "bf16")
    assert g.split > 1 and g.ctas == 4 * g.split
    rate = H100.bf16_peak / 132 * c.eff_16
    no_split = c.fixed_us + c.tile_us + 2 * 128 * 128 * 4096 / rate * 1e6
    assert g.compute_us < no_split
    t = cvm.predict_us(H100, {"b": 1, "m": 256, "n": 256, "k": 4096, "lhs": "bf16",
                              "rhs": "bf16", "out": "bf16"})  # fmt: skip
    # the old model said 22.5 us; without split-K this model says ~14 us; now ~1.3x of 5.9
    assert 5.9 / 1.35 <= t <= 5.9 * 1.35 < no_split


def test_large_gemm_waves_and_no_split():
    # 4096^3 bf16: 32 x 32 = 1024 tiles -> ceil(1024 / 132) = 8 waves, no split
    c = gemm.SM90
    g = gemm.gemm_compute(H100, 1, 4096, 4096, 4096, "bf16")
    assert (g.split, g.ctas, g.waves) == (1, 1024, 8)
    tile = c.tile_us + 2 * 128 * 128 * 4096 / (H100.bf16_peak / 132 * c.eff_16) * 1e6
    assert g.compute_us == pytest.approx(c.fixed_us + 8 * tile)


def test_fixed_cost_floor_and_fp8_rate():
    tiny = gemm.gemm_compute(H100, 1, 16, 16, 16, "bf16")
    assert tiny.compute_us >= gemm.SM90.fixed_us
    big16 = gemm.gemm_compute(H100, 1, 4096, 4096, 4096, "bf16").compute_us
    big8 = gemm.gemm_compute(H100, 1, 4096, 4096, 4096, "f8e4m3fn").compute_us
    assert big8 < big16  # twice the peak (1978.9 vs 989.4 TFLOP/s) at large sizes


def test_parsed_dot_prices_like_the_benchmark():
    text = """HloModule m
ENTRY e {
  lhs = bf16[2,512,1024] parameter(0)
  rhs = bf16[2,1024,256] parameter(1)
  ROOT d = bf16[2,512,256] dot(lhs, rhs), lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_batch_dims={0}, rhs_batch_dims={0}
}"""
    row = estimate(text, "h100_sxm").kernels[0]
    r = {"b": 2, "m": 512, "n": 256, "k": 1024, "lhs": "bf16", "rhs": "bf16", "out": "bf16"}
    assert row.exec_us == pytest.approx(cvm.predict_us(H100, r))


def test_profiles_per_device():
    # XLA hlo_op_profiles_data.h: tanh f32 is 269 cycles on sm_70 (V100), 467 on sm_90
    assert profiles.flops_per_element("tanh", "f32", "v100") == 269
    assert profiles.flops_per_element("tanh", "f32", "h100_sxm") == 467
    assert profiles.flops_per_element("tanh", "f32") == 467  # no device: H100
    assert profiles.flops_per_element("add", "s32", "v100") == profiles.DEFAULT_FLOPS_PER_ELEMENT
    stats = cvm.profile_stats()
    assert set(stats) == set(profiles.PROFILES)
    for gpu, s in stats.items():
        if s["device"] is not None:
            assert s["within_1.25"] >= 0.9, gpu
