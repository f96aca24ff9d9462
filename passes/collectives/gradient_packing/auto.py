"""`spec=auto`: the interconnect model (`hlopass.cost.collectives`) prices every algorithm
for each gradient size and every packing threshold, and the cheapest become the spec.

A gradient of S bytes over groups of n devices costs, per algorithm, the sum of its
collectives' times (each with its launch): `nccl` one all-reduce; `xring` a reduce-scatter
and an all-gather; `#k` k all-reduces of S/k plus one HBM pass to concatenate them;
`a/b` (groups over several hosts) the stage inside each host (all-reduce of S, or
reduce-scatter of S and all-gather of S for `xring`) and the all-reduce across hosts of S
(or S/g after a reduce-scatter over g GPUs), priced by `b`. A pack costs its algorithm on
the summed bytes plus two HBM passes (concatenate, slices) over them.

Sizes are ranked first: each distinct element count takes its cheapest algorithm over all
the gradients of that size, and neighbouring sizes with the same winner make one band.
Then each threshold (0, and each gradient's byte size) is priced with those bands, under the
seed's group limit and under one pack for all: the plan's packs and single gradients summed;
the cheapest threshold and limit win (the smaller on ties).

Summed, the collectives always favour one pack for all. Where the module has compute the
all-reduces can hide behind, each candidate is also scheduled as XLA GPU runs it (`steps`:
async collectives, latency-hiding scheduler) and priced by its step (the critical path of
compute and communication streams): several buckets win where the first ones' transfers
overlap the compute still running (the backward pass of earlier layers), which one
all-reduce at the end cannot. A step shorter by less than 0.1% keeps the cheapest
collectives' plan, so where overlap gives nothing the choice is the one above.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from hlopass.cost.collectives import CollectiveShape, collective_time_us, module_devices
from hlopass.cost.topology import Topology, interconnect
from hlopass.dialects.hlo import ComputationOp, HloOp

from .groups import device_groups, split_by_host
from .plan import plan_computation
from .spec import Band, format_spec
from .steps import Step

# a plan's scheduled step: (bands, max-bytes, max-group) -> Step (`steps.StepPricer`)
Stepper = Callable[[tuple[Band, ...], int, int], Step]

FLAT = (Band("nccl"), Band("xring"), Band("nccl", 2), Band("xring", 2))
HIERARCHICAL = tuple(Band(a, 1, b) for a in ("nccl", "xring") for b in ("nccl", "xring"))


@dataclass(frozen=True)
class Gradient:
    """What the model needs of one gradient all-reduce."""

    elements: int
    nbytes: int
    groups: tuple[tuple[int, ...], ...]


def topology_for(module: object, gpus_per_host: int, device: str) -> Topology:
    """Enough hosts of `gpus_per_host` GPUs (links of `device`) for the module's devices."""
    hosts = max(1, math.ceil(module_devices(module) / gpus_per_host))
    return Topology(hosts, gpus_per_host, interconnect(device))


@dataclass(frozen=True)
class Pricer:
    topo: Topology

    def _one(self, kind: str, nbytes: float, group: list[int] | tuple[int, ...]) -> float:
        c = CollectiveShape(kind, nbytes, len(group), self.topo.hosts_spanned(list(group)))
        return collective_time_us(c, self.topo.links)

    def _flat(self, alg: str, nbytes: float, group: list[int] | tuple[int, ...]) -> float:
        if alg == "xring":
            return sum(self._one(k, nbytes, group) for k in ("reduce-scatter", "all-gather"))
        return self._one("all-reduce", nbytes, group)

    def hbm_us(self, nbytes: float) -> float:
        """One read and one write of `nbytes` in HBM."""
        return 2 * nbytes / self.topo.links.hbm_bandwidth * 1e6

    def time_us(self, band: Band, nbytes: float, groups: tuple[tuple[int, ...], ...]) -> float:
        """µs of `band`'s algorithm on a gradient of `nbytes` over `groups` (the groups run
        at once on disjoint devices: one group's time)."""
        if band.shards > 1:
            one = Band(band.alg, 1, band.inner)
            pieces = band.shards * self.time_us(one, nbytes / band.shards, groups)
            return pieces + self.hbm_us(nbytes)
        group = groups[0]
        inner = band.inner
        split = split_by_host([list(g) for g in groups], self.topo.gpus_per_host) if inner else None
        if inner is None or split is None:
            return self._flat(band.alg, nbytes, group)
        intra, inter = split
        if band.alg == "xring":
            local = self._flat("xring", nbytes, intra[0])
            return local + self._flat(inner, nbytes / len(intra[0]), inter[0])
        return self._one("all-reduce", nbytes, intra[0]) + self._flat(inner, nbytes, inter[0])


