"""The interconnect model for collectives (`hlopass/cost/collectives.py`, `topology.py`).

Expected values are XLA's measured 8xH100 times (`benchmarks/data/collective_perf_sm_90.csv`,
from XLA's default_collective_perf_table) or worked out by hand from the ring formulas."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from fit_collectives_sm90 import agreement, load, measured, predict  # noqa: E402

from hlopass.cost.cli import cost_main  # noqa: E402
from hlopass.cost.collectives import (  # noqa: E402
    SM90_FIT,
    CollectiveFit,
    CollectiveShape,
    collective_time_us,
    op_collective,
    permute_pattern,
)
from hlopass.cost.topology import interconnect, parse_topology  # noqa: E402

H100_NVLS = interconnect("h100_sxm")
H100 = dataclasses.replace(H100_NVLS, nvls=False)  # rings only
# no fixed costs, no reduction passes, the full line rate: only the bandwidth term is left
PURE_BW = CollectiveFit(0, 0, 0, 0, 1.0, 0, 0, 0, 1.0, 1.0, 0, 1.0, 0, 1.0, 1.0)
GIB = 1 << 30

MODULE = """HloModule m, replica_count=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY e {
  p = f32[1048576] parameter(0)
  ROOT ar = f32[1048576] all-reduce(p), replica_groups=[2,4]<=[8], to_apply=add
}
"""


def test_sm90_agreement_with_measured_table():
    # issue 31 asks for 80% within 1.25x and Spearman 0.95. No model rising with message
    # size passes 88.8% within 1.25x (exact, `monotone_bounds.within_ceiling`) nor Spearman
    # 0.956 (projection bound); the best monotone ranking found reaches 0.9503, so 0.95
    # needs the measurements' own order almost entry by entry. The fitted model reaches
    # 80.9% and 0.934, pinned here so that a regression fails. The local-copy model it
    # replaced: 0% and a median ratio of 0.08.
    rows = load("sm_90")
    within, rho, med = agreement(predict(rows, H100_NVLS, SM90_FIT), measured(rows))
    assert len(rows) == 330
    assert within >= 0.80
    assert rho >= 0.93
    assert 0.9 <= med <= 1.1


def test_permute_splits_like_nccl_p2p():
    # NCCL cuts a send into parts of at least one 512 KiB chunk over at most 4 channels,
    # each here at 1/4 of the 450 GB/s line rate (112.5 GB/s): 512 KiB / 112.5e9 = 4.660 us
    # carried by one channel up to 512 KiB, one chunk per channel up to 2 MiB, then a
    # quarter of the copy each (4 MiB: 9.321 us); plus the 0.6 us NVLink hop
    fit = dataclasses.replace(PURE_BW, permute_switch_us=1e9)  # never the all-channel copy
    t = {kib: collective_time_us(CollectiveShape("collective-permute", kib * 1024, 2), H100, fit)
         for kib in (256, 512, 1024, 2048, 4096)}  # fmt: skip
    assert t[256] == pytest.approx(0.6 + 2.330, rel=1e-3)
    assert t[512] == t[1024] == t[2048] == pytest.approx(0.6 + 4.660, rel=1e-3)
    assert t[4096] == pytest.approx(0.6 + 9.321, rel=1e-3)


def test_ll_reduction_steps_wait_on_their_adds():
    # 1 byte over 4 GPUs, LL only (the others made slow): 3 ring steps of a 0.6 us hop;
    # reduce-scatter's 3 steps each add reduce_step = 1 more hop: 3.6 us against 1.8 us
    fit = dataclasses.replace(PURE_BW, ll_step=1.0, ll128_step=100.0, simple_step=100.0,
                              reduce_step=1.0)  # fmt: skip
    rs = collective_time_us(CollectiveShape("reduce-scatter", 1, 4), H100, fit)
    ag = collective_time_us(CollectiveShape("all-gather", 1, 4), H100, fit)
    assert rs == pytest.approx(3.6, abs=1e-3)
    assert ag == pytest.approx(1.8, abs=1e-3)


def test_ring_all_reduce_bandwidth_term():
    # 2(n-1)/n x bytes / bw: 2*7/8 * 2^30 B / 450e9 B/s = 4175.66 us
    c = CollectiveShape("all-reduce", GIB, 8)
    assert collective_time_us(c, H100, PURE_BW) == pytest.approx(4175.66, rel=1e-4)


def test_ring_all_gather_and_permute_bandwidth_terms():
    # (n-1)/n x bytes / bw: 3/4 * 2^30 / 450e9 = 1789.57 us; a permute sends all of it
    c = CollectiveShape("all-gather", GIB, 4)
    assert collective_time_us(c, H100, PURE_BW) == pytest.approx(1789.57, rel=1e-4)
    p = CollectiveShape("collective-permute", GIB, 2)
    assert collective_time_us(p, H100, PURE_BW) == pytest.approx(2386.09 + 0.6, rel=1e-4)


def test_nvls_all_reduce_sends_the_buffer_once():
    # in-switch reduction: S each way, 2^30 / 450e9 = 2386.09 us (the ring needs 4175.66)
    c = CollectiveShape("all-reduce", GIB, 8)
    assert collective_time_us(c, H100_NVLS, PURE_BW) == pytest.approx(2386.09, rel=1e-4)


def test_reduction_passes_use_hbm():
    # 2 passes over a 1/4 shard of 2^30 B at 3.35 TB/s: 2 * 2^28 / 3.35e12 = 160.26 us
    fit = dataclasses.replace(PURE_BW, reduce_passes=2.0)
    c = CollectiveShape("reduce-scatter", GIB, 4)
    extra = collective_time_us(c, H100, fit) - collective_time_us(c, H100, PURE_BW)
    assert extra == pytest.approx(160.26, rel=1e-3)


@pytest.mark.parametrize(
    ("pairs", "pattern"),
    [
        ([[0, 1], [1, 0], [2, 3], [3, 2]], "mutual"),
        ([[0, 4], [1, 5]], "one_way"),
        ([[0, 1], [1, 2], [2, 0]], "non_mutual"),
    ],
)
def test_permute_patterns(pairs, pattern):
    assert permute_pattern(pairs) == pattern


def test_across_hosts_the_nic_limits():
    # over 2 hosts the ring runs at the 50 GB/s NIC: 15/16 * 2^30 / 50e9 = 20132.66 us; a
    # ring all-reduce would take twice that (40265.3 us):
    # the hierarchical tree is cheaper and is taken
    ring = CollectiveShape("reduce-scatter", GIB, 16, hosts=2)
    assert collective_time_us(ring, H100, PURE_BW) == pytest.approx(20132.66, rel=1e-4)
    ar = CollectiveShape("all-reduce", GIB, 16, hosts=2)
    assert collective_time_us(ar, H100, PURE_BW) < 40265.3


def test_iota_groups_and_hosts():
    import hlopass

    text = MODULE.replace("[2,4]<=[8]", "[2,4]<=[4,2]T(1,0)")  # {0,2,4,6}, {1,3,5,7}
    op = [o for o in hlopass.parse_hlo(text).walk() if getattr(o, "opcode", "") == "all-reduce"][0]
    assert op_collective(op, parse_topology("1x8")) == CollectiveShape(
        "all-reduce", 4 * 2**20, 4, 1
    )
    assert op_collective(op, parse_topology("2x4")).hosts == 2


def test_cli_topology_prices_against_measured(tmp_path, capsys):
    f = tmp_path / "m.hlo"
    f.write_text(MODULE)
    assert cost_main([str(f), "--topology", "1x8", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["kernels"][0]
    assert row["kind"] == "collective"
    # XLA measured 59.2 us for a 4 MiB f32 all-reduce over groups of 4 on 8xH100
    assert 59.2 / 1.25 <= row["time_us"] <= 59.2 * 1.25
    assert cost_main([str(f), "--topology", "2x2", "--json"]) == 0  # groups span 2 hosts
    assert json.loads(capsys.readouterr().out)["kernels"][0]["time_us"] > 1.5 * row["time_us"]


def test_single_device_module_prices_as_before(tmp_path, capsys):
    f = tmp_path / "m.hlo"
    f.write_text(
        MODULE.replace("replica_count=8", "replica_count=1").replace(
            "replica_groups=[2,4]<=[8]", "replica_groups={}"
        )
    )
    assert cost_main([str(f), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["kernels"][0]
    assert row["kind"] == "collective" and row["bound"] != "network"


@pytest.mark.parametrize("bad", ["bogus", "0x8", "2x"])
def test_bad_topology_is_one_line(tmp_path, capsys, bad):
    f = tmp_path / "m.hlo"
    f.write_text(MODULE)
    with pytest.raises(SystemExit) as e:
        cost_main([str(f), "--topology", bad])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad topology" in err and "Traceback" not in err
