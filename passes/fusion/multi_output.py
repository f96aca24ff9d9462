"""`multi-output-fusion`: XLA's GPU MultiOutputFusion, after priority fusion.

Two rewrites (`rewrites.py` style, one per class):

* `MergeSiblingFusions`: `a(x...), b(x...)` reading a common value -> one fusion
  writing both (its users read `get-tuple-element`s), so x is read once;
* `FuseProducerIntoMultiOutput`: `c(p(...))` where p has other readers -> one fusion
  computing p and c and exporting both.

Guards (XLA's reasons): both kernels fusible as multi-output roots (loop or reduction
fusions, elementwise ops; at least one a fusion for siblings), the same loop shape
(a reduction's is its input's), no path between siblings / from the producer to another
operand of the consumer ("would introduce a cycle", answered by `Reachability`, ancestor
bitsets updated on each merge), the fusion budget (96 operands and outputs, 8 unnested
reductions, shared memory), and the cost model: refused when the merged kernel is not
faster than the two ("will execute slower if fused").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.cost.fusion_model import (
    FusionCostModel,
    emitter_kind,
    fusion_kind,
    is_unnested_reduction,
)
from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    create_op,
    new_computation_op,
    new_return_op,
)
from hlopass.passes.fusion.explain import FusionRecord, explain_sink
from hlopass.passes.fusion.priority import fusible_computations
from hlopass.passes.fusion.rewrites import FusionBuilder, _erase, run_merge_drivers
from hlopass.passes.fusion.rules import (
    MAX_OPERANDS_AND_OUTPUTS,
    MAX_UNNESTED_REDUCTIONS,
    SHARED_MEMORY_PER_BLOCK,
    instruction_fusible,
    shared_memory,
)
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook
from hlopass.shape import ArrayShape, TupleShape

CYCLE = "would introduce a cycle when fused"
SLOWER = "will execute slower if fused"
DIFFERENT_LOOP_SHAPES = "different loop shapes"
NOT_ROOT = "consumer not eligible as multi-output fusion root."
BUDGET = "Number of operands and output buffers is larger than allowed budget per fusion"


class Reachability:
    """Who reaches whom in one computation: each instruction's ancestors as a bitset.

    A merge gives the new instruction the union of the merged ones' bits, so paths into
    or out of them stay answered; descendants then inherit the new ancestors. `order`
    keeps the instructions' sequence (`pos` comparable keys) with O(1) updates."""

    def __init__(self, comp: ComputationOp):
        self.bits: dict[int, int] = {}
        self.anc: dict[int, int] = {}
        self.order = Order()
        for i, op in enumerate(comp.instructions):
            self.bits[id(op)] = 1 << i
            a = 0
            for v in op.operands:
                a |= self.bits.get(id(v.owner), 0) | self.anc.get(id(v.owner), 0)
            self.anc[id(op)] = a
            self.order.append(op)

    @property
    def pos(self) -> dict[int, float]:
        return self.order.key

    def reaches(self, a: Any, b: Any) -> bool:
        """A path of one or more edges from a to b."""
        return bool(self.bits.get(id(a), 0) & self.anc.get(id(b), 0))

    def merged(self, new: Any, olds: list[Any], extra: list[Any]) -> None:
        bits = 0
        anc = 0
        for o in olds:
            bits |= self.bits.pop(id(o), 0)
            anc |= self.anc.pop(id(o), 0)
        anc &= ~bits
        self.bits[id(new)], self.anc[id(new)] = bits, anc
        done: set[int] = set()
        for e in extra:  # get-tuple-elements of the new fusion
            self.bits[id(e)] = 0
            self.anc[id(e)] = anc | bits
            done.add(id(e))
        # descendants inherit the new ancestors: walk the readers from the merged nodes and
        # stop where the ancestors are already there (ancestor sets are closed under
        # reading, so everything further down has them too) -- no scan of the computation
        stack = [u for x in (new, *olds, *extra) for u in _readers(x)]
        while stack:
            op = stack.pop()
            if id(op) in done:
                continue
            done.add(id(op))
            a = self.anc.get(id(op))
            if a is None or a | anc == a:
                continue
            self.anc[id(op)] = a | anc
            stack.extend(_readers(op))


