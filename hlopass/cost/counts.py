"""Counting helpers of the cost model: bytes of shapes as XLA's CPU client counts them, the
flops of dots and convolutions, the element count of a reduce-window's windows, and `Work`
(flops, transcendentals, bytes accessed)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hlopass.ir.shape import ELEMENT_BITS, UNBOUNDED, ArrayShape, Shape, TupleShape, byte_size
from hlopass.kernel_structure.shapes import elements, first_array

POINTER_BYTES = 8


DYNAMIC_SIZE_BYTES = 4  # XLA ShapeUtil: an s32 size per dimension after a dynamic array


def shape_size(shape: Shape) -> int:
    """Bytes of a shape as XLA's CPU client counts them (tuples: a pointer per element).

    A dynamic array (a `<=n` or `?` dim) adds its size metadata, 4 bytes per dimension
    (XLA ShapeUtil::ByteSizeOf); an unbounded one counts the metadata only (pinned with
    hlopass.execution.oracle.cost_analysis: f32[<=4] abs -> 2 x (16 + 4), f32[?,784] abs -> 2 x 8)."""
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


def leaf_bytes(shape: Shape) -> int:
    if isinstance(shape, TupleShape):
        return sum(leaf_bytes(e) for e in shape.elements)
    return shape_size(shape)


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


def reduce_window_count(op: Any, operand: Shape) -> float:
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
