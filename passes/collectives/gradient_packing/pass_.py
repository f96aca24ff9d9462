"""The pass `gradient-packing`: the seed's all-reduce spec applied to a module's gradient
all-reduces (see `spec`, `plan`, `rewrites`; `auto` for `spec=auto`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar, TextIO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import computations
from hlopass.passes.collectives.all_reduce_folder import ChannelIds
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    comps_by_name,
    fusion_computations,
    run_patterns,
)

from .auto import choose, topology_for
from .build import Lowering
from .plan import plan_computation
from .rewrites import HierarchicalAllReduce, PackRange, RingAllReduce, ShardAllReduce, topological
from .spec import parse_spec
from .steps import StepPricer, has_hideable_compute

_EXPLAIN: list[TextIO] = []


def explain_to(stream: TextIO | None) -> None:
    """Send every `spec=auto` run's candidates and estimates to `stream` (None: only where
    the pass's `explain` option asks, to stderr)."""
    _EXPLAIN.clear()
    if stream is not None:
        _EXPLAIN.append(stream)


@dataclass(frozen=True)
class GradientPackingPass(HloModulePass):
    """Rewrite each sum all-reduce by the band of the seed's all-reduce spec its size
    falls in (flat, ring, sharded, hierarchical), packing small neighbours first."""

    name: ClassVar[str] = "gradient-packing"

    spec: str = "nccl"
    """The seed's spec, `alg[#shards][/alg]` bands separated by `:limit:` (elements, with
    k/M/G suffixes), algorithms nccl and xring; or `auto` (chosen by the cost model)."""
    max_bytes: int = 0
    """The seed's agg_small_grads_max_bytes: gradients of at most this many bytes are
    packed with their neighbours (0: no packing; `auto` chooses its own)."""
    max_group: int = 10
    """The seed's agg_small_grads_max_group: at most this many gradients in one pack
    (`auto` tries this and one pack for all)."""
    gpus_per_host: int = 8
    """GPUs per host: device d is on host d / gpus-per-host (hierarchical `a/b`, `auto`)."""
    device: str = "h100_sxm"
    """The GPU whose links `auto` prices (a device name or a collective-table GPU key)."""
    explain: bool = False
    """`auto` prints every candidate and its estimate (stderr)."""
    rank_by_step: bool = True
    """`auto` ranks candidates by the step time of the module scheduled with async
    collectives (where it has compute to hide them behind), not only by the collectives'
    summed time."""
    price_after: str = "algsimp,cse,dce,priority-fusion"
    """The passes each candidate goes through (on a copy) before it is made async,
    scheduled and priced: the kernels it will run, not one per instruction."""

    def __post_init__(self) -> None:
        if self.spec.strip() != "auto":
            parse_spec(self.spec)  # a bad spec fails here: one line, before any run
        if self.gpus_per_host < 1:
            raise ValueError("gpus-per-host must be at least 1")

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        by_name = comps_by_name(module)
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        if self.spec.strip() == "auto":
            topo = topology_for(module, self.gpus_per_host, self.device)
            stepper = None
            if self.rank_by_step and has_hideable_compute(module, self.device, topo):
                stepper = StepPricer(
                    module, self.device, topo, self.gpus_per_host, self.price_after
                )
            choice = choose(comps, by_name, topo, self.max_group, stepper)
            stream = _EXPLAIN[0] if _EXPLAIN else (sys.stderr if self.explain else None)
            if stream is not None:
                print("\n".join(choice.lines), file=stream)
            bands, max_bytes, max_group = choice.bands, choice.max_bytes, choice.max_group
        else:
            bands, max_bytes, max_group = parse_spec(self.spec), self.max_bytes, self.max_group
        state = Lowering(
            RewriteContext.of(module, trace), ChannelIds.of(module), self.gpus_per_host
        )
        changed = False
        for comp in comps:
            plan = plan_computation(comp, by_name, bands, max_bytes, max_group)
            state.todo.update(plan.bands)
            for pack in plan.packs:
                PackRange(state)(pack)
            if plan.packs:
                topological(comp)
                changed = True
        patterns = [ShardAllReduce(state), HierarchicalAllReduce(state), RingAllReduce(state)]
        return run_patterns(module, patterns, comps) or changed
