"""`priority-fusion`: XLA's GPU producer-consumer fusion (PriorityFusion).

Strategy (`PriorityFusionDriver`): a priority queue of producers keyed by the benefit of
fusing each into all its readers, `time_unfused - time_fused` from a `FusionCostModel`
(each kernel pays a 1 µs launch). The best producer is fused into every non-bitcast reader
or into none (`rules.Rules`, XLA's reasons); afterwards only the new fusions and the
producers they read are re-priced, and the cost model re-estimates only kernels that
changed. Bitcasts go first; constants are never queued, and those of at most one element
are fused into their readers at the end (larger ones stay parameters of the kernels).

The driver plans on the original instructions (every kernel priced by `estimate`-style
group work, nothing built); the rewrite `FuseProducerIntoConsumers` then replays the plan
on the IR. Other strategies reuse the graph, rules, cost model and rewrite unchanged.
"""

from __future__ import annotations

import heapq
import math
import os
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.cost.fusion_cost_model import FusionCostModel, RunTimes
from hlopass.cost.fusion_models import fusion_cost_model
from hlopass.dialects.hlo import ComputationOp, HloOp, entry_computation
from hlopass.kernel_structure.plan import Kernel
from hlopass.passes.fusion.book import ConsumerBook
from hlopass.passes.fusion.explain import FusionRecord
from hlopass.passes.fusion.graph import FusionGraph
from hlopass.passes.fusion.memory_guard import LiveBytes, guard_reason
from hlopass.passes.fusion.pass_base import PricedFusionPass
from hlopass.passes.fusion.rewrites import (
    FuseProducerIntoConsumers,
    FusionBuilder,
    settle,
)
from hlopass.passes.fusion.rules import (
    NO_USERS,
    NOT_FUSIBLE_PRODUCER,
    ONLY_BITCAST_USERS,
    Rules,
    is_bitcast_kernel,
    scatter_rule,
)
from hlopass.passes.fusion.settle import adopt
from hlopass.passes.fusion.triton_fusible import retile
from hlopass.rewriting import (
    RewriteContext,
    TraceHook,
    comps_by_name,
    has_side_effect,
)

CHECK_BOOKS = bool(os.environ.get("HLOPASS_CHECK_BOOKS"))
"""Check every consumer book against the graph (a test and debugging aid)."""
_NEVER_PRODUCERS = frozenset({"parameter", "tuple", "get-tuple-element", "constant"})
_CONTROL = frozenset({"while", "conditional", "call", "domain"})


@dataclass
class Fuel:
    """XLA's `xla_fuel` for this pass: at most `left` fusions (negative: unlimited)."""

    left: int = -1

    def take(self) -> bool:
        if self.left == 0:
            return False
        if self.left > 0:
            self.left -= 1
        return True


@dataclass
class Step:
    producer: HloOp
    consumers: list[HloOp]


