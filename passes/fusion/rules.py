"""When may a producer kernel be fused into a consumer kernel: XLA's refusal rules
(`priority_fusion.cc` CanFuse, `gpu_fusible.cc` FusionFitsInBudget / CanEmitInputFusedScatter,
`instruction_fusion.cc` ShouldFuseInPlaceOp), each answering with XLA's reason text.

`Rules.can_fuse(producer, consumer)` returns None when allowed, else the reason. Kernels are
plans (`hlopass.kernel_structure.plan.Kernel`); the facts each rule needs (reductions, shared
memory, emitter) are cached per kernel version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, TupleShape
from hlopass.kernel_structure.emitter import (
    emitter_kind,
    is_elementwise,
    is_tiled_transpose,
    is_unnested_reduction,
)
from hlopass.kernel_structure.plan import Kernel
from hlopass.kernel_structure.shapes import elements
from hlopass.rewriting import calls_side_effect, is_control_predecessor, value_shape

# XLA's IsFusible: elementwise ops and these.
FUSIBLE_OPCODES = frozenset({
    "copy", "iota", "constant", "reduce", "bitcast", "broadcast", "concatenate",
    "dynamic-slice", "dynamic-update-slice", "gather", "pad", "reduce-window", "reshape",
    "reverse", "scatter", "slice", "transpose",
})  # fmt: skip

SIGNIFICANT_REDUCE = 16  # elements reduced per output: smaller ones use the loop emitter
MAX_UNNESTED_REDUCTIONS = 8  # XLA kMaxUnnestedReductionOutputsPerFusion
MAX_OPERANDS_AND_OUTPUTS = 96  # XLA MaxOperandsAndOutputsPerFusion
COLUMN_VECTOR_MAX = 4  # XLA SharedMemoryUsage: the vector size a column reduction may take
SHARED_MEMORY_PER_BLOCK = 49152  # gpu_specs shared_memory_per_block (all NVIDIA specs)

# XLA's reason texts
NOT_FUSIBLE_PRODUCER = "the producer is not fusible"
NOT_FUSIBLE_CONSUMER = "the consumer is not fusible"
BITCAST_CONSUMER = "not fusing into a single bitcast as consumer"
SCATTER_OUTPUT = "do not fuse into the output of scatter"
SCATTER_IN_PLACE = "do not fuse into the in-place operand of scatter"
SCATTER_USES_IN_PLACE = "Producer uses the in-place operand of a scatter"
REDUCE_INTO_REDUCE = "both the producer and the consumer contain a reduce"
REDUCTION_EPILOGUE = "fusion into output of a reduce fusion would create a loop fusion"
SHARED_MEMORY = "shared memory usage would be over the budget of {}B"
UNNESTED_REDUCTIONS = f"over {MAX_UNNESTED_REDUCTIONS} unnested reductions in fusion"
OPERAND_BUDGET = "Number of operands and output buffers is larger than allowed budget per fusion"
CODE_DUPLICATION = "the fusion would result in an overly large code duplication"
PRODUCER_IS_ROOT = "not fusing into the output of the root instruction"
IN_PLACE_SAME_OPERAND = (
    "The consumer is an in-place operation that has an additional operand that has the "
    "same value as the in-place buffer"
)
IN_PLACE_MULTIPLE_NON_ELEMENTWISE = "Producer fusion has multiple non-elementwise ops, bailing."
IN_PLACE_CONSUMER_CONFLICT = (
    "Non-elementwise ops in consumer lead to inplace conflict after fusion."
)
IN_PLACE_MULTIPLE_DUS = "multiple dus ops, bailing."
IN_PLACE_SLICE_SHAPE = (
    "Slice op has a different shape than the update shape of the dus op, bailing."
)
IN_PLACE_SLICE_INDEX = "DUS and slice index mismatch"
IN_PLACE_DS_SHAPE = (
    "Dynamic slice op has a different shape than the update shape of the dus op, bailing."
)
IN_PLACE_DS_INDEX = "DUS and DS index mismatch"
IN_PLACE_SLICE_UNSAFE = (
    "Fusing slice into DUS will also fuse another non-elementwise op with shared operand as DUS."
)
IN_PLACE_DS_UNSAFE = (
    "Fusing DS into DUS will also fuse another non-elementwise op with shared operand as DUS."
)
IN_PLACE_UNRECOGNIZED = "unrecognized inplace update non-elementwise output pair"
NO_USERS = "No users to fuse"
ONLY_BITCAST_USERS = "not fusing because there are only bitcast users"


def changes_element_width(op: HloOp) -> bool:
    """A bitcast between element types of different widths (s8[3,5,2] -> s16[3,5]): XLA's
    priority fusion leaves it and its neighbours unfused (DoNotFuseBitWidthChangingBitcast)."""
    src, dst = value_shape(op.operands[0]), op.shape
    if not (isinstance(src, ArrayShape) and isinstance(dst, ArrayShape)):
        return False
    return ELEMENT_BITS[src.element_type] != ELEMENT_BITS[dst.element_type]


def instruction_fusible(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """XLA's IsFusible for an unfused instruction (dots, convolutions, custom-calls, sorts,
    control flow, collectives and random numbers are not). An instruction with control
    dependencies is not either: XLA relays them onto the fusion, our builder does not."""
    opc = op.opcode
    if opc == "fusion" or not (opc in FUSIBLE_OPCODES or is_elementwise(op)):
        return False
    if op.attr("control-predecessors") or is_control_predecessor(op):
        return False
    if opc == "map" or (opc == "bitcast" and changes_element_width(op)):
        return False
    return not op.callees() or not calls_side_effect(op, comps, random=True)


def is_bitcast_kernel(k: Kernel) -> bool:
    return len(k.members) == 1 and k.root.opcode == "bitcast"


def _bytes_of(shape: Any) -> int:
    leaf = shape.leaves()[0] if isinstance(shape, TupleShape) and shape.leaves() else shape
    return max(1, (ELEMENT_BITS.get(getattr(leaf, "element_type", "f32"), 32) + 7) // 8)


def shared_memory(op: HloOp) -> int:
    """XLA SharedMemoryUsage of one fused instruction."""
    if is_unnested_reduction(op):
        from hlopass.kernel_structure.emitter import reduction_dims

        # one shared buffer per reduced input (a variadic reduce's inputs share a shape)
        size = sum(_bytes_of(value_shape(v)) for v in op.operands[: len(op.operands) // 2])
        is_row, _ = reduction_dims(op)
        # a column reduction's cache is 32 x (32 x the widest vector, 4, + 1) elements
        return 32 * size if is_row else 32 * (COLUMN_VECTOR_MAX * 32 + 1) * size
    if is_tiled_transpose(op):
        return 32 * 33 * _bytes_of(op.shape)
    return 0


def significant_reduce(op: HloOp) -> bool:
    if op.opcode != "reduce" or not isinstance(op.shape, ArrayShape):
        return False
    out = max(1, elements(op.shape))
    return elements(value_shape(op.operands[0])) // out >= SIGNIFICANT_REDUCE


def subshape_count(shape: Any) -> int:
    if isinstance(shape, TupleShape):
        return 1 + sum(subshape_count(s) for s in shape.elements)
    return 1


@dataclass(frozen=True)
class Facts:
    fusible: bool
    significant_reduce: bool
    shared_memory: int
    unnested_reductions: int
    emitter: str


class Rules:
    """XLA's CanFuse for kernel plans, with cached per-kernel facts."""

    def __init__(self, model: FusionCostModel, comps: dict[str, ComputationOp],
                 roots: set[int]):  # fmt: skip
        self.model = model
        self.comps = comps
        self.roots = roots  # ids of computation roots
        self._facts: dict[int, tuple[int, Facts]] = {}
        self._facts_by_sid: dict[tuple[bool, int], Facts] = {}
        self._fusible: dict[int, bool] = {}

    def op_fusible(self, op: HloOp) -> bool:
        hit = self._fusible.get(id(op))
        if hit is None:
            hit = self._fusible[id(op)] = instruction_fusible(op, self.comps)
        return hit

    def facts(self, k: Kernel) -> Facts:
        hit = self._facts.get(id(k))
        if hit is not None and hit[0] == k.version:
            return hit[1]
        # whether its instructions are fusible reads control dependencies, which signatures
        # leave out: asked per kernel; the other facts read the kernel alone
        fusible = all(self.op_fusible(m) for m in k.members)
        sid = self.model.signatures.of_kernel(k).sid
        f = self._facts_by_sid.get((fusible, sid))
        if f is None:
            f = self._facts_by_sid[(fusible, sid)] = self._kernel_facts(k, fusible)
        self._facts[id(k)] = (k.version, f)
        return f

    def _kernel_facts(self, k: Kernel, fusible: bool) -> Facts:
        return Facts(
            fusible=fusible,
            significant_reduce=any(significant_reduce(m) for m in k.members),
            shared_memory=sum(shared_memory(m) for m in k.members),
            unnested_reductions=sum(is_unnested_reduction(m) for m in k.members),
            emitter=emitter_kind(k.members, k.outputs),
        )

    def can_fuse(self, producer: Kernel, consumer: Kernel) -> str | None:
        """None when `producer` may be fused into `consumer`, else XLA's reason."""
        pf, cf = self.facts(producer), self.facts(consumer)
        if not pf.fusible:
            return NOT_FUSIBLE_PRODUCER
        if not cf.fusible:
            return NOT_FUSIBLE_CONSUMER
        if is_bitcast_kernel(consumer):
            return BITCAST_CONSUMER
        why = scatter_rule(producer, consumer)
        if why:
            return why
        if pf.significant_reduce and cf.significant_reduce:
            return REDUCE_INTO_REDUCE
        if pf.emitter == "reduction":
            merged = consumer.merged(producer)
            # XLA's HloFusionAnalysis has no kind of its own for an in-place
            # dynamic-update-slice: that emitter is picked under kLoop, so a reduction
            # fused into a DUS's update is refused like one into a loop
            if emitter_kind(merged, consumer.outputs) in ("loop", "in_place_dus"):
                return REDUCTION_EPILOGUE
        why = self.budget(producer, consumer, pf, cf)
        if why:
            return why
        if self.model.would_explode_ir_size(producer, consumer):
            return CODE_DUPLICATION
        if id(producer.root) in self.roots:
            return PRODUCER_IS_ROOT
        return in_place_rule(producer, consumer)

    @staticmethod
    def budget(producer: Kernel, consumer: Kernel, pf: Facts, cf: Facts) -> str | None:
        """XLA FusionFitsInBudget for a producer-consumer fusion."""
        if pf.shared_memory + cf.shared_memory > SHARED_MEMORY_PER_BLOCK:
            return SHARED_MEMORY.format(SHARED_MEMORY_PER_BLOCK)
        if pf.unnested_reductions + cf.unnested_reductions > MAX_UNNESTED_REDUCTIONS:
            return UNNESTED_REDUCTIONS
        outputs = subshape_count(producer.root.shape) + subshape_count(consumer.root.shape)
        p_in, c_in = producer.inputs(), consumer.inputs()
        if len(p_in) + len(c_in) - 1 + outputs <= MAX_OPERANDS_AND_OUTPUTS:
            return None
        operands = {id(v) for v in p_in} | {id(v) for v in c_in}
        operands.discard(id(producer.root.result))
        if len(operands) <= len(c_in):
            return None
        if len(operands) + outputs > MAX_OPERANDS_AND_OUTPUTS:
            return OPERAND_BUDGET
        return None


