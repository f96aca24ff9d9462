"""while-loop-unroller: on every corpus program, unrolling changes no output bit under the
interpreter (the unrolled copies run the same instructions in the same order), and XLA
accepts the result; the loops it unrolls are those with a known trip count within XLA's
WhileLoopUnroller limits (rng_bits' two threefry loops of 5 rounds, rnn_scan's 10 steps)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS

BASE = "call-inliner,algsimp,constant-folding,dce,cse"


def _programs() -> list[str]:
    if CORPUS is None:
        return []
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir())


def _bits(values: list) -> list[bytes]:
    return [np.ascontiguousarray(np.asarray(v)).tobytes() for v in values]


@pytest.mark.parametrize("program", _programs() or ["<no corpus>"])
def test_outputs_bit_identical(program: str, corpus: Path, xla) -> None:
    import hlopass.interpreter as interp

    d = corpus / "jax" / program
    text = (d / "before_optimizations.hlo").read_text()
    before, after = parse_hlo(text, program), parse_hlo(text, program)
    run_pipeline(before, BASE)
    run_pipeline(after, "while-loop-unroller," + BASE, verify_each=True)
    out = print_hlo(after)
    ok, msg = xla.accepts(out)
    assert ok, f"XLA rejects {program} after unrolling: {msg}"
    io = np.load(d / "io.npz")
    args = [io[f"in{i}"] for i in range(sum(k.startswith("in") for k in io.files))]
    want = interp.evaluate(before, *args)
    got = interp.evaluate(parse_hlo(out, program), *args)
    assert _bits(got) == _bits(want), f"{program}: outputs differ after unrolling"
    loops_before = " while(" in print_hlo(before)
    if program in ("rng_bits", "rnn_scan"):
        assert loops_before and " while(" not in out, f"{program}: loop not unrolled"
