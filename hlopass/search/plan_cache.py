"""Prices kept across the plans of one search space, keyed by what a kernel is.

Each plan replays priority fusion's queue on fresh `Kernel`s (fresh ids, so the fusion
passes' own caches, keyed by `id(kernel)`, cannot outlive a plan). But every answer the
queue asks for (a kernel's time, a producer fused into a consumer, XLA's refusal of that
fusion, a kernel's facts) depends only on which instructions the kernels hold and which
they write: the same producer-consumer pair priced in one plan is the same pair in the
next. `PlanCache` keeps those answers by a structural key (the kernel's instruction set and
its outputs, interned to a small int), so a plan that differs from an earlier one by one
decision computes only the kernels and pairs that decision changed; everything else is a
dictionary look-up. The keys name instructions of the space's own module copy by `id`;
that copy lives as long as the space, so the ids are never reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.kernel_structure.plan import Kernel
from hlopass.passes.fusion.rules import Facts, Rules

_MISSING = object()  # a cached refusal may be None (allowed), so None cannot mean "not cached"


class PlanCache:
    """Answers shared by every plan of one space: kernel keys and what was priced by them."""

    def __init__(self) -> None:
        self.keys: dict[tuple[frozenset[int], tuple[int, ...]], int] = {}
        self.times: dict[tuple[str, int], float] = {}
        self.fused: dict[tuple[str, int, int], float] = {}
        self.refusals: dict[tuple[int, int], str | None] = {}
        self.facts: dict[int, Facts] = {}
        self.candidates: dict[int, bool] = {}
        """Whether each instruction (by id) may be queued at all: fixed by the module."""

    def plan(self) -> PlanKeys:
        """Keys for one plan's kernels (kernel ids are only valid within a plan)."""
        return PlanKeys(self)


class PlanKeys:
    """The structural key of each kernel of one plan, recomputed when the kernel grows."""

    def __init__(self, cache: PlanCache):
        self.cache = cache
        self.of: dict[int, tuple[int, int]] = {}  # id(kernel) -> (version, key)

    def key(self, k: Kernel) -> int:
        hit = self.of.get(id(k))
        if hit is not None and hit[0] == k.version:
            return hit[1]
        shape = (frozenset(k.ids), tuple(id(o) for o in k.outputs))
        keys = self.cache.keys
        key = keys.get(shape)
        if key is None:
            key = keys[shape] = len(keys)
        self.of[id(k)] = (k.version, key)
        return key


class CachedModel(FusionCostModel):
    """A fusion cost model whose kernel and pair prices are looked up by structure first;
    `inner` (cleared between plans) prices what was never seen."""

    def __init__(self, inner: FusionCostModel, keys: PlanKeys):
        super().__init__(inner.device)
        self.inner = inner
        self.name = inner.name
        self.keys = keys
        self.cache = keys.cache

    def kernel_time_us(self, members: Sequence[Any], outputs: Sequence[Any]) -> float:
        return self.inner.kernel_time_us(members, outputs)

    def price_kernel(self, k: Kernel) -> float:
        key = (self.name, self.keys.key(k))
        t = self.cache.times.get(key)
        if t is None:
            t = self.cache.times[key] = self.inner.time_us(k)
        return t

    def price_fused(self, producer: Kernel, consumer: Kernel) -> float:
        key = (self.name, self.keys.key(producer), self.keys.key(consumer))
        t = self.cache.fused.get(key)
        if t is None:
            t = self.cache.fused[key] = self.inner.fused_time_us(producer, consumer)
        return t

    def ir_size(self, k: Kernel) -> tuple[dict[int, float], float, float]:
        return self.inner.ir_size(k)

    def invalidate(self, k: Kernel) -> None:
        super().invalidate(k)
        self.inner.invalidate(k)


class CachedRules(Rules):
    """XLA's CanFuse with its answers and kernel facts looked up by structure first (they
    depend on the two kernels, the computation's root and the module, all fixed within a
    space's computation)."""

    def __init__(self, model: FusionCostModel, comps: dict[str, ComputationOp],
                 roots: set[int], keys: PlanKeys):  # fmt: skip
        super().__init__(model, comps, roots)
        self.keys = keys
        self.cache = keys.cache

    def facts(self, k: Kernel) -> Facts:
        key = self.keys.key(k)
        f = self.cache.facts.get(key)
        if f is None:
            f = self.cache.facts[key] = super().facts(k)
        return f

    def can_fuse(self, producer: Kernel, consumer: Kernel) -> str | None:
        key = (self.keys.key(producer), self.keys.key(consumer))
        why = self.cache.refusals.get(key, _MISSING)
        if why is _MISSING:
            why = self.cache.refusals[key] = super().can_fuse(producer, consumer)
        return why  # type: ignore[return-value]


def candidate(cache: PlanCache, op: HloOp, decide: Any) -> bool:
    """`decide(op)` (may `op` be queued), asked once per instruction per space."""
    hit = cache.candidates.get(id(op))
    if hit is None:
        hit = cache.candidates[id(op)] = bool(decide(op))
    return hit
