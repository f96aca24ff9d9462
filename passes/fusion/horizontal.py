"""`horizontal-fusion`: XLA's GPU HorizontalLoopFusion, after multi-output fusion.

Small kernels that a consumer reads side by side are launch-bound: merged into one kernel
they pay one launch instead of n. One rewrite, `FuseHorizontally`, two forms (XLA's):

* loop form, parts of one output shape: `a(x), b(y)` -> `f = fusion(x, y)` whose root is
  `tuple(a', b')`, kind=kLoop; readers of a and b read `get-tuple-element(f)`;
* sliced form, parts of one element type and any shapes: each part's output is reshaped
  to 1-D inside, the pieces concatenated and sliced back out (`tuple(slice_a, slice_b)`,
  kind=kInput); readers read `bitcast(get-tuple-element(f))` in the old shape.

Strategy (`HorizontalFusionDriver`, XLA's): consumers of the entry computation from the
last to the first; for each, the operands (through get-tuple-element) that are loop
fusions or elementwise instructions, read by nothing but that consumer and the root, small
enough (elements and instruction count), and, in the sliced form, not sharing a parameter
with another candidate; sorted by output type, output count, instruction count and size,
then cut into spans (same type and output count, same shape in the loop form, at most
32/64 outputs and 4000 bytes of kernel parameters). The loop form runs first; the sliced
form takes what is left. Every span is priced by the fusion cost model (one kernel against
the parts' kernels) and refused when the merged kernel is slower ("will execute slower
if fused"). A new fusion goes back on the worklist: its own operands may merge next.

Candidates are independent by construction: each is read only by the consumer (or the
root, which reads nothing back), so no candidate reaches another and no merge makes a
cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    create_op,
    new_return_op,
)
from hlopass.ir.attrs import SliceDim
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.ir.shape import ArrayShape, TupleShape, default_layout
from hlopass.kernel_structure.emitter import is_elementwise
from hlopass.passes.fusion.explain import FusionRecord
from hlopass.passes.fusion.pass_base import PricedFusionPass
from hlopass.passes.fusion.priority import fusible_computations
from hlopass.passes.fusion.rewrites import FusionBuilder, erase_op, run_merge_drivers
from hlopass.rewriting import RewriteContext, TraceHook, has_side_effect, is_control_predecessor

LOOP_SHAPE_THRESHOLD = 8192 * 8192
"""XLA: a loop-form part may write at most this many elements (else not launch-bound)."""
SLICED_SHAPE_THRESHOLD = 128 * 2048
"""XLA: the same for the sliced form (one element per thread there)."""
LOOP_INSTRUCTION_THRESHOLD = 128
SLICED_INSTRUCTION_THRESHOLD = 30
MAX_CUDA_PARAM_SIZE = 4000
"""XLA: bytes of kernel parameters (8 per operand or output) one launch may take."""
MAX_BATCH_FUSIONS = 32
MAX_BATCH_INSTRUCTIONS = 64

# reasons (XLA's VLOG texts, shortened where XLA only logs)
NOT_ONLY_USER = "including it may create cycles in HLO"
NOT_PROFITABLE = "may-not-be profitable fusion"
SHARES_PARAMETER = "shares parameter with other fusion candidates"
SLOWER = "will execute slower if fused"
ONE_PART = "just one fusion in its span"

# XLA's PrimitiveType numbers: the sort key of output types
_TYPE_ORDER = {
    "pred": 1, "s8": 2, "s16": 3, "s32": 4, "s64": 5, "u8": 6, "u16": 7, "u32": 8,
    "u64": 9, "f16": 10, "f32": 11, "f64": 12, "c64": 15, "bf16": 16, "c128": 18,
    "f8e5m2": 19, "f8e4m3fn": 20, "s4": 21, "u4": 22,
}  # fmt: skip


# --- what a part is -------------------------------------------------------------------------


def part_outputs(op: HloOp, comps: dict[str, ComputationOp]) -> list[HloOp]:
    """XLA GetOutputsOfFusible: the fused root's tuple operands, the root, or op itself."""
    if op.opcode != "fusion":
        return [op]
    root = comps[op.attr("calls")].root
    return [v.owner for v in root.operands] if root.opcode == "tuple" else [root]  # type: ignore[misc]


def part_body(op: HloOp, comps: dict[str, ComputationOp]) -> list[HloOp]:
    return list(comps[op.attr("calls")].instructions) if op.opcode == "fusion" else [op]


def instruction_count(op: HloOp, comps: dict[str, ComputationOp]) -> int:
    return len(part_body(op, comps)) if op.opcode == "fusion" else 1