class Order:
    """A sequence of instructions as a linked list with increasing float keys: inserting
    or removing is O(1) (keys are respaced, O(n), only when a gap is used up), where
    rebuilding a list and its index per merge made merging quadratic."""

    def __init__(self) -> None:
        self.key: dict[int, float] = {}
        self.prev: dict[int, Any] = {}
        self.next: dict[int, Any] = {}
        self.last: Any = None
        self.first: Any = None

    def append(self, op: Any) -> None:
        self.key[id(op)] = self.key[id(self.last)] + 1.0 if self.last is not None else 0.0
        self._link(op, self.last, None)

    def _link(self, op: Any, before: Any, after: Any) -> None:
        self.prev[id(op)], self.next[id(op)] = before, after
        if before is None:
            self.first = op
        else:
            self.next[id(before)] = op
        if after is None:
            self.last = op
        else:
            self.prev[id(after)] = op

    def insert_before(self, anchor: Any, ops: list[Any]) -> None:
        for op in ops:
            self._link(op, self.prev[id(anchor)], anchor)
        self._key(ops)

    def insert_after(self, anchor: Any, ops: list[Any]) -> None:
        for op in reversed(ops):
            self._link(op, anchor, self.next[id(anchor)])
        self._key(ops)

    def remove(self, op: Any) -> None:
        before, after = self.prev.pop(id(op)), self.next.pop(id(op))
        self.key.pop(id(op))
        if before is None:
            self.first = after
        else:
            self.next[id(before)] = after
        if after is None:
            self.last = before
        else:
            self.prev[id(after)] = before

    def between(self, a: Any, b: Any) -> list[Any]:
        """The instructions strictly between a and b (a before b)."""
        out = []
        op = self.next[id(a)]
        while op is not None and op is not b:
            out.append(op)
            op = self.next[id(op)]
        return out

    def _key(self, ops: list[Any]) -> None:
        """Keys for consecutive new `ops`, between their neighbours'."""
        before, after = self.prev[id(ops[0])], self.next[id(ops[-1])]
        lo = self.key[id(before)] if before is not None else self.key[id(after)] - 1.0
        hi = self.key[id(after)] if after is not None else lo + 1.0
        step = (hi - lo) / (len(ops) + 1)
        keys = [lo + step * (i + 1) for i in range(len(ops))]
        if all(x < y for x, y in zip([lo, *keys], [*keys, hi], strict=True)):
            for op, k in zip(ops, keys, strict=True):
                self.key[id(op)] = k
            return
        op, i = self.first, 0.0  # the gap is used up: respace all
        while op is not None:
            self.key[id(op)] = i
            op, i = self.next[id(op)], i + 1.0


def _readers(op: Any) -> list[Any]:
    result = getattr(op, "result", None)
    return [u.operation for u in result.uses] if result is not None else []


def _outputs(op: HloOp, comps: dict[str, ComputationOp]) -> list[Any]:
    if op.opcode == "fusion":
        root = comps[op.attr("calls")].root
        return [v.owner for v in root.operands] if root.opcode == "tuple" else [root]
    return [op]


def _body(op: HloOp, comps: dict[str, ComputationOp]) -> list[HloOp]:
    return list(comps[op.attr("calls")].instructions) if op.opcode == "fusion" else [op]


def loop_shape(op: HloOp, comps: dict[str, ComputationOp]) -> Any:
    """The iteration space of a kernel: a reduction hero's input, else its output."""
    outs = _outputs(op, comps)
    body = _body(op, comps)
    if emitter_kind(body, outs) == "reduction":
        for m in body:
            if is_unnested_reduction(m):
                return _dims(m.operands[0].type.data)
    return _dims(outs[0].shape)


