"""`rng` as XLA-CPU computes it (hlopass/interpreter/rng.py): XLA's RngExpander lowering
(Philox-4x32 keyed per instruction, per-instruction counters from 0x7012395, prng.cc's
uniform/int/Box-Muller conversions), checked against XLA-CPU executing the module once as
the first compilation of a fresh process (the keys come from a process-global generator
that every compilation advances)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.interpreter.rng import mt19937_64

pytest.importorskip("jax")

_BODY = """
body {
  p = (s32[], f32[4,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[4,3] get-tuple-element(p), index=1
  lo = f32[] constant(-1)
  hi = f32[] constant(1)
  r = f32[1,3] rng(lo, hi), distribution=rng_uniform
  z = s32[] constant(0)
  upd = f32[4,3] dynamic-update-slice(acc, r, i, z)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[4,3]) tuple(i2, upd)
}

cond {
  p = (s32[], f32[4,3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(4)
  ROOT c = pred[] compare(i, n), direction=LT
}
"""

# (name, type, dims, distribution, a, b): every element type XLA-CPU's expander takes
_DRAWS = [
    ("uf", "f32", "3,5", "rng_uniform", "-3", "5"),
    ("ud", "f64", "7", "rng_uniform", "2", "7"),
    ("uh", "f16", "4,3", "rng_uniform", "-2", "3"),
    ("ub", "bf16", "2,2,3", "rng_uniform", "0", "10"),
    ("us", "s32", "5,4", "rng_uniform", "-10", "1000"),
    ("uu", "u32", "9", "rng_uniform", "3", "17"),
    ("ul", "s64", "3,3", "rng_uniform", "-1099511627776", "1125899906842624"),
    ("uq", "u64", "5", "rng_uniform", "0", "1000000000000000"),
    ("ue", "s32", "6", "rng_uniform", "5", "5"),  # empty range: x % 0 = x
    ("nf", "f32", "3,5", "rng_normal", "1", "2"),
    ("n0", "f32", "", "rng_normal", "1", "2"),
    ("nd", "f64", "5,3", "rng_normal", "-1", "0.5"),
    ("nh", "f16", "7", "rng_normal", "0", "1"),
    ("nb", "bf16", "3,3", "rng_normal", "3", "2"),
    ("n3", "f32", "3,5,7", "rng_normal", "0", "1"),
    ("nl", "f32", "1000,7", "rng_normal", "0", "1"),
]


def _module() -> str:
    lines, names, shapes = [], [], []
    for name, ty, dims, dist, a, b in _DRAWS:
        lines += [f"  {name}a = {ty}[] constant({a})", f"  {name}b = {ty}[] constant({b})",
                  f"  {name} = {ty}[{dims}] rng({name}a, {name}b), distribution={dist}"]  # fmt: skip
        names.append(name)
        shapes.append(f"{ty}[{dims}]")
    lines += ["  zero = s32[] constant(0)", "  zf = f32[] constant(0)",
              "  init = f32[4,3] broadcast(zf), dimensions={}",
              "  t0 = (s32[], f32[4,3]) tuple(zero, init)",
              "  w = (s32[], f32[4,3]) while(t0), condition=cond, body=body",
              "  wacc = f32[4,3] get-tuple-element(w), index=1"]  # fmt: skip
    names.append("wacc")
    shapes.append("f32[4,3]")
    root = f"  ROOT out = ({', '.join(shapes)}) tuple({', '.join(names)})"
    return "HloModule rngs\n" + _BODY + "\nENTRY e {\n" + "\n".join(lines + [root]) + "\n}\n"


_CHILD = """
import sys, numpy as np
from hlopass import oracle
outs = oracle.compile(open(sys.argv[1]).read())([])
np.savez(sys.argv[2], *[np.asarray(o).view(f"u{np.asarray(o).dtype.itemsize}") for o in outs])
"""


def _xla_first_run(text: str) -> list[np.ndarray]:
    """XLA-CPU's outputs (as raw bits) for the first compilation in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        hlo, out = Path(tmp, "m.hlo"), Path(tmp, "out.npz")
        hlo.write_text(text)
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(hlo), str(out)],
                              capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        with np.load(out) as z:
            return [z[f"arr_{i}"] for i in range(len(z.files))]


@pytest.fixture(scope="module")
def both():
    text = _module()
    ours = hlopass.evaluate(hlopass.parse_hlo(text))
    return _xla_first_run(text), [np.asarray(o) for o in ours]


# f32 normal: XLA-CPU's vectorised f32 log/sin/cos (its own polynomial approximations, not
# libm, which the interpreter uses) round differently. Bound: each of the three within
# 2 ulp of the true value (so within 4 ulp of ours), the product sin*r then a+b*z add a
# rounding each; z = sin(v)*r with r <= sqrt(-2 ln 1e-7) < 5.7 and |sin| <= 1: an absolute
# error of 4 ulp(1) in sin/cos gives 5.7 * 2^-21, a relative 4 ulp in r gives 4 ulp(z),
# plus 2 ulp(z) of roundings. Measured: at most 4 ulp(z).
_F32_NORMAL = {"nf", "n0", "n3", "nl"}


def test_rng_matches_xla_cpu(both):
    xla, ours = both
    names = [d[0] for d in _DRAWS] + ["wacc"]
    for name, x, o in zip(names, xla, ours, strict=True):
        bits = o.reshape(-1).view(f"u{o.dtype.itemsize}")
        x = x.reshape(-1)
        if name not in _F32_NORMAL:
            assert np.array_equal(bits, x), (name, np.count_nonzero(bits != x))
            continue
        xv, ov = x.view(np.float32).astype(np.float64), o.reshape(-1).astype(np.float64)
        sigma = 2.0 if name in ("nf", "n0") else 1.0
        bound = 6 * np.spacing(np.abs(xv).astype(np.float32)) + sigma * 5.7 * 2.0**-21
        assert np.all(np.abs(xv - ov) <= bound), (name, np.max(np.abs(xv - ov) - bound))


def test_rng_f32_normal_mostly_exact(both):
    """Most f32 normal elements are bit-exact already (the others differ by the
    approximations above): a check that the key, counter and Box-Muller layout are XLA's."""
    xla, ours = both
    i = [d[0] for d in _DRAWS].index("nl")
    same = np.count_nonzero(ours[i].reshape(-1).view(np.uint32) == xla[i].reshape(-1))
    assert same > 0.7 * xla[i].size


def test_rng_second_evaluate_repeats_first_execution():
    text = _module()
    module = hlopass.parse_hlo(text)
    a, b = hlopass.evaluate(module), hlopass.evaluate(module)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.xfail(strict=True, reason="XLA's expander visited a `call`ed computation before "
                   "an earlier while body here (its computation order after the StableHLO "
                   "round trip is not reproduced): keys of rngs in called computations swap")  # fmt: skip
def test_rng_order_with_call_and_while():
    text = _module().replace(
        "ENTRY e {",
        """draw {
  dl = f32[] parameter(0)
  dh = f32[] constant(9)
  ROOT dr = f32[2,3] rng(dl, dh), distribution=rng_uniform
}

ENTRY e {""",
    )
    text = text.replace(
        "  ROOT out = (",
        "  cl = f32[] constant(4)\n"
        "  called = f32[2,3] call(cl), to_apply=draw\n  ROOT out = (f32[2,3], ",
    )
    text = text.replace(" tuple(uf,", " tuple(called, uf,")
    xla = _xla_first_run(text)
    ours = hlopass.evaluate(hlopass.parse_hlo(text))
    assert np.array_equal(np.asarray(ours[0]).reshape(-1).view(np.uint32), xla[0].reshape(-1))
    assert np.array_equal(np.asarray(ours[-1]).reshape(-1).view(np.uint32), xla[-1].reshape(-1))


def test_mt19937_64_is_the_cpp_engine():
    # the C++ standard fixes the 10000th output of a default-constructed mt19937_64
    assert mt19937_64(5489, 10000)[-1] == 9981545732273789042


@pytest.mark.parametrize("ty", ["s8", "u16", "pred"])
def test_rng_types_xla_cpu_cannot_expand_are_unsupported(ty):
    """XLA-CPU aborts compiling these (RngExpander: `Check failed: primitive_type == F16 ||
    primitive_type == BF16`, checked by hand for each type): we report them unsupported."""
    text = f"""HloModule r
ENTRY e {{
  a = {ty}[] constant(0)
  b = {ty}[] constant(1)
  ROOT r = {ty}[4] rng(a, b), distribution=rng_uniform
}}"""
    with pytest.raises(hlopass.UnsupportedOpError, match=f"rng of {ty}"):
        hlopass.evaluate(hlopass.parse_hlo(text))
