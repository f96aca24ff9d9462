"""The fusion search space: alternatives to `priority-fusion`'s plan.

A decision flips one of the priority pass's producer decisions: `keep:NAME` leaves a
producer the greedy pass fused as a kernel of its own; `fuse:NAME` fuses a producer it kept
because fusing looked slower (XLA's rules still apply: a refused fusion stays refused). The
rest of the plan is XLA's priority queue run again around the flipped decisions, so a
flipped fusion can open (or close) later ones: that is how a plan beats the greedy one.

Everything is reused from `hlopass.passes.fusion` (graph, rules, cost model, the driver and
the rewrite); `PlanDriver` only overrides the producer priority. Plans are priced on the
kernel plan, nothing built: fused computations are opened once, and each plan replays the
queue on fresh `Kernel`s with fresh model caches (kernel ids of an earlier plan may be
reused by Python, so caches are never shared between plans).
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
    fusible_computations,
    open_existing_fusions,
    replay,
)
from hlopass.passes.fusion.rewrites import FusionBuilder, settle
from hlopass.passes.fusion.rules import Rules, is_bitcast_kernel
from hlopass.rewriting import RewriteContext, comps_by_name
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
    _prices: dict[tuple[str, frozenset[int], tuple[int, ...]], float] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self._base = self.module.clone()
        self._opened = _open(self._base)

    def _drive(self, opened: list[_Opened], decisions: Decisions,
               model: FusionCostModel) -> list[PlanDriver]:  # fmt: skip
        keep, force = _split(decisions)
        fuel = Fuel(-1)
        drivers = []
        for o in opened:
            rules = Rules(model, o.comps, {id(o.comp.root)})
            d = PlanDriver(FusionGraph(o.comp), rules, model, fuel,
                           max_temp_bytes=self.max_temp_bytes, keep=keep, force=force)  # fmt: skip
            d.seed(o.seeds)
            d.run()
            drivers.append(d)
        return drivers

    def price(self, decisions: Decisions) -> Priced:
        model = fusion_cost_model(self.cost_model, self.device)
        drivers = self._drive(self._opened, decisions, model)
        kernels = [
            k
            for d in drivers
            for k in d.graph.kernel.values()
            if k.alive and k.root.opcode not in _NOT_KERNELS and not is_bitcast_kernel(k)
        ]
        by_model = {}
        for name in MODELS:
            m = model if name == self.cost_model else fusion_cost_model(name, self.device)
            by_model[name] = sum(self._kernel_us(name, m, k) for k in kernels)
        return Priced(decisions, by_model[self.cost_model], by_model,
                      _choices(drivers, decisions), len(kernels))  # fmt: skip

    def _kernel_us(self, name: str, model: FusionCostModel, k: Any) -> float:
        """A kernel's price, kept across plans by what it holds and writes: a plan that
        differs from the last in one decision prices only the kernels that decision changed
        (the instructions are the space's own copy, alive as long as it is, so their ids
        are never reused)."""
        key = (name, frozenset(k.ids), tuple(id(o) for o in k.outputs))
        t = self._prices.get(key)
        if t is None:
            t = self._prices[key] = model.time_us(k)
        return t

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