def _dims(shape: Any) -> Any:
    return shape.dims if isinstance(shape, ArrayShape) else None


def mof_root_eligible(op: HloOp, comps: dict[str, ComputationOp], kinds: Any = None) -> bool:
    """XLA IsFusibleAsMultiOutputFusionRoot: loop or input (reduction) fusions, and
    elementwise instructions; no scatter or transpose heroes, no kCustom. `kinds`: a cache
    of fusions' emitter kinds (`KindCache`)."""
    if op.opcode == "fusion":
        if op.attr("kind") not in ("kLoop", "kInput"):
            return False
        if isinstance(op.shape, TupleShape) and (
            comps[op.attr("calls")].root.opcode != "tuple"
            or any(
                not (isinstance(u.operation, HloOp) and u.operation.opcode == "get-tuple-element")
                for u in op.result.uses
            )
        ):
            return False  # only multi-output fusions read through get-tuple-element
        kind = (
            kinds(op) if kinds is not None else emitter_kind(_body(op, comps), _outputs(op, comps))
        )
        return kind in ("loop", "reduction")
    from hlopass.cost.fusion import is_elementwise

    return (
        is_elementwise(op)
        and not isinstance(op.shape, TupleShape)
        and instruction_fusible(op, comps)
        and bool(op.operands)
    )


def output_index(a: HloOp, v: SSAValue) -> int | None:
    """Which output of `a` the value `v` is: 0 for a's own result when a has one output,
    the index of a get-tuple-element of a multi-output a, else None."""
    if v is a.result:
        return None if isinstance(a.shape, TupleShape) else 0
    owner = v.owner
    element = isinstance(owner, HloOp) and owner.opcode == "get-tuple-element"
    if element and owner.operands[0] is a.result:  # type: ignore[union-attr]
        return owner.attr("index")  # type: ignore[union-attr]
    return None


def readers_through_elements(op: HloOp) -> list[Operation]:
    """Who reads op's value: its users, or, for a multi-output op, its elements' users."""
    out: list[Operation] = []
    for use in op.result.uses:
        u = use.operation
        if (
            isinstance(op.shape, TupleShape)
            and isinstance(u, HloOp)
            and (u.opcode == "get-tuple-element")
        ):
            out += [w.operation for w in u.result.uses]
        else:
            out.append(u)
    return list(dict.fromkeys(out))


@dataclass
class MergePlan:
    """A built, unplaced multi-output fused computation for kernels `a` and `b`."""

    block: Block
    operands: list[SSAValue]
    outputs: list[SSAValue]
    members: list[HloOp]


def build_merged(a: HloOp, b: HloOp, comps: dict[str, ComputationOp],
                 builder: FusionBuilder) -> MergePlan:  # fmt: skip
    """Clone a's and b's computations into one block (b may read a: that read becomes the
    clone of a's output)."""
    block = Block()
    operands: list[SSAValue] = []
    bound: dict[int, SSAValue] = {}
    members: list[HloOp] = []

    def param(v: SSAValue) -> SSAValue:
        got = bound.get(id(v))
        if got is None:
            p = create_op("parameter", [], v.type.data, builder.fresh_inst(f"param_{len(operands)}"),  # type: ignore[attr-defined]
                          {"number": len(operands)})  # fmt: skip
            block.add_op(p)
            members.append(p)
            bound[id(v)] = got = p.result
            operands.append(v)
        return got

    outputs: list[SSAValue] = []
    a_outs: list[SSAValue] = []

    def bind(v: SSAValue, k: int) -> SSAValue:
        """b's read of a (directly, or an element of a multi-output a) becomes a's value."""
        i = output_index(a, v) if k == 1 else None
        return a_outs[i] if i is not None and i < len(a_outs) else param(v)

    for k, op in enumerate((a, b)):
        mapping: dict[SSAValue, SSAValue] = {}
        if op.opcode == "fusion":
            comp = comps[op.attr("calls")]
            for p in comp.parameters():
                mapping[p.result] = bind(op.operands[p.attr("number")], k)
            body = [x for x in comp.instructions if x.opcode != "parameter"]
            root = comp.root
        else:
            for v in op.operands:
                mapping[v] = bind(v, k)
            body, root = [op], op
        for x in body:
            clone = x.clone(value_mapper=mapping)
            clone.inst_name = builder.fresh_inst(x.inst_name)
            block.add_op(clone)
            members.append(clone)
        r = mapping[root.result]
        if root.opcode == "tuple":
            outs = list(r.owner.operands)  # type: ignore[union-attr]
            members.remove(r.owner)  # type: ignore[arg-type]
            _erase(r.owner)  # type: ignore[arg-type]
        else:
            outs = [r]
        if k == 0:
            a_outs = list(outs)
        outputs += outs
    return MergePlan(block, operands, outputs, members)


