"""The pipeline space (`hlopass.search.pipeline_space`), `search_all` and `--space`: plan
texts written by hand, decisions offered by what the module holds, wins greedy's pipeline
misses on hand-written modules (XLA's TreeReductionRewriter split of a column sum, XLA's
DotMerger), every reported plan checked again here on fresh inputs, a variant a pass fails
on dropped and counted."""

from __future__ import annotations

from pathlib import Path

import pytest

import hlopass
from hlopass.checking.equivalence import check_equivalent
from hlopass.cost.devices import get_device
from hlopass.cost.gemm import SM90
from hlopass.execution.inputs import random_inputs
from hlopass.search import search
from hlopass.search.combined import search_all
from hlopass.search.driver import Plan, SearchResult
from hlopass.search.pipeline_space import PipelineSpace, pipeline_decisions, pipeline_text
from hlopass.search.space import Decisions

DATA = Path(__file__).parent / "data"
PIPELINE = "call-inliner,algsimp,constant-folding,dce,cse,priority-fusion,multi-output-fusion"
COLUMN_SUM = DATA / "search_column_sum.hlo"
TWO_DOTS = DATA / "search_two_dots.hlo"


def _module(path: Path):
    return hlopass.parse_hlo(path.read_text())


def _checked_again(module, result) -> None:
    """Every reported plan keeps the module's values on inputs the search did not draw."""
    args = random_inputs(module, 7)
    for p in result.plans:
        assert check_equivalent(module, p.module, args), p.decisions


def test_pipeline_text_by_hand():
    d = frozenset({"+while-loop-unroller", "+dot-merger", "+tree-reduction-rewriter",
                   "-multi-output-fusion", "priority-fusion{cost-model=roofline}",
                   "+horizontal-fusion"})  # fmt: skip
    # inserted passes among themselves in XLA's GPU order: dot merging (simplification)
    # before the tree reductions (post layout assignment)
    assert pipeline_text(PIPELINE, d) == (
        "while-loop-unroller,call-inliner,algsimp,constant-folding,dce,cse,"
        "dot-merger,tree-reduction-rewriter,priority-fusion{cost-model=roofline},"
        "horizontal-fusion"
    )
    both = frozenset({"+gemm-fusion", "+dot-decomposer"})
    assert pipeline_text("algsimp,priority-fusion", both) == (
        "algsimp,dot-decomposer,gemm-fusion,priority-fusion"
    )
    assert pipeline_text(PIPELINE, frozenset()) == PIPELINE
    on = frozenset({"algsimp{use-associative-reordering=true}"})
    assert pipeline_text("algsimp{run-to-fixed-point=false},dce", on) == (
        "algsimp{run-to-fixed-point=false use-associative-reordering=true},dce"
    )
    lay = "dce,layout-assignment{policy=cost max-trials=8},priority-fusion"
    assert pipeline_text(lay, frozenset({"layout-assignment{policy=xla}"})) == (
        "dce,layout-assignment{policy=xla max-trials=8},priority-fusion"
    )


def test_decisions_follow_the_module_and_the_pipeline():
    assert pipeline_decisions(PIPELINE, {"add", "parameter"}) == [
        "+horizontal-fusion", "+layout-assignment{policy=cost}", "-multi-output-fusion",
        "algsimp{use-associative-reordering=true}",
        "algsimp{unconditionally-simplify-reduce-of-transpose-or-reshape=true}",
        "constant-folding{level=aggressive}", "priority-fusion{cost-model=roofline}",
    ]  # fmt: skip
    own = pipeline_decisions("layout-assignment{policy=cost},priority-fusion{cost-model=roofline}",
                             {"while", "dot", "reduce"})  # fmt: skip
    assert own == ["+while-loop-unroller", "+tree-reduction-rewriter", "+dot-merger",
                   "+multi-output-fusion", "+horizontal-fusion", "+gemm-fusion",
                   "+dot-decomposer", "+softmax-rewriter-triton{only-fuse-if-profitable=true}",
                   "-layout-assignment", "layout-assignment{policy=xla}",
                   "priority-fusion{cost-model=default}"]  # fmt: skip


def test_pipeline_space_finds_the_tree_reduction_greedy_misses():
    module = _module(COLUMN_SUM)
    result = search(module, PIPELINE, budget=100, top=3, space=PipelineSpace)
    best, greedy = result.best, result.greedy
    assert best.decisions == ["+tree-reduction-rewriter"]
    # XLA splits the [8192,16] column sum into [64,128,16] -> [64,16] -> [16]: two kernels
    assert (len(greedy.kernels), len(best.kernels)) == (1, 2)
    assert "f32[64,128,16]" in hlopass.print_hlo(best.module)
    assert best.time_us < 0.5 * greedy.time_us
    assert all(best.faster_than(greedy, m) for m in ("default", "roofline"))
    assert result.disagreements() == [] and result.dropped == 0 and result.unchecked is None
    # one plan per distinct module: decisions that change nothing are not reported again
    printed = [hlopass.print_hlo(p.module) for p in result.plans]
    assert len(set(printed)) == len(printed)
    _checked_again(module, result)


