"""sine, cosine and tan of f32, f16 and bf16 as XLA-CPU computes them, bit for bit.

XLA-CPU calls the C library's `sinf`/`cosf`/`tanf` on every element (vector lane or scalar
remainder alike; narrow floats widened to f32), and the interpreter calls the same library
(hlopass/interpreter/xla_cpu_f32.py); numpy's own f32 versions differ in 5-17% of inputs.
Every expected value here is XLA-CPU's, executed in this run.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlopass
from hlopass.pipeline import run_pipeline

OPS = ("sine", "cosine", "tan")
NUMPY = {"sine": np.sin, "cosine": np.cos, "tan": np.tan}
# +-0, +-inf, NaN, denormals (the smallest, a mid one, the largest), the smallest normal,
# the largest finite, tiny, around pi/2 and pi, and huge arguments (range reduction)
_SPECIAL = np.array([0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-40, -1e-40,
                     1.1754942e-38, 1.17549435e-38, 3.4028235e38, -3.4028235e38, 1e-7, 0.5,
                     1, 2, np.pi / 2, np.pi, -np.pi, 1e5, 1e10, 105414350.0, 1e30],
                    np.float32)  # fmt: skip


def _f32_values() -> np.ndarray:
    rng = np.random.default_rng(13)
    n = 2048
    random_bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    wide = np.exp(rng.uniform(-90, 88, n)) * rng.choice([-1.0, 1.0], n)
    # each part in f32 on its own: a trip through f64 would quiet the signalling NaNs
    parts = [rng.uniform(-7, 7, n).astype(np.float32), wide.astype(np.float32), random_bits]
    return np.concatenate([_SPECIAL, *parts])


def _module(op: str, et: str, n: int) -> str:
    return (
        f"HloModule m\nENTRY e {{\n  p = {et}[{n}] parameter(0)\n  ROOT r = {et}[{n}] {op}(p)\n}}\n"
    )


def _differing(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Bits differ, NaN matching any NaN."""
    uint = {2: np.uint16, 4: np.uint32}[want.dtype.itemsize]
    got, want = np.asarray(got, want.dtype), np.asarray(want)
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    return (got.view(uint) != want.view(uint)) & ~nan


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size", [6160, 6165])  # all in full vector lanes (16 | 6160); a remainder
def test_f32_trig_matches_xla_cpu_bit_for_bit(xla, op, size):
    x = _f32_values()[:size]
    assert x.size == size >= 4096 + _SPECIAL.size
    text = _module(op, "f32", size)
    (want,) = xla.execute(text, [x])
    module = hlopass.parse_hlo(text)
    for mode in ("xla-cpu", "ieee"):  # libm underflows gradually itself: same in both modes
        (got,) = hlopass.evaluate(module, x, float_mode=mode)
        bad = np.flatnonzero(_differing(got, want))
        assert bad.size == 0, (mode, bad.size, x[bad[:5]], np.asarray(got)[bad[:5]], want[bad[:5]])
    # The test can fail: numpy's f32 function or the f64 value rounded to f32 differs from
    # XLA-CPU's on a share of these inputs. Which one depends on the CPU (numpy picks its
    # f32 kernels by instruction set: on an AMD EPYC Zen 3 (AVX2) its tan equals XLA-CPU's
    # bit for bit, while the rounded f64 tan differs on 2.5% of the inputs).
    with np.errstate(all="ignore"):
        others = (NUMPY[op](x), NUMPY[op](x.astype(np.float64)).astype(np.float32))
        assert max(np.count_nonzero(_differing(o, want)) for o in others) > 0.005 * size


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("et", ["f16", "bf16"])
def test_narrow_trig_matches_xla_cpu_on_every_value(xla, op, et):
    """All 65,536 bit patterns (denormals, infinities and NaNs included)."""
    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[et]
    x = np.arange(2**16, dtype=np.uint16).view(dt)
    text = _module(op, et, x.size)
    (want,) = xla.execute(text, [x])
    (got,) = hlopass.evaluate(hlopass.parse_hlo(text), x)
    bad = np.flatnonzero(_differing(got, want))
    assert bad.size == 0, (bad.size, x[bad[:5]], np.asarray(got)[bad[:5]], want[bad[:5]])


@pytest.mark.parametrize("op", OPS)
def test_f32_trig_folded_matches_xla_cpu(xla, op):
    """constant-folding bakes the interpreter's value into the program: the folded module,
    printed and run by XLA-CPU, gives XLA-CPU's value of the unfolded one."""
    x = _f32_values()[:1024]
    bits = ", ".join(str(int(b)) for b in x.view(np.int32))
    n = x.size
    text = (f"HloModule m\nENTRY e {{\n  c = s32[{n}] constant({{{bits}}})\n"
            f"  f = f32[{n}] bitcast-convert(c)\n  ROOT r = f32[{n}] {op}(f)\n}}\n")  # fmt: skip
    (want,) = xla.execute(text, [])
    module = hlopass.parse_hlo(text)
    run_pipeline(module, "constant-folding")
    folded = hlopass.print_hlo(module)
    assert f" {op}(" not in folded, folded[-300:]
    (got,) = xla.execute(folded, [])
    bad = np.flatnonzero(_differing(got, want))
    assert bad.size == 0, (bad.size, x[bad[:5]], np.asarray(got)[bad[:5]], want[bad[:5]])


@pytest.mark.parametrize("op", OPS)
def test_f64_trig_matches_xla_cpu_bit_for_bit(xla, op):
    """f64: XLA-CPU calls the C library's sin/cos/tan, and so does the interpreter (numpy's
    tan differs; its sin/cos are its own SIMD versions on AVX-512 machines)."""
    import jax

    jax.config.update("jax_enable_x64", True)  # f64 reaches XLA unchanged only in x64 mode
    rng = np.random.default_rng(64)
    n = 3000
    wide = np.exp(rng.uniform(-745, 709, n)) * rng.choice([-1.0, 1.0], n)
    special = np.array([0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e-310, 2.2e-308,
                        1.7976931348623157e308, 1e-9, np.pi / 2, np.pi, 1e22])  # fmt: skip
    x = np.concatenate([special, rng.uniform(-7, 7, n), wide])
    text = _module(op, "f64", x.size)
    (want,) = xla.execute(text, [x])
    (got,) = hlopass.evaluate(hlopass.parse_hlo(text), x)
    got, want = np.asarray(got), np.asarray(want)
    bad = np.flatnonzero(
        (got.view(np.uint64) != want.view(np.uint64)) & ~(np.isnan(got) & np.isnan(want))
    )
    assert bad.size == 0, (bad.size, x[bad[:5]], got[bad[:5]], want[bad[:5]])