@dataclass
class MergeSketch:
    """What `build_merged(a, b)` would build, counted without building it: the budget's
    numbers, and the instruction names the build takes (in the order it takes them), so a
    refused merge costs O(|a| + |b|) name look-ups instead of cloning both kernels."""

    operands: int
    outputs: int
    reductions: int
    smem: int
    names: list[str]


@dataclass(frozen=True)
class Part:
    """What a kernel adds to a merge: which operands its parameters read (in the order
    the build binds them; None: all operands), its body's names, unnested reductions and
    shared memory, its number of outputs. Fixed while the kernel lives (merges make new
    fusions), so it is computed once per kernel."""

    numbers: list[int] | None
    names: list[str]
    reductions: int
    smem: int
    outputs: int

    @staticmethod
    def of(op: HloOp, comps: dict[str, ComputationOp]) -> Part:
        if op.opcode == "fusion":
            comp = comps[op.attr("calls")]
            numbers = [p.attr("number") for p in comp.parameters()]
            body = [x for x in comp.instructions if x.opcode != "parameter"]
            root = comp.root
            n = len(root.operands) if root.opcode == "tuple" else 1
        else:
            numbers, body, n = None, [op], 1
        reductions = sum(is_unnested_reduction(x) for x in body)
        smem = sum(shared_memory(x) for x in body)
        return Part(numbers, [x.inst_name for x in body], reductions, smem, n)

    def reads(self, op: HloOp) -> list[SSAValue]:
        if self.numbers is None:
            return list(op.operands)
        return [op.operands[i] for i in self.numbers]


class PerKernel:
    """A value computed once per live kernel (keyed by identity: ids are reused)."""

    def __init__(self, compute: Any):
        self.compute = compute
        self.hits: dict[int, tuple[Any, Any]] = {}

    def __call__(self, op: Any) -> Any:
        hit = self.hits.get(id(op))
        if hit is None or hit[0] is not op:
            hit = self.hits[id(op)] = (op, self.compute(op))
        return hit[1]


def sketch_merged(a: HloOp, b: HloOp, comps: dict[str, ComputationOp],
                  parts: Any = None) -> MergeSketch:  # fmt: skip
    """`build_merged`'s walk without the clones (keep the two in step). `parts`: a
    `PerKernel` cache of `Part.of`."""
    bound: set[int] = set()
    names: list[str] = []
    reductions = smem = 0
    n_a = 0
    outputs = 0
    for k, op in enumerate((a, b)):
        part = parts(op) if parts is not None else Part.of(op, comps)
        for v in part.reads(op):
            i = output_index(a, v) if k == 1 else None
            if (i is not None and i < n_a) or id(v) in bound:
                continue
            names.append(f"param_{len(bound)}")
            bound.add(id(v))
        names += part.names
        reductions += part.reductions
        smem += part.smem
        if k == 0:
            n_a = part.outputs
        outputs += part.outputs
    return MergeSketch(len(bound), outputs, reductions, smem, names)


