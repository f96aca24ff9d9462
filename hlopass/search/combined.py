"""`search_all`: the pipeline space, then the fusion space on the best pipeline found.

The pipeline search spends what it needs of the budget (its spaces are small: a few dozen
plans); the fusion search around the best pipeline's priority-fusion gets the rest. A fusion
plan's decisions are the best pipeline's followed by its own flips; its price per fusion
model is the best pipeline's, scaled by the fusion plan's ratio to its own greedy plan
under that model (the two spaces price on different scales: whole modules, kernel plans),
so `SearchResult.disagreements()` still says which models see it faster than greedy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hlopass.errors import HloError
from hlopass.search.driver import Plan, SearchResult, search
from hlopass.search.fusion_space import FusionSpace
from hlopass.search.layout_space import LayoutSpace
from hlopass.search.mof_space import MofSpace
from hlopass.search.pipeline_space import PipelineSpace, pipeline_text


def search_all(module: Any, pipeline: str, *, budget: int = 500, top: int = 3,
               **options: Any) -> SearchResult:  # fmt: skip
    """Pipelines around `pipeline`, then fusion plans on the best one (module docstring);
    `options` are `search`'s."""
    first = search(module, pipeline, budget=budget, top=top, space=PipelineSpace, **options)
    left = budget - first.explored
    if left < 2:
        return first
    best = first.best
    chosen = pipeline_text(pipeline, frozenset(best.decisions))
    try:
        second = search(module, chosen, budget=left, top=top, space=FusionSpace, **options)
    except HloError:  # the fusion search cannot be made on that pipeline: the pipelines stand
        return first
    base = second.greedy
    extra = [_rebased(p, best, base) for p in second.plans if p is not base]
    plans = sorted(first.plans + extra, key=lambda p: (p.time_us, p is not first.greedy))
    greedy = first.greedy
    shown = {id(p) for p in [p for p in plans if p is not greedy][:top]}
    plans = [p for p in plans if p is greedy or id(p) in shown]
    return SearchResult(greedy, plans, first.explored + second.explored,
                        first.dropped + second.dropped, first.seconds + second.seconds,
                        first.unchecked or second.unchecked)  # fmt: skip


def _rebased(p: Plan, best: Plan, base: Plan) -> Plan:
    """A fusion plan `p` around the best pipeline (`base` its greedy plan), priced on the
    pipeline plans' scale."""
    plan_us = {m: best.plan_us[m] * p.plan_us[m] / (base.plan_us[m] or 1e-9) for m in best.plan_us}
    return Plan([*best.decisions, *p.decisions], p.time_us, plan_us, p.module, p.kernels)


def search_pipelines(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the pipeline space alone."""
    return search(module, pipeline, space=PipelineSpace, **options)


def search_layouts(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the layout space (per-cluster layout candidates combined)."""
    return search(module, pipeline, space=LayoutSpace, **options)


def search_merges(module: Any, pipeline: str, **options: Any) -> SearchResult:
    """`search` over the multi-output fusion space (merges skipped)."""
    return search(module, pipeline, space=MofSpace, **options)


SPACES: dict[str, Callable[..., SearchResult]] = {
    "fusion": search,
    "pipeline": search_pipelines,
    "layout": search_layouts,
    "multi-output": search_merges,
    "all": search_all,
}
"""The searches `hlopass search --space`, `hlopass sweep --search` and the benchmark name."""
