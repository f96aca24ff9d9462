"""tree-reduction-rewriter: split sizes as XLA's GPU TreeReductionRewriter computes them
(checked by hand and against the reductions in XLA's own H100 plan of cnn_train), and
outputs kept under the interpreter: exactly for max, within the derived error bound of
the program against XLA's reference outputs (io.npz) for sums."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hlopass.passes.tree_reduction_rewriter import split_params
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS
from tests.error_bound import assert_within_bound, program_bounds_or_none

PIPELINE = "call-inliner,algsimp,constant-folding,dce,cse,tree-reduction-rewriter"


def _programs() -> list[str]:
    if CORPUS is None:
        return []
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir())


def test_split_params_by_hand() -> None:
    # 8192: sqrt -> 90 (88 padding); 64 divides exactly -> k1 = 128, k2 = 64; a column
    # swaps them: [64, 128], as XLA's cnn_train plan reduces f32[64,128,16] -> f32[64,16].
    assert split_params(8192, is_row=False) == (64, 128)
    # 4099 (prime): 64 needs 61 padding, 50 and 41 need 1; 50 comes first -> 82 x 50, swapped.
    assert split_params(4099, is_row=False) == (50, 82)
    # a row of 20000: 125 divides (k1 = 160); k2 = 125 is odd and n even -> swapped.
    assert split_params(20000, is_row=True) == (125, 160)


_REDUCE = re.compile(r"= (f32\[[\d,]*\])\S* reduce\(")


def test_cnn_train_splits_like_xla(corpus: Path) -> None:
    """Our [8192,16] column sums become the [64,16] partial sums XLA's H100 plan has."""
    d = corpus / "jax" / "cnn_train"
    m = parse_hlo((d / "before_optimizations.hlo").read_text(), "cnn_train")
    run_pipeline(m, PIPELINE)
    ours = Counter(_REDUCE.findall(print_hlo(m)))
    xla = Counter(_REDUCE.findall((d / "xla_h100_optimized.hlo").read_text()))
    assert ours["f32[64,16]"] == xla["f32[64,16]"] > 0, (ours, xla)


@pytest.mark.parametrize("program", _programs() or ["<no corpus>"])
def test_outputs_kept(program: str, corpus: Path, xla) -> None:
    import hlopass.interpreter as interp

    d = corpus / "jax" / program
    m = parse_hlo((d / "before_optimizations.hlo").read_text(), program)
    run_pipeline(m, PIPELINE, verify_each=True)
    text = print_hlo(m)
    ok, msg = xla.accepts(text)
    assert ok, f"XLA rejects {program} after the rewrite: {msg}"
    io = np.load(d / "io.npz")
    args = [io[f"in{i}"] for i in range(sum(k.startswith("in") for k in io.files))]
    want = [io[f"out{i}"] for i in range(sum(k.startswith("out") for k in io.files))]
    got = interp.evaluate(parse_hlo(text, program), *args)
    bounds = program_bounds_or_none(d)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype.kind in "biu" or bounds is None:
            # integers exactly; a program without a derived bound must come out unchanged
            before = interp.evaluate(parse_hlo((d / "before_optimizations.hlo").read_text()), *args)
            np.testing.assert_array_equal(g, np.asarray(before[i]), err_msg=f"{program} out{i}")
            continue
        assert_within_bound(g, w, bounds[i], what=f"{program} out{i} vs XLA")


_MAX = """HloModule column_padded
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY column_padded {
  x = f32[4099,8] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[8] reduce(x, z), dimensions={0}, to_apply=mx
}
"""


def test_padded_max_exact(xla) -> None:
    """max is exact in any order: the split (with -inf padding) gives the same bits,
    and XLA-CPU's value of the original agrees."""
    import hlopass.interpreter as interp

    x = np.random.default_rng(0).standard_normal((4099, 8)).astype(np.float32)
    m = parse_hlo(_MAX, "t")
    run_pipeline(m, "tree-reduction-rewriter", verify_each=True)
    text = print_hlo(m)
    assert "f32[50,82,8]" in text
    ok, msg = xla.accepts(text)
    assert ok, msg
    (got,) = interp.evaluate(parse_hlo(text, "t"), x)
    np.testing.assert_array_equal(np.asarray(got), x.max(axis=0))