def gradients_of(comps: list[ComputationOp], by_name: dict[str, ComputationOp]) -> list[Gradient]:
    out = []
    for comp in comps:
        for op in plan_computation(comp, by_name, (Band("nccl"),), 0, 0).bands:
            out.append(_gradient(op))
    return out


def _gradient(op: HloOp) -> Gradient:
    shape = op.shape
    groups = device_groups(op) or [[0]]
    return Gradient(shape.num_elements, shape.byte_size(), tuple(tuple(g) for g in groups))  # type: ignore[attr-defined]


BUCKET_LIMIT = 8
"""The most gradients per pack `auto` tries as a bucket size where it ranks by the step
(each candidate is a scheduled copy of the module to price)."""


@dataclass
class Choice:
    """What `auto` chose, and the lines `explain` prints."""

    bands: tuple[Band, ...]
    max_bytes: int
    max_group: int
    lines: list[str]

    @property
    def spec(self) -> str:
        return format_spec(self.bands)


def choose(comps: list[ComputationOp], by_name: dict[str, ComputationOp], topo: Topology,
           max_group: int, stepper: Stepper | None = None) -> Choice:  # fmt: skip
    """The cheapest bands, then the cheapest packing threshold with them; with `stepper`
    (a plan's scheduled step), the threshold of the shortest step where overlap makes it
    shorter than the cheapest collectives' step."""
    pricer = Pricer(topo)
    grads = gradients_of(comps, by_name)
    spans = any(topo.hosts_spanned(list(g.groups[0])) > 1 for g in grads)
    candidates = FLAT + (HIERARCHICAL if spans else ())
    lines = [f"gradient-packing auto on {topo.name} ({len(grads)} gradient all-reduces)"]
    best_by_size: dict[int, Band] = {}
    for elements in sorted({g.elements for g in grads}):
        same = [g for g in grads if g.elements == elements]
        times = {c: sum(pricer.time_us(c, g.nbytes, g.groups) for g in same) for c in candidates}
        best = min(candidates, key=lambda c: times[c])
        best_by_size[elements] = best
        shown = ", ".join(f"{c.text()} {t:.2f} us" for c, t in times.items())
        lines.append(f"  size {elements} elements x{len(same)}: {shown} -> {best.text()}")
    bands = _bands(best_by_size)
    lines.append(f"  bands: {format_spec(bands)}")
    tried: list[Candidate] = []

    def attempt(threshold: int, group: int) -> None:
        t, count = plan_time(comps, by_name, bands, threshold, group, pricer)
        step = stepper(bands, threshold, group) if stepper is not None else None
        tried.append(Candidate(threshold, group, t, count, step))
        shown = f", step {step.step_us:.2f} us" if step is not None else ""
        lines.append(f"  max-bytes={threshold} max-group={group}: {count} all-reduces, "
                     f"{t:.2f} us{shown}")  # fmt: skip

    # the seed's group limit, and one pack for all (what XLA's combiner makes, short of its
    # byte threshold); the smaller wins ties
    groups = sorted({max_group, max(max_group, len(grads))})
    sizes = sorted({g.nbytes for g in grads})
    for group in groups:
        for threshold in [0, *sizes]:
            attempt(threshold, group)
    if stepper is not None:
        # buckets (PyTorch DDP's): every gradient packable, fewer per pack, so the first
        # packs can go while the backward pass still computes the later gradients
        for group in range(2, min(len(grads), BUCKET_LIMIT + 1)):
            if group not in groups:
                attempt(sizes[-1], group)
    best = _cheapest(tried)
    if stepper is not None:
        best, reason = _by_step(tried, best)
        lines.append(f"  reason: {reason}")
    shown = f", step {best.step.step_us:.2f} us" if best.step is not None else ""
    lines.append(
        f"  chosen: spec={format_spec(bands)} max-bytes={best.max_bytes} "
        f"max-group={best.max_group} ({best.us:.2f} us{shown})"
    )
    return Choice(bands, best.max_bytes, best.max_group, lines)


