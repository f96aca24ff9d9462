"""Work per opcode: the cost model's one table of opcode-specific rules (`OPCODE_WORK`).

Each entry gives one opcode's rules for the model's three counts; the dispatchers read the
table and apply their category defaults where an opcode has no rule:

* `hlo`: XLA's `HloCostAnalysis` conventions (the base class, the one `jax ...
  .cost_analysis()` and `hlopass.execution.oracle.cost_analysis` report on the CPU client), read by
  `hlo_cost_analysis.XlaCostAnalysis` so that totals can be compared with XLA's exactly:
  - every instruction by default reads all its operands and writes its output (a tuple
    instruction writes a table of 8-byte pointers, other tuple-shaped results such as
    variadic reduce/sort or rng-bit-generator write their arrays); parameters, constants,
    get-tuple-element, bitcasts, after-all, add-dependency and domain touch no memory;
  - elementwise ops cost 1 flop per output element, or 1 transcendental for exp, log,
    logistic, power, sqrt, cbrt, rsqrt, tanh, sin, cos, expm1, log1p, atan2 (and tan, erf in
    newer XLA);
  - dot and convolution cost 2 flops per multiply-accumulate; convolutions count only the
    window positions that land inside the (dilated, padded) input;
  - reduce: (input elements - output elements) x the reducer's flops; reduce-window:
    (window size - 1) x output elements x reducer; map, scatter: per element x sub-computation;
  - slice, dynamic-slice, gather: 2 x output bytes (+ indices); dynamic-update-slice:
    2 x update bytes + start index; scatter 3 x update bytes + indices;
  - sort n*ceil(log2 n), fft 8 * prod(floor(log2 len)) * elements, rng 1 transcendental per element;
  - while, call, conditional: the called computations' totals (one loop iteration,
    the most expensive branch); custom-call: unknown (XLA reports -1).
* `kernel`: what the instruction adds to the work of the GPU kernel it runs in (read by
  `model.KernelAnalyzer.inner_work`): tensor-core flops and the gemm shape of dots and
  convolutions, reducer work of reductions, sorts, the uncoalesced mark of a transpose of
  the minor dimension, random numbers; otherwise an instruction is free in a kernel
  (`model.FREE_IN_KERNEL`) or costs elements x its ALU cost (`model.ALU_COST`).
* `gpu_flops`: ALU flops as XLA's `GpuHloCostAnalysis` counts them (read by
  `gpu_flops.FlopCounter.alu`); elementwise ops cost the measured H100 table (`profiles.py`).
* `tensor`: tensor-core flops of dots and convolutions (`gpu_flops.FlopCounter.tensor`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from hlopass.cost.counts import (
    Work,
    conv_flops,
    dot_flops,
    leaf_bytes,
    reduce_window_count,
    shape_size,
)
from hlopass.cost.gemm import dims as gemm_dims
from hlopass.ir.shape import ArrayShape, Shape, TupleShape
from hlopass.kernel_structure.emitter import WARP
from hlopass.kernel_structure.shapes import (
    array_operand_shapes,
    elements,
    elements_recursive,
    first_array,
    operand_ops,
    operand_shapes,
    transpose_is_bitcast,
    users,
)

# --- categories: what opcodes without a rule of their own cost --------------------------------

TRANSCENDENTAL = frozenset({
    "exponential", "log", "logistic", "power", "sqrt", "cbrt", "rsqrt", "tanh", "sine",
    "cosine", "exponential-minus-one", "log-plus-one", "atan2", "tan", "erf", "acos", "acosh",
    "asin", "asinh", "atan", "atanh", "cosh", "sinh",
})  # fmt: skip

ELEMENTWISE_EXTRA = frozenset(
    {
        "convert",
        "compare",
        "select",
        "clamp",
        "reduce-precision",
        "bitcast-convert",
    }
)

NO_MEMORY = frozenset({
    "parameter", "constant", "get-tuple-element", "bitcast", "after-all",
    "add-dependency", "domain",
})  # fmt: skip

DEFAULT_ALU = 3.0  # FP32-lane operations per element of ops XLA did not profile
GEMM_TILE = 128


@dataclass(frozen=True)
class OpcodeWork:
    """One opcode's rules; None where the count's category default applies.

    hlo(analysis, op, work, operand shapes, output bytes) -> the instruction's Work, given
    the default (operands read, output written); kernel(analyzer, op, kernel work, scale)
    adds to a kernel's work; gpu_flops(counter, op) and tensor(op) -> flops."""

    hlo: Callable[[Any, Any, Work, list[Shape], int], Work] | None = None
    kernel: Callable[[Any, Any, Any, float], None] | None = None
    gpu_flops: Callable[[Any, Any], float] | None = None
    tensor: Callable[[Any], float] | None = None


