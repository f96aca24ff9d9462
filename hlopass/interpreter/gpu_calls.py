"""Library calls of GPU-optimized modules: cuBLAS gemms and cuDNN convolutions.

XLA's GPU pipeline replaces `dot` and `convolution` by custom-calls whose semantics live in
their operands and `backend_config`; these evaluators compute the same values on logical
(layout-free) arrays, so a module printed by XLA for an H100 runs under the interpreter:

* `__cublas$gemm`, `__cublas$lt$matmul`: `alpha * dot(a, b) + beta * c`, then the cublasLt
  epilogue (vector bias over the output's most minor dimensions, relu, gelu (tanh form),
  silu; `*_AUX` variants also return the pre-activation value). Operands: `a, b[, c][, bias]`
  (c only when beta != 0, bias only for BIAS epilogues).
* `__cudnn$convForward`, `__cudnn$convBackwardInput`, `__cudnn$convBackwardFilter`,
  `__cudnn$convBiasActivationForward`: `window`/`dim_labels` always describe the forward
  convolution `y = conv(x, w)`. Forward takes `(x, w)`, backward-input `(dy, w)` and returns
  dx, backward-filter `(x, dy)` and returns dw. The fused form computes
  `act(conv_result_scale * conv(x, w) + side_input_scale * side + bias)`.

A tuple-shaped call ends with its scratch workspace (`u8[n]`/`s8[n]`): returned as zeros.
Arithmetic is done in f32 (f64 for f64 operands) and rounded once to the result type, as the
libraries do. Anything else raises `UnsupportedOpError` naming the instruction.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hlopass.interpreter.core import dtype_of, unsupported
from hlopass.interpreter.linalg import acc_dtype, dilate
from hlopass.interpreter.linalg import pad_axis as _pad
from hlopass.interpreter.numeric import as_dtype
from hlopass.ir.attrs import backend_config
from hlopass.ir.shape import ArrayShape, TupleShape

GEMM_TARGETS = ("__cublas$gemm", "__cublas$lt$matmul")
CONV_TARGETS = (
    "__cudnn$convForward",
    "__cudnn$convBackwardInput",
    "__cudnn$convBackwardFilter",
    "__cudnn$convBiasActivationForward",
)


def is_library_call(target: str) -> bool:
    return target in GEMM_TARGETS or target in CONV_TARGETS


def evaluate_library_call(interp: Any, op: Any, args: list[Any]) -> Any:
    target = op.attr("custom_call_target")
    if target in GEMM_TARGETS:
        return _with_workspace(op, _gemm(op, args))
    if target in CONV_TARGETS:
        return _with_workspace(op, [_conv(op, target, args)])
    raise unsupported(op)


def _with_workspace(op: Any, results: list[np.ndarray]) -> Any:
    """The call's value: its results, plus a zero workspace when the shape has one more leaf."""
    shape = op.shape
    if not isinstance(shape, TupleShape):
        if len(results) != 1:
            raise unsupported(op, f"an array result, but the call computes {len(results)} values")
        return results[0]
    elements = list(shape.elements)
    if len(elements) == len(results) + 1:
        ws = elements[-1]
        if not isinstance(ws, ArrayShape) or ws.element_type not in ("u8", "s8"):
            raise unsupported(op, "the last tuple element is not a u8/s8 workspace")
        return (*results, np.zeros(ws.dims, dtype_of(ws)))
    if len(elements) != len(results):
        raise unsupported(op, f"{len(elements)} results, expected {len(results)} (+ workspace)")
    return tuple(results)


# --- cuBLAS ------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "RELU": lambda x: np.maximum(x, 0),
    # cublasLt's GELU is the tanh approximation (what XLA's gemm rewriter matches)
    "GELU": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "SILU": lambda x: x / (1 + np.exp(-x)),
}


