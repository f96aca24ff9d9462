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
    # issue targets: >= 85% within 1.25x (met: 93.0%), Spearman >= 0.97 (met: 0.9712; the
    # table's noise ceiling is 0.994, see gemm.py for what is left);
    # these are the levels reached, so a regression fails
    assert 0.9 <= sm90["median"] <= 1.1
    assert sm90["within_1.25"] >= 0.925
    assert sm90["spearman"] >= 0.97


def test_unseen_b200_figures_are_computed():
    s = cvm.gemm_stats("sm_100_B200")
    assert s["n"] == 1875
    assert all(math.isfinite(v) for v in s.values())
    assert 0.5 < s["median"] < 2.0 and s["spearman"] > 0.97  # 0.9791 today


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


def _entry(gpu, b, m, n, k, lhs, rhs):
    return next(r for r in cvm.load_matmul(gpu)
                if (r["b"], r["m"], r["n"], r["k"], r["lhs"], r["rhs"]) == (b, m, n, k, lhs, rhs))  # fmt: skip


def test_small_fp8_dot_on_hopper_is_one_triton_kernel():
    # XLA's sm_90 table, b1 256x256x512: bf16 5856 ns, fp8 (e4m3 x e4m3) 7232 ns: slower than
    # bf16, one kernel: Triton's GEMM transposing the n-minor rhs in the kernel, no copy
    f8, bf = (_entry("sm_90", 1, 256, 256, 512, t, t) for t in ("f8e4m3fn", "bf16"))
    assert (f8["time_ns"], bf["time_ns"]) == (7232, 5856)
    # the two GEMMs are within the autotuner's noise of each other here (library 9.67 us,
    # Triton 9.73): Triton, kept by XLA, must win a fair share of the timings, and it runs
    # no copy
    lib, tri = gemm.gemm_candidates(H100, 1, 256, 256, 512, "f8e4m3fn")
    assert tri.path == "triton" and not gemm.has_fp8_copy(H100, tri, "f8e4m3fn")
    assert gemm.pick_share((lib.compute_us, tri.compute_us))[1] > 0.4
    t8, t16 = cvm.predict_us(H100, f8), cvm.predict_us(H100, bf)
    assert t8 > t16 and 1 / 1.25 <= t8 / (f8["time_ns"] / 1e3) <= 1.25


def test_triton_fp8_gemm_never_splits_k():
    # b1 256x256x1024: 16 tiles of 64x64, one wave, k unsplit (the table: 10.6 us against
    # 7.2 at k = 512, linear in k) while the library GEMM splits its 4 tiles of 128x128
    lib, tri = gemm.gemm_candidates(H100, 1, 256, 256, 1024, "f8e4m3fn")
    assert (lib.path, tri.path) == ("library", "triton")
    assert (tri.split, tri.ctas, tri.waves) == (1, 16, 1) and lib.split > 1
    c = gemm.SM90
    rate = H100.matrix_peak("f8e4m3fn", "default") / 132 * c.eff_8t
    assert tri.compute_us == pytest.approx(c.fixed_8t_us + c.tile_8t_us
                                           + 2 * 64 * 64 * 1024 / rate * 1e6)  # fmt: skip


def test_autotuner_pick_share_by_hand():
    # two timings, each off by lognormal(0, 0.054): the first kernel wins half the time at a
    # tie; at a ratio of exp(0.054 x sqrt 2) one sd of the difference: Phi(1) = 0.8413
    assert gemm.pick_share((7.0,)) == (1.0,)
    assert gemm.pick_share((7.0, 7.0)) == pytest.approx((0.5, 0.5))
    fast = gemm.pick_share((7.0, 7.0 * math.exp(0.054 * math.sqrt(2))))
    assert fast == pytest.approx((0.8413, 0.1587), abs=1e-4)
    assert gemm.pick_share((1.0, 100.0))[0] == pytest.approx(1.0)


def test_fp8_figure_near_the_crossing_weighs_both_kernels():
    # b2 256x512x512: the two GEMMs within the noise of each other; the table's figure is
    # the two kernels' figures weighted by the autotuner's pick shares
    r = {"b": 2, "m": 256, "n": 512, "k": 512, "lhs": "f8e4m3fn", "rhs": "f8e4m3fn",
         "out": "bf16"}  # fmt: skip
    lib, tri = gemm.gemm_candidates(H100, 2, 256, 512, 512, "f8e4m3fn")
    w_lib, w_tri = gemm.pick_share((lib.compute_us, tri.compute_us))
    assert 0.05 < w_tri < 0.95
    mem = cvm.kernel_time(cvm.gemm_work(r), H100).memory_us
    fig = [g.compute_us + mem - 0.95 * min(g.compute_us, mem) for g in (lib, tri)]
    fig[0] = 0.5 * (fig[0] + gemm.fp8_aux_us(H100, 2, 512, 512))
    assert cvm.predict_us(H100, r) == pytest.approx(w_lib * fig[0] + w_tri * fig[1])


def test_large_fp8_dot_on_hopper_is_library_gemm_and_copy():
    # b1 4096^3 fp8 measures 56.7 us, bf16 176.2: under half of bf16 although the fp8 peak is
    # only twice bf16's -- the median of two kernels, the rhs copy and the library GEMM
    f8 = _entry("sm_90", 1, 4096, 4096, 4096, "f8e4m3fn", "f8e4m3fn")
    g = gemm.gemm_compute(H100, 1, 4096, 4096, 4096, "f8e4m3fn")
    assert g.path == "library" and gemm.has_fp8_copy(H100, g, "f8e4m3fn")
    t = cvm.predict_us(H100, f8)
    assert t == pytest.approx(0.5 * (cvm.kernel_time(cvm.gemm_work(f8), H100).exec_us
                                     + gemm.fp8_aux_us(H100, 1, 4096, 4096)))  # fmt: skip
    assert 1 / 1.25 <= t / (f8["time_ns"] / 1e3) <= 1.25


def test_fp8_on_blackwell_is_one_library_kernel():
    # tcgen05 takes 8-bit operands mn-major: no copy, no Triton path, the common fixed cost
    b200 = get_device("b200")
    for size in (256, 4096):
        g = gemm.gemm_compute(b200, 1, size, size, size, "f8e4m3fn")
        assert g.path == "library" and not gemm.has_fp8_copy(b200, g, "f8e4m3fn")
    tiny = gemm.gemm_compute(b200, 1, 16, 16, 16, "f8e4m3fn")
    assert tiny.compute_us == pytest.approx(gemm.SM90.fixed_us + gemm.SM90.tile_us, rel=0.05)


def test_noise_ceiling_from_fp8_pairs():
    # the three fp8 type pairs of one shape differ by a few percent (b1 256^3: 5600, 5600,
    # 5584 ns in XLA's table); the ceiling is near, not at, 1
    c = cvm.noise_ceiling("sm_90", draws=3)
    assert 0.01 < c["sd"] < 0.15 and 0.97 < c["spearman"] < 1.0


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