@dataclass
class MultiOutputMerge(RewritePattern):
    """Shared by both rewrites: replace kernels `a` and `b` by one fusion writing the
    outputs of both; their readers read get-tuple-elements of it."""

    ctx: RewriteContext
    builder: FusionBuilder
    comps: dict[str, ComputationOp]
    reach: Reachability
    result: HloOp | None = None

    def merge(self, a: HloOp, b: HloOp, plan: MergePlan) -> HloOp:
        tup = create_op("tuple", plan.outputs,
                        TupleShape(tuple(v.type.data for v in plan.outputs)),  # type: ignore[attr-defined]
                        self.builder.fresh_inst("tuple"))  # fmt: skip
        plan.block.add_op(tup)
        plan.block.add_op(new_return_op(tup.result))
        name = self.builder.fresh_comp("fused_computation")
        comp = new_computation_op(name, plan.block)
        host = b.parent_op()
        assert isinstance(host, ComputationOp)
        mblock = host.parent_block()
        assert mblock is not None
        mblock.insert_op_before(comp, host)
        self.builder.comps[name] = comp
        self.builder.callers[name] = 1
        self.comps[name] = comp
        kind = fusion_kind(plan.members, [v.owner for v in plan.outputs])
        operands = [v for v in plan.operands]
        fusion = create_op("fusion", operands, tup.shape, self.builder.fresh_inst("fusion"),
                           {"kind": kind, "calls": name})  # fmt: skip
        pos = self.reach.pos
        later = b if pos[id(b)] > pos[id(a)] else a
        earlier = a if later is b else b
        block = later.parent_block()
        assert block is not None
        block.insert_op_before(fusion, later)
        self._move_after(fusion, earlier, later)
        gtes: list[HloOp] = []
        offset = 0
        for old in (a, b):
            n = len(_outputs(old, self.comps))
            if isinstance(old.shape, TupleShape):
                for use in list(old.result.uses):
                    u = use.operation
                    assert isinstance(u, HloOp) and u.opcode == "get-tuple-element"
                    u.set_attr("index", u.attr("index") + offset)
                    u.operands = [fusion.result]
            elif old.result.uses:
                g = create_op("get-tuple-element", [fusion.result], old.shape,
                              self.builder.fresh_inst(f"{old.inst_name}.out"), {"index": offset})  # fmt: skip
                block.insert_op_after(g, fusion)
                gtes.append(g)
                old.result.replace_all_uses_with(g.result)
            offset += n
        self.reach.merged(fusion, [a, b], gtes)
        self.reach.order.insert_before(later, [fusion, *gtes])
        self.reach.order.remove(a)
        self.reach.order.remove(b)
        for old in (a, b):
            callee = old.attr("calls") if old.opcode == "fusion" else None
            _erase(old)
            if callee is not None:
                self.builder.callers[callee] -= 1
                if self.builder.callers[callee] == 0:
                    _erase(self.builder.comps.pop(callee))
                    self.comps.pop(callee, None)
        self.builder.created.append(fusion)
        self.result = fusion
        return fusion

    def _move_after(self, fusion: HloOp, earlier: HloOp, later: HloOp) -> None:
        """Readers of `earlier` placed before `later` move after the new fusion (none of
        them reaches `later`: that would be a cycle)."""
        order = self.reach.order
        moved = [op for op in order.between(earlier, later) if self.reach.reaches(earlier, op)]
        anchor: Operation = fusion
        for op in moved:
            op.detach()
            block = fusion.parent_block()
            assert block is not None
            block.insert_op_after(op, anchor)
            anchor = op
        if moved:
            for op in moved:
                order.remove(op)
            order.insert_after(later, moved)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        raise NotImplementedError  # the concrete rewrites below


