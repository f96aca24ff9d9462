"""cuDNN convolutions (XLA's GPU conv canonicalization): `conv-rewriter` (convolutions to
cuDNN calls, `match` decides which), `cudnn-fused-convolution-rewriter` (bias, side input,
scale and activation into `__cudnn$convBiasActivationForward`), `conv-padding-legalization`
(the padding cuDNN cannot take made explicit); `lowering` turns the calls back into HLO."""

from hlopass.passes.conv_rewriter.conv_rewriter import ConvRewriterPass

__all__ = ["ConvRewriterPass"]
