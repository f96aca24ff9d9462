"""Tolerances derived from the computation, for comparing two executions of one program that
round at different points (XLA:CPU on the unfused module vs the interpreter on XLA's GPU
plan: fusion keeps f32 intermediates, library calls accumulate in f32 and round once).

For a float output k:

    atol_k = 4 * u * L * max(max |input|, max |output_k|, 1)

* u: the unit roundoff of the narrowest float type the module computes in (f8e4m3fn 2^-4,
  bf16 2^-8, f16 2^-11, f32 2^-24, f64 2^-53);
* L: the longest chain of accumulated roundings: the largest reduction length of any
  reduce / dot / convolution / library call / fft in the module, or a while loop's known trip
  count. The rounding error of a sum of L terms is at most about L * u times their
  magnitude whatever the order of summation (the sqrt(L) growth of independent roundings
  is typical, not a bound: with it, seed 000 on an AMD EPYC Zen 3 came out 1.4x over);
  the factor 4 covers both executions rounding differently at a couple of points per term;
* the magnitude: the largest input or output value (intermediates of the programs are of
  that order; cancellation makes small outputs carry the error of large intermediates).

Integers and predicates compare exactly.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

_UNIT_ROUNDOFF: dict[str, float] = {}


def unit_roundoff(element_type: str) -> float:
    """Half the machine epsilon of a float (or complex) element type; 0 for others."""
    if element_type not in _UNIT_ROUNDOFF:
        import ml_dtypes

        from hlopass.ir.literal import numpy_dtype

        u = 0.0
        try:
            dt = numpy_dtype(element_type)
            if dt.kind == "c" or dt in (np.float16, np.float32, np.float64):
                u = float(np.finfo(dt).eps) / 2
            elif dt.kind in "fV":  # ml_dtypes floats (bf16, f8...); integers raise here
                u = float(ml_dtypes.finfo(dt).eps) / 2
        except (KeyError, ValueError, TypeError):
            u = 0.0
        _UNIT_ROUNDOFF[element_type] = u
    return _UNIT_ROUNDOFF[element_type]


def _n(dims: Any) -> int:
    return math.prod(int(d) for d in dims)


def _reduction_length(op: Any) -> int:
    opc = op.opcode
    shapes = [v.type.data for v in op.operands]
    if opc == "reduce":
        return _n(shapes[0].dims[d] for d in op.attr("dimensions"))
    if opc == "reduce-window":
        window = op.attr("window")
        return _n(w.size for w in window.dims) if window is not None else 1
    if opc == "dot":
        return _n(shapes[0].dims[d] for d in op.attr("lhs_contracting_dims") or ())
    if opc == "fft":
        return _n(op.attr("fft_length"))
    if opc == "convolution":
        ki, ko, _ = op.attr("dim_labels").kernel
        return _n(shapes[1].dims) // max(1, shapes[1].dims[ko])
    if opc == "while":
        cfg = _config(op).get("known_trip_count", {})
        return int(cfg.get("n", 1)) if isinstance(cfg, dict) else 1
    if opc == "custom-call":
        target = op.attr("custom_call_target") or ""
        cfg = _config(op)
        if target.startswith("__cublas"):
            dn = cfg.get("gemm_backend_config", cfg).get("dot_dimension_numbers", {})
            return _n(shapes[0].dims[int(d)] for d in dn.get("lhs_contracting_dimensions", []))
        if target.startswith("__cudnn$conv"):
            labels = op.attr("dim_labels")
            ki, ko, _ = labels.kernel
            if target == "__cudnn$convBackwardFilter":  # sums over batch and output positions
                _, of, _ = labels.output
                return _n(shapes[1].dims) // max(1, shapes[1].dims[of])
            if target == "__cudnn$convBackwardInput":
                return _n(shapes[1].dims) // max(1, shapes[1].dims[ki])
            return _n(shapes[1].dims) // max(1, shapes[1].dims[ko])
    return 1


def _config(op: Any) -> dict:
    raw = op.attr("backend_config")
    if not raw:
        return {}
    try:
        value = json.loads(raw if isinstance(raw, str) else getattr(raw, "text", str(raw)))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def module_error_scale(module: Any) -> tuple[float, int]:
    """(u, L) of a module: see the module docstring."""
    from hlopass.dialects.hlo import computations

    u, length = 0.0, 1
    for comp in computations(module):
        for op in comp.instructions:
            for leaf in op.shape.leaves():
                u = max(u, unit_roundoff(leaf.element_type))
            length = max(length, _reduction_length(op))
    return (u or unit_roundoff("f32")), length


def max_abs(arrays: list[np.ndarray]) -> float:
    m = 0.0
    for a in arrays:
        if a.size and (a.dtype.kind in "fc" or a.dtype.kind == "V"):
            v = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
            finite = v[np.isfinite(v)]
            if finite.size:
                m = max(m, float(finite.max()))
    return m


def assert_outputs_close(module: Any, inputs: list[np.ndarray], got: list[np.ndarray],
                         want: list[np.ndarray], what: str) -> None:  # fmt: skip
    u, length = module_error_scale(module)
    m_in = max_abs(inputs)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{what} out{k}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} out{k}")
            continue
        atol = 4 * u * length * max(m_in, max_abs([w]), 1.0)
        kind = np.complex128 if g.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(g.astype(kind), w.astype(kind), rtol=0, atol=atol,
                                   equal_nan=True, err_msg=f"{what} out{k} (atol {atol:.3g})")  # fmt: skip
