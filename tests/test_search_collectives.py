"""The collectives space (`hlopass.search.collectives_space`): combiner thresholds and
all-reduce one-shot bands as decisions. Three all-reduces over 8 replicas (f32[1024],
f32[2048], f32[512,256]: 4 KiB, 8 KiB, 512 KiB): each all-reduce pays its launch and its
ring steps' latency, so combining all three into one (a threshold of 4 MiB or more, none
at 256 KiB, which combines the two small ones only) is the fastest plan, by both models;
every plan is run on the 8 replicas and gives the module's values."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import hlopass
from hlopass.execution.inputs import random_inputs
from hlopass.search.collectives_space import collective_decisions, collectives_text
from hlopass.search.combined import SPACES, search_collectives

ALL_REDUCES = Path(__file__).parent / "data" / "search_all_reduces.hlo"
MIB = 1024 * 1024


def _module():
    return hlopass.parse_hlo(ALL_REDUCES.read_text())


def test_decisions_offered_by_what_the_module_holds():
    d = collective_decisions("priority-fusion", {"all-reduce", "add"})
    assert d == [
        "combine:all-reduce-combiner=0",
        "combine:all-reduce-combiner=262144",
        f"combine:all-reduce-combiner={4 * MIB}",
        f"combine:all-reduce-combiner={30 * MIB + 7}",
        f"combine:all-reduce-combiner={256 * MIB}",
        "all-reduce:one-shot<=16384",
        "all-reduce:one-shot<=262144",
        "all-reduce:one-shot<=4194304",
    ]
    # the pipeline's own threshold is not offered again, nor a band with the decomposer in it
    own = "all-reduce-decomposer,all-reduce-combiner{combine-threshold-in-bytes=0},priority-fusion"
    d = collective_decisions(own, {"all-reduce", "all-gather"})
    assert "combine:all-reduce-combiner=0" not in d and len(d) == 4 + 5
    assert not any(x.startswith("all-reduce:") for x in d)
    assert collective_decisions("priority-fusion", {"add", "dot"}) == []


def test_collectives_text_by_hand():
    d = frozenset({"combine:all-reduce-combiner=262144", "all-reduce:one-shot<=16384"})
    assert collectives_text("dce,priority-fusion", d) == (
        "dce,all-reduce-decomposer{max-elements=16384},"
        "all-reduce-combiner{combine-threshold-in-bytes=262144},priority-fusion"
    )
    own = "all-reduce-combiner{combine-threshold-in-bytes=5},priority-fusion"
    off = frozenset({"combine:all-reduce-combiner=0"})
    assert collectives_text(own, off) == (
        "all-reduce-combiner{combine-threshold-in-bytes=0},priority-fusion"
    )


def _collectives(m) -> list[str]:
    return [op.opcode for op in m.walk() if getattr(op, "opcode", "") in
            ("all-reduce", "all-gather")]  # fmt: skip


def test_combining_all_three_is_the_best_plan_and_keeps_values():
    module = _module()
    r = search_collectives(module, "priority-fusion", budget=60, top=8)
    assert r.unchecked is None and r.dropped == 0
    assert r.explored == 1 + 8 + 3 * 5 - 3  # the space exhausted: one band, one threshold
    best = r.best
    assert best.decisions in (
        [f"combine:all-reduce-combiner={t}"] for t in (4 * MIB, 30 * MIB + 7, 256 * MIB)
    )
    assert _collectives(best.module) == ["all-reduce"] and len(_collectives(r.greedy.module)) == 3
    assert best.time_us < 0.5 * r.greedy.time_us
    assert all(best.faster_than(r.greedy, m) for m in ("default", "roofline"))
    small = [p for p in r.plans if p.decisions == ["combine:all-reduce-combiner=262144"]]
    assert small and len(_collectives(small[0].module)) == 2
    # the driver ran each plan on the 8 replicas; once more here on other inputs
    args = random_inputs(module, 3)
    want = hlopass.evaluate(module, *args, replicas=8)
    for p in r.plans:
        got = hlopass.evaluate(p.module, *args, replicas=8)
        for dw, dg in zip(want, got, strict=True):
            for w, g in zip(dw, dg, strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_one_shot_band_decomposes_only_the_small_all_reduces():
    module = _module()
    r = search_collectives(module, "priority-fusion", budget=60, top=20)
    (band,) = [p for p in r.plans if p.decisions == ["all-reduce:one-shot<=16384"]]
    # the two small ones became all-gathers (and a local reduce), the 128Ki one stays
    assert sorted(_collectives(band.module)) == ["all-gather", "all-gather", "all-reduce"]
    assert "collectives" in SPACES


def test_space_all_stacks_the_thresholds_on_the_best_pipeline():
    # the pipeline space offers nothing for collectives; `all` then searches the
    # thresholds on the best pipeline, and the combined plan is the best one reported
    module = _module()
    r = SPACES["all"](module, "priority-fusion", budget=80, top=3)
    assert r.dropped == 0 and r.unchecked is None
    assert any(d.startswith("combine:all-reduce-combiner=") for d in r.best.decisions)
    assert _collectives(r.best.module) == ["all-reduce"]
    assert r.best.time_us < 0.5 * r.greedy.time_us


def test_plans_parse_in_xla(tmp_path, xla):
    # the combined, the one-shot and the greedy plans, through XLA's parser in a child
    # (XLA may abort)
    import subprocess
    import sys

    r = search_collectives(_module(), "priority-fusion", budget=60, top=20)
    files = []
    for i, p in enumerate(r.plans):
        f = tmp_path / f"plan_{i}.hlo"
        f.write_text(hlopass.print_hlo(p.module))
        files.append(f)
    code = (
        "import sys\nfrom hlopass.execution import oracle\nfor f in sys.argv[1:]:\n"
        "    ok, why = oracle.accepts(open(f).read())\n    print(f, ok, why.splitlines()[:1])"
    )
    child = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    verdicts = child.stdout.splitlines()
    assert len(verdicts) == len(files) >= 3, child.stderr[-1000:]
    assert all(" True " in v for v in verdicts), verdicts