@dataclass
class PriorityFusionDriver:
    """Plans the fusions of one computation (see the module docstring)."""

    graph: FusionGraph
    rules: Rules
    model: FusionCostModel
    fuel: Fuel
    pass_name: str = "priority-fusion"
    steps: list[Step] = field(default_factory=list)
    records: dict[int, FusionRecord] = field(default_factory=dict)
    fused_records: list[FusionRecord] = field(default_factory=list)
    _heap: list[tuple[float, int, int, int, Kernel]] = field(default_factory=list)
    _stamp: dict[int, int] = field(default_factory=dict)
    _can: dict[tuple[int, int], tuple[int, int, str | None]] = field(default_factory=dict)
    _books: dict[int, ConsumerBook] = field(default_factory=dict)
    _consumers_of: dict[int, list[Kernel]] = field(default_factory=dict)
    """Readers of each producer when it was last priced (names for the records)."""
    max_temp_bytes: int = -1
    live: LiveBytes | None = None
    """Live ranges of the plan's buffers, kept only under a `max_temp_bytes` limit."""

    def __post_init__(self) -> None:
        if self.max_temp_bytes >= 0:
            self.live = LiveBytes(self.graph.comp, self.graph.position)

    # -- queue ----------------------------------------------------------------------------

    @staticmethod
    def candidate(op: HloOp) -> bool:
        """XLA queues instructions with users that fusion may touch at all (no
        parameters, tuples, get-tuple-elements, constants, side effects, control flow)."""
        if op.opcode in _NEVER_PRODUCERS or op.opcode in _CONTROL or has_side_effect(op):
            return False
        return any(isinstance(u.operation, HloOp) for u in op.result.uses)

    def push(self, k: Kernel) -> None:
        stamp = self._stamp.get(id(k), 0) + 1
        self._stamp[id(k)] = stamp
        prio = self.priority(k)
        if prio is None or prio < 0:
            return
        pos = self.graph.position[id(k.root)]
        heapq.heappush(self._heap, (-prio, -pos, stamp, id(k), k))

    def can_fuse(self, producer: Kernel, consumer: Kernel) -> str | None:
        key = (id(producer), id(consumer))
        hit = self._can.get(key)
        if hit is not None and hit[0] == producer.version and hit[1] == consumer.version:
            return hit[2]
        why = self.rules.can_fuse(producer, consumer)
        self._can[key] = (producer.version, consumer.version, why)
        return why

    def priority(self, k: Kernel) -> float | None:
        """XLA's priority of a producer: the time saved by fusing it into all its readers
        (`estimate_run_times`, summed from the producer's `ConsumerBook`), None if refused."""
        if is_bitcast_kernel(k):
            return math.inf
        record = FusionRecord(self.pass_name, self.graph.comp.comp_name, k.root.inst_name, "kept")
        self.records[id(k.root)] = record
        if not self.rules.facts(k).fusible:  # XLA: the first check of CanFuse
            record.reason = NOT_FUSIBLE_PRODUCER
            return None
        book = self.book(k)
        self._consumers_of[id(k.root)] = list(book.kernels)
        if not book.kernels:
            record.reason = NO_USERS
            return None
        why, any_reader = book.refusal(lambda c: self.can_fuse(k, c))
        why = why or (None if any_reader else ONLY_BITCAST_USERS)
        if why:
            record.reason = why
            return None
        t, f = book.times(self.model.time_us, lambda c: self.model.fused_time_us(k, c))
        times = RunTimes(self.model.time_us(k) + t, f)
        record.unfused_us, record.fused_us = times.unfused_us, times.fused_us
        if times.benefit_us < 0:
            record.reason = "slower if fused"
        return times.benefit_us

    def book(self, k: Kernel) -> ConsumerBook:
        """k's consumers with their prices; rebuilt when k itself changed."""
        book = self._books.get(id(k))
        if book is None or book.version != k.version:
            book = ConsumerBook(k.version, self.graph.consumers(k), self.graph.position)
            self._books[id(k)] = book
        elif CHECK_BOOKS:
            assert [id(c) for c in book.kernels] == [id(c) for c in self.graph.consumers(k)]
        return book

    def _note_fused(self, k: Kernel, done: list[Kernel], k_producers: list[Kernel]) -> None:
        """Tell the books what one step changed: each consumer that grew is (again) a
        consumer of what it reads, and none of what it now computes; a dead k is nobody's."""
        books = self._books
        for m in k.members:
            book = books.get(id(self.graph.kernel.get(id(m))))
            if book is not None:
                for c in done:
                    book.drop(c)
        for c in done:
            for p in self.graph.producers(c):
                book = books.get(id(p))
                if book is not None:
                    book.put(c)
        if not k.alive:
            for p in k_producers:
                book = books.get(id(p))
                if book is not None:
                    book.drop(k)

    def seed(self, groups: list[tuple[HloOp, list[HloOp]]]) -> None:
        """Start from existing fusions (opened by `open_existing_fusions`): each group's
        instructions join its root's kernel, and the steps that rebuild it come first."""
        g = self.graph
        for root, members in groups:
            k = g.kernel[id(root)]
            for m in reversed(members):
                if m is root:
                    continue
                mk = g.kernel[id(m)]
                if self.live is not None:
                    self.live.apply(mk, [k], dies=True)
                g.fuse(mk, k)
                g.kill(mk)
                self.steps.append(Step(m, [root]))

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> list[Step]:
        g = self.graph
        queued: dict[int, bool] = {}  # (whether an instruction may be queued never changes)

        def candidate(op: HloOp) -> bool:
            hit = queued.get(id(op))
            if hit is None:
                hit = queued[id(op)] = self.candidate(op)
            return hit

        for op in g.ops:
            if candidate(op) and g.kernel[id(op)].alive:
                self.push(g.kernel[id(op)])
        while self._heap:
            _, _, stamp, kid, k = heapq.heappop(self._heap)
            if not k.alive or self._stamp.get(kid) != stamp:
                continue
            consumers = g.consumers(k)
            if is_bitcast_kernel(k):
                consumers = [c for c in consumers if self.can_fuse(k, c) is None]
            consumers = [c for c in consumers if not is_bitcast_kernel(c)]
            if self.memory_refusal(k, consumers):
                continue
            done = self.fuse(k, consumers)
            if not done:
                continue
            touched: dict[int, Kernel] = {}
            for c in done:
                touched[id(c)] = c
                for p in g.producers(c):
                    if p is not k and p.root.opcode not in ("constant", "get-tuple-element"):
                        touched[id(p)] = p
            for t in touched.values():
                if t.alive and candidate(t.root):
                    self.push(t)
        self.fuse_small_constants()
        return self.steps

    def memory_refusal(self, k: Kernel, consumers: list[Kernel]) -> bool:
        """The `max_temp_bytes` guard (memory_guard.py); records its reason."""
        if self.live is None:
            return False
        dies = not self.graph.is_root(k.root)
        why = guard_reason(self.live, self.max_temp_bytes, k, consumers, dies)
        if why is None:
            return False
        record = self.records.get(id(k.root)) or FusionRecord(
            self.pass_name, self.graph.comp.comp_name, k.root.inst_name, "kept"
        )
        record.decision, record.reason = "kept", why
        self.records[id(k.root)] = record
        return True

    def fuse(self, k: Kernel, consumers: list[Kernel]) -> list[Kernel]:
        g = self.graph
        k_producers = list(g.producers(k))
        done = []
        for c in consumers:
            if not self.fuel.take():
                break
            g.fuse(k, c)
            self.model.on_instruction_fused(k, c, c)
            done.append(c)
        if done and self.live is not None:
            dies = len(done) == len(consumers) and not g.is_root(k.root)
            self.live.apply(k, done, dies)
        if done:
            self.steps.append(Step(k.root, [c.root for c in done]))
            record = self.records.pop(id(k.root), None) or FusionRecord(
                self.pass_name, g.comp.comp_name, k.root.inst_name, "kept"
            )
            record.decision, record.reason = "fused", None
            record.consumers = [c.root.inst_name for c in done]
            self.fused_records.append(record)
        if not g.consumers(k) and not g.is_root(k.root):
            g.kill(k)
            self.model.invalidate(k)
        if done:
            self._note_fused(k, done, k_producers)
        return done

    def fuse_small_constants(self) -> None:
        """XLA fuses constants of at most one element into every fusible reader."""
        g = self.graph
        for op in g.ops:
            if op.opcode != "constant" or not hasattr(op.shape, "dims"):
                continue
            if math.prod(op.shape.dims) > 1:  # type: ignore[attr-defined]
                continue
            k = g.kernel[id(op)]
            readers = [
                c
                for c in g.consumers(k)
                if self.rules.facts(c).fusible and scatter_rule(k, c) is None
            ]
            self.fuse(k, readers)

    def all_records(self) -> list[FusionRecord]:
        kept = sorted(self.records.items(), key=lambda kv: kv[1].producer)
        g = self.graph
        for key, r in kept:
            readers = self._consumers_of.get(key)
            if readers is None and key in g.kernel:
                readers = g.consumers(g.kernel[key])
            r.consumers = [c.root.inst_name for c in readers or ()]
        return self.fused_records + [r for _, r in kept]


