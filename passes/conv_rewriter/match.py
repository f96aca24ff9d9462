"""Which cuDNN call a `convolution` is (XLA's ConvRewriter matchers): the gradient of a
forward convolution's input (`MatchBackwardInput`), of its filter (`MatchBackwardFilter`),
or a forward convolution cuDNN can run (`CanImplementAsGpuForwardConv`). A match gives the
call's window and dimension numbers, which always describe the forward convolution
`y = conv(x, w)`: a backward-input call reads (dy, w) and returns dx, a backward-filter call
reads (x, dy) and returns dw.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import ConvDims, Window, WindowDim
from hlopass.ir.shape import ArrayShape
from hlopass.rewriting import owner, value_shape

from .labels import conv_dims, has_lhs_dilation, has_rhs_dilation, reversal_allowed


@dataclass(frozen=True)
class Match:
    """The call a convolution becomes: its window, dim labels and, where the matcher
    replaces it, the operand (`None`: the convolution's own)."""

    window: Window
    labels: ConvDims
    operand: SSAValue | None = None
    reverse_constant: bool = False
    """The filter is a constant that is not a reverse: the call reads its reverse (XLA's
    double reverse, one half of which the call absorbs)."""
    unreverse_1d: bool = False
    """A conv1d filter `reshape(reverse(f))`: the call reads `reshape(f)`."""


def _arr(v: SSAValue) -> ArrayShape:
    s = value_shape(v)
    assert isinstance(s, ArrayShape)
    return s


def inserted_unit_dims(src: tuple[int, ...], dst: tuple[int, ...]) -> list[int] | None:
    """The 1-sized dimensions of `dst` a reshape from `src` inserts, where it only inserts
    (None: it deletes or moves elements too)."""
    i = j = 0
    inserted: list[int] = []
    while i < len(src) or j < len(dst):
        if i < len(src) and j < len(dst) and src[i] == dst[j]:
            i, j = i + 1, j + 1
        elif j < len(dst) and dst[j] == 1:
            inserted.append(j)
            j += 1
        else:
            return None
    return inserted


def conv1d_as_2d(conv: HloOp) -> bool:
    """XLA's MaybeConv1dToConv2d: a 2-D window whose filter is a reshape inserting one
    1-sized kernel spatial dimension (how JAX and TF write a 1-D convolution)."""
    window = conv.attr("window")
    f = owner(conv.operands[1])
    if window is None or len(window.dims) != 2 or f is None or f.opcode != "reshape":
        return False
    ins = inserted_unit_dims(_arr(f.operands[0]).dims, _arr(f.result).dims)
    labels: ConvDims = conv.attr("dim_labels")
    return ins is not None and len(ins) == 1 and ins[0] in labels.kernel[2]


def looks_like_forward(conv: HloOp) -> bool:
    """XLA's LooksLikeForwardConvolution: batch and output feature counts agree between
    operands and result (a filter gradient swaps them) and no kernel exceeds the output."""
    labels: ConvDims = conv.attr("dim_labels")
    x, w, y = _arr(conv.operands[0]), _arr(conv.operands[1]), conv.shape
    assert isinstance(y, ArrayShape)
    if x.dims[labels.input[0]] != y.dims[labels.output[0]]:
        return False
    if w.dims[labels.kernel[1]] != y.dims[labels.output[1]]:
        return False
    return all(
        w.dims[k] <= y.dims[o] for k, o in zip(labels.kernel[2], labels.output[2], strict=True)
    )


def can_run_forward(conv: HloOp) -> bool:
    """XLA's CanImplementAsGpuForwardConv: at most 3 spatial dims, no empty operand, and a
    reversal cuDNN can do."""
    labels: ConvDims = conv.attr("dim_labels")
    if len(labels.input[2]) > 3:
        return False
    if any(_arr(v).num_elements == 0 for v in conv.operands):
        return False
    window = conv.attr("window") or Window(())
    return reversal_allowed(window)


def _high_padding(low: int, lowest: int, stride: int) -> int:
    """The high padding XLA picks from the valid range [lowest, lowest + stride - 1]: the
    low padding where it is in the range (cuDNN pads symmetrically), else the nearest end."""
    if lowest <= low <= lowest + stride - 1:
        return low
    return lowest if low < lowest else lowest + stride - 1


def match_backward_filter(conv: HloOp) -> Match | None:
    """XLA's MatchBackwardFilter: the activations convolved with the (window-dilated)
    output gradients, the batch dimension contracted."""
    if (conv.attr("feature_group_count") or 1) > 1 or looks_like_forward(conv):
        return None
    window: Window = conv.attr("window") or Window(())
    for d in window.dims:
        if d.stride != 1 or d.lhs_dilation != 1 or d.pad_low < 0 or d.reversal:
            return None
    labels: ConvDims = conv.attr("dim_labels")
    (ib, if_, isp), (ki, ko, ksp), (ob, of, osp) = labels.input, labels.kernel, labels.output
    x, dy, dw = _arr(conv.operands[0]), _arr(conv.operands[1]), conv.shape
    assert isinstance(dw, ArrayShape)
    # Forward convolutions have small kernels, filter gradients large "kernels" (the output
    # gradients); a 1-D convolution written as 2-D always has one small dimension.
    small = sum(1 for k, o in zip(ksp, osp, strict=True) if dy.dims[k] <= dw.dims[o])
    if (not ksp or small > 1 or (small == 1 and not conv1d_as_2d(conv))) and not has_rhs_dilation(
        window
    ):
        return None
    dims = []
    for i, d in enumerate(window.dims):
        size, stride = dw.dims[osp[i]], d.rhs_dilation
        padded = size + (d.size - 1) * stride
        high = _high_padding(d.pad_low, padded - x.dims[isp[i]] - d.pad_low, stride)
        if high < 0:  # GpuConvPaddingLegalization cannot slice the filter gradient
            return None
        dims.append(WindowDim(size=size, stride=stride, pad_low=d.pad_low, pad_high=high))
    new = conv_dims((x.rank, dw.rank, dy.rank), (if_, ib, isp), (ob, of, osp), (ki, ko, ksp))
    return Match(Window(tuple(dims)), new)


def match_backward_input(conv: HloOp) -> Match | None:
    """XLA's MatchBackwardInput: the output gradients (base-dilated by the stride) convolved
    with the reversed filter; also a base-dilated convolution with a 1x1 or constant filter."""
    if (conv.attr("feature_group_count") or 1) > 1:  # (XLA: no faster for grouped convs)
        return None
    window: Window = conv.attr("window") or Window(())
    labels: ConvDims = conv.attr("dim_labels")
    f = owner(conv.operands[1])
    reversed_filter = (
        f is not None
        and f.opcode == "reverse"
        and sorted(f.attr("dimensions") or ()) == sorted(labels.kernel[2])
    )
    inner = owner(f.operands[0]) if f is not None and f.operands else None
    reversed_1d = conv1d_as_2d(conv) and inner is not None and inner.opcode == "reverse"
    constant = f is not None and f.opcode == "constant"
    one_by_one = all(d.size == 1 for d in window.dims)
    if not (
        reversed_filter or reversed_1d or (has_lhs_dilation(window) and (constant or one_by_one))
    ):
        return None
    if any(d.stride != 1 or d.rhs_dilation != 1 or d.reversal for d in window.dims):
        return None
    (ib, if_, isp), (ki, ko, ksp), (ob, of, osp) = labels.input, labels.kernel, labels.output
    dy, dx = _arr(conv.operands[0]), conv.shape
    assert isinstance(dx, ArrayShape)
    dims = []
    for i, d in enumerate(window.dims):
        stride, low = d.lhs_dilation, d.size - 1 - d.pad_low
        if low < 0:  # GpuConvPaddingLegalization has no negative low padding
            return None
        padded = d.size + stride * (dy.dims[isp[i]] - 1)
        high = _high_padding(low, padded - dx.dims[osp[i]] - low, stride)
        if high < 0:
            return None
        dims.append(WindowDim(size=d.size, stride=stride, pad_low=low, pad_high=high))
    new = conv_dims((dx.rank, _arr(conv.operands[1]).rank, dy.rank), (ob, of, osp), (ko, ki, ksp),
                    (ib, if_, isp))  # fmt: skip
    if reversed_filter:
        assert f is not None
        return Match(Window(tuple(dims)), new, f.operands[0])
    return Match(Window(tuple(dims)), new, None, reverse_constant=constant,
                 unreverse_1d=reversed_1d and not constant)  # fmt: skip
