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

from hlopass.shape import ArrayShape

RESHAPE_CHECK_LIMIT = 1 << 21
"""Element count up to which a reshape's memory order is compared element by element."""

# tensor-core types per CUDA compute capability (major) from which they run on tensor cores
TENSOR_CORE_SINCE = {"f16": 7, "bf16": 8, "f32": 8, "s8": 7, "u8": 7}
COMPUTE_CAPABILITY = {
    "v100": 7, "a100_sxm_80": 8, "a6000": 8, "h100_sxm": 9, "h100_pcie": 9, "b200": 10,
}  # fmt: skip


def physical_offsets(shape: ArrayShape) -> np.ndarray:
    """For each logical index (row-major), the element's offset in memory."""
    m2m = shape.minor_to_major
    order = list(reversed(m2m))  # major to minor
    phys = np.arange(shape.num_elements, dtype=np.int64).reshape([shape.dims[d] for d in order])
    return np.transpose(phys, np.argsort(order)).reshape(-1)


def _default_ignoring_ones(shape: ArrayShape) -> bool:
    nd = [d for d in shape.minor_to_major if shape.dims[d] != 1]
    return nd == sorted(nd, reverse=True)


def reshape_is_bitcast(src: ArrayShape, dst: ArrayShape) -> bool:
    """A reshape (or copy) that keeps every element at its memory offset (XLA's
    ShapeUtil::ReshapeIsBitcast); conservative (False) for arrays over 2M elements in a
    non-default layout."""
    if src.num_elements != dst.num_elements:
        return False
    if _default_ignoring_ones(src) and _default_ignoring_ones(dst):
        return True
    if src.num_elements > RESHAPE_CHECK_LIMIT:
        return False
    return bool(np.array_equal(physical_offsets(src), physical_offsets(dst)))


def op_reshape_is_bitcast(op: Any) -> bool:
    src = op.operands[0].type.data
    dst = op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape):
        return True
    return reshape_is_bitcast(src, dst)


def _feature_minor(shape: ArrayShape, feature_dim: int) -> bool:
    nd = [d for d in shape.minor_to_major if shape.dims[d] != 1]
    return not nd or nd[0] == feature_dim


def conv_transpose_bytes(op: Any, device: str) -> float:
    """Bytes cuDNN moves (read + write) to bring the tensors of convolution `op` to its
    native layout on `device`: NHWC (feature dims minor) for tensor-core types, NCHW
    otherwise; 0 when they are already there."""
    labels = op.attr("dim_labels")
    if labels is None or len(op.operands) < 2:
        return 0.0
    lhs, rhs, out = op.operands[0].type.data, op.operands[1].type.data, op.shape
    if not all(isinstance(s, ArrayShape) for s in (lhs, rhs, out)):
        return 0.0
    cc = COMPUTE_CAPABILITY.get(device, 9)
    since = TENSOR_CORE_SINCE.get(lhs.element_type)
    want_nhwc = since is not None and cc >= since
    tensors = ((lhs, labels.input[1]), (rhs, labels.kernel[0]), (out, labels.output[1]))
    moved = 0.0
    for shape, feature in tensors:
        if _feature_minor(shape, feature) != want_nhwc:
            moved += 2.0 * shape.byte_size()
    return moved