def openable_fusions(module: ModuleOp, comp: ComputationOp) -> list[HloOp]:
    """The loop and input fusions of `comp` the plan opens: single-output, one caller."""
    callers: dict[str, int] = {}
    for c in comps_by_name(module).values():
        for op in c.instructions:
            for n in op.callees():
                callers[n] = callers.get(n, 0) + 1
    return [
        op
        for op in comp.instructions
        if op.opcode == "fusion"
        and op.attr("kind") in ("kLoop", "kInput")
        and not hasattr(op.shape, "elements")
        and callers.get(op.attr("calls"), 0) == 1
    ]


def open_existing_fusions(module: ModuleOp, comp: ComputationOp) -> list[tuple[HloOp, list[HloOp]]]:
    """Inline the loop and input fusions already in `comp` (single-output, one caller) so
    the plan can grow them, as XLA's priority fusion does; returns (root, instructions) of
    each, to seed the plan. Custom (library, Triton) and multi-output fusions stay."""
    from hlopass.passes.defuse import UsedNames, inline_computation, remove_uncalled

    comps = comps_by_name(module)
    fusions = openable_fusions(module, comp)
    if not fusions:
        return []
    names = UsedNames({op.inst_name for c in comps.values() for op in c.instructions})
    groups = []
    opened: set[str] = set()
    for op in fusions:
        callee = comps[op.attr("calls")]
        clones: list[HloOp] = []
        root = inline_computation(op, callee, names, clones)
        op.result.replace_all_uses_with(root.result)
        op.detach()
        op.erase()
        opened.add(callee.comp_name)
        groups.append((root, clones))
    remove_uncalled(module, opened)
    return groups


