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
    INPUT_EMITTERS,
    FusionCostModel,
    emitter_kind,
    fusion_kind,
    is_unnested_reduction,
)
from hlopass.cost.sibling import EmitterFacts
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


def first_reduction(body: list[HloOp]) -> Any:
    """The input dimensions of the first unnested reduction in `body`, None if none."""
    for m in body:
        if is_unnested_reduction(m):
            return _dims(m.operands[0].type.data)
    return None


def shape_of_loop(emitter: str, reduction: Any, first_output: Any) -> Any:
    """The iteration space of a kernel: a reduction hero's input, else its first output."""
    if emitter == "reduction" and reduction is not None:
        return reduction
    return _dims(first_output.shape)


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


def key_of(op: HloOp) -> Any:
    """How a kernel's summary keys its inputs: a fused computation's parameters by number,
    an instruction's operands by the first index reading them (both: operand indexes)."""
    if op.opcode == "fusion":
        return lambda src: src.attr("number")
    first: dict[int, int] = {}
    for i, v in enumerate(op.operands):
        first.setdefault(id(v.owner), i)
    return lambda src: first[id(src)]


def key_to_operand(op: HloOp, index: dict[int, int]) -> Any:
    """op's summary keys (its operand indexes) -> indexes into another operand list."""
    operands = op.operands
    return lambda k: index[id(operands[k])]


def distinct_reads(op: HloOp) -> list[SSAValue]:
    """What a kernel reads, each value once, in parameter order (a fusion's operand i is
    its parameter number i; an instruction's operands)."""
    return list({id(v): v for v in op.operands}.values())


def merged_operands(a: HloOp, b: HloOp) -> list[SSAValue]:
    """The operands of a's and b's fusion: a's reads, then b's others (as built)."""
    out = {id(v): v for v in distinct_reads(a)}
    for v in distinct_reads(b):
        out.setdefault(id(v), v)
    return list(out.values())


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
class SiblingPlan:
    """A priced sibling merge, built in place (`MultiOutputMerge.extend`): the merged
    fusion's operands and kind."""

    operands: list[SSAValue]
    kind: str


@dataclass
class MergeSketch:
    """What merging a and b would build, counted without building it: the budget's
    numbers (a refused merge costs O(operands), not a copy of both kernels)."""

    operands: int
    outputs: int
    reductions: int
    smem: int


@dataclass(frozen=True)
class Part:
    """What a kernel adds to a merge: which operands its parameters read (in the order
    the build binds them; None: all operands), its unnested reductions and shared memory,
    its number of outputs. Fixed while the kernel lives (merges make new fusions), so it is
    computed once per kernel."""

    numbers: list[int] | None
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
        return Part(numbers, reductions, smem, n)

    def merged(self, other: Part) -> Part:
        """The part of a fusion built from two (its parameters follow its operands)."""
        return Part(None, self.reductions + other.reductions, self.smem + other.smem,
                    self.outputs + other.outputs)  # fmt: skip

    def reads(self, op: HloOp) -> list[SSAValue]:
        if self.numbers is None:
            return list(op.operands)
        return [op.operands[i] for i in self.numbers]


class PerKernel:
    """A value computed once per live kernel (keyed by identity: ids are reused)."""

    def __init__(self, compute: Any):
        self.compute = compute
        self.hits: dict[int, tuple[Any, Any]] = {}

    def put(self, op: Any, value: Any) -> None:
        self.hits[id(op)] = (op, value)

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
    reductions = smem = 0
    n_a = 0
    outputs = 0
    for k, op in enumerate((a, b)):
        part = parts(op) if parts is not None else Part.of(op, comps)
        for v in part.reads(op):
            i = output_index(a, v) if k == 1 else None
            if (i is not None and i < n_a) or id(v) in bound:
                continue
            bound.add(id(v))
        reductions += part.reductions
        smem += part.smem
        if k == 0:
            n_a = part.outputs
        outputs += part.outputs
    return MergeSketch(len(bound), outputs, reductions, smem)


