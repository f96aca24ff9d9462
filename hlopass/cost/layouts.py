"""What layouts cost outside the kernels' own reads: reshapes that move data, and the
transposes cuDNN runs inside a convolution whose layouts are not its native ones.

NVIDIA's convolution performance guide (Deep Learning Performance, "Tensor Layouts In
Memory: NCHW vs NHWC"): tensor-core convolution kernels want NHWC; given NCHW tensors cuDNN
transposes them to NHWC and back around the kernel. FP64 has no NHWC kernels (XLA picks NCHW
for f64 for that reason), and on GPUs without tensor cores for the type (f32 before Ampere,
bf16 before Ampere) NCHW is the native order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlopass.cost.profiles import COMPUTE_CAPABILITY as FULL_CC
from hlopass.ir.shape import ArrayShape

# tensor-core types per CUDA compute capability (major) from which they run on tensor cores
TENSOR_CORE_SINCE = {"f16": 7, "bf16": 8, "f32": 8, "s8": 7, "u8": 7}
COMPUTE_CAPABILITY = {d: cc[0] for d, cc in FULL_CC.items()}


def physical_offsets(shape: ArrayShape) -> np.ndarray:
    """For each logical index (row-major), the element's offset in memory."""
    m2m = shape.minor_to_major
    order = list(reversed(m2m))  # major to minor
    phys = np.arange(shape.num_elements, dtype=np.int64).reshape([shape.dims[d] for d in order])
    return np.transpose(phys, np.argsort(order)).reshape(-1)


def _default_ignoring_ones(shape: ArrayShape) -> bool:
    nd = [d for d in shape.minor_to_major if shape.dims[d] != 1]
    return nd == sorted(nd, reverse=True)