def fusible_computations(module: ModuleOp) -> list[ComputationOp]:
    """Computations whose instructions run as kernels: the entry and what control flow
    (while, conditional, call) reaches from it; not fused or reducer computations."""
    comps = comps_by_name(module)
    entry = entry_computation(module)
    seen = {entry.comp_name}
    order = [entry]
    i = 0
    while i < len(order):
        for op in order[i].instructions:
            if op.opcode in ("while", "conditional", "call"):
                for name in op.callees():
                    if name in comps and name not in seen:
                        seen.add(name)
                        order.append(comps[name])
        i += 1
    return order


@dataclass
class FusionReport:
    changed: bool
    records: list[FusionRecord]


def _latest(current: dict[int, HloOp], op: HloOp) -> HloOp:
    """`op`, or the fusion that has replaced it."""
    return current.get(id(op), op)


def replay(steps: list[Step], builder: FusionBuilder, ctx: RewriteContext,
           current: dict[int, HloOp]) -> None:  # fmt: skip
    """Apply the planned steps to the IR with the `FuseProducerIntoConsumers` rewrite."""
    for step in steps:
        producer = current.get(id(step.producer), step.producer)
        consumers = [current.get(id(c), c) for c in step.consumers]
        pattern = FuseProducerIntoConsumers(ctx, builder, consumers)
        pattern.match_and_rewrite(producer, PatternRewriter(producer))
        for c, fusion in zip(step.consumers, pattern.fusions, strict=True):
            current[id(c)] = fusion


