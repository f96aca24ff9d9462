"""XLA's `xla_builder.*` custom-calls that arrive without their attached decomposition:
computed from their definition in float64 with scipy, then rounded to the result type.
XLA-CPU itself has no implementation of these targets (its builder expands them first);
tests/test_interpreter_coverage.py compares them with the functions JAX lowers for them.
"""

from __future__ import annotations

import re
from types import ModuleType

import numpy as np

from hlopass.interpreter.numeric import as_dtype


def _special() -> ModuleType:
    """`scipy.special`, imported on first use: scipy's import takes ~0.4 s, and most
    processes that load the interpreter (constant folding in a pipeline) never need it."""
    from scipy import special

    return special


def _linalg() -> ModuleType:
    from scipy import linalg

    return linalg


# relative step of the central differences below: float64's error in P(a, x) is ~1e-16,
# so the derivative's error is ~1e-16/h + h^2 ~ 1e-10 relative, far below f32's 6e-8
_H = 1e-5


def _dp_da(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d/da of the regularized lower incomplete gamma P(a, x), by central differences."""
    h = _H * np.maximum(np.abs(a), 1.0)
    return (_special().gammainc(a + h, x) - _special().gammainc(a - h, x)) / (2 * h)


def igamma_grad_a(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    return _dp_da(a, x)


def random_gamma_grad(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """d sample / d alpha of a Gamma(alpha, 1) sample x (implicit differentiation of
    P(alpha, x) = u): -(dP/dalpha) / (dP/dx), dP/dx = x^(alpha-1) e^-x / Gamma(alpha)."""
    log_density = (a - 1) * np.log(x) - x - _special().gammaln(a)
    return -_dp_da(a, x) / np.exp(log_density)


def polygamma(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """polygamma(n, x) for integral n >= 0; NaN for any other n (as XLA's builder)."""
    ok = (n == np.floor(n)) & (n >= 0)
    out = _special().polygamma(np.where(ok, n, 0).astype(np.int64), x)
    return np.where(ok, out, np.nan)


def regularized_incomplete_beta(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    ok = (a > 0) & (b > 0) & (x >= 0) & (x <= 1)
    return np.where(ok, _special().betainc(np.where(ok, a, 1), np.where(ok, b, 1),
                                        np.clip(x, 0, 1)), np.nan)  # fmt: skip


MATH = {
    "xla_builder.math.IgammaGradA": igamma_grad_a,
    "xla_builder.math.RandomGammaGrad": random_gamma_grad,
    "xla_builder.math.Polygamma": polygamma,
    "xla_builder.math.RegularizedIncompleteBeta": regularized_incomplete_beta,
}


def evaluate_math(target: str, args: list[np.ndarray], out: np.dtype) -> np.ndarray:
    with np.errstate(all="ignore"):
        wide = [np.asarray(a, np.float64) for a in args]
        return as_dtype(MATH[target](*wide), out)


def einsum(spec: str, args: list[np.ndarray], out: np.dtype) -> np.ndarray:
    """`backend_config` holds the equation; an output letter written twice (`i,ij->ii`)
    puts the values on that diagonal, zeros elsewhere."""
    spec = spec.replace(" ", "")
    lhs, _, result = spec.partition("->")
    unique = "".join(dict.fromkeys(result))
    wide = np.einsum(f"{lhs}->{unique}", *(np.asarray(a, np.float64) for a in args))
    if unique != result:
        full = np.zeros([wide.shape[unique.index(c)] for c in result])
        index = tuple(np.indices(wide.shape)[unique.index(c)] for c in result)
        full[index] = wide
        wide = full
    return as_dtype(wide, out)


def tridiagonal_solve(lower, main, upper, rhs, out: np.dtype) -> np.ndarray:
    """Solve T x = rhs, T tridiagonal: diagonals [..., 1, m] (lower[0] and upper[m-1]
    unused), rhs [..., m, n]; batch dims broadcast."""
    lo, d, up = (np.asarray(v, np.float64)[..., 0, :] for v in (lower, main, upper))
    b = np.asarray(rhs, np.float64)
    batch = np.broadcast_shapes(lo.shape[:-1], b.shape[:-2])
    m = d.shape[-1]
    lo, d, up = (np.broadcast_to(v, batch + (m,)) for v in (lo, d, up))
    b = np.broadcast_to(b, batch + b.shape[-2:])
    result = np.empty(b.shape)
    for idx in np.ndindex(*batch):
        ab = np.zeros((3, m))
        ab[0, 1:] = up[idx][:-1]
        ab[1] = d[idx]
        ab[2, :-1] = lo[idx][1:]
        with np.errstate(all="ignore"):
            try:
                result[idx] = _linalg().solve_banded((1, 1), ab, b[idx])
            except (_linalg().LinAlgError, ValueError):  # singular: no solution to give
                result[idx] = np.nan
    return as_dtype(result, out)


def is_einsum(target: str) -> bool:
    return target == "xla_builder.matrix.Einsum"


_EQUATION = re.compile(r"^[a-zA-Z,\s]*->[a-zA-Z\s]*$")


def einsum_equation(config: object) -> str | None:
    text = str(getattr(config, "text", config) or "").strip().strip('"')
    return text if _EQUATION.match(text) else None