class _NoGemmFusion(PipelineSpace):
    """The pipeline space without the Triton GEMM decisions (which would also speed the
    merged dot up, under both models)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decisions = [d for d in self.decisions if d not in ("+gemm-fusion", "+dot-decomposer")]


def test_dot_merger_win_holds_under_both_models():
    module = _module(TWO_DOTS)
    result = search(module, PIPELINE, budget=100, top=1, space=_NoGemmFusion)
    assert result.best.decisions == ["+dot-merger"]
    assert hlopass.print_hlo(result.best.module).count(" dot(") == 1
    # the merge reads x once but writes the [256,512] concatenated weights first: by hand
    # 1920 KiB of DRAM traffic against 960 KiB, and one GEMM less (three kernels either
    # way: the concatenate takes the second dot's launch), so to the roofline model the
    # plan gains one GEMM's fixed cost less the DRAM time of 960 KiB
    dev = get_device("h100_sxm")
    gain = result.greedy.plan_us["roofline"] - result.best.plan_us["roofline"]
    assert gain == pytest.approx(SM90.fixed_us - 960 * 1024 / dev.hbm_bandwidth * 1e6, abs=0.05)
    assert result.disagreements() == []
    _checked_again(module, result)
    # with the Triton GEMM decisions the merged dot also runs as one GEMM fusion, faster
    # under both models
    both = search(module, PIPELINE, budget=100, top=1, space=PipelineSpace)
    assert both.best.decisions == ["+dot-merger", "+gemm-fusion"] and both.disagreements() == []
    # a plan only one model sees faster is listed (prices set by hand)
    g = result.greedy
    odd = Plan(["+x"], g.time_us - 1, {"default": g.plan_us["default"] - 1,
                                      "roofline": g.plan_us["roofline"] + 1}, g.module)  # fmt: skip
    flagged = SearchResult(g, [odd, g], result.explored, result.dropped, result.seconds)
    assert flagged.disagreements() == ["plan 1: faster than greedy under default only"]


class _Failing(PipelineSpace):
    """`+horizontal-fusion` runs a pass that does not exist: the plan cannot be priced."""

    def text(self, decisions: Decisions) -> str:
        if "+horizontal-fusion" in decisions:
            return "no-such-pass," + PIPELINE
        return super().text(decisions)


def test_a_variant_a_pass_fails_on_is_dropped_and_counted():
    result = search(_module(COLUMN_SUM), PIPELINE, budget=100, top=3, space=_Failing)
    assert result.dropped >= 1
    assert all("+horizontal-fusion" not in p.decisions for p in result.plans)
    assert result.best.decisions == ["+tree-reduction-rewriter"]


def test_search_all_adds_fusion_decisions_on_the_best_pipeline():
    module = _module(COLUMN_SUM)
    result = search_all(module, PIPELINE, budget=60, top=3)
    assert result.best.decisions[0] == "+tree-reduction-rewriter"
    assert result.best.time_us <= result.greedy.time_us
    assert result.explored <= 60
    _checked_again(module, result)


def test_cli_space_pipeline(capsys: pytest.CaptureFixture):
    from hlopass.commands.cli import main

    code = main(["search", str(COLUMN_SUM), "-p", PIPELINE, "--space", "pipeline", "--top", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[1].endswith("): +tree-reduction-rewriter")


CONST_DOT = """HloModule const_dot

ENTRY e {
  x = f32[6,3] parameter(0)
  i = f32[24] iota(), iota_dimension=0
  r = f32[4,6] reshape(i)
  t = f32[6,4] transpose(r), dimensions={1,0}
  one = f32[] constant(1)
  b = f32[4,3] broadcast(one), dimensions={}
  d = f32[6,3] dot(t, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT a = f32[6,3] add(x, d)
}
"""


def test_aggressive_constant_folding_folds_a_dot_of_iotas():
    # XLA's default level folds only what reads a constant; the aggressive one also what
    # is computed from iotas and broadcasts alone: the dot and its operands become one
    # constant (the corpus's const_heavy, 10.50 -> 2.05 us)
    m = hlopass.parse_hlo(CONST_DOT)
    assert "constant-folding{level=aggressive}" in pipeline_decisions(PIPELINE, {"dot"})
    r = search(m, PIPELINE, budget=40, top=1, space=PipelineSpace)
    assert "constant-folding{level=aggressive}" in r.best.decisions
    space = PipelineSpace(m, "h100_sxm", pipeline=PIPELINE)
    alone = space.price(frozenset({"constant-folding{level=aggressive}"}))
    assert alone.time_us == pytest.approx(r.best.time_us, abs=0.01)  # the others add nothing
    opcodes = {getattr(op, "opcode", None) for op in r.best.module.walk()}
    assert "dot" not in opcodes and "iota" not in opcodes
    assert all(r.best.faster_than(r.greedy, model) for model in ("default", "roofline"))
    assert r.best.time_us < 0.5 * r.greedy.time_us
    _checked_again(m, r)