def output_type(op: HloOp, comps: dict[str, ComputationOp]) -> str | None:
    """The one element type of all outputs, or None when they differ (XLA refuses those:
    the concatenate of the sliced form needs one type)."""
    types = {getattr(o.shape, "element_type", None) for o in part_outputs(op, comps)}
    return types.pop() if len(types) == 1 else None


def _row_major(shape: Any) -> bool:
    layout = getattr(shape, "layout", None)
    if not isinstance(shape, ArrayShape) or shape.dynamic and any(shape.dynamic):
        return False
    return layout is None or layout.minor_to_major == default_layout(len(shape.dims)).minor_to_major


def is_fusible_candidate(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """XLA IsFusibleCandidate: an elementwise instruction with operands, or a loop fusion
    whose outputs share one element type (and, here, are dense row-major arrays: the
    sliced form flattens them). Not an instruction named as another's control predecessor
    either: it would disappear into the fusion under that name."""
    if op.attr("control-predecessors") or has_side_effect(op) or is_control_predecessor(op):
        return False
    if op.opcode == "fusion":
        if op.attr("kind") != "kLoop" or op.attr("calls") not in comps:
            return False
    elif not (is_elementwise(op) and op.operands) or isinstance(op.shape, TupleShape):
        return False
    outs = part_outputs(op, comps)
    return output_type(op, comps) is not None and all(_row_major(o.shape) for o in outs)


def profitability(op: HloOp, comps: dict[str, ComputationOp], sliced: bool) -> str | None:
    """XLA IsProfitableFusionCandidate: small (launch-bound) parts only."""
    limit = SLICED_SHAPE_THRESHOLD if sliced else LOOP_SHAPE_THRESHOLD
    first = part_outputs(op, comps)[0]
    if math.prod(first.shape.dims) > limit:  # type: ignore[attr-defined]
        return f"{NOT_PROFITABLE}: more than {limit} elements"
    count_limit = SLICED_INSTRUCTION_THRESHOLD if sliced else LOOP_INSTRUCTION_THRESHOLD
    if op.opcode == "fusion" and instruction_count(op, comps) > count_limit:
        return f"{NOT_PROFITABLE}: more than {count_limit} instructions"
    return None


def only_user(op: HloOp, consumer: HloOp, root: HloOp) -> bool:
    """XLA IsConsumerTheOnlyNonRootUser (through get-tuple-elements and bitcasts, no-ops);
    the root counts only when nothing reads it back."""
    for use in op.result.uses:
        user = use.operation
        if not isinstance(user, HloOp):
            return False
        if user.opcode in ("get-tuple-element", "bitcast"):
            if not only_user(user, consumer, root):
                return False
        elif user is not consumer and not (user is root and not _read_back(root)):
            return False
    return True


def _read_back(root: HloOp) -> bool:
    """An instruction reads the root (the computation's return is no reader)."""
    return any(isinstance(u.operation, HloOp) for u in root.result.uses)


def shares_parameter(op: HloOp, candidates: set[int]) -> bool:
    """XLA AnyOpndIsParamSharedAmongFusions (sliced form: the concatenate would stop the
    parameter's buffer from being aliased)."""
    for v in op.operands:
        owner = v.owner
        if isinstance(owner, HloOp) and owner.opcode == "parameter":
            for use in owner.result.uses:
                if use.operation is not op and id(use.operation) in candidates:
                    return True
    return False


def ancestor(v: SSAValue) -> Any:
    """XLA LatestNonTrivialAncestor, through get-tuple-elements."""
    op = v.owner
    while isinstance(op, HloOp) and op.opcode == "get-tuple-element":
        op = op.operands[0].owner
    return op


# --- the plan of one merge --------------------------------------------------------------------


@dataclass
class HorizontalPlan:
    """A built, unplaced fused computation for `parts`."""

    parts: list[HloOp]
    sliced: bool
    block: Block
    operands: list[SSAValue]
    outputs: list[HloOp]
    """The tuple's operands, part-major (part j's output i at n_out * j + i)."""
    members: list[HloOp]


def build_horizontal(parts: list[HloOp], comps: dict[str, ComputationOp],
                     builder: FusionBuilder, sliced: bool) -> HorizontalPlan:  # fmt: skip
    """Clone every part into one block (parameters per part, as XLA's `param_i_j`)."""
    block = Block()
    operands: list[SSAValue] = []
    members: list[HloOp] = []
    per_part: list[list[SSAValue]] = []
    bound: dict[int, SSAValue] = {}  # one parameter per operand (XLA DeduplicateFusionOperands)

    def add(op: HloOp) -> HloOp:
        block.add_op(op)
        members.append(op)
        return op

    def param(v: SSAValue, name: str) -> SSAValue:
        got = bound.get(id(v))
        if got is None:
            q = add(create_op("parameter", [], v.type.data, builder.fresh_inst(name),  # type: ignore[attr-defined]
                              {"number": len(operands)}))  # fmt: skip
            operands.append(v)
            bound[id(v)] = got = q.result
        return got

    for j, part in enumerate(parts):
        mapping: dict[SSAValue, SSAValue] = {}
        if part.opcode == "fusion":
            comp = comps[part.attr("calls")]
            params = sorted(comp.parameters(), key=lambda p: p.attr("number"))
            for i, p in enumerate(params):
                mapping[p.result] = param(part.operands[p.attr("number")], f"param_{j}_{i}")
            body = [x for x in comp.instructions if x.opcode != "parameter"]
        else:
            for i, v in enumerate(part.operands):
                mapping[v] = param(v, f"param_{j}_{i}")
            body = [part]
        for x in body:
            clone = x.clone(value_mapper=mapping)
            clone.inst_name = builder.fresh_inst(x.inst_name)
            add(clone)
        outs = [mapping[o.result] for o in part_outputs(part, comps)]
        if part.opcode == "fusion" and comps[part.attr("calls")].root.opcode == "tuple":
            tup = mapping[comps[part.attr("calls")].root.result].owner
            members.remove(tup)  # type: ignore[arg-type]
            erase_op(tup)  # type: ignore[arg-type]
        per_part.append(outs)
    n_out = len(per_part[0])
    if not sliced:
        outputs = [v.owner for outs in per_part for v in outs]
        return HorizontalPlan(parts, False, block, operands, outputs, members)  # type: ignore[arg-type]
    outputs_by_index: list[list[HloOp]] = [[] for _ in parts]
    for i in range(n_out):
        flat: list[SSAValue] = []
        for outs in per_part:
            v = outs[i]
            shape: ArrayShape = v.type.data  # type: ignore[attr-defined]
            if len(shape.dims) != 1:
                one = ArrayShape(
                    shape.element_type, (math.prod(shape.dims),), (), default_layout(1)
                )
                v = add(create_op("reshape", [v], one, builder.fresh_inst("reshape"))).result
            flat.append(v)
        total = sum(v.type.data.dims[0] for v in flat)  # type: ignore[attr-defined]
        et = flat[0].type.data.element_type  # type: ignore[attr-defined]
        cat_shape = ArrayShape(et, (total,), (), default_layout(1))
        cat = add(create_op("concatenate", flat, cat_shape, builder.fresh_inst("concatenate"),
                            {"dimensions": (0,)}))  # fmt: skip
        start = 0
        for j, v in enumerate(flat):
            n = v.type.data.dims[0]  # type: ignore[attr-defined]
            piece = ArrayShape(et, (n,), (), default_layout(1))
            s = add(create_op("slice", [cat.result], piece, builder.fresh_inst("slice"),
                              {"slice": (SliceDim(start, start + n, 1),)}))  # fmt: skip
            outputs_by_index[j].append(s)
            start += n
    outputs = [s for outs in outputs_by_index for s in outs]
    return HorizontalPlan(parts, True, block, operands, outputs, members)


def drop_plan(plan: HorizontalPlan) -> None:
    """Erase a plan that was refused (its block was never placed)."""
    for op in reversed(list(plan.block.ops)):
        erase_op(op)


# --- the rewrite ------------------------------------------------------------------------------


@dataclass
class FuseHorizontally(RewritePattern):
    """`a(x), b(y)` read side by side -> `f = fusion(x, y)` computing both, whose readers
    read `get-tuple-element(f)` (loop form) or `bitcast(get-tuple-element(f))` (sliced
    form). Guards: at least two parts, all in one block, `plan` built for these parts."""

    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    ctx: RewriteContext
    builder: FusionBuilder
    comps: dict[str, ComputationOp]
    plan: HorizontalPlan
    result: HloOp | None = None
    reader: HloOp | None = None
    """The instruction reading all parts, when known: the latest part is then found by
    walking back from it, not by numbering the whole block per merge (quadratic)."""

    def latest(self, parts: list[HloOp], block: Any) -> HloOp:
        ids = {id(p) for p in parts}
        if self.reader is not None and self.reader.parent_block() is block:
            op = self.reader.prev_op
            while op is not None:
                if id(op) in ids:
                    return op  # type: ignore[return-value]
                op = op.prev_op
        order = {id(x): i for i, x in enumerate(block.ops)}
        return max(parts, key=lambda p: order[id(p)])

    def match_and_rewrite(self, op: Any, rewriter: PatternRewriter) -> None:
        plan = self.plan
        parts = plan.parts
        if not isinstance(op, HloOp) or op is not parts[0] or len(parts) < 2:
            return
        block = op.parent_block()
        if block is None or any(p.parent_block() is not block for p in parts):
            return
        latest = self.latest(parts, block)
        tup = create_op("tuple", [o.result for o in plan.outputs],
                        TupleShape(tuple(o.shape for o in plan.outputs)),
                        self.builder.fresh_inst("tuple"))  # fmt: skip
        plan.block.add_op(tup)
        plan.block.add_op(new_return_op(tup.result))
        comp = self._place(plan.block, latest)
        kind = "kInput" if plan.sliced else "kLoop"
        fusion = create_op("fusion", plan.operands, tup.shape, self.builder.fresh_inst("fusion"),
                           {"kind": kind, "calls": comp.comp_name})  # fmt: skip
        block.insert_op_before(fusion, latest)
        anchor: HloOp = fusion
        n_out = len(plan.outputs) // len(parts)
        for j, part in enumerate(parts):
            news: list[HloOp] = []
            for i, out in enumerate(part_outputs(part, self.comps)):
                index = n_out * j + i
                g = create_op("get-tuple-element", [fusion.result], plan.outputs[index].shape,
                              self.builder.fresh_inst("get-tuple-element"), {"index": index})  # fmt: skip
                block.insert_op_after(g, anchor)
                anchor = g
                if plan.sliced and g.shape != out.shape:
                    b = create_op(
                        "bitcast", [g.result], out.shape, self.builder.fresh_inst("bitcast")
                    )
                    block.insert_op_after(b, anchor)
                    anchor = g = b
                news.append(g)
            self._replace(part, news)
        self.builder.created.append(fusion)
        self.result = fusion
        self.ctx.note(self, fusion, f"{'sliced' if plan.sliced else 'loop'} form of "
                      + ", ".join(p.inst_name for p in parts))  # fmt: skip

    def _place(self, block: Block, caller: HloOp) -> ComputationOp:
        comp = self.builder.add_computation(block, caller, "horizontally_fused_computation")
        self.comps[comp.comp_name] = comp
        return comp

    def _replace(self, part: HloOp, news: list[HloOp]) -> None:
        if isinstance(part.shape, TupleShape):
            for use in list(part.result.uses):  # get-tuple-elements (only_user checked it)
                gte = use.operation
                assert isinstance(gte, HloOp) and gte.opcode == "get-tuple-element"
                gte.result.replace_all_uses_with(news[gte.attr("index")].result)
                erase_op(gte)
        else:
            part.result.replace_all_uses_with(news[0].result)
        callee = part.attr("calls") if part.opcode == "fusion" else None
        erase_op(part)
        if callee is not None:
            self.builder.callers[callee] -= 1
            if self.builder.callers[callee] == 0:
                erase_op(self.builder.comps.pop(callee))
                self.comps.pop(callee, None)


# --- the driver -------------------------------------------------------------------------------


@dataclass
class HorizontalFusionDriver:
    """XLA's HorizontalLoopFusionImpl::Run over one computation (see the module docstring)."""

    comp: ComputationOp
    comps: dict[str, ComputationOp]
    model: FusionCostModel
    builder: FusionBuilder
    ctx: RewriteContext
    records: list[FusionRecord] = field(default_factory=list)
    made: list[tuple[FusionRecord, HloOp]] = field(default_factory=list)
    _told: set[tuple[int, int, str]] = field(default_factory=set)

    def record(self, producer: HloOp, others: list[HloOp], reason: str | None) -> FusionRecord:
        r = FusionRecord("horizontal-fusion", self.comp.comp_name, producer.inst_name, "kept",
                         reason=reason, consumers=[o.inst_name for o in others])  # fmt: skip
        self.records.append(r)
        return r

    def candidates(self, consumer: HloOp, sliced: bool) -> list[HloOp]:
        """XLA FusionCandidates::Initialize: the consumer's fusible operands, filtered and
        sorted."""
        seen: dict[int, HloOp] = {}
        for v in consumer.operands:
            p = ancestor(v)
            if isinstance(p, HloOp) and id(p) not in seen and is_fusible_candidate(p, self.comps):
                seen[id(p)] = p
        ids = set(seen)
        root = self.comp.root
        out: list[HloOp] = []
        for p in seen.values():
            if not only_user(p, consumer, root):
                why: str | None = NOT_ONLY_USER
            else:
                why = profitability(p, self.comps, sliced)
                if why is None and sliced and shares_parameter(p, ids):
                    why = SHARES_PARAMETER
            if why is None:
                out.append(p)
            elif len(seen) > 1 and (id(p), id(consumer), why) not in self._told:
                self._told.add((id(p), id(consumer), why))  # once, not once per form
                self.record(p, [consumer], why)
        comps = self.comps

        def key(p: HloOp) -> tuple[int, int, int, int]:
            outs = part_outputs(p, comps)
            t = _TYPE_ORDER.get(output_type(p, comps) or "", 100)
            return (t, len(outs), instruction_count(p, comps), math.prod(outs[0].shape.dims))  # type: ignore[attr-defined]

        out.sort(key=key)  # stable, as XLA's stable_sort
        return out

    def spans(self, cands: list[HloOp], sliced: bool) -> list[list[HloOp]]:
        """XLA GetNextSpanOfFusions, until the candidates are used up."""
        comps = self.comps
        spans: list[list[HloOp]] = []
        pos = 0
        while pos < len(cands):
            first = cands[pos]
            limit = (
                MAX_BATCH_FUSIONS if sliced or first.opcode == "fusion" else MAX_BATCH_INSTRUCTIONS
            )
            f_outs = part_outputs(first, comps)
            right = pos
            outputs = io = 0
            while right < len(cands):
                c = cands[right]
                c_outs = part_outputs(c, comps)
                if output_type(c, comps) != output_type(first, comps) or len(c_outs) != len(f_outs):
                    break
                if not sliced and c_outs[0].shape.dims != f_outs[0].shape.dims:  # type: ignore[attr-defined]
                    break
                outputs += len(c_outs)
                if outputs >= limit:
                    break
                io += len(c.operands) + len(c_outs)
                if io * 8 >= MAX_CUDA_PARAM_SIZE:
                    break
                right += 1
            right = max(right, pos + 1)
            spans.append(cands[pos:right])
            pos = right
        return spans

    def fuse_operands(self, consumer: HloOp, sliced: bool, worklist: list[HloOp]) -> bool:
        changed = False
        for span in self.spans(self.candidates(consumer, sliced), sliced):
            if len(span) < 2:
                continue
            changed |= self.consider(span, sliced, worklist, consumer)
        return changed

    def consider(self, span: list[HloOp], sliced: bool, worklist: list[HloOp],
                 reader: HloOp | None = None) -> bool:  # fmt: skip
        comps = self.comps
        record = self.record(span[0], span[1:], None)
        unfused = sum(
            self.model.kernel_time_us(part_body(p, comps), part_outputs(p, comps)) for p in span
        )
        plan = build_horizontal(span, comps, self.builder, sliced)
        fused = self.model.kernel_time_us(plan.members, plan.outputs)
        record.unfused_us, record.fused_us = unfused, fused
        if fused > unfused:
            record.reason = SLOWER
            drop_plan(plan)
            return False
        pattern = FuseHorizontally(self.ctx, self.builder, comps, plan, reader=reader)
        pattern.match_and_rewrite(span[0], PatternRewriter(span[0]))
        if pattern.result is None:
            drop_plan(plan)
            return False
        record.decision = "fused"
        self.made.append((record, pattern.result))
        worklist.append(pattern.result)
        return True

    def run(self) -> bool:
        changed = False
        worklist = list(self.comp.instructions)  # defs before uses; popped from the back
        while worklist:
            consumer = worklist.pop()
            if consumer.parent is None or len(consumer.operands) < 2:
                continue
            changed |= self.fuse_operands(consumer, False, worklist)
            changed |= self.fuse_operands(consumer, True, worklist)
        return changed


def horizontal_fusion(module: ModuleOp, device: str = "h100_sxm", cost_model: str = "default",
                      trace: TraceHook | None = None) -> tuple[bool, list[FusionRecord]]:  # fmt: skip
    """Run XLA's horizontal loop fusion in place on the entry and the computations control
    flow reaches from it (XLA's DoFusionInsideWhileLoop: a while body's kernels merge too);
    returns (changed, records)."""
    return run_merge_drivers(module, fusible_computations(module), HorizontalFusionDriver,
                             device, cost_model, trace)  # fmt: skip


@dataclass(frozen=True)
class HorizontalFusionPass(PricedFusionPass):
    """XLA's horizontal loop fusion: small independent kernels read side by side -> one."""

    name: ClassVar[str] = "horizontal-fusion"

    def fuse(self, module: ModuleOp, trace: TraceHook | None) -> tuple[bool, list[FusionRecord]]:
        return horizontal_fusion(module, self.device, self.cost_model, trace)