def transpose_is_strict_bitcast(op: Any) -> bool:
    """XLA ShapeUtil::TransposeIsBitcast (what HloCostAnalysis's IsEffectiveBitcast uses): the
    permuted output minor-to-major equals the input's exactly, size-1 dims included; so
    f32[1,300] -> f32[300,1] with default layouts is *not* a bitcast there (it moves 2 x 1200 B,
    pinned with hlopass.execution.oracle.cost_analysis), though it is one for the GPU time model."""
    src = operand_shapes(op)[0]
    dst = op.shape
    perm = op.attr("dimensions") or ()
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return False
    return [perm[d] for d in dst.minor_to_major] == list(src.minor_to_major)


# --- helpers of the kernel rules -----------------------------------------------------------------


def gemm_tiles(out: Any, batch_dims: int) -> int:
    """128x128 output tiles (x batch) of a dot's result."""
    if not isinstance(out, ArrayShape) or out.rank < 2:
        return 1
    dims = out.dims
    m, n = dims[-2], dims[-1]
    b = math.prod(dims[:-2]) if len(dims) > 2 else 1
    return b * math.ceil(m / GEMM_TILE) * math.ceil(n / GEMM_TILE)


def _precision(op: Any) -> str:
    p = op.attr("operand_precision")
    text = str(p).lower() if p is not None else ""
    return "highest" if "highest" in text else "default"


def _add_dot(w: Any, op: Any, lhs: Any, out: Any, contracting: Any, scale: float) -> None:
    width = math.prod(lhs.dims[d] for d in contracting) if contracting else 1
    f = 2 * elements(out) * width * scale
    w.flops += f
    if f >= w.tensor_flops:
        w.tensor_dtype = lhs.element_type
        w.tensor_precision = _precision(op)
        w.gemm_tiles = gemm_tiles(out, 0)
        w.gemm_shape = gemm_dims(out, width)
    w.tensor_flops += f


# --- dots and convolutions -----------------------------------------------------------------------


def _dot_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.flops = dot_flops(shapes[0], op.shape, op.attr("lhs_contracting_dims"))
    return w


def _ragged_dot_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    if not op.attr("rhs_group_dims"):
        return _dot_hlo(a, op, w, shapes, out_size)
    # XLA HandleRaggedDot: the result with dimension i deleted for each i <
    # len(rhs_group_dims) (the leading dims, whichever the group dims are)
    dims = list(cast(ArrayShape, first_array(op.shape)).dims)  # a ragged dot gives an array
    for i in range(len(op.attr("rhs_group_dims"))):
        del dims[i]
    lhs = cast(ArrayShape, shapes[0])  # dot operands are arrays (verifier)
    width = math.prod(lhs.dims[d] for d in op.attr("lhs_contracting_dims") or ())
    w.flops = 2 * math.prod(dims) * width
    return w


def _dot_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    sh = operand_shapes(op)
    _add_dot(w, op, sh[0], op.shape, op.attr("lhs_contracting_dims"), scale)


def _dot_tensor(op: Any) -> float:
    sh = array_operand_shapes(op)
    contracting = op.attr("lhs_contracting_dims") or ()
    width = math.prod(sh[0].dims[d] for d in contracting) if contracting else 1
    return 2.0 * elements(op.shape) * width


def _conv_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    lhs, rhs = cast("list[ArrayShape]", shapes)[:2]  # convolution operands are arrays (verifier)
    w.flops = conv_flops(op, lhs, rhs, op.shape)
    return w


def _conv_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    sh = array_operand_shapes(op)
    shape = op.shape
    f = conv_flops(op, sh[0], sh[1], shape) * scale
    w.flops += f
    w.tensor_flops += f
    w.tensor_dtype = sh[0].element_type
    w.gemm_tiles = max(w.gemm_tiles, math.ceil(elements(shape) / GEMM_TILE**2))


def _conv_tensor(op: Any) -> float:
    sh = array_operand_shapes(op)
    return float(conv_flops(op, sh[0], sh[1], op.shape))


# --- reductions, windows, maps, scatters ---------------------------------------------------------


