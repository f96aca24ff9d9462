"""The fusion search space: alternatives to `priority-fusion`'s plan.

A decision flips one of the priority pass's producer decisions: `keep:NAME` leaves a
producer the greedy pass fused as a kernel of its own; `fuse:NAME` fuses a producer it kept
because fusing looked slower (XLA's rules still apply: a refused fusion stays refused). The
rest of the plan is XLA's priority queue run again around the flipped decisions, so a
flipped fusion can open (or close) later ones: that is how a plan beats the greedy one.

Everything is reused from `hlopass.passes.fusion` (graph, rules, cost model, the driver and
the rewrite); `PlanDriver` only overrides the producer priority. Plans are priced on the
kernel plan, nothing built: fused computations are opened once, and each plan replays the
queue on fresh `Kernel`s. The passes' own caches are keyed by kernel id (an earlier plan's
ids may be reused by Python), so they are fresh per plan; what they would compute is kept
across plans by the kernels' structure instead (`plan_cache.py`): a plan re-prices only the
kernels and pairs its decisions changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.cost.fusion_models import fusion_cost_model
from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.passes.fusion.graph import FusionGraph
from hlopass.passes.fusion.priority import (
    Fuel,
    PriorityFusionDriver,
    Step,
    fusible_computations,
    open_existing_fusions,
    replay,
)
from hlopass.passes.fusion.rewrites import FusionBuilder, settle
from hlopass.passes.fusion.rules import Rules, is_bitcast_kernel
from hlopass.rewriting import RewriteContext, comps_by_name
from hlopass.search.plan_cache import CachedModel, CachedRules, PlanCache, PlanKeys, candidate
from hlopass.search.space import Choice, Decisions, Priced, SearchSpace

KEPT_BY_PLAN = "kept by the search plan"
SLOWER = "slower if fused"
# Not kernels of their own: control flow's kernels are those of the computations it calls,
# planned (and priced) as computations of their own.
_NOT_KERNELS = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "tuple",
        "call",
        "while",
        "conditional",
        "domain",
    }
)
MODELS = ("default", "roofline")


@dataclass
class PlanDriver(PriorityFusionDriver):
    """XLA's priority queue with some producer decisions flipped by a plan."""

    keep: frozenset[str] = frozenset()
    """Producers left unfused."""
    force: frozenset[str] = frozenset()
    """Producers fused although the model priced the fusion slower."""
    cache: PlanCache | None = None
    """Answers kept across the plans of one space (None: none kept)."""

    def candidate(self, op: HloOp) -> bool:  # type: ignore[override]
        if self.cache is None:
            return PriorityFusionDriver.candidate(op)
        return candidate(self.cache, op, PriorityFusionDriver.candidate)

    def priority(self, k: Any) -> float | None:
        prio = super().priority(k)
        name = k.root.inst_name
        if name in self.keep and not is_bitcast_kernel(k):
            record = self.records.get(id(k.root))
            if record is not None:
                record.reason = KEPT_BY_PLAN
            return None
        if prio is not None and prio < 0 and name in self.force:
            return 0.0  # queued last among the fusions that pay
        return prio


@dataclass
class _Opened:
    """One fusible computation with its existing fusions opened (the plan's seeds)."""

    comp: ComputationOp
    seeds: list[tuple[HloOp, list[HloOp]]]
    comps: dict[str, ComputationOp]
    seeded: tuple[FusionGraph, list[Step]] | None = None
    """The graph with the seeds fused, and the steps that rebuild them: made once, each plan
    starts from a copy (merging the seeds again was a third of a plan's time on seed 001)."""

    def start(self, rules: Rules, model: FusionCostModel) -> tuple[FusionGraph, list[Step]]:
        """A copy of the seeded graph, and its steps."""
        if self.seeded is None:
            d = PriorityFusionDriver(FusionGraph(self.comp), rules, model, Fuel(-1))
            d.seed(self.seeds)
            self.seeded = (d.graph, d.steps)
        graph, steps = self.seeded
        return graph.copy(), list(steps)


def _open(module: ModuleOp) -> list[_Opened]:
    out = []
    for comp in fusible_computations(module):
        seeds = open_existing_fusions(module, comp)
        out.append(_Opened(comp, seeds, comps_by_name(module)))
    return out


def _split(decisions: Decisions) -> tuple[frozenset[str], frozenset[str]]:
    keep = frozenset(d.split(":", 1)[1] for d in decisions if d.startswith("keep:"))
    force = frozenset(d.split(":", 1)[1] for d in decisions if d.startswith("fuse:"))
    return keep, force


