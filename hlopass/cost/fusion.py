"""What XLA's default GPU performance model sees in one fused kernel.

`analyze(members, outputs, ...)` follows `GpuHloCostAnalysis` and `GpuPerformanceModel::
EstimateRunTimeForInstruction` (XLA_GPU_COST_MODEL_REFERENCE.md 1.2-1.5):

* **Utilisation** (`FusionCalculateUtilizations`): walking from the outputs (utilisation 1)
  towards the inputs, elementwise ops, tuples and get-tuple-elements pass their consumers'
  utilisation through; any other op multiplies it by its operand utilisation (slices,
  dynamic-slices and gathers take a fraction, a broadcast re-reads its operand out/in times,
  a reduce-window window-size times; an in-place dynamic-update-slice root does not read its
  buffer), rounded up to whole elements. An instruction recomputed for several consumers
  counts once per consumer (`count_multiple_input_accesses`, as XLA's stats pass sets).
* **ALU flops** = sum of utilisation x per-instruction flops, elementwise ops priced with the
  measured H100 table (`profiles.py`), reduces as reductions x reducer flops, concatenates 6
  (or XLA's 400 anti-fusion hack) per element. Dots and convolutions are kept apart
  (tensor-core flops; XLA's default model would price them on the scalar FPUs).
* **Reads**: per input, bytes = size x utilisation (`n_bytes_total`), the first `size` of them
  from DRAM, the rest re-reads; coalesced unless a transpose that moves the minor dimension
  lies between the input and an output (in a non-transpose emitter).
* **Launch dimensions** of the emitter XLA would pick: loop (one thread per output element,
  unrolled x4 when the output fills every SM, 128 threads per block), row / multi-row /
  column / small-column reduction, tiled transpose (32x32 tiles, 64x64 for 16-bit types),
  scatter and in-place dynamic-update-slice (one thread per update element), concatenate,
  Triton (output tiles x warps from the block-level config) and Triton gemm (block_m x
  block_n tiles x split_k).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hlopass.attrs import backend_config as _backend
from hlopass.cost.profiles import flops_per_element
from hlopass.cost.work import (
    _reduce_window_count,
    conv_flops,
    elements,
    elements_recursive,
    first_array,
    operand_shapes,
    shape_size,
    transpose_is_bitcast,
    transpose_orders,
)
from hlopass.shape import ELEMENT_BITS, ArrayShape, TupleShape

WARP = 32
LOOP_THREADS = 128
THREADS_PER_SM = 2048  # default threads_per_core_limit (gpu_specs; DeviceSpec.threads_per_sm)
ROW_REDUCTION_MAX_THREADS = 512  # XLA MinThreadsXRowReduction
REDUCTION_THREADS_TARGET = 256
ROW_THREADS_TARGET = 128

_EW_EXTRA = frozenset({"convert", "compare", "select", "clamp", "reduce-precision", "copy"})
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


def is_elementwise(op: Any) -> bool:
    opc = op.opcode
    if opc in _EW_EXTRA:
        return True
    if opc == "bitcast-convert":
        a, b = operand_shapes(op)[0], op.shape
        return ELEMENT_BITS.get(getattr(a, "element_type", ""), 0) == ELEMENT_BITS.get(
            getattr(b, "element_type", ""), 1
        )
    return "elementwise" in op.spec.traits


def _elem_count(shape: Any) -> int:
    return elements_recursive(shape)


# --- per-instruction flops (GpuHloCostAnalysis) ----------------------------------------------


class FlopCounter:
    """Flops of single instructions and of called computations, cached per computation."""

    def __init__(self, comps: dict[str, Any]):
        self.comps = comps
        self._sub: dict[str, float] = {}

    def sub(self, name: str | None) -> float:
        if not name or name not in self.comps:
            return float(flops_per_element("add", "f32"))
        v = self._sub.get(name)
        if v is None:
            self._sub[name] = 0.0  # recursion guard
            v = sum(self.alu(op) for op in self.comps[name].instructions)
            self._sub[name] = v
        return v

    def alu(self, op: Any) -> float:
        """ALU flops of one execution of `op` (dots and convolutions: 0, see `tensor`)."""
        opc = op.opcode
        shape = op.shape
        if is_elementwise(op) and opc != "copy":
            et = getattr(first_array(shape), "element_type", "f32")
            return float(flops_per_element(opc, et) * elements(shape))
        if opc == "concatenate":
            n = elements(shape)
            dim = (op.attr("dimensions") or (0,))[0]
            if dim != 0:
                for s in operand_shapes(op):
                    if isinstance(s, ArrayShape) and s.dims[dim] % WARP:
                        return 400.0 * n
            return 6.0 * n
        if opc == "reduce":
            inp = operand_shapes(op)[0]
            count = elements(inp) - elements(first_array(shape))
            return count * self.sub(op.attr("to_apply"))
        if opc == "reduce-window":
            return _reduce_window_count(op, operand_shapes(op)[0]) * self.sub(op.attr("to_apply"))
        if opc == "map":
            return elements(shape) * self.sub(op.attr("to_apply"))
        if opc == "scatter":
            sh = operand_shapes(op)
            n = (len(sh) - 1) // 2
            return elements(sh[n + 1]) * self.sub(op.attr("to_apply"))
        if opc == "select-and-scatter":
            sh = operand_shapes(op)
            src = elements(sh[1])
            win = op.attr("window")
            k = math.prod(d.size for d in win.dims) if win else 1
            return src * (k - 1) * self.sub(op.attr("select")) + src * self.sub(op.attr("scatter"))
        if opc == "sort":
            n = elements(operand_shapes(op)[0])
            return float(n * (math.ceil(math.log2(n)) if n > 1 else 0))
        if opc == "fusion":
            name = op.attr("calls")
            return self.sub(name)
        return 0.0

    @staticmethod
    def tensor(op: Any) -> float:
        opc = op.opcode
        if opc in ("dot", "ragged-dot", "scaled-dot"):
            sh = operand_shapes(op)
            contracting = op.attr("lhs_contracting_dims") or ()
            width = math.prod(sh[0].dims[d] for d in contracting) if contracting else 1
            return 2.0 * elements(op.shape) * width
        if opc == "convolution":
            sh = operand_shapes(op)
            return float(conv_flops(op, sh[0], sh[1], op.shape))
        return 0.0


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
    elementwise ops only (their utilisation counts the outputs' shared 1 once): what two
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
        for i, v in enumerate(op.operands):
            src = v.owner
            sk = id(src)
            if sk not in member_ids:
                externals[sk] = src
            if ew:
                roots_of.setdefault(sk, set()).update(rs)
            else:
                roots_of.setdefault(sk, set()).add(sk)
                ou = u * operand_utilization(op, i, key in in_place, tiled)
                n = _elem_count(v.type.data)
                ou = math.ceil(ou * n - 1e-9) / n if n else 0.0
                root_util[sk] = root_util.get(sk, 0.0) + ou
    for sk in externals:
        util[sk] = sum(root_util.get(r, 0.0) for r in roots_of.get(sk, ()))
    if direct is not None:
        direct.update(k for k, rs in roots_of.items() if VROOT in rs)
    return util


# --- reductions and transposes: the emitters' launch dimensions ----------------------------


def physical_groups(shape: ArrayShape, marked: set[int]) -> list[tuple[bool, int]]:
    """Major-to-minor runs of (marked?, size) over the non-degenerate dims of `shape`."""
    groups: list[tuple[bool, int]] = []
    for d in reversed(shape.minor_to_major):
        size = shape.dims[d]
        if size == 1:
            continue
        m = d in marked
        if groups and groups[-1][0] == m:
            groups[-1] = (m, groups[-1][1] * size)
        else:
            groups.append((m, size))
    return groups


def reduction_dims(reduce: Any) -> tuple[bool, tuple[int, int, int]]:
    """XLA ReductionDimensions: (is_row, [major_reduced, kept, minor_reduced]) for a row
    reduction, (False, [major_kept, reduced, minor_kept]) for a column reduction."""
    inp = operand_shapes(reduce)[0]
    if not isinstance(inp, ArrayShape):
        return True, (1, 1, 1)
    groups = physical_groups(inp, set(reduce.attr("dimensions") or ()))
    if not groups:
        return True, (1, 1, 1)
    if groups[-1][0]:  # minor-most run reduced: row reduction
        minor = groups[-1][1]
        kept = math.prod(s for r, s in groups[:-1] if not r)
        major = math.prod(s for r, s in groups[:-1] if r)
        return True, (major, kept, minor)
    minor_kept = groups[-1][1]
    reduced = math.prod(s for r, s in groups if r)
    major_kept = math.prod(s for r, s in groups[:-1] if not r)
    return False, (major_kept, reduced, minor_kept)


def reduction_faster_than_elemental(is_row: bool, dims: tuple[int, int, int]) -> bool:
    if is_row:
        return dims[2] >= WARP or WARP % dims[2] == 0
    major, minor = dims[1], dims[2]
    elemental = (major < WARP or (major < 2 * WARP and minor < WARP)
                 or (major < 4 * WARP and minor < 8) or (major < 8 * WARP and minor < 3))  # fmt: skip
    return not elemental


def _vector_size(minor: int, threads: int, in_bits: int, complex_input: bool) -> int:
    """XLA GetVectorSizeForMlir."""
    if minor % 2 or threads * 2 > minor or complex_input:
        return 1
    if in_bits >= 64:
        return 1
    if in_bits >= 32:
        return 2
    if threads * 4 > minor:
        return 2
    return 4 if minor % 4 == 0 else 2


def reduction_launch(is_row: bool, dims: tuple[int, int, int], in_bits: int, out_bits: int,
                     complex_input: bool, sm_count: int) -> tuple[int, int]:  # fmt: skip
    """(blocks, threads per block) of XLA's reduction emitters."""
    if 0 in dims:  # an empty reduction: no elements to spread, as for any empty launch
        return 1, 1
    if is_row:
        _major, kept, minor = dims
        # multi-row: a power-of-two row that fits in one warp
        if minor & (minor - 1) == 0:
            small = min(in_bits, out_bits)
            large = max(in_bits, out_bits)
            vs = min(minor, max(1, 64 // max(small, 1)))
            if large >= 32:
                vs = min(max(1, 128 // large), vs)

            def threads(v: int) -> tuple[int, int]:
                tr = max(1, minor // v)
                tk = (
                    kept
                    if kept * tr <= REDUCTION_THREADS_TARGET
                    else max(1, REDUCTION_THREADS_TARGET // tr)
                )
                return tk, tr

            if minor <= WARP * vs:
                while vs > 1 and math.ceil(kept / threads(vs)[0]) < sm_count:
                    vs //= 2
                if minor <= WARP * vs:
                    tk, tr = threads(vs)
                    return math.ceil(kept / tk), tk * tr
        per_thread = 32
        tr = min(ROW_REDUCTION_MAX_THREADS, math.ceil(math.ceil(minor / per_thread) / WARP) * WARP)
        tk = 1
        if tr * 2 <= ROW_THREADS_TARGET:
            tk = kept if kept * tr <= ROW_THREADS_TARGET else ROW_THREADS_TARGET // tr
        vs = _vector_size(minor, tr, in_bits, complex_input)
        row = minor // vs
        tile = min(per_thread // vs, math.ceil(row / tr))
        blocks = math.ceil(kept / tk) * math.ceil(row / (tile * tr))
        return blocks, tk * tr
    major_kept, _reduced, minor_kept = dims
    if WARP % minor_kept == 0:  # small column reduction
        return major_kept, LOOP_THREADS
    vs = _vector_size(minor_kept, WARP, in_bits, complex_input)
    return major_kept * math.ceil(minor_kept / (WARP * vs)), WARP * WARP


def transpose_launch(op: Any, size_rule: bool = False) -> tuple[int, int] | None:
    """(blocks, threads) of the tiled transpose emitter, None if not a tiled transpose."""
    orders = transpose_orders(op)
    if orders is None:
        return None
    out_order, in_order = orders
    src = operand_shapes(op)[0]
    if not out_order or out_order == in_order:
        return None
    pos = {d: i for i, d in enumerate(in_order)}
    groups: list[list[int]] = []
    for d in out_order:
        if groups and pos[d] == pos[groups[-1][-1]] + 1:
            groups[-1].append(d)
        else:
            groups.append([d])
    sizes = [math.prod(src.dims[d] for d in g) for g in groups]
    out_minor = len(groups) - 1
    in_minor = max(range(len(groups)), key=lambda i: pos[groups[i][-1]])
    if in_minor == out_minor:
        return None
    if size_rule and (sizes[in_minor] < 16 or sizes[out_minor] < 16
                      or sizes[in_minor] * sizes[out_minor] < 64 * 128):  # fmt: skip
        return None  # XLA leaves small transposes to the loop emitter
    bits = ELEMENT_BITS.get(src.element_type, 32)
    tile = WARP * max(1, min(4, 32 // max(bits, 1)))
    blocks = 1
    for i, s in enumerate(sizes):
        blocks *= math.ceil(s / tile) if i in (in_minor, out_minor) else s
    return blocks, LOOP_THREADS


def moves_minor_dim(op: Any) -> bool:
    """XLA TransposesMinorDimension for transposes and layout-changing copies."""
    opc = op.opcode
    src = operand_shapes(op)[0] if op.operands else None
    dst = op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape) or not src.dims:
        return False
    if opc == "transpose":
        if transpose_is_bitcast(op):
            return False
        perm = op.attr("dimensions") or ()
        minor_out = next((d for d in dst.minor_to_major if dst.dims[d] != 1), None)
        minor_in = next((d for d in src.minor_to_major if src.dims[d] != 1), None)
        return minor_out is not None and perm[minor_out] != minor_in
    if opc == "copy":
        minor_out = next((d for d in dst.minor_to_major if dst.dims[d] != 1), None)
        minor_in = next((d for d in src.minor_to_major if src.dims[d] != 1), None)
        return minor_out != minor_in
    return False


def loop_launch(n: int, sm_count: int, threads_per_sm: int = THREADS_PER_SM) -> tuple[int, int]:
    """XLA's loop emitter: 128-thread blocks, unrolled x4/x2 once the elements reach
    `threads_per_core_limit x core_count` of the device."""
    if n <= 1:
        return 1, 1
    unroll = 1
    if n >= sm_count * threads_per_sm:
        for f in (4, 2):
            if n % f == 0:
                unroll = f
                break
    n = math.ceil(n / unroll)
    tpb = min(LOOP_THREADS, n)
    return math.ceil(n / tpb), tpb


def _bits(shape: Any) -> int:
    leaves = shape.leaves() if hasattr(shape, "leaves") else []
    return min((ELEMENT_BITS.get(s.element_type, 32) for s in leaves), default=32)


# --- the analysis ----------------------------------------------------------------------------


def analyze(members: list[Any], outputs: list[Any], counter: FlopCounter, sm_count: int,
            fusion_op: Any = None, kind: str = "",
            threads_per_sm: int = THREADS_PER_SM) -> FusionInfo:  # fmt: skip
    """XLA's view of `members` (topologically ordered instructions of one computation) run as
    one kernel writing `outputs`; values used but not defined by members are the inputs."""
    info = FusionInfo()
    util = utilizations(members, outputs, tiled=kind == "triton")
    member_ids = {id(m) for m in members}
    heroes = _heroes(outputs, member_ids)
    heroes_reduce = [h for h in heroes if h.opcode == "reduce"]
    heroes_transpose = [
        h for h in heroes if h.opcode == "transpose" and not transpose_is_bitcast(h)
    ]
    scatters = [h for h in heroes if h.opcode == "scatter"]
    concats = [h for h in heroes if h.opcode == "concatenate"]
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
    bad = _uncoalesced_sources(members, sources, member_ids)
    emitter = _emitter(kind, fusion_op, outputs, heroes_reduce, heroes_transpose, scatters,
                       concats)  # fmt: skip
    info.emitter = emitter
    for s in sources:
        shape = s.shape
        if isinstance(shape, TupleShape):
            size = sum(shape_size(leaf) for leaf in shape.leaves())
            u = util.get(id(s), 0.0)
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
    info.blocks, info.threads_per_block = _launch(
        emitter, fusion_op, outputs, heroes_reduce, heroes_transpose, scatters, concats,
        sm_count, members, threads_per_sm)  # fmt: skip
    info_tensor = tensor
    info.__dict__["tensor_flops"] = info_tensor
    return info


def _heroes(outputs: list[Any], member_ids: set[int]) -> list[Any]:
    """XLA FindNonTrivialHero for each output: walk up through bitcasts, reshapes and
    elementwise ops with a single non-constant operand."""
    leaves: list[Any] = []
    for o in outputs:
        leaves += [v.owner for v in o.operands] if o.opcode == "tuple" else [o]
    heroes = []
    for h in leaves:
        for _ in range(64):
            opc = h.opcode
            if opc in ("reduce", "transpose", "scatter", "concatenate"):
                break
            if opc in ("bitcast", "reshape") or (is_elementwise(h) and opc != "copy"):
                live = [
                    v.owner
                    for v in h.operands
                    if id(v.owner) in member_ids
                    and v.owner.opcode not in ("constant", "broadcast", "iota", "parameter")
                ]
                if len(live) == 1:
                    h = live[0]
                    continue
            break
        heroes.append(h)
    return heroes


def _uncoalesced_sources(members: list[Any], sources: list[Any], member_ids: set[int]) -> set[int]:
    """Inputs from which a minor-dimension transpose (not of a broadcast or iota) is reached."""
    reach: dict[int, set[int]] = {id(s): {id(s)} for s in sources}
    bad: set[int] = set()
    for op in members:
        if op.opcode == "parameter":
            continue
        acc: set[int] = set()
        for v in op.operands:
            r = reach.get(id(v.owner))
            if r:
                acc |= r
        if (op.opcode in ("transpose", "copy") and moves_minor_dim(op)
                and op.operands[0].owner.opcode not in ("broadcast", "iota")):  # fmt: skip
            bad |= reach.get(id(op.operands[0].owner), set())
        reach[id(op)] = acc
    return bad


_FIND = object()


def _emitter(kind: str, fusion_op: Any, outputs: list[Any], reduces: list[Any],
             transposes: list[Any], scatters: list[Any], concats: list[Any],
             slices: Any = _FIND) -> str:  # fmt: skip
    """XLA HloFusionAnalysis::GetEmitterFusionKind, from the heroes of the outputs.
    `slices`: `_slices_of_one_input(outputs)` when the caller knows it (a merged kernel
    whose roots slice one value through different parameters)."""
    if kind in ("triton", "triton_gemm", "custom_fusion"):
        return kind
    for r in reduces:
        is_row, dims = reduction_dims(r)
        if reduction_faster_than_elemental(is_row, dims):
            return "reduction"
    if kind in ("input", "") and any(transpose_launch(t, kind == "") for t in transposes):
        return "transpose"
    n_roots = sum(len(o.operands) if o.opcode == "tuple" else 1 for o in outputs)
    if n_roots == 1:
        if scatters:
            return "scatter"
        if concats:
            return "concatenate"
        if outputs[0].opcode == "dynamic-update-slice":
            return "in_place_dus"
    if (_slices_of_one_input(outputs) if slices is _FIND else slices) is not None:
        return "input_slices"
    return "loop"


def _slices_of_one_input(outputs: list[Any]) -> Any:
    """XLA IsInputFusibleSlices (the horizontal fusion's sliced form): every root a slice
    of one common input; that input's shape (the launch grid of XLA's input-slices
    emitter, one thread per element of the input), else None."""
    roots: list[Any] = []
    for o in outputs:
        roots += [v.owner for v in o.operands] if o.opcode == "tuple" else [o]
    if not roots or any(getattr(r, "opcode", None) != "slice" for r in roots):
        return None
    src = roots[0].operands[0]
    if any(r.operands[0] is not src for r in roots):
        return None
    return src.type.data


def _launch(emitter: str, fusion_op: Any, outputs: list[Any], reduces: list[Any],
            transposes: list[Any], scatters: list[Any], concats: list[Any], sm_count: int,
            members: list[Any], threads_per_sm: int = THREADS_PER_SM,
            slices: Any = _FIND) -> tuple[int, int]:  # fmt: skip

    out_shape = outputs[0].shape if outputs else None
    if outputs and outputs[0].opcode == "tuple" and outputs[0].operands:
        out_shape = outputs[0].operands[0].type.data
    n_out = elements(first_array(out_shape)) if out_shape is not None else 1
    if emitter == "reduction":
        r = reduces[0]
        is_row, dims = reduction_dims(r)
        ins = operand_shapes(r)
        nin = max(1, len(ins) // 2)
        in_bits = min(_bits(s) for s in ins[:nin])
        out_bits = _bits(r.shape)
        cplx = any(getattr(s, "element_type", "").startswith("c") for s in ins[:nin])
        return reduction_launch(is_row, dims, in_bits, out_bits, cplx, sm_count)
    if emitter == "transpose":
        for t in transposes:
            lt = transpose_launch(t)
            if lt:
                return lt
    if emitter == "scatter":
        sh = operand_shapes(scatters[0])
        n = (len(sh) - 1) // 2
        return loop_launch(elements(sh[n + 1]), sm_count, threads_per_sm)
    if emitter == "concatenate":
        n_in = max(elements(s) for s in operand_shapes(concats[0]))
        return loop_launch(n_in, sm_count, threads_per_sm)
    if emitter == "input_slices":
        src = _slices_of_one_input(outputs) if slices is _FIND else slices
        return loop_launch(elements(src), sm_count, threads_per_sm)
    if emitter == "in_place_dus":
        return loop_launch(elements(operand_shapes(outputs[0])[1]), sm_count, threads_per_sm)
    if emitter in ("triton", "triton_gemm"):
        cfg = _backend(fusion_op).get("fusion_backend_config", {})
        blc = cfg.get("block_level_fusion_config", {}) if isinstance(cfg, dict) else {}
        tiles = blc.get("output_tiles") or []
        warps = int(blc.get("num_warps", 4) or 4)
        if tiles and isinstance(out_shape, (ArrayShape, TupleShape)):
            arr = first_array(out_shape)
            sizes = [int(x) for x in tiles[0].get("sizes", [])]
            if isinstance(arr, ArrayShape) and len(sizes) == len(arr.dims):
                blocks = math.prod(
                    math.ceil(d / max(1, t)) for d, t in zip(arr.dims, sizes, strict=True)
                )
                return max(1, blocks), warps * WARP
    if emitter == "triton":
        return loop_launch(n_out, sm_count, threads_per_sm)
    if emitter == "triton_gemm":
        cfg = _backend(fusion_op).get("fusion_backend_config", {})
        g = cfg.get("triton_gemm_config", {}) if isinstance(cfg, dict) else {}
        dot = next((m for m in members if m.opcode in ("dot", "scaled-dot")), None)
        if g and dot is not None and isinstance(dot.shape, ArrayShape) and dot.shape.rank >= 2:
            d = dot.shape.dims
            bm, bn = int(g.get("block_m", 64)), int(g.get("block_n", 64))
            sk, warps = int(g.get("split_k", 1)), int(g.get("num_warps", 4))
            blocks = math.prod(d[:-2]) * math.ceil(d[-2] / bm) * math.ceil(d[-1] / bn) * sk
            return max(1, blocks), warps * WARP
        return max(1, sm_count), LOOP_THREADS
    return loop_launch(n_out, sm_count, threads_per_sm)