def _reduce_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    count = elements(shapes[0]) - elements(first_array(op.shape))
    w += a.sub(op.attr("to_apply"), count)
    return w


def _reduce_window_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w += a.sub(op.attr("to_apply"), reduce_window_count(op, shapes[0]))
    return w


def _reduction_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    """reduce and reduce-window: their reducer's work per reduced element."""
    shape = op.shape
    inp = operand_shapes(op)[0]
    count = max(elements(inp) - elements(first_array(shape)), 0) * scale
    if op.opcode == "reduce-window":
        win = op.attr("window")
        size = math.prod(d.size for d in win.dims) if win else 1
        count = (size - 1) * elements(first_array(shape)) * scale
    sub = an.reducer_cost(op.attr("to_apply"))
    w.flops += count * sub[0]
    w.transcendentals += count * sub[1]
    w.alu_ops += count * sub[2]
    w.threads = max(w.threads, int(elements(inp) * scale / 32))
    if w.kind == "loop":
        w.kind = "reduction"


def _reduce_gpu(fc: Any, op: Any) -> float:
    inp = operand_shapes(op)[0]
    count = elements(inp) - elements(first_array(op.shape))
    return count * fc.sub(op.attr("to_apply"))


def _reduce_window_gpu(fc: Any, op: Any) -> float:
    return reduce_window_count(op, operand_shapes(op)[0]) * fc.sub(op.attr("to_apply"))


def _select_and_scatter_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    src = elements(shapes[1])
    win = op.attr("window")  # none for a scalar operand: a window of one
    wsize = math.prod(d.size for d in win.dims) if win is not None else 1
    w += a.sub(op.attr("select"), src * (wsize - 1))
    w += a.sub(op.attr("scatter"), src)
    return w


def _select_and_scatter_gpu(fc: Any, op: Any) -> float:
    sh = operand_shapes(op)
    src = elements(sh[1])
    win = op.attr("window")
    k = math.prod(d.size for d in win.dims) if win else 1
    return src * (k - 1) * fc.sub(op.attr("select")) + src * fc.sub(op.attr("scatter"))


def _map_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w += a.sub(op.attr("to_apply"), elements(op.shape))
    return w


def _map_gpu(fc: Any, op: Any) -> float:
    return elements(op.shape) * fc.sub(op.attr("to_apply"))


def _scatter_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    n = (len(shapes) - 1) // 2
    upd = sum(shape_size(s) for s in shapes[n + 1 :])
    w.bytes_accessed = 3 * upd + shape_size(shapes[n])
    w += a.sub(op.attr("to_apply"), elements(shapes[n + 1]))
    return w


def _scatter_gpu(fc: Any, op: Any) -> float:
    sh = operand_shapes(op)
    n = (len(sh) - 1) // 2
    return elements(sh[n + 1]) * fc.sub(op.attr("to_apply"))


# --- sort, fft, random numbers -------------------------------------------------------------------


def _sort_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    n = elements(shapes[0])
    w.flops = n * (math.ceil(math.log2(n)) if n > 1 else 0)
    return w


def _sort_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    m = elements(operand_shapes(op)[0])
    lg = math.ceil(math.log2(m)) if m > 1 else 0
    w.flops += m * lg * scale
    w.alu_ops += m * lg * lg * DEFAULT_ALU * scale


def _sort_gpu(fc: Any, op: Any) -> float:
    n = elements(operand_shapes(op)[0])
    return float(n * (math.ceil(math.log2(n)) if n > 1 else 0))


def _fft_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    logs = 1
    for n in op.attr("fft_length") or ():
        logs *= int(math.floor(math.log2(n))) if n > 0 else 0
    w.flops = 2 * 4 * logs * elements(first_array(shapes[0]))
    return w


def _rng_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.transcendentals = elements(op.shape)
    return w


def _rng_bit_generator_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.transcendentals = elements_recursive(op.shape)
    return w


def _rng_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    w.transcendentals += elements(op.shape) * scale
    w.alu_ops += 20 * elements(op.shape) * scale


# --- data movement -------------------------------------------------------------------------------


def _transpose_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    return Work() if transpose_is_strict_bitcast(op) else w


def _transpose_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    if not transpose_is_bitcast(op):
        src = operand_shapes(op)[0]
        perm = op.attr("dimensions") or ()
        if perm and isinstance(src, ArrayShape) and perm[-1] != src.rank - 1:
            w.uncoalesced = True


def _slice_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.bytes_accessed = 2 * out_size
    return w


