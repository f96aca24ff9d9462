"""The step time of a packing plan: the module packed on a copy (then fused, by default,
so that its kernels are priced as they will run), its collectives made asynchronous and scheduled as XLA GPU runs them (`async-collective-creator`, then
`latency-hiding-scheduler`), priced by the cost model's two-stream critical path
(`Estimate.step_us`). What `spec=auto` ranks its candidates by where the gradients'
all-reduces can hide behind compute."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.cost import estimate, schedule_steps
from hlopass.cost.topology import Topology
from hlopass.dialects.hlo import entry_computation
from hlopass.passes.collectives.async_collective_creator import shape_bytes

from .spec import Band, format_spec

ASYNC = ("async-collective-creator{convert-all-reduce=true convert-all-gather=true "
         "convert-reduce-scatter=true},latency-hiding-scheduler{device=%s topology=%s}")  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One plan, scheduled: its step time, its collectives' summed time, and the first
    async collective's overlap (bytes, its transfer, the compute between start and done)."""

    step_us: float
    collective_us: float
    compute_us: float
    first: tuple[int, float, float] | None


def has_hideable_compute(module: ModuleOp, device: str, topo: Topology) -> bool:
    """The entry runs kernels besides its collectives: something a transfer can hide
    behind (otherwise the step is the collectives' time and ranking by it is the same)."""
    steps = schedule_steps(entry_computation(module), device, topo)
    return any(s.stream == "compute" and s.us > 0 for s in steps)


@dataclass
class StepPricer:
    """Prices plans of `module` (a copy each, pipelines through the registry)."""

    module: ModuleOp
    device: str
    topo: Topology
    gpus_per_host: int
    after: str = ""  # passes run before the async ones (fusion: kernels as they will run)
    memo: dict[tuple[Any, ...], Step] = field(default_factory=dict)

    def __call__(self, bands: tuple[Band, ...], max_bytes: int, max_group: int) -> Step:
        key = (bands, max_bytes, max_group)
        if key not in self.memo:
            self.memo[key] = self._price(bands, max_bytes, max_group)
        return self.memo[key]

    def _price(self, bands: tuple[Band, ...], max_bytes: int, max_group: int) -> Step:
        from hlopass.pipeline import Runner, parse_pass_pipeline

        trial = self.module.clone()
        spec = (f'gradient-packing{{spec="{format_spec(bands)}" max-bytes={max_bytes} '
                f"max-group={max_group} gpus-per-host={self.gpus_per_host} "
                f"device={self.device}}},"
                + (f"{self.after}," if self.after.strip() else "")
                + ASYNC % (self.device, self.topo.name))  # fmt: skip
        Runner().run(parse_pass_pipeline(spec), trial)
        est = estimate(trial, self.device, self.topo)
        coll = sum(k.time_us * k.count for k in est.kernels if k.kind == "collective")
        steps = schedule_steps(entry_computation(trial), self.device, self.topo)
        compute = sum(s.us for s in steps if s.stream == "compute")
        return Step(est.step_us, coll, compute, _first_overlap(trial, steps))


def _first_overlap(module: ModuleOp, steps: list[Any]) -> tuple[int, float, float] | None:
    """(bytes, transfer µs, compute µs scheduled between start and done) of the entry's
    first async all-reduce."""
    ops = {op.inst_name: op for op in entry_computation(module).instructions}
    for i, s in enumerate(steps):
        if s.stream != "async" or ops[s.name].OPCODE != "all-reduce-start":
            continue
        hidden = 0.0
        for later in steps[i + 1 :]:
            if later.stream == "done" and s.name in later.deps:
                break
            if later.stream == "compute":
                hidden += later.us
        return shape_bytes(ops[s.name].shape), s.us, hidden
    return None