# --- scatter and in-place rules ---------------------------------------------------------------


def is_scatter_kernel(k: Kernel) -> bool:
    return k.root.opcode == "scatter"


def scatter_rule(producer: Kernel, consumer: Kernel) -> str | None:
    """XLA CanEmitInputFusedScatter: nothing fuses into a scatter's output or its in-place
    operand (nor a producer reading that operand)."""
    if is_scatter_kernel(producer):
        return SCATTER_OUTPUT
    if not is_scatter_kernel(consumer):
        return None
    scatter = consumer.root
    n = (len(scatter.operands) - 1) // 2
    for buf in scatter.operands[:n]:
        if buf.owner is producer.root:
            return SCATTER_IN_PLACE
        if any(v is buf for v in producer.inputs()):
            return SCATTER_USES_IN_PLACE
    return None


def _in_place_buffers(k: Kernel) -> list[tuple[HloOp, int, Any]]:
    """(in-place op, operand index, buffer value) where the kernel's output is written in
    place over one of its inputs (a dynamic-update-slice or scatter root)."""
    root = k.root
    out = []
    if root.opcode == "dynamic-update-slice":
        idxs = [0]
    elif root.opcode == "scatter":
        idxs = list(range((len(root.operands) - 1) // 2))
    else:
        return out
    for i in idxs:
        v = root.operands[i]
        if id(v.owner) not in k.ids:
            out.append((root, i, v))
    return out


def _constant_int(v: Any) -> int | None:
    op = v.owner
    if not isinstance(op, HloOp) or op.opcode != "constant":
        return None
    lit = op.attr("value")
    try:
        return int(lit.literal.array.reshape(-1)[0])
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def _non_elementwise(k: Kernel, exclude: Any = None) -> list[HloOp]:
    return [
        m
        for m in k.members
        if m is not exclude and not is_elementwise(m) and m.opcode not in ("bitcast", "parameter")
    ]


def in_place_rule(producer: Kernel, consumer: Kernel) -> str | None:
    """XLA ShouldFuseInPlaceOp: fusing must not read a buffer the consumer overwrites."""
    for op, index, buf in _in_place_buffers(consumer):
        if len(consumer.members) == 1 and any(
            v is buf for i, v in enumerate(op.operands) if i != index
        ):
            return IN_PLACE_SAME_OPERAND
        if buf.owner is not producer.root and not any(v is buf for v in producer.inputs()):
            continue
        non_ew = _non_elementwise(producer)
        if len(non_ew) > 1:
            return IN_PLACE_MULTIPLE_NON_ELEMENTWISE
        if not non_ew:
            if len(consumer.members) == 1:
                return None
            if _reaches_non_elementwise(consumer, producer.root.result, op):
                return IN_PLACE_CONSUMER_CONFLICT
            return None
        dus = [m for m in consumer.members if m.opcode == "dynamic-update-slice"]
        if not dus:
            return None
        if len(dus) > 1:
            return IN_PLACE_MULTIPLE_DUS
        why = _slice_matches_dus(non_ew[0], dus[0])
        # the slice's value reaching the DUS through other non-elementwise ops: they would
        # read elements the DUS overwrites in place
        if (
            why is None
            and len(consumer.members) > 1
            and _reaches_non_elementwise(consumer, producer.root.result, dus[0])
        ):
            return IN_PLACE_SLICE_UNSAFE if non_ew[0].opcode == "slice" else IN_PLACE_DS_UNSAFE
        return why
    return None


def _reaches_non_elementwise(consumer: Kernel, value: Any, in_place_op: HloOp) -> bool:
    targets = {id(m) for m in _non_elementwise(consumer, exclude=in_place_op)}
    stack = [u.operation for u in value.uses if id(u.operation) in consumer.ids]
    seen: set[int] = set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if id(op) in targets:
            return True
        stack.extend(u.operation for u in op.result.uses if id(u.operation) in consumer.ids)
    return False


def _slice_matches_dus(producer_op: HloOp, dus: HloOp) -> str | None:
    update_shape = value_shape(dus.operands[1])
    rank = len(getattr(dus.shape, "dims", ()))
    if producer_op.opcode == "slice":
        if producer_op.shape != update_shape:
            return IN_PLACE_SLICE_SHAPE
        dims = producer_op.attr("slice") or ()
        for i in range(rank):
            c = _constant_int(dus.operands[2 + i])
            if c is None or i >= len(dims) or c != dims[i].start or dims[i].stride != 1:
                return IN_PLACE_SLICE_INDEX
        return None
    if producer_op.opcode == "dynamic-slice":
        if producer_op.shape != update_shape:
            return IN_PLACE_DS_SHAPE
        for i in range(rank):
            a, b = producer_op.operands[1 + i], dus.operands[2 + i]
            ca, cb = _constant_int(a), _constant_int(b)
            if ca != cb or (ca is None and a is not b):
                return IN_PLACE_DS_INDEX
        return None
    return IN_PLACE_UNRECOGNIZED