def priority_fusion(module: ModuleOp, device: str = "h100_sxm", cost_model: str = "default",
                    max_fusions: int = -1, trace: TraceHook | None = None,
                    max_temp_bytes: int = -1) -> FusionReport:  # fmt: skip
    """Plan and build XLA's priority fusion of `module` in place; the report lists, for
    every producer considered, what was decided and why.

    Existing fusions are opened to seed the plan; where the plan then fuses nothing more,
    the module is left as it came (XLA's Run returns false and keeps its fusions, names
    and kinds): the plan runs on a copy whenever there is a fusion to open."""
    opens = any(openable_fusions(module, c) for c in fusible_computations(module))
    work = module.clone() if opens else module
    report = _plan_and_build(work, device, cost_model, max_fusions, trace, max_temp_bytes)
    if report.changed:
        if work is module:
            settle(module)
        else:
            adopt(module, work)
    return report


def _plan_and_build(module: ModuleOp, device: str, cost_model: str, max_fusions: int,
                    trace: TraceHook | None, max_temp_bytes: int) -> FusionReport:  # fmt: skip
    model = fusion_cost_model(cost_model, device)
    ctx = RewriteContext.of(module, trace)
    fuel = Fuel(max_fusions)
    comps = comps_by_name(module)
    plans: list[tuple[PriorityFusionDriver, list[Step]]] = []
    grew = False
    for comp in fusible_computations(module):
        seeds = open_existing_fusions(module, comp)
        comps = comps_by_name(module)
        graph = FusionGraph(comp)
        rules = Rules(model, comps, {id(comp.root)})
        driver = PriorityFusionDriver(graph, rules, model, fuel, max_temp_bytes=max_temp_bytes)
        driver.seed(seeds)
        seeded = len(driver.steps)
        steps = driver.run()
        grew |= len(steps) > seeded
        plans.append((driver, steps))
    if not grew:  # only the opened fusions would be rebuilt: nothing to build
        plans = [(d, []) for d, _ in plans]
    builder = FusionBuilder(module)
    builder.defer_kinds = True  # the replay reads no kind
    current: dict[int, HloOp] = {}
    changed = False
    for _driver, steps in plans:
        replay(steps, builder, ctx, current)
        changed |= bool(steps)
    builder.set_kinds()
    builder.finish()
    retile(dict.fromkeys(builder.grown_custom), builder.comps, device)
    records: list[FusionRecord] = []
    for driver, _ in plans:
        g = driver.graph
        by_name = {o.inst_name: o for o in g.ops}
        for r in driver.all_records():
            op = by_name.get(r.producer)
            if op is not None:
                kernels = [_latest(current, k.root) for k in g.containing[id(op)] if k.alive]
                r.kernels = [o.inst_name for o in kernels if o.parent is not None]
            records.append(r)
    return FusionReport(changed, records)


@dataclass(frozen=True)
class PriorityFusionPass(PricedFusionPass):
    """XLA's priority fusion: fuse producers into all readers, best estimated gain first."""

    name: ClassVar[str] = "priority-fusion"

    device: str = "h100_sxm"
    """GPU whose cost model prices the kernels (hlopass.cost.DEVICES)."""

    cost_model: str = "default"
    """`default` (hlopass.cost, XLA's GPU performance model) or `roofline` (DRAM bytes only)."""

    max_fusions: int = -1
    """Stop after this many producer-consumer fusions (xla_fuel-style bisecting; -1: no limit)."""

    max_temp_bytes: int = -1
    """Refuse a fusion that would lift a computation's peak of live intermediate bytes
    (hlopass.ir.memory's model, in block order) above this many bytes (-1: no limit)."""

    def plan(self, module: ModuleOp, trace: TraceHook | None = None) -> FusionReport:
        return priority_fusion(module, self.device, self.cost_model, self.max_fusions, trace,
                               self.max_temp_bytes)  # fmt: skip

    def fuse(self, module: ModuleOp, trace: TraceHook | None) -> tuple[bool, list[FusionRecord]]:
        report = self.plan(module, trace)
        return report.changed, report.records
