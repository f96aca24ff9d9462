"""`search(module, pipeline)`: alternatives to the `priority-fusion` step of a pipeline.

The passes before `priority-fusion` run once; the strategy explores the fusion space,
pricing plans on kernel plans (`FusionSpace.price`, both fusion cost models); the greedy
plan and the `finalists` with the best plan prices are then built, run through the rest of
the pipeline, checked (the interpreter must give the prefix module's outputs on random
inputs; a plan that fails is dropped and counted, the greedy plan failing is an error) and
priced whole with `hlopass.cost.estimate`; the `top` fastest are reported. The greedy plan
is always among them, so the best plan reported is never slower than greedy. Finalists that
build the same module (`SearchSpace.plan_key`: the fusion space's same fusion steps) are
built, checked and estimated once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.errors import HloError
from hlopass.search.fusion_space import MODELS, FusionSpace
from hlopass.search.space import Budget, Priced, SearchSpace
from hlopass.search.strategies import STRATEGIES


class SearchError(HloError):
    """A search that cannot be made, as one line."""


@dataclass
class Plan:
    """One plan built and priced: `decisions` (flips from the greedy plan), `time_us` (the
    built module's estimate), `plan_us` (its kernel-plan price under each fusion model)."""

    decisions: list[str]
    time_us: float
    plan_us: dict[str, float]
    module: ModuleOp
    kernels: list[dict[str, Any]] = field(default_factory=list)

    def faster_than(self, other: Plan, model: str) -> bool:
        return self.plan_us[model] < other.plan_us[model]


@dataclass
class SearchResult:
    greedy: Plan
    plans: list[Plan]
    """The plans that passed the check, fastest first (greedy included)."""
    explored: int
    dropped: int
    seconds: float
    unchecked: str | None = None
    """Why no plan's values could be checked (the module cannot be run: elided constants)."""

    @property
    def best(self) -> Plan:
        return self.plans[0]

    def disagreements(self) -> list[str]:
        """Plans that the two fusion cost models order differently against greedy."""
        g = self.greedy
        out = []
        for i, p in enumerate(self.plans):
            if p is g:
                continue
            votes = {m: p.faster_than(g, m) for m in MODELS}
            if len(set(votes.values())) > 1:
                fast = [m for m, v in votes.items() if v]
                out.append(f"plan {i + 1}: faster than greedy under {', '.join(fast)} only")
        return out


def _split_pipeline(pipeline: str) -> tuple[list[Any], Any, list[Any]]:
    from hlopass.pipeline import parse_pass_pipeline

    passes = parse_pass_pipeline(pipeline)
    at = [i for i, p in enumerate(passes) if p.name == "priority-fusion"]
    if len(at) != 1:
        raise SearchError(
            f"error: the pipeline must hold priority-fusion exactly once (it holds it {len(at)} times)"
        )
    i = at[0]
    return passes[:i], passes[i], passes[i + 1 :]


def search(module: ModuleOp, pipeline: str, *, budget: int = 500, top: int = 3,
           device: str | None = None, strategy: str = "beam", width: int = 4,
           branch: int = 8, finalists: int = 8, check: bool = True, seed: int = 0,
           space: Callable[..., SearchSpace] = FusionSpace) -> SearchResult:  # fmt: skip
    """Search around the greedy plan of `pipeline` on a copy of `module` (see the module
    docstring); `budget` plans priced at most; the `finalists` best by plan price are built
    and priced whole besides greedy, and the `top` best of them reported.
    `space(module, device, cost_model, max_temp_bytes)` makes the space searched."""
    from hlopass.pipeline import Runner

    if strategy not in STRATEGIES:
        raise SearchError(
            f"error: unknown strategy '{strategy}' (strategies: {', '.join(STRATEGIES)})"
        )
    if budget < 1 or top < 0:
        raise SearchError("error: the budget must be at least 1 and top at least 0")
    start = time.perf_counter()
    prefix, fusion, suffix = _split_pipeline(pipeline)
    dev = device or fusion.device
    base = module.clone()
    # a space of whole pipelines (`PipelineSpace`) starts before any pass and runs them all
    whole = bool(getattr(space, "whole_pipeline", False))
    if whole:
        prefix, suffix = [], []
        plans = space(base, dev, fusion.cost_model, fusion.max_temp_bytes, pipeline=pipeline)
    else:
        Runner().run(prefix, base)
        plans = space(base, dev, fusion.cost_model, fusion.max_temp_bytes)
    priced = STRATEGIES[strategy](plans, Budget(budget), branch=branch, width=width)
    root, *others = priced
    failed = [
        p for p in others if not math.isfinite(p.time_us)
    ]  # a plan a pass failed on, or a space could not make
    others = [p for p in others if math.isfinite(p.time_us)]
    others.sort(key=lambda p: (p.time_us, len(p.decisions), sorted(p.decisions)))
    inputs, unchecked = _inputs(base, seed) if check else (None, "not asked")
    finals = _Finals(plans, suffix, base, inputs, dev, dropped=len(failed))
    for p in [root, *others[: max(top, finalists)]]:
        finals.add(p, is_root=p is root)
    built, dropped = finals.built, finals.dropped
    greedy = built[0]
    built.sort(key=lambda b: (b.time_us, b is not greedy))
    shown = {id(b) for b in [b for b in built if b is not greedy][:top]}
    built = [b for b in built if b is greedy or id(b) in shown]
    seconds = time.perf_counter() - start
    return SearchResult(greedy, built, len(priced), dropped, seconds, unchecked)


@dataclass
class _Finals:
    """The finalists built, run through the rest of the pipeline, checked and estimated;
    plans the space says build the same module (`plan_key`) are built once."""

    space: SearchSpace
    suffix: list[Any]
    base: ModuleOp
    inputs: list[Any] | None
    device: str
    built: list[Plan] = field(default_factory=list)
    dropped: int = 0
    done: dict[Hashable, Plan | None] = field(default_factory=dict)
    """What each plan key's first build gave (None: dropped by the check)."""

    def add(self, p: Priced, is_root: bool) -> None:
        import hlopass.cost
        from hlopass.pipeline import Runner

        key = self.space.plan_key(p.decisions)
        if key in self.done:
            first = self.done[key]
            if first is None:
                self.dropped += 1
            elif getattr(self.space, "distinct_plans", False):
                pass  # the space reports one plan per module: the first, fewest decisions
            else:  # the same module: its check and estimate hold, a copy of its own
                self.built.append(Plan(sorted(p.decisions), first.time_us, dict(p.by_model),
                                       first.module.clone(), [dict(r) for r in first.kernels]))  # fmt: skip
            return
        m = self.space.build(p.decisions)
        Runner().run(self.suffix, m)
        if self.inputs is not None and not _keeps_values(self.base, m, self.inputs):
            if is_root:  # the pipeline's own plan: nothing to compare the others with
                raise SearchError("error: the greedy plan does not keep the module's values")
            self.dropped += 1
            self.done[key] = None
            return
        est = hlopass.cost.estimate(m, self.device)
        plan = Plan(sorted(p.decisions), est.time_us, dict(p.by_model), m, est.rows())
        self.built.append(plan)
        self.done[key] = plan


def _inputs(module: ModuleOp, seed: int) -> tuple[list[Any] | None, str | None]:
    """Random inputs for the equivalence check, or (None, why) when `module` cannot run."""
    import hlopass
    from hlopass.execution.inputs import random_inputs
    from hlopass.interpreter import elided_constant, elided_message

    # the run would refuse an elided constant anyway, after the inputs were drawn (seed
    # 001's 68 parameters: 3.7 s of its search)
    found = elided_constant(module)
    if found is not None:
        return None, elided_message(*found)
    try:
        args = random_inputs(module, seed)
        r, n = _devices(module)
        hlopass.evaluate(module, *args, replicas=r, partitions=n)
    except HloError as e:
        return None, str(e).strip().splitlines()[0].removeprefix("error: ")
    return args, None


def _devices(module: ModuleOp) -> tuple[int, int]:
    """The module's replicas and partitions (its collectives run across them)."""
    r, n = (module.attributes.get(f"hlo.{k}") for k in ("replica_count", "num_partitions"))
    return int(getattr(r, "data", 1) or 1), int(getattr(n, "data", 1) or 1)


def _keeps_values(before: ModuleOp, after: ModuleOp, inputs: list[Any]) -> bool:
    """The plan gives `before`'s outputs; a plan the interpreter cannot run fails. A module
    over several devices is run on all of them (the same inputs on each), every device's
    outputs compared (float rounding of combined or one-shot collectives allowed)."""
    import numpy as np

    import hlopass
    from hlopass.checking.equivalence import check_equivalent

    r, n = _devices(before)
    try:
        if r * n == 1:
            return bool(check_equivalent(before, after, inputs))
        want = hlopass.evaluate(before, *inputs, replicas=r, partitions=n)
        got = hlopass.evaluate(after, *inputs, replicas=r, partitions=n)
    except HloError:
        return False
    pairs = [(w, g) for dw, dg in zip(want, got, strict=True) for w, g in zip(dw, dg, strict=True)]  # type: ignore[arg-type]
    return all(
        np.shape(w) == np.shape(g) and np.allclose(w, g, rtol=1e-5, atol=1e-6, equal_nan=True)
        for w, g in pairs
    )
