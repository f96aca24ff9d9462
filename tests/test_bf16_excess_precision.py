"""Excess precision across fused bf16/f16 ops on XLA-CPU (0.10.2), against the interpreter
(`float_mode="xla-cpu"`, which rounds to the narrow type after every op). Measured:

- bf16: XLA-CPU rounds after every op inside a fusion (no excess precision): the
  interpreter matches bit for bit. The excess-precision model (f32 throughout, one final
  rounding) gives other bits on the same inputs, so the comparison tells them apart.
- f16: whether a multiply feeding an add or subtract is contracted into one f32 FMA whose
  product is not rounded to f16 first depends on the CPU XLA-CPU compiles for (XLA's f16
  stays f16 in LLVM, whose promotion to f32 may let the FMA contraction skip the product's
  rounding). Seen both ways: contracted on the machine this test was written on; every op
  rounded on an AMD EPYC (Zen 3, AVX2, no AVX-512), where XLA-CPU equals the interpreter
  bit for bit. XLA-CPU must equal one of the two models bit for bit; the interpreter rounds
  the product, so it stays within the bound derived below of either. Chains without a
  multiply-add match exactly everywhere.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlopass
from hlopass.interpreter.complex_math import fma

_N = 4096
f32 = np.float32
# (name, body on parameters a, b, c; f32 excess-precision model; XLA-CPU's f16 model or
# None when the chain has no multiply feeding an add/subtract, so f16 rounds every op too)
_CHAINS = [
    ("mul-add", "t = @T multiply(a, b)\n  ROOT r = @T add(t, c)",
     lambda a, b, c: a * b + c, lambda r, a, b, c: r(fma(a, b, c))),
    ("mul-div", "t = @T multiply(a, b)\n  ROOT r = @T divide(t, c)",
     lambda a, b, c: a * b / c, None),
    ("add-mul-sub", "t = @T add(a, b)\n  u = @T multiply(t, c)\n  ROOT r = @T subtract(u, a)",
     lambda a, b, c: (a + b) * c - a, lambda r, a, b, c: r(fma(r(a + b).astype(f32), c, -a))),
    ("mul-mul-mul", "t = @T multiply(a, b)\n  u = @T multiply(t, c)\n  ROOT r = @T multiply(u, a)",
     lambda a, b, c: a * b * c * a, None),
    ("add-sqrt-max", "t = @T add(a, b)\n  u = @T abs(t)\n  v = @T sqrt(u)\n  ROOT r = @T maximum(v, c)",
     lambda a, b, c: np.maximum(np.sqrt(np.abs(a + b)), c), None),
]  # fmt: skip
_TYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _inputs(dt):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(_N).astype(dt) for _ in range(3))
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, -65504, 3.0], dt)
    a[: special.size], c[: special.size] = special, special[::-1]
    return a, b, c


def _same(x, y) -> np.ndarray:
    x, y = np.asarray(x), np.asarray(y)
    nan = np.isnan(x.astype(f32)) & np.isnan(y.astype(f32))
    return (x.view(np.uint16) == y.view(np.uint16)) | nan


def _run(xla, ty, body):
    dt = _TYPES[ty]
    shape = f"{ty}[{_N}]"
    params = "\n".join(f"  {p} = {shape} parameter({i})" for i, p in enumerate("abc"))
    text = f"HloModule chain\nENTRY e {{\n{params}\n  {body.replace('@T', shape)}\n}}\n"
    a, b, c = _inputs(dt)
    (want,) = xla.execute(text, [a, b, c])
    (got,) = hlopass.evaluate(hlopass.parse_hlo(text), a, b, c)
    return (a, b, c), np.asarray(want), np.asarray(got)


@pytest.mark.parametrize(("name", "body", "excess", "_"), _CHAINS, ids=[c[0] for c in _CHAINS])
def test_bf16_chain_rounds_after_each_op_like_xla_cpu(xla, name, body, excess, _):
    (a, b, c), want, got = _run(xla, "bf16", body)
    assert _same(got, want).all(), f"{np.count_nonzero(~_same(got, want))} of {_N} differ"
    with np.errstate(all="ignore"):
        model = excess(a.astype(f32), b.astype(f32), c.astype(f32)).astype(ml_dtypes.bfloat16)
    assert np.count_nonzero(~_same(model, want)) > 0  # the check can see excess precision


@pytest.mark.parametrize(("name", "body", "_", "contracted"), _CHAINS, ids=[c[0] for c in _CHAINS])
def test_f16_chain_is_one_of_two_rounding_models_on_xla_cpu(xla, name, body, _, contracted):
    (a, b, c), want, got = _run(xla, "f16", body)
    if contracted is None:
        assert _same(got, want).all(), f"{np.count_nonzero(~_same(got, want))} of {_N} differ"
        return
    r16 = lambda v: v.astype(np.float16)  # noqa: E731
    with np.errstate(all="ignore"):
        model = contracted(r16, a.astype(f32), b.astype(f32), c.astype(f32))
    assert np.count_nonzero(~_same(model, got)) > 0  # the inputs tell the two models apart
    # XLA-CPU is the contraction model or the per-op rounding model, bit for bit (by CPU).
    assert _same(model, want).all() or _same(got, want).all()
    # The interpreter rounds the product p to f16 first (at most ulp(p)/2 away), then both
    # sides round their sums to f16 (ulp/2 each): |ours - XLA| <= (ulp(p) + ulp(ours) +
    # ulp(XLA)) / 2, ulps of f16. The product p is a*b, or (a+b) rounded to f16 times c.
    with np.errstate(all="ignore"):
        p = (
            (a.astype(f32) * b.astype(f32))
            if name == "mul-add"
            else (r16(a.astype(f32) + b.astype(f32)).astype(f32) * c.astype(f32))
        )
        g, w = got.astype(np.float64), want.astype(np.float64)
        ulp = lambda v: np.spacing(np.abs(r16(v))).astype(np.float64)  # noqa: E731
        bound = (ulp(p) + ulp(g) + ulp(w)) / 2
        finite = np.isfinite(g) & np.isfinite(w)
        assert np.all(np.abs(g - w)[finite] <= bound[finite])
        assert _same(got, want)[~finite].all()
