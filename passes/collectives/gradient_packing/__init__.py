"""`gradient-packing`: TensorFlow's `tf_cnn_benchmarks` all-reduce spec as an HLO pass.

`spec` parses the seed's grammar, `plan` picks each gradient's band and the packs of small
ones, `build` and `rewrites` emit the collectives, `auto` ranks the alternatives with the
interconnect model, `pass_` ties them together."""

from .pass_ import GradientPackingPass, explain_to
from .spec import Band, SpecError, format_spec, parse_spec

__all__ = ["Band", "GradientPackingPass", "SpecError", "explain_to", "format_spec", "parse_spec"]