def _dynamic_slice_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.bytes_accessed = 2 * out_size + (shape_size(shapes[1]) if len(shapes) > 1 else 0)
    return w


def _dynamic_update_slice_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:  # fmt: skip
    w.bytes_accessed = 2 * shape_size(shapes[1]) + (shape_size(shapes[2]) if len(shapes) > 2 else 0)
    return w


def _gather_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.bytes_accessed = 2 * out_size + shape_size(shapes[1])
    return w


def _tuple_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w.bytes_accessed = out_size
    return w


def _concatenate_gpu(fc: Any, op: Any) -> float:
    n = elements(op.shape)
    dim = (op.attr("dimensions") or (0,))[0]
    if dim != 0:
        for s in operand_shapes(op):
            if isinstance(s, ArrayShape) and s.dims[dim] % WARP:
                return 400.0 * n
    return 6.0 * n


def _outfeed_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    # XLA HandleOutfeed: the leaves of the data operand, not a tuple's pointer table
    w.bytes_accessed = out_size + sum(leaf_bytes(s) for s in shapes)
    return w


# --- linear algebra, collectives -----------------------------------------------------------------


def _triangular_solve_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    lhs, rhs = cast("list[ArrayShape]", shapes)[:2]  # triangular-solve takes two arrays
    w.bytes_accessed = out_size + shape_size(lhs) / 2 + shape_size(rhs)
    w.flops = 2 * lhs.dims[-1] * elements(rhs)
    return w


def _cholesky_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    m = cast(ArrayShape, shapes[0])  # cholesky takes one array
    w.bytes_accessed = shape_size(m)
    w.flops = m.dims[-1] * elements(m) // 3
    return w


def _all_reduce_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    shape = op.shape
    w.flops = sum(leaf.num_elements for leaf in shape.leaves())
    w.bytes_accessed = sum(shape_size(leaf) for leaf in shape.leaves()) + sum(
        shape_size(s) for s in shapes
    )
    return w


# --- called computations -------------------------------------------------------------------------


def _while_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w = Work()
    w += a.computation(op.attr("body"))
    w += a.computation(op.attr("condition"))
    return w


def _call_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w = Work()
    w += a.computation(op.attr("to_apply"))
    return w


def _async_start_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    w = Work()
    w += a.computation(op.attr("calls"))
    return w


def _conditional_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    names = op.attr("branch_computations") or tuple(
        n for n in (op.attr("true_computation"), op.attr("false_computation")) if n
    )
    ws = [a.computation(n) for n in names]
    return Work(max(x.flops for x in ws), max(x.transcendentals for x in ws),
                max(x.bytes_accessed for x in ws))  # fmt: skip


def _custom_call_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    # XLA does not know what a custom call does: -1 flops and -1 bytes each.
    return Work(a.unknown, 0.0, a.unknown)


def _fusion_hlo(a: Any, op: Any, w: Work, shapes: list[Shape], out_size: int) -> Work:
    """The fused computation's flops; bytes: each fused parameter's reads, the outputs (an
    in-place dynamic-update-slice root writes its update) and non-scalar constants."""
    comp = a.comps[op.attr("calls")]
    inner = a.computation(comp.comp_name)
    w = Work(inner.flops, inner.transcendentals, 0.0)
    root = comp.root
    shape = op.shape
    if root.opcode == "dynamic-update-slice":
        w.bytes_accessed += shape_size(operand_shapes(root)[1])
    elif isinstance(shape, TupleShape):
        ops = operand_ops(root) if root.opcode == "tuple" else []
        for i, leaf in enumerate(shape.elements):
            if i < len(ops) and ops[i].opcode == "dynamic-update-slice":
                w.bytes_accessed += shape_size(operand_shapes(ops[i])[1])
            else:
                w.bytes_accessed += leaf_bytes(leaf)
    else:
        w.bytes_accessed += shape_size(shape)
    for p in comp.parameters():
        w.bytes_accessed += fusion_parameter_read_bytes(p)
    # a non-scalar constant inside the fusion is read from memory (pinned with
    # hlopass.execution.oracle.cost_analysis: broadcast of f32[3] constant -> +12 B, s4[3] -> +3 B)
    for c in comp.instructions:
        if c.opcode == "constant" and isinstance(c.shape, ArrayShape) and elements(c.shape) > 1:
            w.bytes_accessed += shape_size(c.shape)
    return w


