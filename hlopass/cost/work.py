"""Work counting: flops, transcendentals and bytes per HLO instruction.

Two views of the same instructions:

* `xla_cost(module)` follows the conventions of XLA's `HloCostAnalysis` (the base class,
  the one `jax ... .cost_analysis()` and `hlopass.oracle.cost_analysis` report on the CPU
  client) so that totals can be compared with XLA's exactly:
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
    the most expensive branch); custom-call: unknown (counted as 0 here, XLA reports -1).
* `gpu_kernel_work(...)` (in `model.py`) counts what one GPU kernel moves through DRAM:
  bytes per fusion parameter with operand utilisation (slices read only what they take).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hlopass.shape import ELEMENT_BITS, UNBOUNDED, ArrayShape, Shape, TupleShape, byte_size

POINTER_BYTES = 8

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


DYNAMIC_SIZE_BYTES = 4  # XLA ShapeUtil: an s32 size per dimension after a dynamic array


def _num_elements(shape: ArrayShape) -> int:
    """Elements as XLA computes them: an unbounded dim (`?`) is kUnboundedSize = INT64_MIN and
    the product wraps in int64 (f32[?,784] -> 0, f32[?,3] -> INT64_MIN); a negative result is
    taken as 0 here (XLA then reports -9.2e18 flops) so that time estimates stay finite."""
    if UNBOUNDED not in shape.dims or not any(shape.dynamic):
        return shape.num_elements
    n = 1
    for d, dyn in zip(shape.dims, shape.dynamic, strict=False):
        n = (n * (-(1 << 63) if dyn and d == UNBOUNDED else d)) & ((1 << 64) - 1)
    if n >= 1 << 63:
        n -= 1 << 64
    return max(n, 0)


def shape_size(shape: Shape) -> int:
    """Bytes of a shape as XLA's CPU client counts them (tuples: a pointer per element).

    A dynamic array (a `<=n` or `?` dim) adds its size metadata, 4 bytes per dimension
    (XLA ShapeUtil::ByteSizeOf); an unbounded one counts the metadata only (pinned with
    hlopass.oracle.cost_analysis: f32[<=4] abs -> 2 x (16 + 4), f32[?,784] abs -> 2 x 8)."""
    if isinstance(shape, TupleShape):
        return POINTER_BYTES * len(shape.elements)
    if isinstance(shape, ArrayShape):
        meta = DYNAMIC_SIZE_BYTES * shape.rank if any(shape.dynamic) else 0
        if meta and UNBOUNDED in shape.dims:
            return meta
        bits = ELEMENT_BITS[shape.element_type]
        packed = shape.layout.element_size_bits if shape.layout is not None else 0
        if 0 < bits < 8 and packed:  # sub-byte types packed by an E(n) layout
            return (shape.num_elements * packed + 7) // 8 + meta
        return shape.num_elements * byte_size(shape.element_type) + meta
    return 0


def elements(shape: Shape) -> int:
    if isinstance(shape, ArrayShape):
        return _num_elements(shape)
    if isinstance(shape, TupleShape):
        return elements(shape.elements[0]) if shape.elements else 0
    return 0


def elements_recursive(shape: Shape) -> int:
    if isinstance(shape, TupleShape):
        return sum(elements_recursive(e) for e in shape.elements)
    return elements(shape)


def first_array(shape: Shape) -> Shape:
    while isinstance(shape, TupleShape) and shape.elements:
        shape = shape.elements[0]
    return shape


@dataclass
class Work:
    flops: float = 0.0
    transcendentals: float = 0.0
    bytes_accessed: float = 0.0

    def __iadd__(self, o: Work) -> Work:
        self.flops += o.flops
        self.transcendentals += o.transcendentals
        self.bytes_accessed += o.bytes_accessed
        return self

    def scaled(self, k: float) -> Work:
        return Work(self.flops * k, self.transcendentals * k, self.bytes_accessed * k)

    def as_dict(self) -> dict[str, float]:
        return {"flops": self.flops, "transcendentals": self.transcendentals,
                "bytes accessed": self.bytes_accessed}  # fmt: skip


def operand_ops(op: Any) -> list[Any]:
    return [v.owner for v in op.operands]


def operand_shapes(op: Any) -> list[Shape]:
    return [v.type.data for v in op.operands]


def dot_flops(lhs: Shape, out: Shape, lhs_contracting: tuple[int, ...] | None) -> int:
    width = 1
    for d in lhs_contracting or ():
        width *= lhs.dims[d]  # type: ignore[attr-defined]
    return 2 * elements(out) * width


def conv_flops(op: Any, lhs: ArrayShape, rhs: ArrayShape, out: ArrayShape,
               labels: Any = None, window: Any = None) -> int:  # fmt: skip
    dn = labels if labels is not None else op.attr("dim_labels")
    win = window if window is not None else op.attr("window")
    in_b, in_f, in_sp = dn.input
    _k_i, _k_o, k_sp = dn.kernel
    _o_b, o_f, o_sp = dn.output
    fgc = op.attr("feature_group_count") or 1
    bgc = op.attr("batch_group_count") or 1
    positions = 1
    wdims = win.dims if win is not None else ()
    for s, wd in enumerate(wdims):
        inp, ker, outl = lhs.dims[in_sp[s]], rhs.dims[k_sp[s]], out.dims[o_sp[s]]
        positions *= _valid_positions(inp, ker, outl, wd)
    fma = (lhs.dims[in_f] // fgc) * out.dims[o_f] * (lhs.dims[in_b] // bgc) * positions
    return 2 * fma


def _valid_positions(inp: int, ker: int, out: int, wd: Any) -> int:
    stride, lo, hi = wd.stride, wd.pad_low, wd.pad_high
    ldil, rdil = wd.lhs_dilation, wd.rhs_dilation
    if (inp == out and ker == out and inp == ldil and rdil == 1 and max(1, inp - 1) == stride
            and lo == 0 and hi == 0):  # fmt: skip
        return inp
    if (inp == 1 and ker == out and rdil == 1 and ldil == 1 and stride == 1
            and hi == out - 1 and lo == out - 1):  # fmt: skip
        return out
    count = 0
    for k in range(ker):
        base = k * rdil - lo
        for o in range(out):
            u = o * stride + base
            if ldil > 1:
                if u % ldil:
                    continue
                u //= ldil
            if 0 <= u < inp:
                count += 1
    return count


def transpose_orders(op: Any) -> tuple[list[int], list[int]] | None:
    """Major-to-minor physical order of a transpose's non-degenerate dims, as input dims:
    (output order, input order); None when either side is not an array."""
    src = operand_shapes(op)[0]
    dst = op.shape
    perm = op.attr("dimensions") or ()
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return None
    out_order = [perm[d] for d in reversed(dst.minor_to_major) if dst.dims[d] != 1]
    in_order = [d for d in reversed(src.minor_to_major) if src.dims[d] != 1]
    return out_order, in_order


def transpose_is_bitcast(op: Any) -> bool:
    """XLA's `IsEffectiveBitcast`: the physical order of the non-degenerate dims is kept."""
    orders = transpose_orders(op)
    return orders is not None and orders[0] == orders[1]


