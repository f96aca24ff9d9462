"""custom-call targets with a meaning on one device: TopK (and the GPU kernel `__gpu$TopK`), sharding and host-offloading
annotations (identity), XLA's `xla_builder.*` functions (their attached decomposition when
they have one, else numpy for the math ones; XLA-CPU itself has no implementation of these
targets), dynamic reshape."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter import builder_math
from hlopass.interpreter.core import dtype_of, handler, unsupported
from hlopass.interpreter.dynamic import pad_to_static, slice_to_dynamic
from hlopass.interpreter.numeric import as_dtype, daz, widen

# On one device these move no data: sharding annotations and the SPMD partitioner's
# shard/full conversions (one shard is the whole array), host-offloading placement.
_IDENTITY = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                       "MoveToHost", "MoveToDevice", "annotate_device_placement", "Pin",
                       "Unpin", "SetBound"})  # fmt: skip
# SetBound only tells XLA's dynamic padder an upper bound: the data passes unchanged.

_MATH = {
    "xla_builder.math.Acos": np.arccos, "xla_builder.math.Acosh": np.arccosh,
    "xla_builder.math.Asin": np.arcsin, "xla_builder.math.Asinh": np.arcsinh,
    "xla_builder.math.Atan": np.arctan, "xla_builder.math.Atanh": np.arctanh,
    "xla_builder.math.Cosh": np.cosh, "xla_builder.math.Sinh": np.sinh,
    "xla_builder.math.NextAfter": np.nextafter,
}  # fmt: skip


@handler("custom-call")
def _custom_call(interp, op, args):
    from hlopass.interpreter.sorting import custom_call_topk

    target = op.attr("custom_call_target")
    if target in ("TopK", "__gpu$TopK"):  # __gpu$TopK: XLA's GPU TopK kernel, same result
        return custom_call_topk(interp, op, args)
    from hlopass.interpreter.gpu_calls import evaluate_library_call, is_library_call

    if is_library_call(target):  # cuBLAS / cuDNN calls of GPU-optimized modules
        return evaluate_library_call(interp, op, args)
    if target in _IDENTITY:
        if len(args) != 1 or op.shape.is_tuple or args[0].shape != tuple(op.shape.dims):
            raise unsupported(op, "operand and result shapes differ (more than one device)")
        return args[0]
    callees = op.callees()
    if target.startswith("xla_builder.") and len(callees) == 1:
        return interp.call(callees[0], args)  # the decomposition XLA's builder attached
    if target in builder_math.MATH:
        return builder_math.evaluate_math(target, args, dtype_of(op.shape))
    if builder_math.is_einsum(target):
        spec = builder_math.einsum_equation(op.attr("backend_config"))
        if spec is None:
            raise unsupported(op, "backend_config holds no einsum equation")
        return builder_math.einsum(spec, args, dtype_of(op.shape))
    if target == "xla_builder.tridiagonal.TridiagonalSolver" and len(args) == 4:
        lower, main, upper, rhs = args
        return builder_math.tridiagonal_solve(lower, main, upper, rhs, dtype_of(op.shape))
    if target in _MATH:
        out = dtype_of(op.shape)
        return as_dtype(daz(_MATH[target](*(daz(widen(a)) for a in args))), out)
    if target in ("mhlo.dynamic_reshape", "dynamic-reshape"):
        return np.reshape(args[0], op.shape.dims)
    if target == "SliceToDynamic":
        return slice_to_dynamic(args[0], args[1:])
    if target == "PadToStatic":
        return pad_to_static(args[0])
    raise unsupported(op)


@handler("dynamic-reshape")
def _dynamic_reshape(interp, op, args):
    """The result's bounds are its static shape; the data fills it in row-major order."""
    return np.reshape(args[0], op.shape.dims)
