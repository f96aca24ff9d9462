"""The rewrites of `multi-output-fusion` (the driver that orders them is in `multi_output.py`).

`MergeSiblingFusions` and `FuseProducerIntoMultiOutput` (one rewrite per class), the plans
and sketches that price a merge before anything is built, and the graph facts they query:
`Reachability` (ancestor bitsets, updated on each merge, for "would introduce a cycle") and
`Order` (O(1) position updates in the block).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    create_op,
    new_return_op,
)
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, TupleShape
from hlopass.kernel_structure.emitter import (
    emitter_kind,
    fusion_kind,
    is_elementwise,
    is_unnested_reduction,
)
from hlopass.kernel_structure.shapes import elements
from hlopass.passes.fusion.mof_producer import IN_PLACE_PRODUCER, in_place_producer
from hlopass.passes.fusion.rewrites import FusionBuilder, erase_op
from hlopass.passes.fusion.rules import (
    instruction_fusible,
    shared_memory,
)
from hlopass.rewriting import RewriteContext, value_shape

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


def kernel_outputs(op: HloOp, comps: dict[str, ComputationOp]) -> list[Any]:
    if op.opcode == "fusion":
        root = comps[op.attr("calls")].root
        return [v.owner for v in root.operands] if root.opcode == "tuple" else [root]
    return [op]


def multi_output(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """A fusion whose outputs are its root tuple's elements (a variadic reduce root is one
    tuple-shaped output: its readers keep their indices, into an element of the new
    fusion)."""
    return op.opcode == "fusion" and comps[op.attr("calls")].root.opcode == "tuple"


def kernel_body(op: HloOp, comps: dict[str, ComputationOp]) -> list[HloOp]:
    return list(comps[op.attr("calls")].instructions) if op.opcode == "fusion" else [op]


def first_reduction(body: list[HloOp]) -> Any:
    """The input shape of the first unnested reduction in `body`, None if none."""
    for m in body:
        if is_unnested_reduction(m):
            return value_shape(m.operands[0])
    return None


def shape_of_loop(emitter: str, reduction: Any, first_output: Any) -> Any:
    """The iteration space of a kernel: a reduction hero's input, else its first output
    (an array shape, None for a tuple)."""
    if emitter == "reduction" and reduction is not None:
        return reduction
    shape = first_output.shape
    return shape if isinstance(shape, ArrayShape) else None


def loop_group(shape: Any) -> Any:
    """Kernels whose loops may be compatible share a group: the element count."""
    return elements(shape) if isinstance(shape, ArrayShape) else None


def loops_compatible(a: Any, b: Any, reshape_ok: bool) -> bool:
    """XLA ShapesCompatibleForMultiOutputFusion: the same loop dims, or (`reshape_ok`) two
    arrays one reshape of the other that is a bitcast: same element count, both laid out
    row-major (ignoring size-1 dims)."""
    if not isinstance(a, ArrayShape) or not isinstance(b, ArrayShape):
        return a is None and b is None
    if a.dims == b.dims:
        return True
    return reshape_ok and elements(a) == elements(b) and _row_major(a) and _row_major(b)


def _row_major(shape: ArrayShape) -> bool:
    order = [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
    return order == sorted(order)


def mof_root_eligible(op: HloOp, comps: dict[str, ComputationOp], kinds: Any = None,
                      tiled: Any = None) -> bool:  # fmt: skip
    """XLA IsFusibleAsMultiOutputFusionRoot: loop or input (reduction) fusions, and
    elementwise instructions or reductions XLA's reduction emitter takes (a variadic one
    only inside a fusion); kernels whose hero is a tiled transpose (`mof_heroes`); no
    scatter heroes, no kCustom. `kinds`: a cache of fusions' emitter kinds (`KindCache`);
    `tiled`: op -> its tiled-transpose hero or None (`mof_heroes.transpose_hero`)."""
    has_tiled = tiled is not None and op.opcode in ("fusion", "transpose") and tiled(op) is not None
    if op.opcode == "transpose":
        return has_tiled and instruction_fusible(op, comps)
    if op.opcode == "fusion":
        if op.attr("kind") not in ("kLoop", "kInput"):
            return False
        root_opcode = comps[op.attr("calls")].root.opcode
        # XLA IsNestableVariadicReduction: a variadic reduce root only in a kInput fusion
        variadic_ok = root_opcode == "reduce" and op.attr("kind") == "kInput"
        if isinstance(op.shape, TupleShape) and root_opcode != "tuple" and not variadic_ok:
            return False
        if has_tiled:
            return True
        kind = (
            kinds(op)
            if kinds is not None
            else emitter_kind(kernel_body(op, comps), kernel_outputs(op, comps))
        )
        # XLA IsLoopFusion: a kLoop fusion is a root whatever its emitter (an in-place
        # dynamic-update-slice one too; `in_place_refusal` keeps XLA's limits on those)
        return kind in ("loop", "reduction") or (
            kind == "in_place_dus" and op.attr("kind") == "kLoop"
        )
    return (
        (is_elementwise(op) or is_unnested_reduction(op))
        and not isinstance(op.shape, TupleShape)
        and instruction_fusible(op, comps)
        and bool(op.operands)
    )


def read_through_elements(op: HloOp) -> bool:
    """XLA IsSiblingFusionCandidate's last test: a multi-output fusion takes part in a merge
    only when every reader reads it through a get-tuple-element (the merge rewires those)."""
    if not isinstance(op.shape, TupleShape):
        return True
    return all(isinstance(u.operation, HloOp) and u.operation.opcode == "get-tuple-element"
               for u in op.result.uses)  # fmt: skip


def in_place_refusal(
    a: HloOp, b: HloOp, comps: dict[str, ComputationOp], sibling: bool
) -> str | None:
    """XLA's limits on in-place dynamic-update-slice kernels: never siblings (LegalToFuse:
    the emitter takes one DUS root only), and a producer only when its update is not made
    in place in one of its parameters (IsProducerMultiOutputFusible: "In-place operations
    are present"; as XLA, a DUS chained on another DUS is not followed to the parameter)."""
    if sibling:
        if any(x.opcode == "fusion" and comps[x.attr("calls")].root.opcode == "dynamic-update-slice"
               for x in (a, b)):  # fmt: skip
            return "can't fuse multiple DUSs"
        return None
    return IN_PLACE_PRODUCER if in_place_producer(a, comps) else None


def is_effective_scalar(shape: Any) -> bool:
    """An array of one element (XLA ShapeUtil::IsEffectiveScalar)."""
    return isinstance(shape, ArrayShape) and all(d == 1 for d in shape.dims)


def fusion_priority(op: HloOp) -> int:
    """XLA's FusionPriority: siblings are tried multi-output fusions first, then fusions,
    then unfused instructions."""
    if op.opcode != "fusion":
        return 0
    return 2 if isinstance(op.shape, TupleShape) else 1


SLICES_DISJOINT = "slices are non-overlapping"
SMALL_PARAMETER_BYTES = 1024  # XLA: a parameter under 1 KiB may be fused even if disjoint


def disjoint_slices(a: HloOp, b: HloOp, common: HloOp,
                    comps: dict[str, ComputationOp]) -> str | None:  # fmt: skip
    """XLA ParameterSlicesAreNonOverlapping: siblings that each read only one slice of
    the (at least 1 KiB) common value, and slices that share no element, gain nothing
    from one kernel."""
    shape = common.shape
    if not isinstance(shape, ArrayShape):
        return None
    if elements(shape) * ELEMENT_BITS.get(shape.element_type, 32) < 8 * SMALL_PARAMETER_BYTES:
        return None
    s1, s2 = unique_slice(common, a, comps), unique_slice(common, b, comps)
    if s1 is None or s2 is None:
        return None
    for d1, d2 in zip(s1.attr("slice"), s2.attr("slice"), strict=True):
        if not (d1.start < d2.limit and d2.start < d1.limit):
            return SLICES_DISJOINT
    return None


def unique_slice(parent: HloOp, op: HloOp, comps: dict[str, ComputationOp]) -> HloOp | None:
    """XLA FindUniqueSlice: the one slice through which `op` reads `parent` (directly, or
    through one fusion parameter read only by it), None if there is none or several."""
    if op.opcode == "slice":
        return op
    if op.opcode != "fusion":
        return None
    found: HloOp | None = None
    params = {p.attr("number"): p for p in comps[op.attr("calls")].parameters()}
    for i, v in enumerate(op.operands):
        if v is not parent.result:
            continue
        if found is not None:
            return None  # read through two parameters: no unique slice
        users = [u.operation for u in params[i].result.uses]
        if len(users) != 1 or not isinstance(users[0], HloOp):
            return None
        found = unique_slice(params[i], users[0], comps)
        if found is None:
            return None
    return found


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

    a_outs: list[SSAValue] = []
    b_outs: list[SSAValue] = []

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
            erase_op(r.owner)  # type: ignore[arg-type]
        else:
            outs = [r]
        if k == 0:
            a_outs = list(outs)
        else:
            b_outs = list(outs)
    # XLA fuses the producer into its consumer: the consumer's outputs come first
    outputs = b_outs + a_outs
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

    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

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
        counts = [len(kernel_outputs(a, self.comps)), len(kernel_outputs(b, self.comps))]
        return self._replace(a, b, list(plan.operands), tup.shape, kind, comp, counts, None,
                             consumer_first=True)  # fmt: skip

    def extend(self, a: HloOp, b: HloOp, operands: list[SSAValue], kind: str) -> HloOp:
        """Siblings: b's body joins a's fused computation in place (moved when b's
        computation is b's alone, else copied), so a growing fusion is never copied;
        `operands`: the merged fusion's, a's first (`merged_operands`)."""
        # before a's computation becomes the merged one (its root then is a tuple)
        multi = (multi_output(a, self.comps), multi_output(b, self.comps))
        comp = self._own(a)
        block = comp.body.block
        ret = block.last_op
        assert ret is not None
        root = comp.root
        outs = list(root.operands) if root.opcode == "tuple" else [root.result]
        if root.opcode == "tuple":
            erase_op(root)
        bound = {id(v): p.result for v, p in zip(distinct_reads(a), comp.parameters(), strict=True)}
        counts = [len(outs)]

        param = self._binder(bound, block, ret)

        b_outs = self._bring(b, param, block, ret)
        counts.append(len(b_outs))
        outs += b_outs
        tup = create_op("tuple", outs, TupleShape(tuple(v.type.data for v in outs)),  # type: ignore[attr-defined]
                        self.builder.fresh_inst("tuple"))  # fmt: skip
        block.insert_op_before(tup, ret)
        ret.operands = [tup.result]
        return self._replace(a, b, operands, tup.shape, kind, comp, counts, comp.comp_name,
                             multi=multi)  # fmt: skip

    def _binder(self, bound: dict[int, SSAValue], block: Block, ret: Operation) -> Any:
        """v -> the fused computation's parameter for outer value v, a new parameter (numbered
        after those in `bound`, inserted before `ret`) the first time v is read."""

        def param(v: SSAValue) -> SSAValue:
            got = bound.get(id(v))
            if got is None:
                n = len(bound)
                p = create_op("parameter", [], v.type.data, self.builder.fresh_inst(f"param_{n}"),  # type: ignore[attr-defined]
                              {"number": n})  # fmt: skip
                block.insert_op_before(p, ret)
                bound[id(v)] = got = p.result
            return got

        return param

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

        param = self._binder(bound, block, ret)

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
        comp = self.builder.add_computation(block, near)
        self.comps[comp.comp_name] = comp
        return comp

    def _replace(self, a: HloOp, b: HloOp, operands: list[SSAValue], shape: Any, kind: str,
                 comp: ComputationOp, counts: list[int], keep: str | None,
                 consumer_first: bool = False,
                 multi: tuple[bool, bool] | None = None) -> HloOp:  # fmt: skip
        """A fusion of `comp` replaces a and b (placed where both may be: readers of the
        earlier one that come before the later one move after it); a's and b's readers
        read its elements (`counts`: a's and b's numbers of outputs; b's come first with
        `consumer_first`). `keep`: a computation of a's that is now the new fusion's.
        `multi`: whether a and b are multi-output fusions (their readers are re-indexed),
        when a's computation has already been changed."""
        if multi is None:
            multi = (multi_output(a, self.comps), multi_output(b, self.comps))
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
        pairs = list(zip((a, b), counts, multi, strict=True))
        for old, n, is_multi in reversed(pairs) if consumer_first else pairs:
            if is_multi:
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
            erase_op(old)
            if callee is not None and callee != keep:
                self.builder.callers[callee] -= 1
                if self.builder.callers[callee] == 0:
                    erase_op(self.builder.comps.pop(callee))
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
