"""The multi-output fusion space (`hlopass.search.mof_space`): each merge the pass made is a
decision to skip. Two row sums of one [1024,1024] f32 value (x and x*x): multi-output fusion
merges the sibling reductions into one kernel reading x once (4 MiB); skipping that merge
leaves two kernels that read it twice, so both models price the skip slower and greedy
stays the best plan."""

from __future__ import annotations

from pathlib import Path

import hlopass
from hlopass.checking.equivalence import check_equivalent
from hlopass.execution.inputs import random_inputs
from hlopass.search.combined import search_merges

SIBLINGS = Path(__file__).parent / "data" / "search_sibling_reduces.hlo"


def test_skipping_the_sibling_merge_is_a_plan_priced_slower():
    module = hlopass.parse_hlo(SIBLINGS.read_text())
    result = search_merges(module, "priority-fusion,multi-output-fusion", budget=20, top=3)
    assert result.best is result.greedy and len(result.greedy.kernels) == 1
    (skip,) = [p for p in result.plans if p is not result.greedy]
    assert len(skip.decisions) == 1 and skip.decisions[0].startswith("mof-skip:")
    assert len(skip.kernels) == 2
    assert all(skip.plan_us[m] > result.greedy.plan_us[m] for m in ("default", "roofline"))
    args = random_inputs(module, 5)
    for p in result.plans:
        assert check_equivalent(module, p.module, args), p.decisions


def test_no_multi_output_fusion_in_the_pipeline_means_no_decisions():
    module = hlopass.parse_hlo(SIBLINGS.read_text())
    result = search_merges(module, "priority-fusion", budget=20)
    assert result.explored == 1 and result.plans == [result.greedy]


SLOW_SIBLINGS = Path(__file__).parent / "data" / "search_sibling_slow.hlo"


def test_a_merge_refused_as_slower_is_a_decision_to_force():
    # a column sum of x [2048,64] beside tanh(exp(x)), two sibling kernels reading x: the
    # default model refuses the merge as slower (the merged kernel runs the 131,072-element
    # loop on the column reduction's grid, two blocks of 32 columns), so forcing it is a
    # decision; the roofline model, which has no grid, prices the forced kernel faster (x is
    # read once instead of twice, one launch fewer), and the search reports that it disagrees.
    # (Layer norm's mean and variance, the example before, is no longer a decision: XLA's
    # multi-output fusion takes no reduction fusion as a producer, IsLoopFusibleAsProducer.)
    module = hlopass.parse_hlo(SLOW_SIBLINGS.read_text())
    result = search_merges(module, "priority-fusion,multi-output-fusion", budget=20, top=5)
    assert result.best is result.greedy and len(result.greedy.kernels) == 2
    (forced,) = [p for p in result.plans if any(d.startswith("mof-force:") for d in p.decisions)]
    assert forced.decisions == ["mof-force:input_reduce_fusion+loop_tanh_fusion"]
    assert len(forced.kernels) == 1
    assert forced.plan_us["default"] > 5 * result.greedy.plan_us["default"]
    assert forced.plan_us["roofline"] < result.greedy.plan_us["roofline"]
    assert result.disagreements() == [
        f"plan {result.plans.index(forced) + 1}: faster than greedy under roofline only"
    ]
    args = random_inputs(module, 5)
    for p in result.plans:
        assert check_equivalent(module, p.module, args), p.decisions
