"""GPU-optimized modules under the interpreter (library calls, Triton and nested gemm
fusions, every fusion kind): each `jax/*/xla_h100_optimized.hlo` against XLA:CPU's recorded
outputs in io.npz, and seed 000 (an MNIST Adam step with cuBLAS gemms, no reference outputs)
against XLA:CPU running the same module with its library calls written as plain HLO.
Seed 001 (BERT, minutes in the interpreter) runs in benchmarks/gpu_optimized_exec.py.
Tolerances: tests/gpu_tolerance.py (derived from the computation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hlopass
from tests.conftest import CORPUS
from tests.gpu_plain import plain_text, seed_inputs
from tests.gpu_tolerance import assert_outputs_close
from tests.interp_util import xla_execute_many

_PROGRAMS = sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir()) if CORPUS else []
SEED_000 = "seeds/000_887393ea171d6a40.hlo"


def _io(folder: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    with np.load(folder / "io.npz") as d:
        ins = [d[f"in{i}"] for i in range(sum(k.startswith("in") for k in d.files))]
        outs = [d[f"out{i}"] for i in range(sum(k.startswith("out") for k in d.files))]
    return ins, outs


@pytest.mark.parametrize("program", _PROGRAMS or ["<no corpus>"])
def test_h100_module_matches_recorded_outputs(corpus: Path, program: str) -> None:
    path = corpus / "jax" / program / "xla_h100_optimized.hlo"
    module = hlopass.parse_hlo(path.read_text(), str(path))
    ins, want = _io(path.parent)
    got = hlopass.evaluate(module, *ins)
    assert_outputs_close(module, ins, got, want, f"{program} (H100 plan)")


def test_seed_000_matches_xla_on_plain_form(corpus: Path, xla) -> None:
    path = corpus / SEED_000
    text = path.read_text()
    module = hlopass.parse_hlo(text, str(path))
    args = seed_inputs(module, 0)
    got = hlopass.evaluate(module, *args)
    (result,) = xla_execute_many([(plain_text(text), args)])
    assert "outputs" in result, f"XLA:CPU on the plain seed 000: {result}"
    want = result["outputs"]
    # the inputs were chosen so that the step is finite: a NaN would hide differences
    assert all(np.isfinite(w.astype(np.float64)).all() for w in want if w.dtype.kind == "f")
    assert_outputs_close(module, args, got, want, "seed 000")
