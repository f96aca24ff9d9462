"""The searches by name (`SPACES`), and `search_all`: the pipeline space, then the
collectives, layout, multi-output and algebraic-then-fusion spaces, each on the best
pipeline found (stacked on it, not on each other), and the algebraic-then-fusion space on
the given pipeline too when the best pipeline is another (`_algebraic_on_given`).

The pipeline search spends what it needs of the budget (its spaces are small: a few dozen
plans); the collectives search (a module with collectives), the layout search, the
multi-output search on the best pipeline, then the algebraic candidates with fusion
decisions on each (`AlgebraicThenFusion`), get the rest, in that order. A plan's decisions
are the best pipeline's followed by its own (thresholds, layout choices, merges skipped or
forced, `alg:` candidates, fusion flips); a collectives, layout or multi-output plan is
priced as the pipeline plans are. An algebraic or fusion plan's price per fusion
model is the best pipeline's, scaled by the plan's ratio to its own greedy plan under that
model (the spaces price on different scales: whole modules, kernel plans), so
`SearchResult.disagreements()` still says which models see it faster than greedy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hlopass.errors import HloError
from hlopass.search.algebraic import AlgebraicSpace
from hlopass.search.algebraic.combined import AlgebraicThenFusion
from hlopass.search.collectives_space import CollectivesSpace
from hlopass.search.driver import Plan, SearchResult, search
from hlopass.search.layout_space import LayoutSpace
from hlopass.search.mof_space import MofSpace
from hlopass.search.pipeline_space import PipelineSpace, pipeline_text


def search_all(module: Any, pipeline: str, *, budget: int = 500, top: int = 3,
               **options: Any) -> SearchResult:  # fmt: skip
    """Pipelines around `pipeline`, then layout plans and fusion plans on the best one
    (module docstring); `options` are `search`'s."""
    first = search(module, pipeline, budget=budget, top=top, space=PipelineSpace, **options)
    best = first.best
    chosen = pipeline_text(pipeline, frozenset(best.decisions))
    results, extra = [first], []
    for space in (CollectivesSpace, LayoutSpace, MofSpace, AlgebraicThenFusion):
        left = budget - sum(r.explored for r in results)
        if left < 2:
            break
        try:
            r = search(module, chosen, budget=left, top=top, space=space, **options)
        except HloError:  # that search cannot be made on the pipeline: the others stand
            continue
        results.append(r)
        scaled = space is AlgebraicThenFusion
        extra += [_rebased(p, best, r.greedy, scaled) for p in r.plans if p is not r.greedy]
    extra += _algebraic_on_given(module, pipeline, first, budget - sum(r.explored for r in results),
                                 top, options, results)  # fmt: skip
    plans = sorted(first.plans + extra, key=lambda p: (p.time_us, p is not first.greedy))
    greedy = first.greedy
    shown = {id(p) for p in [p for p in plans if p is not greedy][:top]}
    plans = [p for p in plans if p is greedy or id(p) in shown]
    return SearchResult(greedy, plans, sum(r.explored for r in results),
                        sum(r.dropped for r in results), sum(r.seconds for r in results),
                        next((r.unchecked for r in results if r.unchecked), None))  # fmt: skip


def _algebraic_on_given(module: Any, pipeline: str, first: SearchResult, left: int, top: int,
                        options: dict[str, Any], results: list[SearchResult]) -> list[Plan]:  # fmt: skip
    """The algebraic-then-fusion plans on the given pipeline, when the best pipeline is
    another: a pipeline pass can close what the rules rewrite (rnn_scan: `+gemm-fusion`
    makes its dots fusions, opaque to the rules, and wins 0.972x where the rules' one dot
    of `[h x]` and `[W; U]` wins 0.742x on the given pipeline), so stacking alone would
    report less than the algebraic space alone finds."""
    if first.best is first.greedy or left < 2:
        return []
    try:
        r = search(module, pipeline, budget=left, top=top, space=AlgebraicThenFusion, **options)
    except HloError:
        return []
    results.append(r)
    return [_rebased(p, first.greedy, r.greedy, True) for p in r.plans if p is not r.greedy]


def _rebased(p: Plan, best: Plan, base: Plan, scaled: bool) -> Plan:
    """A plan `p` around the best pipeline (`base` its greedy plan) with the pipeline's
    decisions first; a fusion plan's kernel-plan prices (`scaled`) on the pipeline plans'
    scale."""
    plan_us = dict(p.plan_us)
    if scaled:
        plan_us = {
            m: best.plan_us[m] * p.plan_us[m] / (base.plan_us[m] or 1e-9) for m in best.plan_us
        }
    return Plan([*best.decisions, *p.decisions], p.time_us, plan_us, p.module, p.kernels)


def search_pipelines(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the pipeline space alone."""
    return search(module, pipeline, space=PipelineSpace, **options)


def search_layouts(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the layout space (per-cluster layout candidates combined)."""
    return search(module, pipeline, space=LayoutSpace, **options)


def search_algebraic(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the algebraic space (e-graph rewrites of the entry computation)."""
    return search(module, pipeline, space=AlgebraicSpace, **options)


def search_algebraic_fusion(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over an algebraic candidate, then the fusion decisions on it."""
    return search(module, pipeline, space=AlgebraicThenFusion, **options)


def search_collectives(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over combiner thresholds and all-reduce algorithm bands."""
    return search(module, pipeline, space=CollectivesSpace, **options)


def search_merges(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the multi-output fusion space (merges skipped)."""
    return search(module, pipeline, space=MofSpace, **options)


SPACES: dict[str, Callable[..., SearchResult]] = {
    "fusion": search,
    "algebraic": search_algebraic,
    "algebraic+fusion": search_algebraic_fusion,
    "pipeline": search_pipelines,
    "layout": search_layouts,
    "multi-output": search_merges,
    "collectives": search_collectives,
    "all": search_all,
}
"""The searches `hlopass search --space`, `hlopass sweep --search` and the benchmark name."""
