"""A corpus program's `io.npz` and XLA:CPU runs of a module on its inputs, shared by the
tests that hold a pass's output to XLA's reference values (fusion, GEMM fusion, `-p gpu`).

XLA:CPU runs in a child process: it may abort on a module, and an abort must be a test
failure, not the end of the test session."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.error_bound import assert_within_bound, program_bounds_or_none

ROOT = Path(__file__).resolve().parents[1]

XLA_CHILD = r"""
import pickle, sys
import numpy as np
from hlopass.execution import oracle
io = np.load(sys.argv[2])
args = [io[f"in{i}"] for i in range(sum(1 for k in io.files if k.startswith("in")))]
outs = oracle.execute(open(sys.argv[1]).read(), args)
pickle.dump([np.asarray(o) for o in outs], open(sys.argv[3], "wb"))
"""
"""The child: `python -c XLA_CHILD module.hlo io.npz outs.pkl`."""


def program_io(folder: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The program's inputs `in0..` and XLA:CPU's reference outputs `out0..`."""
    io = np.load(folder / "io.npz")
    n_in = sum(1 for k in io.files if k.startswith("in"))
    n_out = sum(1 for k in io.files if k.startswith("out"))
    return [io[f"in{i}"] for i in range(n_in)], [io[f"out{i}"] for i in range(n_out)]


def xla_cpu_outputs(text: str, folder: Path, tmp_path: Path, what: str) -> list[np.ndarray]:
    """XLA:CPU's outputs of module `text` on `folder`'s inputs; a non-zero exit fails."""
    src, res = tmp_path / "module.hlo", tmp_path / "outs.pkl"
    src.write_text(text)
    r = subprocess.run([sys.executable, "-c", XLA_CHILD, str(src), str(folder / "io.npz"),
                        str(res)], capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    last = (r.stderr.strip().splitlines() or ["(no message)"])[-1][:200]
    assert r.returncode == 0, f"XLA:CPU failed on {what} (rc {r.returncode}): {last}"
    return pickle.loads(res.read_bytes())


def fallback_tolerance(dtype: np.dtype) -> tuple[float, float]:
    """(rtol, atol) for a program the error analysis has no bound for
    (`tests.test_interpreter.NO_BOUND_YET`, empty today)."""
    name = str(dtype)
    if name in ("bfloat16", "float16") or "float8" in name:
        return 5e-2, 5e-2
    if name in ("float32", "complex64"):
        return 1e-4, 1e-5
    return 1e-9, 0.0


def assert_matches_io(got: list, folder: Path, what: str) -> None:
    """`got` against the program's reference outputs: integers exactly, floats within the
    program's derived error bound."""
    _, want = program_io(folder)
    assert len(got) == len(want), what
    bounds = program_bounds_or_none(folder)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} out{i}")
        elif bounds is not None:
            assert_within_bound(g, w, bounds[i], what=f"{what} out{i}")
        else:
            rtol, atol = fallback_tolerance(g.dtype)
            np.testing.assert_allclose(g.astype(np.complex128), w.astype(np.complex128),
                                       rtol=rtol, atol=atol, equal_nan=True)  # fmt: skip


def assert_bitwise(got: list, want: list, what: str) -> None:
    """The same outputs, bit for bit."""
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what} out{i}"
        np.testing.assert_array_equal(
            g.reshape(-1).view(np.uint8),
            w.reshape(-1).view(np.uint8),
            err_msg=f"{what} out{i} (bits)",
        )
