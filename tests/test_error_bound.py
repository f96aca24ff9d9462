"""The derived tolerance (tests/error_bound.py): wide enough for any summation order, FMA or
library-function ulps, narrow enough to catch real bugs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlopass
from hlopass.checking.corpus import corpus_root
from tests.error_bound import NoBound, error_bounds, within_bound

DOT = """HloModule m
ENTRY e {
  a = f32[16,192] parameter(0)
  b = f32[192,16] parameter(1)
  ROOT d = f32[16,16] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""

REDUCE_F16 = """HloModule m
add {
  x = f16[] parameter(0)
  y = f16[] parameter(1)
  ROOT s = f16[] add(x, y)
}
ENTRY e {
  p = f16[8,64] parameter(0)
  z = f16[] constant(0)
  ROOT r = f16[8] reduce(p, z), dimensions={1}, to_apply=add
}"""


def _dot_case():
    rng = np.random.default_rng(0)
    a = (2 * rng.standard_normal((16, 192))).astype(np.float32)
    b = np.ascontiguousarray(a.T)  # dot(X, X^T): off-diagonal entries cancel
    ((v, bound),) = error_bounds(hlopass.parse_hlo(DOT), a, b)
    return a, b, v, bound


def _sequential(a, b, order, dtype=np.float32):
    """dot(a, b) summed term by term in `order`, each step rounded to `dtype`."""
    out = np.zeros((a.shape[0], b.shape[1]), dtype)
    for k in order:
        out = (out + (a[:, k : k + 1] * b[k : k + 1, :]).astype(dtype)).astype(dtype)
    return out


def test_other_summation_orders_are_within_the_bound():
    a, b, v, bound = _dot_case()
    n = a.shape[1]
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    for other in (exact, _sequential(a, b, range(n)), _sequential(a, b, reversed(range(n)))):
        assert within_bound(other, v, bound).all()


@pytest.mark.parametrize("bug", ["one product dropped", "bf16 accumulation",
                                 "one sign flipped", "neighbour element read"])  # fmt: skip
def test_bugs_exceed_the_bound(bug):
    a, b, v, bound = _dot_case()
    n = a.shape[1]
    if bug == "one product dropped":
        wrong = _sequential(a, b, range(n - 1))
    elif bug == "bf16 accumulation":
        wrong = _sequential(a, b, range(n), ml_dtypes.bfloat16).astype(np.float32)
    elif bug == "one sign flipped":
        a2 = a.copy()
        a2[3, 7] = -a2[3, 7]
        wrong = (a2.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    else:  # an indexing bug: column k+1 read for the last k
        idx = list(range(n - 1)) + [n - 2]
        wrong = (a[:, idx].astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert not within_bound(wrong, v, bound).all(), f"{bug} passed the bound"


def test_the_epyc_difference_in_transpose_chain_is_within_the_bound():
    """The AVX-512 EPYC's 0.35504913 against the recorded 0.35505772 (a dot(X, X^T) entry
    that cancels) failed rtol 1e-5 / atol 1e-6; the derived bound takes it."""
    root = corpus_root()
    if root is None:
        pytest.skip("corpus not present")
    d = root / "jax" / "transpose_chain"
    with np.load(d / "io.npz") as z:
        x, want = z["in0"], z["out0"]
    (_, bound), *_ = error_bounds(
        hlopass.parse_hlo((d / "before_optimizations.hlo").read_text()), x
    )
    k = np.unravel_index(np.argmin(np.abs(want - np.float32(0.35505772))), want.shape)
    assert want[k] == np.float32(0.35505772)
    epyc = np.float32(0.35504913)
    assert not np.isclose(epyc, want[k], rtol=1e-5, atol=1e-6)
    assert within_bound(np.array([epyc]), np.array([want[k]]), np.array([bound[k]])).all()


def test_f16_reduce_accumulated_in_f16_is_within_the_bound():
    """XLA:CPU sums an f16 reduce in f16 element after element; the interpreter in f32."""
    rng = np.random.default_rng(1)
    p = rng.uniform(-2, 2, (8, 64)).astype(np.float16)
    ((v, bound),) = error_bounds(hlopass.parse_hlo(REDUCE_F16), p)
    seq = np.zeros(8, np.float16)
    for k in range(64):
        seq = (seq + p[:, k]).astype(np.float16)
    assert within_bound(seq, v, bound).all()
    # the worst case of 64 f16 roundings is wide (gamma_64 = 0.03 of sum|x|), yet a sign
    # bug (summing magnitudes) is far outside it
    sign_bug = np.abs(p).astype(np.float32).sum(axis=1).astype(np.float16)
    assert not within_bound(sign_bug, v, bound).any()


def test_an_op_without_a_rule_is_reported():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] reduce-precision(p), exponent_bits=5, mantissa_bits=10
}"""
    with pytest.raises(NoBound, match="reduce-precision"):
        error_bounds(hlopass.parse_hlo(text), np.ones(4, np.float32))