def _gemm(op: Any, args: list[Any]) -> list[np.ndarray]:
    cfg = backend_config(op)
    cfg = cfg.get("gemm_backend_config", cfg)  # new style wraps it, old style is bare
    if "dot_dimension_numbers" not in cfg:
        raise unsupported(op, "backend_config has no dot_dimension_numbers")
    if cfg.get("is_fp8") or cfg.get("damax_output"):
        raise unsupported(op, "FP8 scaling / amax outputs")
    epilogue = str(cfg.get("epilogue", "DEFAULT"))
    parts = epilogue.split("_")
    has_bias = parts[0] == "BIAS"
    act_name = next((p for p in parts if p in _ACTIVATIONS), None)
    has_aux = parts[-1] == "AUX"
    known = {"DEFAULT", "BIAS", "AUX"} | set(_ACTIVATIONS)
    if any(p not in known for p in parts):
        raise unsupported(op, f"epilogue {epilogue}")
    alpha = complex(float(cfg.get("alpha_real", 1)), float(cfg.get("alpha_imag", 0)))
    beta = float(cfg.get("beta", 0))
    n_expected = 2 + (beta != 0) + has_bias
    if len(args) != n_expected:
        raise unsupported(op, f"{len(args)} operands for beta={beta:g}, epilogue {epilogue}")
    out_shape = _first_leaf(op.shape)
    out_dt = dtype_of(out_shape)
    a, b = args[0], args[1]
    acc = acc_dtype(a.dtype, b.dtype, out_dt)
    dn = cfg["dot_dimension_numbers"]
    r = _contract(a, b, dn, acc)
    if r.shape != tuple(out_shape.dims):
        raise unsupported(op, f"dot gives {r.shape}, result is {out_shape.text(False)}")
    if alpha != 1:
        r = r * (alpha if acc.kind == "c" else alpha.real)
    if beta != 0:
        r = r + beta * args[2].astype(acc)
    if has_bias:
        r = _add_minor_bias(r, out_shape, args[-1], op)
    aux = r
    if act_name is not None:
        r = _ACTIVATIONS[act_name](r)
    results = [as_dtype(r, out_dt)]
    if has_aux:
        aux_shape = op.shape.elements[1] if isinstance(op.shape, TupleShape) else out_shape
        results.append(as_dtype(aux, dtype_of(aux_shape)))
    return results


def _first_leaf(shape: Any) -> ArrayShape:
    while isinstance(shape, TupleShape):
        shape = shape.elements[0]
    assert isinstance(shape, ArrayShape)
    return shape


def _dims(dn: dict, key: str) -> list[int]:
    return [int(d) for d in dn.get(key, [])]


def _contract(a: np.ndarray, b: np.ndarray, dn: dict, acc: np.dtype) -> np.ndarray:
    """dot_general with XLA's output order (batch, lhs free, rhs free), in `acc`."""
    lb, rb = _dims(dn, "lhs_batch_dimensions"), _dims(dn, "rhs_batch_dimensions")
    lc, rc = _dims(dn, "lhs_contracting_dimensions"), _dims(dn, "rhs_contracting_dimensions")
    lf = [d for d in range(a.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(b.ndim) if d not in rb and d not in rc]
    batch = [a.shape[d] for d in lb]
    m = math.prod(a.shape[d] for d in lf)
    n = math.prod(b.shape[d] for d in rf)
    k = math.prod(a.shape[d] for d in lc)
    nb = math.prod(batch)
    x = np.transpose(a, lb + lf + lc).astype(acc).reshape(nb, m, k)
    y = np.transpose(b, rb + rc + rf).astype(acc).reshape(nb, k, n)
    out = np.matmul(x, y)
    return out.reshape(batch + [a.shape[d] for d in lf] + [b.shape[d] for d in rf])


def _physical_order(shape: ArrayShape) -> list[int]:
    """Logical dimensions from most major to most minor."""
    mtm = shape.minor_to_major
    if mtm is None or len(mtm) != len(shape.dims):
        return list(range(len(shape.dims)))
    return list(reversed(mtm))


def _add_minor_bias(r: np.ndarray, out_shape: ArrayShape, bias: np.ndarray, op: Any) -> np.ndarray:
    """The BIAS epilogue: the vector is broadcast over the output's most major dimensions, i.e.
    it lines up with the output's most minor physical dimensions (in physical order)."""
    order = _physical_order(out_shape)
    phys = np.transpose(r, order)
    bias_shape = op.operands[len(op.operands) - 1].type.data
    bias_phys = np.transpose(bias, _physical_order(bias_shape)) if bias.ndim else bias
    if bias_phys.shape != phys.shape[phys.ndim - bias_phys.ndim :]:
        raise unsupported(op, f"bias {bias.shape} does not match the output's minor dimensions")
    phys = phys + bias_phys.astype(r.dtype)
    return np.transpose(phys, np.argsort(order))


# --- cuDNN convolutions --------------------------------------------------------------------

_CONV_ACTIVATIONS: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "kNone": lambda x, _: x,
    "kRelu": lambda x, _: np.maximum(x, 0),
    "kRelu6": lambda x, _: np.clip(x, 0, 6),
    "kTanh": lambda x, _: np.tanh(x),
    "kSigmoid": lambda x, _: 1 / (1 + np.exp(-x)),
    "kElu": lambda x, _: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "kLeakyRelu": lambda x, alpha: np.where(x > 0, x, alpha * x),
}


