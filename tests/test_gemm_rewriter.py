"""`gemm-rewriter`: every section of its lit files (the guards of
`lit_tests/passes/gemm-rewriter.hlo`, the ports of `lit_tests/xla_ports/gemm_rewriter_test.hlo`)
keeps its values through the pass, with XLA's defaults and with cublasLt on: XLA:CPU runs the
module before and the module after with its cuBLAS calls written out by `tests/gpu_plain.py`
(from XLA's GemmBackendConfig, independently of the interpreter), and the interpreter runs the
calls themselves. Plus the pass's `changed` flag, and cuBLAS calls priced with their epilogue."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.execution.inputs import random_inputs
from hlopass.pipeline import run_pipeline
from tests.gpu_plain import plain_text

ROOT = Path(__file__).resolve().parents[1]
FILES = (
    ROOT / "lit_tests/passes/gemm-rewriter.hlo",
    ROOT / "lit_tests/xla_ports/gemm_rewriter_test.hlo",
)
RUNS = ("gemm-rewriter", "gemm-rewriter{enable-cublaslt=true}")


def _sections() -> list[tuple[str, str]]:
    out = []
    for path in FILES:
        if not path.is_file():
            continue
        for chunk in path.read_text().split("\n// -----\n"):
            head = next(ln for ln in chunk.splitlines() if ln.startswith("HloModule"))
            out.append((f"{path.stem}:{head.split()[1].rstrip(',')}", chunk))
    return out


SECTIONS = _sections()


def _tolerance(module) -> float:
    """Relative to the output's scale: f32 sums reordered; a fused bf16/f16 output (or a bias
    added before the bf16 rounding XLA's mixed-type fusion drops) one rounding of that type."""
    low = any(t in hlopass.print_hlo(module) for t in ("bf16[", "f16["))
    return 2e-2 if low else 1e-5


def _close(got, want, tol: float, what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g).astype(np.complex128), np.asarray(w).astype(np.complex128)
        assert g.shape == w.shape, f"{what} out{i}"
        scale = max(1.0, float(np.abs(w).max()) if w.size else 1.0)
        err = float(np.abs(g - w).max()) if w.size else 0.0
        assert err <= tol * scale, f"{what} out{i}: {err} > {tol} x {scale}"


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize(("name", "text"), SECTIONS, ids=[n for n, _ in SECTIONS])
def test_values_kept(name: str, text: str, run: str, xla) -> None:
    module = hlopass.parse_hlo(text)
    before = hlopass.print_hlo(module)
    args = random_inputs(module, 0)
    changed = run_pipeline(module, run, verify_each=True)
    after = hlopass.print_hlo(module)
    assert changed == (after != before), name
    if not changed:
        return
    ok, msg = xla.accepts(after)
    assert ok, f"XLA rejects {name} after {run}: {msg}"
    tol = _tolerance(module)
    import jax

    jax.config.update("jax_enable_x64", True)  # f64 inputs reach XLA as f64
    want = xla.execute(plain_text(before), list(args))  # a call in `before` too
    _close(xla.execute(plain_text(after), list(args)), want, tol, f"{name} {run} (XLA:CPU)")
    _close(hlopass.evaluate(hlopass.parse_hlo(after), *args), want, tol, f"{name} {run} (interp)")


def test_epilogue_priced() -> None:
    """A BIAS_GELU call counts the bias add and the GELU's elementwise work (XLA's
    convention: 1 per add, 8 flops and a tanh per element) on top of the GEMM's 2*m*n*k."""
    from hlopass.cost import estimate

    (chunk,) = [t for n, t in SECTIONS if n.endswith(":GeluWithAux")]
    module = hlopass.parse_hlo(chunk)
    run_pipeline(module, RUNS[1])
    rows = [k for k in estimate(module, "h100_sxm").kernels if k.kind == "gemm"]
    assert len(rows) == 1
    assert rows[0].flops == 2 * 16 * 16 * 32 + (1 + 8) * 16 * 16
    assert rows[0].transcendentals == 16 * 16


def test_old_style_config_priced() -> None:
    """The seeds' form of a call (a bare, escaped GemmBackendConfig, as in
    ../shared/corpus/seeds/000's `cublas-gemm.3`) is read too: its contracting dimension
    gives 2*m*n*k, plus one add per element for beta 1."""
    from hlopass.cost import estimate

    cfg = ('"{\\"alpha_real\\":1,\\"alpha_imag\\":0,\\"beta\\":1,\\"dot_dimension_numbers\\":'
           '{\\"lhs_contracting_dimensions\\":[\\"1\\"],\\"rhs_contracting_dimensions\\":[\\"0\\"],'
           '\\"lhs_batch_dimensions\\":[],\\"rhs_batch_dimensions\\":[]},\\"batch_size\\":\\"1\\"}"')  # fmt: skip
    module = hlopass.parse_hlo(f"""HloModule seed_form
ENTRY e {{
  a = f32[32,784] parameter(0)
  b = f32[784,128] parameter(1)
  c = f32[32,128] parameter(2)
  ROOT g = f32[32,128] custom-call(a, b, c), custom_call_target="__cublas$gemm", backend_config={cfg}
}}""")
    (row,) = [k for k in estimate(module, "h100_sxm").kernels if k.kind == "gemm"]
    assert row.flops == 2 * 32 * 128 * 784 + 32 * 128