@dataclass
class MultiOutputMerge(RewritePattern):
    """Shared by both rewrites: replace kernels `a` and `b` by one fusion writing the
    outputs of both; their readers read get-tuple-elements of it."""

    ctx: RewriteContext
    builder: FusionBuilder
    comps: dict[str, ComputationOp]
    reach: Reachability
    result: HloOp | None = None
    copies: dict[int, HloOp] = field(default_factory=dict)
    """Instructions copied (not moved) into the new fusion: id -> copy."""

    def merge(self, a: HloOp, b: HloOp, plan: MergePlan) -> HloOp:
        """A fusion calling a new computation built from `plan` (copies of a and b)."""
        tup = create_op("tuple", plan.outputs,
                        TupleShape(tuple(v.type.data for v in plan.outputs)),  # type: ignore[attr-defined]
                        self.builder.fresh_inst("tuple"))  # fmt: skip
        plan.block.add_op(tup)
        plan.block.add_op(new_return_op(tup.result))
        comp = self._register(plan.block, b)
        kind = fusion_kind(plan.members, [v.owner for v in plan.outputs])
        counts = [len(_outputs(a, self.comps)), len(_outputs(b, self.comps))]
        return self._replace(a, b, list(plan.operands), tup.shape, kind, comp, counts, None)

    def extend(self, a: HloOp, b: HloOp, operands: list[SSAValue], kind: str) -> HloOp:
        """Siblings: b's body joins a's fused computation in place (moved when b's
        computation is b's alone, else copied), so a growing fusion is never copied;
        `operands`: the merged fusion's, a's first (`merged_operands`)."""
        comp = self._own(a)
        block = comp.body.block
        ret = block.last_op
        assert ret is not None
        root = comp.root
        outs = list(root.operands) if root.opcode == "tuple" else [root.result]
        if root.opcode == "tuple":
            _erase(root)
        bound = {id(v): p.result for v, p in zip(distinct_reads(a), comp.parameters(), strict=True)}
        counts = [len(outs)]

        def param(v: SSAValue) -> SSAValue:
            got = bound.get(id(v))
            if got is None:
                n = len(bound)
                p = create_op("parameter", [], v.type.data, self.builder.fresh_inst(f"param_{n}"),  # type: ignore[attr-defined]
                              {"number": n})  # fmt: skip
                block.insert_op_before(p, ret)
                bound[id(v)] = got = p.result
            return got

        b_outs = self._bring(b, param, block, ret)
        counts.append(len(b_outs))
        outs += b_outs
        tup = create_op("tuple", outs, TupleShape(tuple(v.type.data for v in outs)),  # type: ignore[attr-defined]
                        self.builder.fresh_inst("tuple"))  # fmt: skip
        block.insert_op_before(tup, ret)
        ret.operands = [tup.result]
        return self._replace(a, b, operands, tup.shape, kind, comp, counts, comp.comp_name)

    def _own(self, a: HloOp) -> ComputationOp:
        """a's fused computation when only a calls it and reads each operand once, else a
        new computation holding a copy of a (one instruction, or a shared body)."""
        if (
            a.opcode == "fusion"
            and self.builder.callers.get(a.attr("calls")) == 1
            and len({id(v) for v in a.operands}) == len(a.operands)
        ):
            return self.comps[a.attr("calls")]
        block = Block()
        ret = new_return_op(a.result)  # a placeholder operand, replaced below
        block.add_op(ret)
        bound: dict[int, SSAValue] = {}

        def param(v: SSAValue) -> SSAValue:
            got = bound.get(id(v))
            if got is None:
                n = len(bound)
                p = create_op("parameter", [], v.type.data, self.builder.fresh_inst(f"param_{n}"),  # type: ignore[attr-defined]
                              {"number": n})  # fmt: skip
                block.insert_op_before(p, ret)
                bound[id(v)] = got = p.result
            return got

        outs = self._bring(a, param, block, ret, copy=True)
        if len(outs) > 1:
            tup = create_op("tuple", outs, TupleShape(tuple(v.type.data for v in outs)),  # type: ignore[attr-defined]
                            self.builder.fresh_inst("tuple"))  # fmt: skip
            block.insert_op_before(tup, ret)
            outs = [tup.result]
        ret.operands = outs
        return self._register(block, a)

    def _bring(self, op: HloOp, param: Any, block: Block, before: Operation,
               copy: bool = False) -> list[SSAValue]:  # fmt: skip
        """Put op's body into `block` before `before`, its reads bound by `param(value)`
        (in parameter order); returns its outputs there."""
        if op.opcode != "fusion":
            mapping = {v: param(v) for v in op.operands}
            clone = op.clone(value_mapper=mapping)
            clone.inst_name = self.builder.fresh_inst(op.inst_name)
            block.insert_op_before(clone, before)
            self.copies[id(op)] = clone
            return [clone.result]
        comp = self.comps[op.attr("calls")]
        mapping = {p.result: param(op.operands[p.attr("number")]) for p in comp.parameters()}
        root = comp.root
        body = [x for x in comp.instructions if x.opcode != "parameter"]
        if root.opcode == "tuple":
            body.remove(root)
        copy = copy or self.builder.callers.get(comp.comp_name) != 1
        for x in body:
            if copy:
                moved = x.clone(value_mapper=mapping)
                moved.inst_name = self.builder.fresh_inst(x.inst_name)
                mapping[x.result] = moved.result
                self.copies[id(x)] = moved
            else:  # b's computation is erased with b: its instructions move, names kept
                moved = x
                x.detach()
                if any(v in mapping for v in x.operands):
                    x.operands = [mapping.get(v, v) for v in x.operands]
            block.insert_op_before(moved, before)
        outs = list(root.operands) if root.opcode == "tuple" else [root.result]
        return [mapping.get(v, v) for v in outs]

    def _register(self, block: Block, near: HloOp) -> ComputationOp:
        name = self.builder.fresh_comp("fused_computation")
        comp = new_computation_op(name, block)
        host = near.parent_op()
        assert isinstance(host, ComputationOp)
        mblock = host.parent_block()
        assert mblock is not None
        mblock.insert_op_before(comp, host)
        self.builder.comps[name] = comp
        self.builder.callers[name] = 1
        self.comps[name] = comp
        return comp

    def _replace(self, a: HloOp, b: HloOp, operands: list[SSAValue], shape: Any, kind: str,
                 comp: ComputationOp, counts: list[int], keep: str | None) -> HloOp:  # fmt: skip
        """A fusion of `comp` replaces a and b (placed where both may be: readers of the
        earlier one that come before the later one move after it); a's and b's readers
        read its elements (`counts`: a's and b's numbers of outputs). `keep`: a computation
        of a's that is now the new fusion's."""
        fusion = create_op("fusion", operands, shape, self.builder.fresh_inst("fusion"),
                           {"kind": kind, "calls": comp.comp_name})  # fmt: skip
        pos = self.reach.pos
        later = b if pos[id(b)] > pos[id(a)] else a
        earlier = a if later is b else b
        block = later.parent_block()
        assert block is not None
        block.insert_op_before(fusion, later)
        self._move_after(fusion, earlier, later)
        gtes: list[HloOp] = []
        offset = 0
        for old, n in zip((a, b), counts, strict=True):
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
            if callee is not None and callee != keep:
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
    plan: SiblingPlan | None = None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or self.sibling is None or self.plan is None:
            return
        fusion = self.extend(op, self.sibling, self.plan.operands, self.plan.kind)
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
    made: list[tuple[FusionRecord, HloOp]] = field(default_factory=list)
    """Each merge's record and fusion (named once the builder has renamed them)."""

    def __post_init__(self) -> None:
        # per-kernel facts, each computed once: recomputing them for the growing fusion
        # on every candidate made a sibling group quadratic
        # (a fusion made by a sibling merge gets them from its two kernels' facts)
        comps = self.comps
        self.facts = PerKernel(
            lambda op: EmitterFacts.of(_body(op, comps), _outputs(op, comps), key_of(op))
        )
        self.kinds = PerKernel(lambda op: self.facts(op).emitter())
        self.reduction = PerKernel(lambda op: first_reduction(_body(op, comps)))
        self.parts = PerKernel(lambda op: Part.of(op, comps))
        self.summaries = PerKernel(lambda op: self.model.sibling_summary(
            _body(op, comps), _outputs(op, comps), key_of(op)))  # fmt: skip
        self.time_of = PerKernel(
            lambda op: self.model.sibling_time_us(self.summaries(op), self.facts(op))
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
        record.unfused_us, record.fused_us = self.time_of(a) + self.time_of(b), fused
        if fused > record.unfused_us:
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
        record.unfused_us, record.fused_us = self.time_of(a) + self.time_of(b), fused
        if fused > record.unfused_us:
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
        plan = SiblingPlan(operands, "kInput" if emitter in INPUT_EMITTERS else "kLoop")
        return self.model.sibling_time_us(summary, facts), plan, summary, facts

    def price_producer(self, a: HloOp, b: HloOp) -> tuple[float, MergePlan]:
        """b reads a: the merged kernel is built (a copy of both) and analysed whole."""
        plan = build_merged(a, b, self.comps, self.builder)
        outputs = [v.owner for v in plan.outputs]
        return self.model.kernel_time_us(plan.members, outputs), plan

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
        return shape_of_loop(self.kinds(op), self.reduction(op), self.facts(op).outputs[0])

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
