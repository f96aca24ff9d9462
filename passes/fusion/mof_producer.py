"""Which producers multi-output fusion may merge into one of their readers (XLA's
IsProducerMultiOutputFusible in gpu_fusible.cc), and the predicates it reads.

XLA asks this of a producer before it looks at any reader: a producer that fails it is
never merged into a consumer while keeping its own output, whatever the cost model says.
Ours asked only the in-place part, so a kernel that copies data into another physical
order could be merged where XLA keeps it apart.
"""

from __future__ import annotations

from typing import Any

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import TupleShape
from hlopass.kernel_structure.emitter import is_elementwise, transpose_tiling
from hlopass.kernel_structure.shapes import transpose_is_bitcast
from hlopass.passes.fusion.rules import changes_element_width, instruction_fusible

MULTI_OUTPUT_PRODUCER = "Producer is a multi-output fusion"
IN_PLACE_PRODUCER = "In-place operations are present"
NOT_LOOP_FUSIBLE = "producer is not loop-fusible"
PHYSICALLY_TRANSPOSING = "producer is physically transposing"

# XLA IsUniversallyLoopFusible: non-elementwise opcodes a loop fusion can take either side
_LOOP_FUSIBLE = frozenset({
    "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "pad",
    "reduce-window", "reshape", "reverse", "slice", "transpose",
})  # fmt: skip


def _body(op: HloOp, comps: dict[str, ComputationOp]) -> list[HloOp]:
    return list(comps[op.attr("calls")].instructions)


def is_physically_transposing(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """XLA IsPhysicallyTransposing: a copy (it exists only to change the layout), a
    transpose that is not a bitcast, or a fusion holding either. A fusion writes its output
    in physical order, so only such an op can make it read an operand out of order."""
    if op.opcode == "fusion":
        return any(is_physically_transposing(m, comps) for m in _body(op, comps))
    if op.opcode == "copy":
        return True
    return op.opcode == "transpose" and not transpose_is_bitcast(op)


def _universally_loop_fusible(op: HloOp) -> bool:
    """XLA IsUniversallyLoopFusible (the elementwise test comes first: a copy is elementwise
    and is fusible only when the tiled transpose emitter would not take it)."""
    opc = op.opcode
    if opc == "copy":
        return transpose_tiling(op, size_rule=True) is None
    if is_elementwise(op) and op.operands:
        return True
    if opc == "fusion":
        return op.attr("kind") == "kLoop"
    if opc == "bitcast":
        return not changes_element_width(op)
    return opc in _LOOP_FUSIBLE


def loop_fusible_as_producer(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """XLA IsLoopFusibleAsProducer: fusible, and an iota, a constant, a reduce with one
    output, or what a loop fusion takes on either side."""
    if op.opcode != "fusion" and not instruction_fusible(op, comps):
        return False
    if op.opcode in ("iota", "constant"):
        return True
    if op.opcode == "reduce":
        return not isinstance(op.shape, TupleShape)
    return _universally_loop_fusible(op)


def in_place_producer(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
    """XLA's "In-place operations are present": a dynamic-update-slice or scatter output
    updated in place in a parameter of the fusion (or unfused). Its loop could not iterate
    over its outputs in parallel. As XLA, a DUS chained on another DUS is not followed to
    the parameter."""
    outs: list[Any] = [op]
    if op.opcode == "fusion":
        root = comps[op.attr("calls")].root
        outs = [v.owner for v in root.operands] if root.opcode == "tuple" else [root]
    return any(
        out.opcode in ("dynamic-update-slice", "scatter")
        and (out.operands[0].owner.opcode == "parameter" or op.opcode != "fusion")
        for out in outs
    )


def producer_mof_refusal(op: HloOp, comps: dict[str, ComputationOp]) -> str | None:
    """XLA IsProducerMultiOutputFusible: None when `op` may join one of its readers."""
    if op.opcode == "fusion" and isinstance(op.shape, TupleShape):
        # multi-output producers are not supported by XLA's producer-consumer merge
        return MULTI_OUTPUT_PRODUCER
    if in_place_producer(op, comps):
        return IN_PLACE_PRODUCER
    if not loop_fusible_as_producer(op, comps):
        return NOT_LOOP_FUSIBLE
    if is_physically_transposing(op, comps):
        return PHYSICALLY_TRANSPOSING
    return None


def fusion_roots(comp: ComputationOp) -> list[Any]:
    """XLA GetFusionRoots: the values a fused computation writes, its root tuple flattened
    (nested tuples too), a get-tuple-element of a tuple followed to that tuple's element and
    any other get-tuple-element replaced by the multi-output op it reads."""
    out: list[Any] = []
    _roots_of(comp.root, out)
    return out


def _roots_of(op: Any, out: list[Any]) -> None:
    opc = getattr(op, "opcode", None)
    if opc == "get-tuple-element":
        src = op.operands[0].owner
        if getattr(src, "opcode", None) == "tuple":
            _roots_of(src.operands[op.attr("index")].owner, out)
        else:
            out.append(src)
    elif opc == "tuple":
        for v in op.operands:
            _roots_of(v.owner, out)
    else:
        out.append(op)
