"""`multi-output-fusion`: XLA's GPU MultiOutputFusion, after priority fusion.

Two rewrites (`rewrites.py` style, one per class):

* `MergeSiblingFusions`: `a(x...), b(x...)` reading a common value -> one fusion
  writing both (its users read `get-tuple-element`s), so x is read once;
* `FuseProducerIntoMultiOutput`: `c(p(...))` where p has other readers -> one fusion
  computing p and c and exporting both.

Guards (XLA's reasons): both kernels fusible as multi-output roots (loop or reduction
fusions, tiled-transpose heroes, elementwise ops; at least one a fusion for siblings),
compatible heroes (`mof_heroes`: tiled transposes alike, no nested transpose beside
an unnested hero), loop shapes equal or reshape bitcasts of each other (a reduction's or
a tiled transpose's loop is its input), XLA's limits on in-place DUS kernels, a producer
that is no multi-output fusion, loop-fusible and not physically transposing
(`mof_producer`), no path between siblings / from the producer to another
operand of the consumer ("would introduce a cycle", answered by `Reachability`, ancestor
bitsets updated on each merge), the fusion budget (96 operands and outputs, 8 unnested
reductions, shared memory), and the cost model: refused when the merged kernel is not
faster than the two ("will execute slower if fused").

The strategy (`MultiOutputDriver`: which pairs are tried, in which order) is here; the
rewrites and their guards are in `multi_output_rewrites.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
)
from hlopass.ir.shape import TupleShape
from hlopass.kernel_structure.emitter import (
    INPUT_EMITTERS,
    EmitterFacts,
    is_unnested_reduction,
    reduction_dims,
)
from hlopass.passes.fusion.explain import FusionRecord
from hlopass.passes.fusion.mof_heroes import (
    deep_transpose_hero,
    heroes_refusal,
    nested_transpose,
    nested_transpose_refusal,
    transpose_hero,
)
from hlopass.passes.fusion.mof_producer import producer_mof_refusal
from hlopass.passes.fusion.multi_output_rewrites import (
    BUDGET,
    CYCLE,
    DIFFERENT_LOOP_SHAPES,
    NOT_ROOT,
    SLOWER,
    FuseProducerIntoMultiOutput,
    MergePlan,
    MergeSiblingFusions,
    MergeSketch,
    Part,
    PerKernel,
    Reachability,
    SiblingPlan,
    build_merged,
    disjoint_slices,
    first_reduction,
    fusion_priority,
    in_place_refusal,
    is_effective_scalar,
    kernel_body,
    kernel_outputs,
    key_of,
    key_to_operand,
    loop_group,
    loops_compatible,
    merged_operands,
    mof_root_eligible,
    output_index,
    read_through_elements,
    readers_through_elements,
    shape_of_loop,
    sketch_merged,
)
from hlopass.passes.fusion.pass_base import PricedFusionPass
from hlopass.passes.fusion.priority import fusible_computations
from hlopass.passes.fusion.rewrites import FusionBuilder, run_merge_drivers
from hlopass.passes.fusion.rules import (
    MAX_OPERANDS_AND_OUTPUTS,
    MAX_UNNESTED_REDUCTIONS,
    SHARED_MEMORY_PER_BLOCK,
)
from hlopass.rewriting import RewriteContext, TraceHook, value_shape

DIFFERENT_REDUCTIONS = "tiled reductions with different shapes"


@dataclass
class MultiOutputDriver:
    """Visits kernels in block order (defs before uses): first siblings reading a common
    value, then producers into one of their readers; each merge priced before it is done."""

    comp: ComputationOp
    comps: dict[str, ComputationOp]
    model: FusionCostModel
    builder: FusionBuilder
    ctx: RewriteContext
    records: list[FusionRecord] = field(default_factory=list)
    _fused: HloOp | None = None
    made: list[tuple[FusionRecord, HloOp]] = field(default_factory=list)
    """Each merge's record and fusion (named once the builder has renamed them)."""

    def __post_init__(self) -> None:
        # per-kernel facts, each computed once: recomputing them for the growing fusion
        # on every candidate made a sibling group quadratic
        # (a fusion made by a sibling merge gets them from its two kernels' facts)
        comps = self.comps
        self.facts = PerKernel(
            lambda op: EmitterFacts.of(
                kernel_body(op, comps), kernel_outputs(op, comps), key_of(op)
            )
        )
        self.kinds = PerKernel(lambda op: self.facts(op).emitter())
        self.reduction = PerKernel(lambda op: first_reduction(kernel_body(op, comps)))
        self.tiled = PerKernel(lambda op: transpose_hero(self.facts(op).transposes)
                               or deep_transpose_hero(kernel_outputs(op, comps),
                                                      kernel_body(op, comps)))  # fmt: skip
        self.nested = PerKernel(lambda op: nested_transpose(
            kernel_outputs(op, comps), self.tiled(op), self.kinds(op) == "reduction"))  # fmt: skip
        self.unnested = PerKernel(
            lambda op: self.tiled(op) is not None or self.kinds(op) == "reduction"
        )
        self.parts = PerKernel(lambda op: Part.of(op, comps))
        self.summaries = PerKernel(lambda op: self.model.sibling_summary(
            kernel_body(op, comps), kernel_outputs(op, comps), key_of(op)))  # fmt: skip
        self.time_of = PerKernel(
            lambda op: self.model.sibling_time_us(self.summaries(op), self.facts(op))
        )

    def refusal(self, a: HloOp, b: HloOp, reach: Reachability, sibling: bool) -> str | None:
        comps = self.comps
        if not self.eligible(b) or not self.eligible(a):
            return NOT_ROOT
        if sibling and a.opcode != "fusion" and b.opcode != "fusion":
            return "no fusion among the siblings"
        why = heroes_refusal(self.tiled(a), self.tiled(b), self.kinds(a) == "reduction",
                             self.kinds(b) == "reduction", sibling)  # fmt: skip
        if why is not None:
            return why
        why = nested_transpose_refusal(self.nested(a), self.nested(b), self.unnested(a),
                                       self.unnested(b))  # fmt: skip
        if why is not None:
            return why
        why = self.reductions_refusal(a, b)
        if why is not None:
            return why
        # XLA takes loop shapes that are reshape bitcasts of each other (its
        # ShapesCompatibleForMultiOutputFusion), the heroes checked above
        if not loops_compatible(self.loop_shape(a), self.loop_shape(b), reshape_ok=True):
            return DIFFERENT_LOOP_SHAPES
        if sibling:
            if reach.reaches(a, b) or reach.reaches(b, a):
                return CYCLE
        else:
            for v in b.operands:
                if output_index(a, v) is None and v is not a.result and reach.reaches(a, v.owner):
                    return CYCLE
        return in_place_refusal(a, b, comps, sibling)

    def reductions_refusal(self, a: HloOp, b: HloOp) -> str | None:
        """XLA FusionHeroesAreCompatible for two reduction kernels: their reductions must
        have the same ReductionDimensions (AreReductionsMultiOutputFusionCompatible)."""
        if self.kinds(a) != "reduction" or self.kinds(b) != "reduction":
            return None
        ra, rb = (next((m for m in kernel_body(x, self.comps) if is_unnested_reduction(m)), None)
                  for x in (a, b))  # fmt: skip
        if ra is None or rb is None or reduction_dims(ra) == reduction_dims(rb):
            return None
        return DIFFERENT_REDUCTIONS

    def budget(self, sketch: MergeSketch) -> str | None:
        if sketch.operands + sketch.outputs + 1 > MAX_OPERANDS_AND_OUTPUTS:
            return BUDGET
        if sketch.reductions > MAX_UNNESTED_REDUCTIONS:
            return f"over {MAX_UNNESTED_REDUCTIONS} unnested reductions in fusion"
        if sketch.smem > SHARED_MEMORY_PER_BLOCK:
            return f"shared memory usage would be over the budget of {SHARED_MEMORY_PER_BLOCK}B"
        return None

    def consider(self, a: HloOp, b: HloOp, reach: Reachability, sibling: bool,
                 common: HloOp | None = None) -> bool:  # fmt: skip
        record = FusionRecord("multi-output-fusion", self.comp.comp_name, a.inst_name, "kept",
                              consumers=[b.inst_name])  # fmt: skip
        self.records.append(record)
        why = self.refusal(a, b, reach, sibling)
        if why is None and common is not None:
            why = disjoint_slices(a, b, common, self.comps)
        if why is None:
            # the budget is decided on a sketch, nothing built for a refused candidate
            why = self.budget(sketch_merged(a, b, self.comps, self.parts))
        if why is not None:
            record.reason = why
            return False
        if sibling:
            fusion = self._merge_siblings_priced(a, b, reach, record)
        else:
            fusion = self._merge_producer_priced(a, b, reach, record)
        if fusion is None:
            record.reason = SLOWER
            return False
        record.decision = "fused"
        self.made.append((record, fusion))
        self._fused = fusion
        return True

    def _merge_siblings_priced(self, a: HloOp, b: HloOp, reach: Reachability,
                               record: FusionRecord) -> HloOp | None:  # fmt: skip
        fused, plan, summary, facts = self.price_siblings(a, b)
        unfused = self.time_of(a) + self.time_of(b)
        record.unfused_us, record.fused_us = unfused, fused
        if fused > unfused:
            return None
        known = (self.parts(a).merged(self.parts(b)), self.reduction(a), self.reduction(b))
        pattern = MergeSiblingFusions(self.ctx, self.builder, self.comps, reach,
                                      sibling=b, plan=plan)  # fmt: skip
        pattern.match_and_rewrite(a, PatternRewriter(a))
        fusion = pattern.result
        assert fusion is not None
        # the new fusion's facts from the two kernels': nothing re-analysed
        self.facts.put(fusion, facts.moved(pattern.copies))
        self.summaries.put(fusion, summary)
        self.time_of.put(fusion, fused)
        self.parts.put(fusion, known[0])
        self.reduction.put(fusion, known[1] if known[1] is not None else known[2])
        return fusion

    def _merge_producer_priced(self, a: HloOp, b: HloOp, reach: Reachability,
                               record: FusionRecord) -> HloOp | None:  # fmt: skip
        fused, plan = self.price_producer(a, b)
        unfused = self.time_of(a) + self.time_of(b)
        record.unfused_us, record.fused_us = unfused, fused
        if fused > unfused:
            return None
        pattern = FuseProducerIntoMultiOutput(self.ctx, self.builder, self.comps, reach,
                                              consumer=b, plan=plan)  # fmt: skip
        pattern.match_and_rewrite(a, PatternRewriter(a))
        return pattern.result

    def price_siblings(self, a: HloOp, b: HloOp) -> tuple[float, SiblingPlan, Any, EmitterFacts]:
        """a and b as one kernel, from their summaries: (µs, plan, summary, facts), the
        summary and facts keyed by the merged fusion's operands."""
        operands = merged_operands(a, b)
        index = {id(v): i for i, v in enumerate(operands)}
        ka, kb = key_to_operand(a, index), key_to_operand(b, index)
        summary = self.summaries(a).rekeyed(ka).merged(self.summaries(b).rekeyed(kb))
        facts = self.facts(a).rekeyed(ka).merged(self.facts(b).rekeyed(kb))
        emitter = facts.emitter()
        # XLA ChooseFusionKind: kInput when either kernel is input fusible (a tiled
        # transpose hero is, by XLA's size rule, also where the cost model's is not)
        tiled = self.tiled(a) is not None or self.tiled(b) is not None
        kind = "kInput" if emitter in INPUT_EMITTERS or tiled else "kLoop"
        plan = SiblingPlan(operands, kind)
        return self.model.sibling_time_us(summary, facts), plan, summary, facts

    def price_producer(self, a: HloOp, b: HloOp) -> tuple[float, MergePlan]:
        """b reads a: the merged kernel is built (a copy of both) and analysed whole."""
        plan = build_merged(a, b, self.comps, self.builder)
        outputs = [v.owner for v in plan.outputs]
        return self.model.kernel_time_us(plan.members, outputs), plan

    def run(self) -> bool:
        # XLA's order: uses before defs; at each instruction its readers first merge as
        # siblings, then it may join one of them. A producer is thus met before a merge
        # above it could make it multi-output (XLA never merges a multi-output producer).
        changed = False
        reach = Reachability(self.comp)
        for op in reversed(list(self.comp.instructions)):
            if op.parent is None or op.opcode == "constant":
                continue
            if op.opcode == "fusion" and op.attr("kind") == "kCustom":
                continue
            changed |= self._siblings_of(op, reach)
            if op.parent is not None:
                changed |= self._producer_of(op, reach)
        return changed

    def _siblings_of(self, value_owner: HloOp, reach: Reachability) -> bool:
        # never an effective scalar's readers: reading it once saves nothing
        if is_effective_scalar(value_owner.shape):
            return False
        readers = [u.operation for u in value_owner.result.uses]
        readers = [r for r in dict.fromkeys(readers)
                   if isinstance(r, HloOp) and r.parent is not None
                   and self.eligible(r)]  # fmt: skip
        if len(readers) < 2:
            return False
        # XLA's order: multi-output fusions, then fusions, then instructions
        readers.sort(key=lambda r: (-fusion_priority(r), reach.pos[id(r)]))
        return self._merge_siblings(readers, reach, value_owner)

    def _producer_of(self, p: HloOp, reach: Reachability) -> bool:
        """A producer read by several kernels joins one of them."""
        if isinstance(p.shape, TupleShape) and p.opcode != "fusion":
            return False
        if not self.eligible(p) or producer_mof_refusal(p, self.comps) is not None:
            return False  # XLA asks the producer first and looks at no reader
        readers = [r for r in readers_through_elements(p) if isinstance(r, HloOp)]
        if len(readers) < 2:
            return False
        for c in readers:
            # as XLA, an unfused consumer (a reduce) becomes the fusion p joins
            ready = c.parent is not None and p.parent is not None
            if ready and self.consider(p, c, reach, sibling=False):
                return True
        return False

    def _merge_siblings(self, readers: list[HloOp], reach: Reachability, common: HloOp) -> bool:
        """Merge compatible readers of one value; only readers whose loops have the same
        element count are paired (a value read by many kernels costs one pass over them
        per loop size)."""
        groups: dict[Any, list[HloOp]] = {}
        for r in readers:
            groups.setdefault(loop_group(self.loop_shape(r)), []).append(r)
        heads = [g[0] for g in groups.values()]
        for a, b in zip(heads, heads[1:], strict=False):  # one record per shape boundary
            self.records.append(FusionRecord(
                "multi-output-fusion", self.comp.comp_name, a.inst_name, "kept",
                reason=DIFFERENT_LOOP_SHAPES, consumers=[b.inst_name],
            ))  # fmt: skip
        changed = False
        for group in groups.values():
            if len(group) > 1:
                changed |= self._merge_group(group, reach, common)
        return changed

    def loop_shape(self, op: HloOp) -> Any:
        hero = self.tiled(op)
        if hero is not None:  # XLA: a tiled transpose loops over its input
            return value_shape(hero.operands[0])
        return shape_of_loop(self.kinds(op), self.reduction(op), self.facts(op).outputs[0])

    def eligible(self, op: HloOp) -> bool:
        return mof_root_eligible(op, self.comps, self.kinds, self.tiled) and (
            read_through_elements(op)
        )

    def _merge_group(self, readers: list[HloOp], reach: Reachability, common: HloOp) -> bool:
        changed = False
        i = 0
        while i < len(readers):
            a = readers[i]
            j = i + 1
            while j < len(readers):
                b = readers[j]
                if (
                    a.parent is not None
                    and b.parent is not None
                    and self.consider(a, b, reach, True, common)
                ):
                    changed = True
                    a = self._fused
                    assert a is not None  # consider() returned True: it set the fusion
                    readers[i] = a
                    readers.pop(j)
                    continue
                j += 1
            i += 1
        return changed


def multi_output_fusion(module: ModuleOp, device: str = "h100_sxm", cost_model: str = "default",
                        trace: TraceHook | None = None) -> tuple[bool, list[FusionRecord]]:  # fmt: skip
    return run_merge_drivers(module, fusible_computations(module), MultiOutputDriver,
                             device, cost_model, trace)  # fmt: skip


@dataclass(frozen=True)
class MultiOutputFusionPass(PricedFusionPass):
    """XLA's multi-output fusion: siblings and producer-consumer pairs into one kernel."""

    name: ClassVar[str] = "multi-output-fusion"

    def fuse(self, module: ModuleOp, trace: TraceHook | None) -> tuple[bool, list[FusionRecord]]:
        return multi_output_fusion(module, self.device, self.cost_model, trace)
