"""Helpers shared by the interpreter tests: compare hlopass.evaluate with XLA:CPU."""

from __future__ import annotations

import numpy as np

import hlopass


def assert_same(got, want, rtol=0.0, atol=0.0, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "iub" or (rtol == 0 and atol == 0):
        if got.dtype.kind in "fc" or got.dtype.kind == "V":
            g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
            w = want.astype(g.dtype)
            same = (g == w) | (np.isnan(g) & np.isnan(w))
            assert same.all(), f"{what}: {int((~same).sum())} elements differ\n{got}\n{want}"
        else:
            assert np.array_equal(got, want), f"{what}: {int((got != want).sum())} elements differ\n{got}\n{want}"
        return
    kind = np.complex128 if got.dtype.kind == "c" else np.float64
    np.testing.assert_allclose(got.astype(kind), want.astype(kind), rtol=rtol, atol=atol,
                               equal_nan=True, err_msg=what)  # fmt: skip


def check_against_xla(xla, text: str, *args, rtol=0.0, atol=0.0):
    """Run `text` on `args` with the interpreter and with XLA:CPU; assert equal results."""
    _enable_x64()
    module = hlopass.parse_hlo(text)
    got = hlopass.evaluate(module, *args)
    want = xla.execute(text, list(args))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        assert_same(g, w, rtol, atol, what=f"output {i}")
    return got


def _enable_x64() -> None:
    """64-bit inputs reach XLA unchanged only with jax's x64 mode on."""
    import jax

    jax.config.update("jax_enable_x64", True)
