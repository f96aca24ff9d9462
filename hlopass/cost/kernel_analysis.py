"""What one fused kernel reads, writes and computes, as XLA's default GPU model counts it.

`analyze(members, outputs, ...)` prices nothing itself: it counts what one fused kernel
reads, writes and computes, as `GpuHloCostAnalysis` and `GpuPerformanceModel::
EstimateRunTimeForInstruction` (XLA_GPU_COST_MODEL_REFERENCE.md 1.2-1.5):

* **Utilisation** (`FusionCalculateUtilizations`): walking from the outputs (utilisation 1)
  towards the inputs, elementwise ops, tuples and get-tuple-elements pass their consumers'
  utilisation through; any other op multiplies it by its operand utilisation (slices,
  dynamic-slices and gathers take a fraction, a broadcast re-reads its operand out/in times,
  a reduce-window window-size times; an in-place dynamic-update-slice root does not read its
  buffer), rounded up to whole elements. An instruction recomputed for several consumers
  counts once per consumer (`count_multiple_input_accesses`, as XLA's stats pass sets).
* **ALU flops** = sum of utilisation x per-instruction flops (`gpu_flops.FlopCounter`).
  Dots and convolutions are kept apart (tensor-core flops; XLA's default model would price
  them on the scalar FPUs).
* **Reads**: per input, bytes = size x utilisation (`n_bytes_total`), the first `size` of them
  from DRAM, the rest re-reads; coalesced unless a transpose that moves the minor dimension
  lies between the input and an output (in a non-transpose emitter).
* **Launch dimensions** of the emitter XLA would pick (`launch.py`; the emitter itself is
  a structural fact, `hlopass.kernel_structure.emitter`).

`model.kernel_time` turns this into microseconds on a device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hlopass.cost.counts import shape_size
from hlopass.cost.gpu_flops import FlopCounter
from hlopass.cost.launch import THREADS_PER_SM, launch
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape, TupleShape
from hlopass.kernel_structure.emitter import (
    choose_emitter,
    hero_parts,
    heroes,
    is_elementwise,
    is_unnested_reduction,
    uncoalesced_sources,
)
from hlopass.kernel_structure.shapes import (
    elements,
    elements_recursive,
    first_array,
    operand_shapes,
)

_PASS = frozenset({"tuple", "get-tuple-element"})


@dataclass
class Read:
    net: float  # bytes first read from DRAM
    total: float  # all bytes read (re-reads included)
    elem_bytes: int
    coalesced: bool


@dataclass
class FusionInfo:
    alu_flops: float = 0.0  # XLA GpuHloCostAnalysis flops (without dots/convolutions)
    reads: list[Read] = field(default_factory=list)
    bytes_written: float = 0.0
    blocks: int = 1
    threads_per_block: int = 1
    emitter: str = "loop"


def emitting_roots(outputs: list[Any], members: list[Any]) -> list[Any]:
    """The outputs whose heroes choose the kernel's emitter and launch grid: every output
    leaf but those another member reads. An output read inside its own kernel (a
    producer-consumer multi-output kernel: the producer's result is both written and read
    by the consumer) is computed in the consumer's loop at the consumer's indices, so the
    kernel runs the consumer's emitter over the consumer's grid, as XLA's
    GpuPerformanceModel prices such a fusion (the producer fused into the consumer, plus
    the producer's write). Left as a hero, a reduction that the consumer reads through a
    broadcast would set a small-column reduction's one block and then recompute itself
    for every consumer element inside that block (cnn_train: 68.5 ms for a 10.7 us pair)."""
    leaves: list[Any] = []
    for o in outputs:
        leaves += [v.owner for v in o.operands] if o.opcode == "tuple" else [o]
    if len(leaves) < 2:
        return outputs
    leaf_ids = {id(x) for x in leaves}
    read = {id(v.owner) for m in members if m.opcode != "tuple" for v in m.operands
            if id(v.owner) in leaf_ids}  # fmt: skip
    kept = [x for x in leaves if id(x) not in read]
    return kept if read and kept else outputs


# --- operand utilisation (HloCostAnalysis with count_multiple_input_accesses) -----------------


def operand_utilization(op: Any, i: int, in_place_root: bool = False,
                        tiled: bool = False) -> float:  # fmt: skip
    opc = op.opcode
    if opc in ("slice", "gather") or (opc == "dynamic-slice" and i == 0):
        if i != 0:
            return 1.0
        n = elements(op.operands[0].type.data)
        return elements(op.shape) / n if n else 0.0
    if opc == "dynamic-update-slice" and i == 0:
        if in_place_root:
            return 0.0
        n = elements(op.shape)
        upd = elements(op.operands[1].type.data)
        return (n - upd) / n if n else 0.0
    if opc == "broadcast" and not tiled:
        n = elements(op.operands[0].type.data)
        return elements(op.shape) / n if n else 0.0
    if opc == "reduce-window" and i == 0:
        n = elements(op.operands[0].type.data)
        win = op.attr("window")
        k = math.prod(d.size for d in win.dims) if win else 1
        return elements(first_array(op.shape)) * k / n if n else 0.0
    return 1.0


def utilizations(members: list[Any], outputs: list[Any], tiled: bool = False,
                 direct: set[int] | None = None) -> dict[int, float]:  # fmt: skip
    """id(op) -> utilisation for members and for the values they read from outside.

    `direct`, when given, receives the ids of the instructions that reach an output through
    elementwise ops only, or the input of a reduction hero that way (their utilisation
    counts the outputs' shared 1 once): what two
    sibling kernels' utilisations need to be added (`DefaultFusionCostModel.merge_siblings`).

    `tiled`: a Triton (block-level) kernel keeps a broadcast operand in registers for the
    whole tile instead of recomputing it per output element (what XLA's indexing model
    assumes; XLA's default model prices Triton fusions like loop fusions)."""
    roots_of: dict[int, set[int]] = {}
    root_util: dict[int, float] = {}
    VROOT = -1
    root_util[VROOT] = 1.0
    for o in outputs:
        roots_of.setdefault(id(o), set()).add(VROOT)
    util: dict[int, float] = {}
    member_ids = {id(m) for m in members}
    in_place = {id(o) for o in outputs if o.opcode == "dynamic-update-slice"}
    externals: dict[int, Any] = {}
    for op in reversed(members):
        key = id(op)
        rs = roots_of.get(key, ())
        u = sum(root_util.get(r, 0.0) for r in rs)
        util[key] = u
        if not op.operands:
            continue
        ew = is_elementwise(op) or op.opcode in _PASS
        # a reduction hero reads its inputs in the kernel's loop, at the index where the
        # side outputs are written: its inputs share the outputs' 1 (a tanh both written
        # and reduced is computed once); another reader of the reduce keeps its own share
        hero = VROOT in rs and op.opcode == "reduce" and is_unnested_reduction(op)
        n_inputs = len(op.operands) // 2 if hero else 0
        for i, v in enumerate(op.operands):
            src = v.owner
            sk = id(src)
            if sk not in member_ids:
                externals[sk] = src
            in_loop = i < n_inputs
            if in_loop:
                roots_of.setdefault(sk, set()).add(VROOT)
            if ew:
                roots_of.setdefault(sk, set()).update(rs)
                continue
            w = u - root_util[VROOT] if in_loop else u
            if w > 0.0 or not in_loop:
                roots_of.setdefault(sk, set()).add(sk)
                ou = w * operand_utilization(op, i, key in in_place, tiled)
                n = elements_recursive(v.type.data)
                ou = math.ceil(ou * n - 1e-9) / n if n else 0.0
                root_util[sk] = root_util.get(sk, 0.0) + ou
    for sk in externals:
        util[sk] = sum(root_util.get(r, 0.0) for r in roots_of.get(sk, ()))
    if direct is not None:
        direct.update(k for k, rs in roots_of.items() if VROOT in rs)
    return util


def analyze(members: list[Any], outputs: list[Any], counter: FlopCounter, sm_count: int,
            fusion_op: Any = None, kind: str = "",
            threads_per_sm: int = THREADS_PER_SM) -> FusionInfo:  # fmt: skip
    """XLA's view of `members` (topologically ordered instructions of one computation) run as
    one kernel writing `outputs`; values used but not defined by members are the inputs."""
    info = FusionInfo()
    util = utilizations(members, outputs, tiled=kind == "triton")
    member_ids = {id(m) for m in members}
    roots = emitting_roots(outputs, members)
    parts = hero_parts(heroes(roots, member_ids))
    tensor = 0.0
    for op in members:
        opc = op.opcode
        u = util.get(id(op), 0.0)
        if opc in ("parameter", "constant", "get-tuple-element", "tuple"):
            continue
        t = counter.tensor(op)
        if t:
            tensor += t
        else:
            info.alu_flops += u * counter.alu(op)
    # inputs: fusion parameters, or values from outside the group
    sources: list[Any] = []
    seen: set[int] = set()
    for op in members:
        if op.opcode == "parameter":
            if id(op) not in seen:
                seen.add(id(op))
                sources.append(op)
            continue
        for v in op.operands:
            s = v.owner
            if id(s) not in member_ids and id(s) not in seen:
                seen.add(id(s))
                sources.append(s)
    # which inputs reach an output through a transpose of the minor dimension
    bad = uncoalesced_sources(members, sources, member_ids)
    emitter = choose_emitter(kind, roots, parts)
    info.emitter = emitter
    for s in sources:
        shape = s.shape
        if isinstance(shape, TupleShape):
            for user in (x.operation for x in s.result.uses):
                if id(user) in member_ids and user.opcode == "get-tuple-element":
                    gs = shape_size(user.shape) if isinstance(user.shape, ArrayShape) else 0
                    gu = util.get(id(user), 0.0)
                    info.reads.append(Read(min(gs, gs * gu), gs * gu, 4, True))
            continue
        size = shape_size(shape)
        total = float(int(size * util.get(id(s), 0.0)))
        eb = max(1, (ELEMENT_BITS.get(getattr(shape, "element_type", "f32"), 32) + 7) // 8)
        coalesced = emitter == "transpose" or id(s) not in bad
        info.reads.append(Read(min(size, total), total, eb, coalesced))
    # writes
    for o in outputs:
        leaves = [v.owner for v in o.operands] if o.opcode == "tuple" else [o]
        for leaf in leaves:
            if leaf.opcode == "dynamic-update-slice":
                info.bytes_written += shape_size(operand_shapes(leaf)[1])
            else:
                info.bytes_written += sum(shape_size(a) for a in leaf.shape.leaves())
    info.blocks, info.threads_per_block = launch(
        emitter, fusion_op, roots, parts, sm_count, members, threads_per_sm
    )
    return info