def _fusion_kernel(an: Any, op: Any, w: Any, scale: float) -> None:
    name = op.attr("calls")
    if name in an.comps:
        an.inner_work(list(an.comps[name].instructions), w, scale)


def _fusion_gpu(fc: Any, op: Any) -> float:
    name = op.attr("calls")
    return fc.sub(name)


def fusion_parameter_read_bytes(p: Any) -> int:
    """Bytes a fused parameter reads from memory: slices read what they take, others share one
    read. A tuple parameter reads the leaves its get-tuple-elements take, not its pointer table
    (pinned with hlopass.execution.oracle.cost_analysis: (f32[]) -> 4 B, (f32[], (f32[])) -> 8 B)."""
    if isinstance(p.shape, TupleShape):
        return sum(
            fusion_parameter_read_bytes(u)
            for u in users(p)
            if getattr(u, "opcode", None) == "get-tuple-element"
        )
    size = 0
    seen_trivial = False
    own = shape_size(p.shape)
    for u in users(p):
        opc = getattr(u, "opcode", None)
        first = u.operands[0].owner is p if u.operands else False
        if opc == "slice":
            size += shape_size(u.shape)
        elif opc == "dynamic-slice":
            if first:
                size += shape_size(u.shape)
            elif not seen_trivial:
                seen_trivial = True
                size += own
        elif opc == "dynamic-update-slice":
            if not first and not seen_trivial:
                seen_trivial = True
                size += own
        elif opc in ("broadcast", "reshape"):
            size += own
        elif opc is None:  # the return op
            if not seen_trivial:
                seen_trivial = True
                size += own
        elif not seen_trivial:
            seen_trivial = True
            size += own
    return size


# --- the table -----------------------------------------------------------------------------------

_DOT = OpcodeWork(_dot_hlo, _dot_kernel, tensor=_dot_tensor)
_REDUCE_WINDOW = OpcodeWork(_reduce_window_hlo, _reduction_kernel, _reduce_window_gpu)

OPCODE_WORK: dict[str, OpcodeWork] = {
    "dot": _DOT,
    "scaled-dot": _DOT,
    "ragged-dot": OpcodeWork(_ragged_dot_hlo, _dot_kernel, tensor=_dot_tensor),
    "convolution": OpcodeWork(_conv_hlo, _conv_kernel, tensor=_conv_tensor),
    "reduce": OpcodeWork(_reduce_hlo, _reduction_kernel, _reduce_gpu),
    "reduce-window": _REDUCE_WINDOW,
    "select-and-scatter": OpcodeWork(_select_and_scatter_hlo, gpu_flops=_select_and_scatter_gpu),
    "map": OpcodeWork(_map_hlo, gpu_flops=_map_gpu),
    "scatter": OpcodeWork(_scatter_hlo, gpu_flops=_scatter_gpu),
    "sort": OpcodeWork(_sort_hlo, _sort_kernel, _sort_gpu),
    "fft": OpcodeWork(_fft_hlo),
    "rng": OpcodeWork(_rng_hlo, _rng_kernel),
    "rng-bit-generator": OpcodeWork(_rng_bit_generator_hlo, _rng_kernel),
    "transpose": OpcodeWork(_transpose_hlo, _transpose_kernel),
    "slice": OpcodeWork(_slice_hlo),
    "dynamic-slice": OpcodeWork(_dynamic_slice_hlo),
    "dynamic-update-slice": OpcodeWork(_dynamic_update_slice_hlo),
    "gather": OpcodeWork(_gather_hlo),
    "tuple": OpcodeWork(_tuple_hlo),
    "concatenate": OpcodeWork(gpu_flops=_concatenate_gpu),
    "outfeed": OpcodeWork(_outfeed_hlo),
    "triangular-solve": OpcodeWork(_triangular_solve_hlo),
    "cholesky": OpcodeWork(_cholesky_hlo),
    "all-reduce": OpcodeWork(_all_reduce_hlo),
    "all-reduce-start": OpcodeWork(_all_reduce_hlo),
    "while": OpcodeWork(_while_hlo),
    "call": OpcodeWork(_call_hlo),
    "async-start": OpcodeWork(_async_start_hlo),
    "conditional": OpcodeWork(_conditional_hlo),
    "custom-call": OpcodeWork(_custom_call_hlo),
    "fusion": OpcodeWork(_fusion_hlo, _fusion_kernel, _fusion_gpu),
}
"""opcode -> its rules for the cost model's counts (hlo, kernel, gpu_flops, tensor)."""
