"""The layout space (`hlopass.search.layout_space`): one decision per cluster and candidate,
combined across clusters by the strategy. Two independent f32 NCHW convolutions on H100:
XLA's rules lay each out NHWC with copies around it (lit_tests/passes/
layout-assignment-explain.hlo: `copy(%x)`, `copy(%c)`), keeping NCHW needs none, so the
best plan keeps NCHW in both clusters, a combination of two decisions."""

from __future__ import annotations

from pathlib import Path

import hlopass
from hlopass.checking.equivalence import check_equivalent
from hlopass.execution.inputs import random_inputs
from hlopass.search.combined import search_layouts
from hlopass.search.layout_space import LayoutSpace

TWO_CONVS = Path(__file__).parent / "data" / "search_two_convs_nchw.hlo"
PIPELINE = "layout-assignment,priority-fusion,multi-output-fusion"


def test_decisions_are_the_candidates_of_each_cluster():
    space = LayoutSpace(hlopass.parse_hlo(TWO_CONVS.read_text()), "h100_sxm", pipeline=PIPELINE)
    # the pipeline lays out by XLA's rules already: `xla` is no decision
    assert sorted(space.decisions) == sorted(
        f"layout:{c}={cand}" for c in ("c1", "c2") for cand in ("nchw", "nhwc", "no-copies")
    )
    assert (
        space.slot("layout:c1=nchw") == space.slot("layout:c1=nhwc") != space.slot("layout:c2=nchw")
    )


def test_best_plan_keeps_nchw_in_both_clusters():
    module = hlopass.parse_hlo(TWO_CONVS.read_text())
    result = search_layouts(module, PIPELINE, budget=60, top=2)
    greedy, best = result.greedy, result.best
    assert "copy(" in hlopass.print_hlo(greedy.module)
    assert "copy(" not in hlopass.print_hlo(best.module)
    clusters = sorted(d.split("=")[0] for d in best.decisions)
    assert clusters == ["layout:c1", "layout:c2"]
    assert all(d.split("=")[1] in ("nchw", "no-copies") for d in best.decisions)
    assert best.time_us < greedy.time_us
    assert result.dropped == 0 and result.unchecked is None
    args = random_inputs(module, 3)
    for p in result.plans:
        assert check_equivalent(module, p.module, args), p.decisions