def transpose_is_strict_bitcast(op: Any) -> bool:
    """XLA ShapeUtil::TransposeIsBitcast (what HloCostAnalysis's IsEffectiveBitcast uses): the
    permuted output minor-to-major equals the input's exactly, size-1 dims included; so
    f32[1,300] -> f32[300,1] with default layouts is *not* a bitcast there (it moves 2 x 1200 B,
    pinned with hlopass.oracle.cost_analysis), though it is one for the GPU time model."""
    src = operand_shapes(op)[0]
    dst = op.shape
    perm = op.attr("dimensions") or ()
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return False
    return [perm[d] for d in dst.minor_to_major] == list(src.minor_to_major)


class XlaCostAnalysis:
    """HloCostAnalysis conventions over a parsed module (`hlopass.parse_hlo`)."""

    def __init__(self, module: Any, unknown_custom_call: float = -1.0):
        self.unknown = unknown_custom_call
        from hlopass.dialects import hlo

        self.comps = {c.comp_name: c for c in hlo.computations(module)}
        self.module = module
        self._cache: dict[str, Work] = {}

    def entry(self) -> Any:
        from hlopass.dialects import hlo

        return hlo.entry_computation(self.module)

    def total(self) -> Work:
        return self.computation(self.entry().comp_name)

    def computation(self, name: str) -> Work:
        w = self._cache.get(name)
        if w is None:
            w = Work()
            for op in self.comps[name].instructions:
                w += self.instruction(op)
            self._cache[name] = w
        return w

    def _sub(self, name: str | None, k: float) -> Work:
        if not name or name not in self.comps:
            return Work()
        w = self.computation(name)
        return Work(w.flops * k, w.transcendentals * k, 0.0)

    def instruction(self, op: Any) -> Work:
        opc = op.opcode
        shape = op.shape
        shapes = operand_shapes(op)
        if opc in NO_MEMORY:
            return Work()
        # a tuple instruction writes its pointer table; other tuple-shaped results (variadic
        # reduce/sort, rng-bit-generator, ...) write their arrays (jaxlib 0.10)
        out_size = shape_size(shape) if opc == "tuple" else _leaf_bytes(shape)
        default_bytes = out_size + sum(shape_size(s) for s in shapes)
        w = Work(bytes_accessed=default_bytes)
        if opc in TRANSCENDENTAL:
            w.transcendentals = elements(shape)
        elif "elementwise" in op.spec.traits or opc in ELEMENTWISE_EXTRA:
            w.flops = elements(shape)
        elif opc == "transpose":
            if transpose_is_strict_bitcast(op):
                return Work()
        elif opc == "slice":
            w.bytes_accessed = 2 * out_size
        elif opc == "dynamic-slice":
            w.bytes_accessed = 2 * out_size + (shape_size(shapes[1]) if len(shapes) > 1 else 0)
        elif opc == "dynamic-update-slice":
            w.bytes_accessed = 2 * shape_size(shapes[1]) + (
                shape_size(shapes[2]) if len(shapes) > 2 else 0
            )
        elif opc == "tuple":
            w.bytes_accessed = out_size
        elif opc == "ragged-dot" and op.attr("rhs_group_dims"):
            # XLA HandleRaggedDot: the result with dimension i deleted for each i <
            # len(rhs_group_dims) (the leading dims, whichever the group dims are)
            dims = list(first_array(shape).dims)
            for i in range(len(op.attr("rhs_group_dims"))):
                del dims[i]
            width = math.prod(shapes[0].dims[d] for d in op.attr("lhs_contracting_dims") or ())
            w.flops = 2 * math.prod(dims) * width
        elif opc in ("dot", "ragged-dot", "scaled-dot"):
            w.flops = dot_flops(shapes[0], shape, op.attr("lhs_contracting_dims"))
        elif opc == "convolution":
            w.flops = conv_flops(op, shapes[0], shapes[1], shape)  # type: ignore[arg-type]
        elif opc == "fft":
            logs = 1
            for n in op.attr("fft_length") or ():
                logs *= int(math.floor(math.log2(n))) if n > 0 else 0
            w.flops = 2 * 4 * logs * elements(first_array(shapes[0]))
        elif opc == "reduce":
            count = elements(shapes[0]) - elements(first_array(shape))
            w += self._sub(op.attr("to_apply"), count)
        elif opc == "reduce-window":
            w += self._sub(op.attr("to_apply"), _reduce_window_count(op, shapes[0]))
        elif opc == "select-and-scatter":
            src = elements(shapes[1])
            win = op.attr("window")  # none for a scalar operand: a window of one
            wsize = math.prod(d.size for d in win.dims) if win is not None else 1
            w += self._sub(op.attr("select"), src * (wsize - 1))
            w += self._sub(op.attr("scatter"), src)
        elif opc == "map":
            w += self._sub(op.attr("to_apply"), elements(shape))
        elif opc == "sort":
            n = elements(shapes[0])
            w.flops = n * (math.ceil(math.log2(n)) if n > 1 else 0)
        elif opc == "gather":
            w.bytes_accessed = 2 * out_size + shape_size(shapes[1])
        elif opc == "scatter":
            n = (len(shapes) - 1) // 2
            upd = sum(shape_size(s) for s in shapes[n + 1 :])
            w.bytes_accessed = 3 * upd + shape_size(shapes[n])
            w += self._sub(op.attr("to_apply"), elements(shapes[n + 1]))
        elif opc == "outfeed":
            # XLA HandleOutfeed: the leaves of the data operand, not a tuple's pointer table
            w.bytes_accessed = out_size + sum(_leaf_bytes(s) for s in shapes)
        elif opc == "rng":
            w.transcendentals = elements(shape)
        elif opc == "rng-bit-generator":
            w.transcendentals = elements_recursive(shape)
        elif opc in ("while",):
            w = Work()
            w += self.computation(op.attr("body"))
            w += self.computation(op.attr("condition"))
        elif opc == "call":
            w = Work()
            w += self.computation(op.attr("to_apply"))
        elif opc == "conditional":
            names = op.attr("branch_computations") or tuple(
                n for n in (op.attr("true_computation"), op.attr("false_computation")) if n
            )
            ws = [self.computation(n) for n in names]
            w = Work(max(x.flops for x in ws), max(x.transcendentals for x in ws),
                     max(x.bytes_accessed for x in ws))  # fmt: skip
        elif opc == "custom-call":
            # XLA does not know what a custom call does: -1 flops and -1 bytes each.
            return Work(self.unknown, 0.0, self.unknown)
        elif opc == "fusion":
            return self._fusion(op)
        elif opc == "triangular-solve":
            a, b = shapes[0], shapes[1]
            w.bytes_accessed = out_size + shape_size(a) / 2 + shape_size(b)
            w.flops = 2 * a.dims[-1] * elements(b)  # type: ignore[attr-defined]
        elif opc == "cholesky":
            a = shapes[0]
            w.bytes_accessed = shape_size(a)
            w.flops = a.dims[-1] * elements(a) // 3  # type: ignore[attr-defined]
        elif opc in ("all-reduce", "all-reduce-start"):
            w.flops = sum(leaf.num_elements for leaf in shape.leaves())
            w.bytes_accessed = sum(shape_size(leaf) for leaf in shape.leaves()) + sum(
                shape_size(s) for s in shapes
            )
        elif opc == "async-start":
            w = Work()
            w += self.computation(op.attr("calls"))
        return w

    def _fusion(self, op: Any) -> Work:
        comp = self.comps[op.attr("calls")]
        inner = self.computation(comp.comp_name)
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
                    w.bytes_accessed += _leaf_bytes(leaf)
        else:
            w.bytes_accessed += shape_size(shape)
        for p in comp.parameters():
            w.bytes_accessed += fusion_parameter_read_bytes(p)
        # a non-scalar constant inside the fusion is read from memory (pinned with
        # hlopass.oracle.cost_analysis: broadcast of f32[3] constant -> +12 B, s4[3] -> +3 B)
        for c in comp.instructions:
            if c.opcode == "constant" and isinstance(c.shape, ArrayShape) and elements(c.shape) > 1:
                w.bytes_accessed += shape_size(c.shape)
        return w