class ConvGeometry:
    """A forward convolution's geometry in canonical order: x (N, C, *S), w (O, C/G, *K),
    y (N, O, *P), taken from `window`, `dim_labels` and `feature_group_count`."""

    def __init__(self, op: Any, x_dims: tuple[int, ...], w_dims: tuple[int, ...]):
        labels = op.attr("dim_labels")
        if labels is None:
            raise unsupported(op, "no dim_labels")
        self.labels = labels
        self.groups = int(op.attr("feature_group_count") or 1)
        if int(op.attr("batch_group_count") or 1) != 1:
            raise unsupported(op, "batch_group_count > 1")
        ib, if_, isp = labels.input
        ki, ko, ksp = labels.kernel
        nsp = len(isp)
        window = op.attr("window")
        wd = list(window.dims) if window is not None else []
        if len(wd) != nsp:
            raise unsupported(op, f"window has {len(wd)} dimensions, dim_labels {nsp}")
        self.window = wd
        self.x_canon = (x_dims[ib], x_dims[if_], *(x_dims[d] for d in isp))
        self.w_canon = (w_dims[ko], w_dims[ki], *(w_dims[d] for d in ksp))
        self.padded = []  # length of the dilated, padded input per spatial dim
        self.out = []
        for s, w in enumerate(wd):
            n = self.x_canon[2 + s]
            dil = (n - 1) * w.lhs_dilation + 1 if n else 0
            padded = dil + w.pad_low + w.pad_high
            span = (self.w_canon[2 + s] - 1) * w.rhs_dilation + 1
            self.padded.append(padded)
            self.out.append(max(0, (padded - span) // w.stride + 1) if padded >= span else 0)

    # canonical <-> operand layouts
    def to_canon(self, a: np.ndarray, role: str) -> np.ndarray:
        return np.transpose(a, self._perm(role))

    def from_canon(self, a: np.ndarray, role: str) -> np.ndarray:
        return np.transpose(a, np.argsort(self._perm(role)))

    def _perm(self, role: str) -> list[int]:
        if role == "input":
            b, f, sp = self.labels.input
            return [b, f, *sp]
        if role == "kernel":
            i, o, sp = self.labels.kernel
            return [o, i, *sp]
        b, f, sp = self.labels.output
        return [b, f, *sp]

    def offsets(self) -> Any:
        return itertools.product(*(range(k) for k in self.w_canon[2:]))

    def window_slices(self, k: tuple[int, ...]) -> tuple[slice, ...]:
        """Where kernel offset `k` reads the padded input, for every output position."""
        out = []
        for s, w in enumerate(self.window):
            start = k[s] * w.rhs_dilation
            out.append(slice(start, start + (self.out[s] - 1) * w.stride + 1, w.stride))
        return (slice(None), slice(None), *out)

    def kernel_index(self, k: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(
            self.w_canon[2 + s] - 1 - k[s] if w.reversal else k[s]
            for s, w in enumerate(self.window)
        )

    def pad_input(self, x: np.ndarray) -> np.ndarray:
        """x (canonical) dilated by lhs_dilation and padded (negative padding crops)."""
        for s, w in enumerate(self.window):
            axis = 2 + s
            if w.lhs_dilation > 1:
                x = dilate(x, axis, w.lhs_dilation)
            x = _pad(x, axis, w.pad_low, w.pad_high)
        return x

    def unpad_input(self, g: np.ndarray) -> np.ndarray:
        """Adjoint of pad_input: gradient on the padded input -> gradient on x."""
        for s in reversed(range(len(self.window))):
            w = self.window[s]
            axis = 2 + s
            g = _pad(g, axis, -w.pad_low, -w.pad_high)
            if w.lhs_dilation > 1:
                index = [slice(None)] * g.ndim
                index[axis] = slice(None, None, w.lhs_dilation)
                g = g[tuple(index)]
        return g


def conv_forward(g: ConvGeometry, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """y (N, O, *P) from canonical x and w."""
    xp = g.pad_input(x)
    n, c = x.shape[:2]
    o = w.shape[0]
    G = g.groups
    y = np.zeros((n, G, o // G, *g.out), x.dtype)
    wg = w.reshape(G, o // G, c // G, *w.shape[2:])
    for k in g.offsets():
        xs = xp[g.window_slices(k)].reshape(n, G, c // G, *g.out)
        y += np.einsum("ngc...,goc->ngo...", xs, wg[(..., *g.kernel_index(k))])
    return y.reshape(n, o, *g.out)


def conv_backward_input(g: ConvGeometry, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    """dx (N, C, *S): the adjoint of conv_forward in x."""
    n, o = dy.shape[:2]
    c = g.x_canon[1]
    G = g.groups
    gp = np.zeros((n, c, *g.padded), dy.dtype)
    dyg = dy.reshape(n, G, o // G, *g.out)
    wg = w.reshape(G, o // G, c // G, *w.shape[2:])
    for k in g.offsets():
        part = np.einsum("ngo...,goc->ngc...", dyg, wg[(..., *g.kernel_index(k))])
        gp[g.window_slices(k)] += part.reshape(n, c, *g.out)
    return g.unpad_input(gp)


def conv_backward_filter(g: ConvGeometry, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """dw (O, C/G, *K): the adjoint of conv_forward in w."""
    xp = g.pad_input(x)
    n, c = x.shape[:2]
    o = dy.shape[1]
    G = g.groups
    dw = np.zeros((G, o // G, c // G, *g.w_canon[2:]), x.dtype)
    dyg = dy.reshape(n, G, o // G, -1)
    for k in g.offsets():
        xs = xp[g.window_slices(k)].reshape(n, G, c // G, -1)
        dw[(..., *g.kernel_index(k))] += np.einsum("ngop,ngcp->goc", dyg, xs)
    return dw.reshape(o, c // G, *g.w_canon[2:])


def _conv(op: Any, target: str, args: list[np.ndarray]) -> np.ndarray:
    out_shape = _first_leaf(op.shape)
    out_dt = dtype_of(out_shape)
    cfg = backend_config(op).get("cudnn_conv_backend_config", {})
    if len(args) < 2:
        raise unsupported(op, "fewer than 2 operands")
    acc = acc_dtype(args[0].dtype, args[1].dtype, out_dt)
    a, b = (v.astype(acc) for v in args[:2])
    if target == "__cudnn$convBackwardInput":
        g = ConvGeometry(op, tuple(out_shape.dims), b.shape)
        r = g.from_canon(conv_backward_input(g, g.to_canon(a, "output"), g.to_canon(b, "kernel")),
                         "input")  # fmt: skip
    elif target == "__cudnn$convBackwardFilter":
        g = ConvGeometry(op, a.shape, tuple(out_shape.dims))
        r = g.from_canon(conv_backward_filter(g, g.to_canon(a, "input"), g.to_canon(b, "output")),
                         "kernel")  # fmt: skip
    else:
        g = ConvGeometry(op, a.shape, b.shape)
        y = conv_forward(g, g.to_canon(a, "input"), g.to_canon(b, "kernel"))
        if target == "__cudnn$convBiasActivationForward":
            y = _bias_activation(op, cfg, y, g, args[2:], acc)
        elif len(args) != 2:
            raise unsupported(op, f"{len(args)} operands")
        r = g.from_canon(y, "output")
    if r.shape != tuple(out_shape.dims):
        raise unsupported(op, f"computes {r.shape}, result is {out_shape.text(False)}")
    scale = float(cfg.get("conv_result_scale", 1))
    if target != "__cudnn$convBiasActivationForward" and scale != 1:
        r = r * scale
    return as_dtype(r, out_dt)


def _bias_activation(op: Any, cfg: dict, y: np.ndarray, g: ConvGeometry, rest: list[np.ndarray],
                     acc: np.dtype) -> np.ndarray:  # fmt: skip
    """act(scale * conv + side_input_scale * side + bias) on canonical y (N, O, *P)."""
    if len(rest) not in (1, 2):
        raise unsupported(op, f"{2 + len(rest)} operands (expected x, w, bias[, side input])")
    y = y * float(cfg.get("conv_result_scale", 1))
    if len(rest) == 2:
        side_scale = float(cfg.get("side_input_scale", 0))
        if side_scale:
            y = y + side_scale * g.to_canon(rest[1].astype(acc), "output")
    bias = rest[0].astype(acc).reshape(-1)
    if bias.size != y.shape[1]:
        raise unsupported(op, f"bias has {bias.size} elements for {y.shape[1]} features")
    y = y + bias.reshape((1, -1) + (1,) * (y.ndim - 2))
    mode = str(cfg.get("activation_mode", "kNone"))
    fn = _CONV_ACTIVATIONS.get(mode)
    if fn is None:
        raise unsupported(op, f"activation_mode {mode}")
    return fn(y, float(cfg.get("leakyrelu_alpha", 0)))
