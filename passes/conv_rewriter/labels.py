"""Dimension numbers and windows of convolutions as cuDNN calls see them: building a
`dim_labels` string from (batch, feature, spatial) roles, the window predicates XLA's
`window_util` answers, and the default backend config ConvRewriter gives every call."""

from __future__ import annotations

from collections.abc import Sequence

from hlopass.ir.attrs import ConvDims, Window

FORWARD = "__cudnn$convForward"
BACKWARD_INPUT = "__cudnn$convBackwardInput"
BACKWARD_FILTER = "__cudnn$convBackwardFilter"
BIAS_ACTIVATION = "__cudnn$convBiasActivationForward"

CALL_NAMES = {
    FORWARD: "cudnn-conv",
    BACKWARD_INPUT: "cudnn-conv-bw-input",
    BACKWARD_FILTER: "cudnn-conv-bw-filter",
    BIAS_ACTIVATION: "cudnn-conv-bias-activation",
}
"""The names XLA gives the calls it creates (uniquified: `cudnn-conv.1`, ...)."""

Roles = tuple[int, int, tuple[int, ...]]
"""(batch or input-feature dim, feature or output-feature dim, spatial dims) of one side."""


def backend_config(activation: str = "kNone", scale: float = 1, side_scale: float = 0,
                   alpha: float = 0) -> str:  # fmt: skip
    """A GpuBackendConfig holding a CudnnConvBackendConfig, in XLA's printed field order."""

    def num(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else repr(float(v))

    return (
        '{"operation_queue_id":"0","wait_on_operation_queues":[],'
        f'"cudnn_conv_backend_config":{{"activation_mode":"{activation}",'
        f'"conv_result_scale":{num(scale)},"side_input_scale":{num(side_scale)},'
        f'"leakyrelu_alpha":{num(alpha)}}},"force_earliest_schedule":false}}'
    )


def side(rank: int, roles: Roles, letters: str) -> str:
    """One side of a dim-label string: `letters[0]` at roles[0], `letters[1]` at roles[1],
    spatial dimension i as the digit i."""
    chars = ["?"] * rank
    chars[roles[0]], chars[roles[1]] = letters[0], letters[1]
    for i, d in enumerate(roles[2]):
        chars[d] = str(i)
    return "".join(chars)


def conv_dims(ranks: Sequence[int], lhs: Roles, rhs: Roles, out: Roles) -> ConvDims:
    """`dim_labels` for input roles `lhs` (batch, feature), kernel roles `rhs` (input
    feature, output feature) and output roles `out` (batch, feature)."""
    text = f"{side(ranks[0], lhs, 'bf')}_{side(ranks[1], rhs, 'io')}->{side(ranks[2], out, 'bf')}"
    return ConvDims(text)


def has_lhs_dilation(w: Window) -> bool:
    return any(d.lhs_dilation != 1 for d in w.dims)


def has_rhs_dilation(w: Window) -> bool:
    return any(d.rhs_dilation != 1 for d in w.dims)


def symmetric(w: Window) -> bool:
    return all(d.pad_low == d.pad_high for d in w.dims)


def reversal_allowed(w: Window) -> bool:
    """cuDNN computes a cross-correlation or, with every dimension reversed, a convolution:
    2-D windows may reverse all or none of their dimensions, others none."""
    flags = [d.reversal for d in w.dims]
    return (all(flags) or not any(flags)) if len(flags) == 2 else not any(flags)