def _leaf_bytes(shape: Shape) -> int:
    if isinstance(shape, TupleShape):
        return sum(_leaf_bytes(e) for e in shape.elements)
    return shape_size(shape)


def users(op: Any) -> list[Any]:
    return [u.operation for u in op.result.uses]


def fusion_parameter_read_bytes(p: Any) -> int:
    """Bytes a fused parameter reads from memory: slices read what they take, others share one
    read. A tuple parameter reads the leaves its get-tuple-elements take, not its pointer table
    (pinned with hlopass.oracle.cost_analysis: (f32[]) -> 4 B, (f32[], (f32[])) -> 8 B)."""
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


def _reduce_window_count(op: Any, operand: Shape) -> float:
    win = op.attr("window")
    dims = win.dims if win is not None else ()
    wcount = math.prod(d.size for d in dims) if dims else 1
    out = first_array(op.shape)
    out_elems = elements(out)
    count = (wcount - 1) * out_elems
    nred = sum(1 for d in dims if d.size != 1)
    npad = sum(1 for d in dims if d.pad_low or d.pad_high)
    if nred == 1 and npad == 1 and not isinstance(op.shape, TupleShape):
        for i, d in enumerate(dims):
            if (d.size != 1 and d.pad_low and d.pad_high and d.pad_low == d.pad_high
                    and d.size == 2 * d.pad_low + 1):  # fmt: skip
                if d.pad_low == out.dims[i] - 1:  # type: ignore[attr-defined]
                    n = out.dims[i]  # type: ignore[attr-defined]
                    count = out_elems // n + (n - 1)
                break
    return count


def xla_cost(module: Any) -> dict[str, float]:
    """Totals in XLA's HloCostAnalysis conventions: {flops, transcendentals, bytes accessed}."""
    return XlaCostAnalysis(module).total().as_dict()