@dataclass
class FusionSpace(SearchSpace):
    """Flipped priority-fusion decisions on `module` (left untouched)."""

    module: ModuleOp
    device: str = "h100_sxm"
    cost_model: str = "default"
    """The model the priority queue and the search's ranking use."""
    max_temp_bytes: int = -1
    name = "fusion"
    _opened: list[_Opened] = field(default_factory=list, init=False, repr=False)
    _cache: PlanCache = field(default_factory=PlanCache, init=False, repr=False)
    _inner: dict[str, FusionCostModel] = field(default_factory=dict, init=False, repr=False)
    _steps: dict[Decisions, tuple[Any, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._base = self.module.clone()
        self._opened = _open(self._base)
        # the models that price what the cache has not seen, kept across plans (the default
        # model's analysis of the module is made once) and cleared of kernel ids per plan
        for name in {*MODELS, self.cost_model}:
            self._inner[name] = fusion_cost_model(name, self.device)

    def _drive(self, opened: list[_Opened], decisions: Decisions, model: FusionCostModel,
               keys: PlanKeys | None = None) -> list[PlanDriver]:  # fmt: skip
        keep, force = _split(decisions)
        fuel = Fuel(-1)
        drivers = []
        for o in opened:
            roots = {id(o.comp.root)}
            rules = (Rules(model, o.comps, roots) if keys is None
                     else CachedRules(model, o.comps, roots, keys))  # fmt: skip
            # a build seeds its own copy; so does a plan under the live-bytes guard (the
            # guard's ranges are seeded along)
            fresh = keys is None or self.max_temp_bytes >= 0
            graph, steps = (FusionGraph(o.comp), []) if fresh else o.start(rules, model)
            d = PlanDriver(graph, rules, model, fuel, steps=steps,
                           max_temp_bytes=self.max_temp_bytes, keep=keep, force=force,
                           cache=None if keys is None else keys.cache)  # fmt: skip
            if fresh:
                d.seed(o.seeds)
            d.run()
            drivers.append(d)
        return drivers

    def price(self, decisions: Decisions) -> Priced:
        keys = self._cache.plan()
        models = {}
        for name, inner in self._inner.items():
            inner.clear()
            models[name] = CachedModel(inner, keys)
        drivers = self._drive(self._opened, decisions, models[self.cost_model], keys)
        kernels = [
            k
            for d in drivers
            for k in d.graph.kernel.values()
            if k.alive and k.root.opcode not in _NOT_KERNELS and not is_bitcast_kernel(k)
        ]
        # a kernel's price is kept by what it holds and writes (`CachedModel`): a plan that
        # differs from the last in one decision prices only the kernels that decision changed
        by_model: dict[str, float] = {
            name: sum(models[name].time_us(k) for k in kernels) for name in MODELS
        }
        self._steps[decisions] = tuple(
            (id(st.producer), *map(id, st.consumers)) for d in drivers for st in d.steps
        )
        return Priced(decisions, by_model[self.cost_model], by_model,
                      _choices(drivers, decisions), len(kernels))  # fmt: skip

    def plan_key(self, decisions: Decisions) -> Any:
        """A priced plan's fusion steps (instructions of the space's own copy, by id): a
        build replays exactly these, so plans with the same steps build the same module."""
        return self._steps.get(decisions, decisions)

    def build(self, decisions: Decisions) -> ModuleOp:
        module = self.module.clone()
        opened = _open(module)
        drivers = self._drive(opened, decisions, fusion_cost_model(self.cost_model, self.device))
        builder = FusionBuilder(module)
        ctx = RewriteContext.of(module, None)
        current: dict[int, HloOp] = {}
        changed = False
        for d in drivers:
            replay(d.steps, builder, ctx, current)
            changed |= bool(d.steps)
        builder.finish()
        if changed:
            settle(module)
        return module


def _choices(drivers: list[PlanDriver], decisions: Decisions) -> list[Choice]:
    """Flips open from a plan, the greedy pass's closest calls first: fusions that gained
    least (`keep:`), then refusals that lost least (`fuse:`)."""
    out = []
    for d in drivers:
        for r in d.fused_records:
            if r.unfused_us is not None and r.fused_us is not None:
                out.append(Choice(f"keep:{r.producer}", r.unfused_us - r.fused_us))
        for r in d.records.values():
            if r.reason == SLOWER and r.unfused_us is not None and r.fused_us is not None:
                out.append(Choice(f"fuse:{r.producer}", r.fused_us - r.unfused_us))
    taken = {d.split(":", 1)[1] for d in decisions}
    out = [c for c in out if c.decision.split(":", 1)[1] not in taken]
    out.sort(key=lambda c: (c.score, c.decision))
    return out