def _groups(a: list[int], b: list[int]) -> list[tuple[list[int], list[int]]] | None:
    """Split two lists of sizes (same product) at every point where their running products
    agree: the runs of dims a reshape maps onto each other."""
    out: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(a) or j < len(b):
        ga, gb = [i], [j]
        pa, pb = a[i], b[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                if i >= len(a):
                    return None
                pa *= a[i]
                ga.append(i)
                i += 1
            else:
                if j >= len(b):
                    return None
                pb *= b[j]
                gb.append(j)
                j += 1
        out.append((ga, gb))
    return out


def reshape_is_bitcast(src: ArrayShape, dst: ArrayShape) -> bool:
    """A reshape (or copy) that keeps every element at its memory offset (XLA's
    ShapeUtil::ReshapeIsBitcast). Size-1 dims aside, the dims a reshape maps onto each
    other (runs of equal product) must each sit contiguously in memory in their logical
    order, and the runs in the same memory order on both sides."""
    if src.num_elements != dst.num_elements:
        return False
    if src.num_elements == 0 or (_default_ignoring_ones(src) and _default_ignoring_ones(dst)):
        return True
    a = [d for d in range(src.rank) if src.dims[d] != 1]
    b = [d for d in range(dst.rank) if dst.dims[d] != 1]
    groups = _groups([src.dims[d] for d in a], [dst.dims[d] for d in b])
    if groups is None:
        return False
    orders = []
    for shape, dims, side in ((src, a, 0), (dst, b, 1)):
        physical = [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
        where = {d: k for k, d in enumerate(physical)}
        seq = []
        for g in groups:
            members = [where[dims[k]] for k in g[side]]
            if members != list(range(members[0], members[0] + len(members))):
                return False  # not contiguous in memory, or not in logical order
            seq.append(members[0])
        orders.append(sorted(range(len(groups)), key=lambda k, seq=seq: seq[k]))
    return orders[0] == orders[1]


def op_reshape_is_bitcast(op: Any) -> bool:
    src = op.operands[0].type.data
    dst = op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return True
    return reshape_is_bitcast(src, dst)


Roles = tuple[int, int, tuple[int, ...]]
"""(N dim, C dim, spatial dims) of one tensor as cuDNN sees it (for a filter: O, I, spatial)."""


def conv_kind(op: Any) -> str:
    """Which cuDNN call XLA's ConvRewriter makes of convolution `op`: `forward`,
    `backward_filter` (activations x output gradients -> filter gradient) or
    `backward_input` (output gradients x reversed filter -> input gradient)."""
    labels, win = op.attr("dim_labels"), op.attr("window")
    lhs, rhs, out = op.operands[0].type.data, op.operands[1].type.data, op.shape
    dims = win.dims if win is not None else ()
    if (op.attr("feature_group_count") or 1) > 1 or (op.attr("batch_group_count") or 1) > 1:
        return "forward"
    b, _f, _sp = labels.input
    _ki, ko, ksp = labels.kernel
    ob, of, osp = labels.output
    if _backward_input(op, dims, ksp):
        return "backward_input"
    looks_forward = (
        lhs.dims[b] == out.dims[ob]
        and rhs.dims[ko] == out.dims[of]
        and all(rhs.dims[k] <= out.dims[o] for k, o in zip(ksp, osp, strict=True))
    )
    if looks_forward:
        return "forward"
    if any(d.stride != 1 or d.lhs_dilation != 1 or d.pad_low < 0 or d.reversal for d in dims):
        return "forward"
    small = sum(1 for k, o in zip(ksp, osp, strict=True) if rhs.dims[k] <= out.dims[o])
    dilated = any(d.rhs_dilation != 1 for d in dims)
    if (not ksp or small >= 1) and not dilated:
        return "forward"
    return "backward_filter"


def _backward_input(op: Any, dims: Any, ksp: tuple[int, ...]) -> bool:
    filt = op.operands[1].owner
    reversed_filter = getattr(filt, "opcode", None) == "reverse" and sorted(
        filt.attr("dimensions") or ()
    ) == sorted(ksp)
    base_dilated = any(d.lhs_dilation != 1 for d in dims)
    one_by_one = all(d.size == 1 for d in dims)
    constant = getattr(filt, "opcode", None) == "constant"
    if not reversed_filter and not (base_dilated and (constant or one_by_one)):
        return False
    return not any(d.stride != 1 or d.rhs_dilation != 1 or d.reversal for d in dims)


def conv_roles(op: Any) -> tuple[str, tuple[Roles, Roles, Roles]]:
    """cuDNN's (N, C, spatial) dims of the lhs, rhs and result of convolution `op`, by the
    kind of call XLA makes of it (the roles swap in backward convolutions)."""
    labels = op.attr("dim_labels")
    kind = conv_kind(op)
    b, f, sp = labels.input
    ki, ko, ksp = labels.kernel
    ob, of, osp = labels.output
    if kind == "backward_filter":
        return kind, ((f, b, sp), (ki, ko, ksp), (of, ob, osp))
    if kind == "backward_input":
        return kind, ((b, f, sp), (ki, ko, ksp), (ob, of, osp))
    return kind, ((b, f, sp), (ko, ki, ksp), (ob, of, osp))


def _feature_minor(shape: ArrayShape, feature_dim: int) -> bool:
    nd = [d for d in shape.minor_to_major if shape.dims[d] != 1]
    return not nd or nd[0] == feature_dim


def conv_transpose_bytes(op: Any, device: str) -> float:
    """Bytes cuDNN moves (read + write) to bring the tensors of convolution `op` to its
    native layout on `device`: NHWC (channel dims minor) for tensor-core types, NCHW
    otherwise; 0 when they are already there."""
    if op.attr("dim_labels") is None or len(op.operands) < 2:
        return 0.0
    lhs, rhs, out = op.operands[0].type.data, op.operands[1].type.data, op.shape
    if not all(isinstance(s, ArrayShape) for s in (lhs, rhs, out)):
        return 0.0
    cc = COMPUTE_CAPABILITY.get(device, 9)
    since = TENSOR_CORE_SINCE.get(lhs.element_type)
    want_nhwc = since is not None and cc >= since
    _, roles = conv_roles(op)
    moved = 0.0
    for shape, (_n, c, _sp) in zip((lhs, rhs, out), roles, strict=True):
        if _feature_minor(shape, c) != want_nhwc:
            moved += 2.0 * shape.byte_size()
    return moved