@dataclass(frozen=True)
class Candidate:
    """One packing threshold and group limit, priced."""

    max_bytes: int
    max_group: int
    us: float  # the collectives' summed time (`plan_time`)
    count: int
    step: Step | None  # the scheduled step, where ranked by it


def _cheapest(tried: list[Candidate]) -> Candidate:
    """The least summed collective time, the first tried (the smaller) on ties."""
    best = tried[0]
    for c in tried[1:]:
        if c.us < best.us - 1e-9:
            best = c
    return best


def _by_step(tried: list[Candidate], cheapest: Candidate) -> tuple[Candidate, str]:
    """The shortest step where it beats the cheapest collectives' step by more than 0.1%
    (ties go to fewer collectives, then to the cheaper ones), with the reason."""
    assert cheapest.step is not None
    base = cheapest.step.step_us
    best = min(tried, key=lambda c: (round(c.step.step_us, 6), c.count, c.us))  # type: ignore[union-attr]
    assert best.step is not None
    if best.step.step_us >= base * (1 - 1e-3):
        return cheapest, (f"overlap gives nothing over the cheapest collectives "
                          f"({cheapest.count} all-reduces, step {base:.2f} us)")  # fmt: skip
    why = f"{best.count} all-reduces"
    if best.step.first is not None:
        nbytes, transfer, hidden = best.step.first
        why += (f": the first {_human(nbytes)} all-reduce ({transfer:.1f} us) hides behind "
                f"{hidden:.1f} us of compute")  # fmt: skip
    return best, (f"{why}; step {best.step.step_us:.2f} us against {base:.2f} us for "
                  f"{cheapest.count} all-reduces of {cheapest.us:.2f} us "
                  f"(collectives here {best.us:.2f} us)")  # fmt: skip


def _human(n: float) -> str:
    for unit in ("B", "KiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} MiB"


def _bands(best_by_size: dict[int, Band]) -> tuple[Band, ...]:
    """Neighbouring sizes with the same winner as one band, each limited by its largest."""
    sizes = sorted(best_by_size)
    if not sizes:
        return (Band("nccl"),)
    bands: list[Band] = []
    for i, size in enumerate(sizes):
        band = best_by_size[size]
        last = i == len(sizes) - 1
        if not last and best_by_size[sizes[i + 1]] == band:
            continue
        bands.append(Band(band.alg, band.shards, band.inner, None if last else size))
    return tuple(bands)


def plan_time(comps: list[ComputationOp], by_name: dict[str, ComputationOp],
              bands: tuple[Band, ...], max_bytes: int, max_group: int,
              pricer: Pricer) -> tuple[float, int]:  # fmt: skip
    """µs of all the gradients' all-reduces under a spec, and how many there are."""
    total, count = 0.0, 0
    for comp in comps:
        plan = plan_computation(comp, by_name, bands, max_bytes, max_group)
        packed: set[HloOp] = set()
        for pack in plan.packs:
            grads = [_gradient(m) for m in pack.members]
            nbytes = sum(g.nbytes for g in grads)
            total += pricer.time_us(pack.band, nbytes, grads[0].groups) + 2 * pricer.hbm_us(nbytes)
            packed.update(pack.members)
            count += 1
        for op, band in plan.bands.items():
            if op not in packed:
                g = _gradient(op)
                total += pricer.time_us(band, g.nbytes, g.groups)
                count += 1
    return total, count