@dataclass
class MergeSiblingFusions(MultiOutputMerge):
    """`a(x, ...), b(x, ...)` -> `f = fusion(x, ...)` writing both; a's and b's readers
    read `get-tuple-element(f)`. Guards: see the module docstring; `sibling` is b."""

    sibling: HloOp | None = None
    plan: MergePlan | None = None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or self.sibling is None or self.plan is None:
            return
        fusion = self.merge(op, self.sibling, self.plan)
        self.ctx.note(self, fusion, f"siblings {op.inst_name}, {self.sibling.inst_name}")


@dataclass
class FuseProducerIntoMultiOutput(MultiOutputMerge):
    """`c(p(x))` with other readers of p -> `f = fusion(x)` computing p then c, writing
    both; c's readers read element 1, p's other readers element 0."""

    consumer: HloOp | None = None
    plan: MergePlan | None = None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or self.consumer is None or self.plan is None:
            return
        fusion = self.merge(op, self.consumer, self.plan)
        self.ctx.note(self, fusion, f"producer {op.inst_name} into {self.consumer.inst_name}")


# --- the driver -------------------------------------------------------------------------------


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
    _shapes: dict[int, tuple[HloOp, Any]] = field(default_factory=dict)
    made: list[tuple[FusionRecord, HloOp]] = field(default_factory=list)
    """Each merge's record and fusion (named once the builder has renamed them)."""

    def __post_init__(self) -> None:
        # per-kernel facts, each computed once: recomputing them for the growing fusion
        # on every candidate made a sibling group quadratic
        comps = self.comps
        self.kinds = PerKernel(lambda op: emitter_kind(_body(op, comps), _outputs(op, comps)))
        self.parts = PerKernel(lambda op: Part.of(op, comps))
        self.time_of = PerKernel(
            lambda op: self.model.kernel_time_us(_body(op, comps), _outputs(op, comps))
        )

    def refusal(self, a: HloOp, b: HloOp, reach: Reachability, sibling: bool) -> str | None:
        comps = self.comps
        if not mof_root_eligible(b, comps, self.kinds) or not mof_root_eligible(
            a, comps, self.kinds
        ):
            return NOT_ROOT
        if sibling and a.opcode != "fusion" and b.opcode != "fusion":
            return "no fusion among the siblings"
        if self.loop_shape(a) != self.loop_shape(b):
            return DIFFERENT_LOOP_SHAPES
        if sibling:
            if reach.reaches(a, b) or reach.reaches(b, a):
                return CYCLE
        else:
            for v in b.operands:
                if output_index(a, v) is None and v is not a.result and reach.reaches(a, v.owner):
                    return CYCLE
        return None

    def budget(self, sketch: MergeSketch) -> str | None:
        if sketch.operands + sketch.outputs + 1 > MAX_OPERANDS_AND_OUTPUTS:
            return BUDGET
        if sketch.reductions > MAX_UNNESTED_REDUCTIONS:
            return f"over {MAX_UNNESTED_REDUCTIONS} unnested reductions in fusion"
        if sketch.smem > SHARED_MEMORY_PER_BLOCK:
            return f"shared memory usage would be over the budget of {SHARED_MEMORY_PER_BLOCK}B"
        return None

    def consider(self, a: HloOp, b: HloOp, reach: Reachability, sibling: bool) -> bool:
        record = FusionRecord("multi-output-fusion", self.comp.comp_name, a.inst_name, "kept",
                              consumers=[b.inst_name])  # fmt: skip
        self.records.append(record)
        why = self.refusal(a, b, reach, sibling)
        plan = None
        if why is None:
            # the budget is decided on a sketch: building (cloning the growing fusion) for
            # every refused candidate made large sibling groups quadratic
            sketch = sketch_merged(a, b, self.comps, self.parts)
            why = self.budget(sketch)
            if why is None:
                plan = build_merged(a, b, self.comps, self.builder)
            else:  # the names the build would have taken, so later names stay the same
                for name in sketch.names:
                    self.builder.fresh_inst(name)
        if why is None and plan is not None:
            unfused = self.time_of(a) + self.time_of(b)
            fused = self.model.kernel_time_us(plan.members, [v.owner for v in plan.outputs])
            record.unfused_us, record.fused_us = unfused, fused
            if fused > unfused:
                why = SLOWER
        if why is not None or plan is None:
            record.reason = why
            return False
        cls = MergeSiblingFusions if sibling else FuseProducerIntoMultiOutput
        pattern = cls(self.ctx, self.builder, self.comps, reach)
        if sibling:
            pattern.sibling, pattern.plan = b, plan  # type: ignore[attr-defined]
        else:
            pattern.consumer, pattern.plan = b, plan  # type: ignore[attr-defined]
        pattern.match_and_rewrite(a, PatternRewriter(a))
        record.decision = "fused"
        if pattern.result is not None:
            self.made.append((record, pattern.result))
        self._fused = pattern.result
        return True

    def run(self) -> bool:
        changed = False
        reach = Reachability(self.comp)
        comps = self.comps
        # siblings: kernels reading a common value
        for value_owner in list(self.comp.instructions):
            if value_owner.parent is None:
                continue
            readers = [u.operation for u in value_owner.result.uses]
            readers = [r for r in dict.fromkeys(readers)
                       if isinstance(r, HloOp) and r.parent is not None
                       and mof_root_eligible(r, comps, self.kinds)]  # fmt: skip
            if len(readers) >= 2:
                readers.sort(key=lambda r: reach.pos[id(r)])
                changed |= self._merge_siblings(readers, reach)
        # producer-consumer: a producer read by several kernels joins one of them
        for p in list(self.comp.instructions):
            if p.parent is None or (isinstance(p.shape, TupleShape) and p.opcode != "fusion"):
                continue
            if not mof_root_eligible(p, comps, self.kinds):
                continue
            readers = [r for r in readers_through_elements(p) if isinstance(r, HloOp)]
            if len(readers) < 2:
                continue
            for c in readers:
                ready = c.opcode == "fusion" and c.parent is not None and p.parent is not None
                if ready and self.consider(p, c, reach, sibling=False):
                    changed = True
                    break
        return changed

    def _merge_siblings(self, readers: list[HloOp], reach: Reachability) -> bool:
        """Merge compatible readers of one value; only readers with the same loop shape are
        paired (a value read by many kernels costs one pass over them per shape)."""
        groups: dict[Any, list[HloOp]] = {}
        for r in readers:
            groups.setdefault(repr(self.loop_shape(r)), []).append(r)
        heads = [g[0] for g in groups.values()]
        for a, b in zip(heads, heads[1:], strict=False):  # one record per shape boundary
            self.records.append(FusionRecord(
                "multi-output-fusion", self.comp.comp_name, a.inst_name, "kept",
                reason=DIFFERENT_LOOP_SHAPES, consumers=[b.inst_name],
            ))  # fmt: skip
        changed = False
        for group in groups.values():
            if len(group) > 1:
                changed |= self._merge_group(group, reach)
        return changed

    def loop_shape(self, op: HloOp) -> Any:
        hit = self._shapes.get(id(op))
        if hit is None or hit[0] is not op:
            hit = self._shapes[id(op)] = (op, loop_shape(op, self.comps))
        return hit[1]

    def _merge_group(self, readers: list[HloOp], reach: Reachability) -> bool:
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
                    and self.consider(a, b, reach, True)
                ):
                    changed = True
                    a = self._fused
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
class MultiOutputFusionPass(HloModulePass):
    """XLA's multi-output fusion: siblings and producer-consumer pairs into one kernel."""

    name: ClassVar[str] = "multi-output-fusion"

    device: str = "h100_sxm"
    """GPU whose cost model prices the merged kernels."""

    cost_model: str = "default"
    """`default` or `roofline` (see priority-fusion)."""

    def __post_init__(self) -> None:
        from hlopass.cost.fusion_model import check_pricing_options

        check_pricing_options(self.device, self.cost_model)

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        changed, records = multi_output_fusion(module, self.device, self.cost_model, trace)
        explain_sink.emit(records)
        return changed
