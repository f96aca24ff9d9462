"""A multi-output fusion is priced as the one kernel XLA runs (issue 32, repro
`fusion_reduce_tanh_multi_output.hlo`).

A tanh read by a row reduction and by the module's output: XLA's H100 pipeline makes one
kernel of both (`input_reduce_tanh_fusion`, kInput, outputs reduce then tanh). In that
kernel the reduction's loop computes each tanh once, writes it as the side output and adds
it into the row sum, so the kernel reads x once (4 MiB), writes tanh (4 MiB) and the sums
(4 KiB): 8,392,704 bytes, what XLA's HloCostAnalysis counts for the fused module, and the
tanh's compute once. The model gets this from its own structure (a reduction hero's inputs
share the side outputs' utilisation, `hlopass.cost.kernel_analysis.utilizations`), before
the fix it priced the tanh twice and x read twice (12.59 MB), so the merge looked slower.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hlopass
from hlopass.cost import estimate
from hlopass.cost.kernel_analysis import utilizations
from hlopass.dialects.hlo import entry_computation
from hlopass.pipeline import run_pipeline

ROOT = Path(__file__).resolve().parent.parent
REPRO = ROOT.parent / "shared" / "repros" / "fusion_reduce_tanh_multi_output.hlo"
CORPUS = ROOT.parent / "shared" / "corpus" / "jax"
PIPELINE = "priority-fusion,multi-output-fusion"
FUSION_PIPELINE = (
    "call-inliner,algsimp,constant-folding,dce,cse,tree-reduction-rewriter,"
    "priority-fusion,multi-output-fusion,horizontal-fusion"
)
N = 1024
F32 = 4
FUSED_BYTES = N * N * F32 + N * N * F32 + N * F32  # read x, write tanh, write the sums

REPRO_TEXT = """HloModule mof
add_f32 {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT s = add(p0, p1)
}
ENTRY main {
  x = f32[1024,1024] parameter(0)
  th = tanh(x)
  zero = f32[] constant(0)
  r = reduce(th, zero), dimensions={1}, to_apply=add_f32
  ROOT out = tuple(r, th)
}
"""


def _repro() -> str:
    # the shared repro when present (the file), else the same module written out
    return REPRO.read_text() if REPRO.is_file() else REPRO_TEXT


def _kernels(text: str, pipeline: str) -> list:
    m = hlopass.parse_hlo(text, "repro.hlo")
    run_pipeline(m, pipeline)
    return estimate(m, "h100_sxm").kernels


def test_repro_is_the_shared_file() -> None:
    if REPRO.is_file():
        assert REPRO.read_text().split() == REPRO_TEXT.split()


def test_one_kernel_as_xla() -> None:
    m = hlopass.parse_hlo(_repro(), "repro.hlo")
    run_pipeline(m, PIPELINE)
    text = hlopass.print_hlo(m)
    fusions = re.findall(r"(?m)^  %(\S+) = (\(.*?\)) fusion\(%x\), kind=(\w+)", text)
    # XLA: %input_reduce_tanh_fusion = (f32[1024], f32[1024,1024]) fusion(x), kind=kInput
    assert fusions == [
        ("input_reduce_tanh_fusion", "(f32[1024]{0}, f32[1024,1024]{1,0})", "kInput")
    ]
    assert len(estimate(m, "h100_sxm").kernels) == 1


def test_fused_kernel_priced_once() -> None:
    unfused = _kernels(_repro(), "priority-fusion")
    fused = _kernels(_repro(), PIPELINE)
    assert [k.name for k in unfused] == ["th", "input_reduce_fusion"]
    (kernel,) = fused
    assert kernel.bytes_accessed == FUSED_BYTES
    # each tanh once: the fused kernel's transcendentals are the tanh kernel's alone
    tanh, reduce = unfused
    assert kernel.transcendentals == tanh.transcendentals == N * N
    assert kernel.flops == tanh.flops + reduce.flops
    # one launch saved, x's 4 MiB read once and tanh's 4 MiB never read back: faster than two
    assert tanh.bytes_accessed + reduce.bytes_accessed == FUSED_BYTES + N * N * F32
    assert kernel.time_us < tanh.time_us + reduce.time_us
    # compute-bound on the tanh: the fused kernel's compute is the tanh's plus the sums'
    assert kernel.compute_us == pytest.approx(tanh.compute_us + reduce.compute_us, rel=0.02)


def test_reduction_hero_shares_the_outputs_utilisation() -> None:
    m = hlopass.parse_hlo(REPRO_TEXT, "u.hlo")
    entry = entry_computation(m)
    th, r = (op for op in entry.instructions if op.opcode in ("tanh", "reduce"))
    x = th.operands[0].owner
    util = utilizations([th, r], [r, th])
    assert util[id(th)] == 1.0 and util[id(x)] == 1.0


def test_other_readers_keep_their_share() -> None:
    # must not fire: a reverse reads th at another index than the loop writes it, so th is
    # computed twice for the two outputs (XLA's utilisation: 2)
    text = """HloModule rev
ENTRY main {
  x = f32[1024,1024] parameter(0)
  th = f32[1024,1024] tanh(x)
  rv = f32[1024,1024] reverse(th), dimensions={1}
  ROOT out = (f32[1024,1024], f32[1024,1024]) tuple(rv, th)
}
"""
    m = hlopass.parse_hlo(text, "rev.hlo")
    entry = entry_computation(m)
    th, rv = (op for op in entry.instructions if op.opcode in ("tanh", "reverse"))
    assert utilizations([th, rv], [rv, th])[id(th)] == 2.0


@pytest.mark.skipif(not CORPUS.is_dir(), reason="needs ../shared/corpus")
def test_xla_h100_reduce_with_side_output_reproduced() -> None:
    # mlp_adam: XLA's H100 plan has %input_reduce_select_fusion = (f32[128], f32[32,128]),
    # kInput (the bias gradient's column sum with the select it reduces as a side output)
    xla = (CORPUS / "mlp_adam" / "xla_h100_optimized.hlo").read_text()
    want = re.search(r"%input_reduce_select_fusion = (\(.*?\)) fusion\(.*?kind=(\w+)", xla)
    assert want is not None
    m = hlopass.parse_hlo((CORPUS / "mlp_adam" / "before_optimizations.hlo").read_text(), "m")
    run_pipeline(m, FUSION_PIPELINE)
    ours = re.findall(r"%input_reduce_select_fusion = (\(.*?\)) fusion\(.*?kind=(\w+)",
                      hlopass.print_hlo(m))  # fmt: skip
    assert ours == [(want.group(1), want.group(2))]
