"""Values of the TopK ports (lit_tests/xla_ports/topk_rewriter_test.hlo and
topk_specializer_test.hlo): each case small enough for the interpreter runs before and after
its passes (topk-rewriter alone, the rewriter + decomposer round trip, the decomposer
alone), bit for bit, and XLA:CPU on each result agrees; plus the fixed outputs XLA's
SanityCheckOutput and DecomposerStability assert."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hlopass.dialects.hlo import computations
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.interp_util import assert_same, xla_friendly

PORTS = Path(__file__).resolve().parent.parent / "lit_tests" / "xla_ports"
FILES = ("topk_rewriter_test.hlo", "topk_specializer_test.hlo")
LIMIT = 1 << 12
"""Elements of input the interpreter runs a case on (the 8 x 2048 and larger ones are left to lit:
the interpreter sorts through the comparator, too slowly for them)."""
PIPELINES = (
    "topk-rewriter,dce",
    "topk-rewriter,dce,topk-decomposer,algsimp,dce",
    "dce,topk-decomposer,dce",
    "topk-rewriter,topk-specializer,topk-decomposer,dce",
)


def _sections() -> list[tuple[str, str]]:
    out = []
    for name in FILES:
        path = PORTS / name
        if not path.is_file():
            continue
        for text in path.read_text().split("// -----"):
            label = next(
                (ln.split()[1] for ln in text.splitlines() if ln.startswith("HloModule ")), ""
            )
            if label:
                out.append((label, text))
    return out


def _params(text: str):
    module = parse_hlo(text)
    entry = next(c for c in computations(module) if c.is_entry)
    return sorted(entry.parameters(), key=lambda p: p.attr("number"))


SECTIONS = [
    (label, text)
    for label, text in _sections()
    if sum(int(np.prod(p.shape.dims)) for p in _params(text)) <= LIMIT
]


def _args(text: str) -> list[np.ndarray]:
    """Distinct values (a permutation) for unstable sorts, few-valued ties for stable ones."""
    rng = np.random.default_rng(1)
    ties = "is_stable = false" not in text and "is_stable=false" not in text
    out = []
    for p in _params(text):
        n = int(np.prod(p.shape.dims))
        flat = rng.integers(-4, 5, size=n) if ties else rng.permutation(n) - n // 2
        out.append(flat.reshape(p.shape.dims).astype(np.float32))  # f32 cases only
    return out


@pytest.mark.parametrize(("label", "text"), SECTIONS, ids=[s[0] for s in SECTIONS])
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_port_keeps_values(label: str, text: str, pipeline: str, xla) -> None:
    import hlopass.interpreter as interp

    if any(p.shape.element_type == "bf16" for p in _params(text)):
        pytest.skip("bf16 inputs: covered by tests/test_topk_passes.py's f32 cases")
    args = _args(text)
    want = interp.evaluate(parse_hlo(text), *args)
    module = parse_hlo(text)
    run_pipeline(module, pipeline, verify_each=True)
    out = print_hlo(module)
    for g, w in zip(interp.evaluate(parse_hlo(out), *args), want, strict=True):
        assert_same(g, w, what=f"{label} {pipeline} (interpreter)")
    for g, w in zip(xla.execute(xla_friendly(out), args), want, strict=True):
        assert_same(g, w, what=f"{label} {pipeline} (XLA:CPU)")


def _case(label: str) -> str:
    return next(text for name, text in _sections() if name == label)


def test_sanity_check_output() -> None:
    """XLA's SanityCheckOutput: 80000..81233 keeps 81233..81229, before and after."""
    import hlopass.interpreter as interp

    text = _case("SanityCheckOutput")
    x = np.arange(80000, 80000 + 1234, dtype=np.float32)
    for pipeline in ("dce", "topk-rewriter,dce", "topk-rewriter,topk-decomposer,dce"):
        module = parse_hlo(text)
        run_pipeline(module, pipeline)
        values = interp.evaluate(parse_hlo(print_hlo(module)), x)[0]
        assert np.array_equal(values, np.array([81233, 81232, 81231, 81230, 81229], np.float32))


def test_decomposer_stability() -> None:
    """XLA's DecomposerStability: 1234 equal keys keep indices 0..4 through the round trip."""
    import hlopass.interpreter as interp

    module = parse_hlo(_case("DecomposerStability"))
    run_pipeline(module, "topk-rewriter,topk-decomposer,algsimp,dce")
    values, indices = interp.evaluate(parse_hlo(print_hlo(module)))
    assert np.array_equal(indices, np.arange(5, dtype=np.int32))
    assert np.array_equal(values, np.full(5, 42, np.float32))


_SPECIALIZER_CASE = """HloModule m

compare {
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  t = pred[] constant(true)
  bt = pred[] broadcast(t), dimensions={}
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  gt = pred[] compare(a, b), direction=GT, type=TOTALORDER
  ROOT r = pred[] select(bt, gt, bt)
}

ENTRY top_k {
  arg = DT[B,N] parameter(0)
  ROOT result = (DT[B,K], s32[B,K]) custom-call(arg), custom_call_target="TopK", to_apply=compare
}
"""
COMBINATIONS = [(n, k, b, dt) for n in (1, 8, 12, 32) for k in (1, 2, 4, 8, 16, 7, 12)
                for b in (1, 16, 32, 64, 128) for dt in ("f32", "bf16")]  # fmt: skip


def _specializer_text(n_kb: int, k: int, batch: int, dtype: str) -> str:
    text = _SPECIALIZER_CASE.replace("DT", dtype).replace("B,", f"{batch},")
    return text.replace("N]", f"{n_kb * 1024}]").replace("K]", f"{k}]")


def test_specializer_fires_on_every_xla_combination() -> None:
    """XLA's TopkTest/ProducesCorrectResult expects a change for all 280 combinations."""
    missed = []
    for combo in COMBINATIONS:
        module = parse_hlo(_specializer_text(*combo))
        run_pipeline(module, "topk-specializer")
        if "__gpu$TopK" not in print_hlo(module):
            missed.append(combo)
    assert not missed


@pytest.mark.parametrize("k", [1, 2, 4, 8, 16, 7, 12])
def test_specialized_topk_equals_sort_and_slice(k: int, xla) -> None:
    """ProducesCorrectResult's comparison, for n = 1 KiB, batch 1, f32: the `__gpu$TopK`
    module against its decomposition into sort + slice (interpreter), and XLA:CPU."""
    import hlopass.interpreter as interp

    module = parse_hlo(_specializer_text(1, k, 1, "f32"))
    run_pipeline(module, "topk-specializer")
    kernel = print_hlo(module)
    reference = parse_hlo(kernel.replace('"__gpu$TopK"', '"TopK"'))
    run_pipeline(reference, "topk-decomposer,algsimp,dce")
    x = np.random.default_rng(k).integers(-20, 20, size=(1, 1024)).astype(np.float32)
    got = interp.evaluate(parse_hlo(kernel), x)
    for g, w in zip(got, interp.evaluate(parse_hlo(print_hlo(reference)), x), strict=True):
        assert_same(g, w, what=f"k={k} (interpreter)")
    for g, w in zip(xla.execute(xla_friendly(kernel), [x]), got, strict=True):
        assert_same(g, w, what=f"k={k} (XLA:CPU)")
