"""Named pipelines (`-p gpu{device=...}`): the expansion, its errors, the CLI's
`--print-pipeline`, and the values of every corpus JAX program through `-p gpu` (interpreter,
and XLA:CPU on the module lowered by `gpu_plain.plain_text`: cuBLAS calls written out as
dots and their epilogues, then `xla_friendly`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hlopass.driver.named_pipelines import GPU
from hlopass.pipeline import PipelineError, expanded_pipeline, parse_pass_pipeline, run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS
from tests.corpus_io import program_io, xla_cpu_outputs
from tests.error_bound import assert_within_bound, program_bounds_or_none
from tests.gpu_plain import plain_text

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_expands_to_its_stages_in_order_with_the_device() -> None:
    text = expanded_pipeline("gpu{device=a100_sxm_80},dce")
    names = [p.name for p in parse_pass_pipeline(text)]
    # XLA's GpuCompiler order: simplification, layout, post-layout, fusion, collectives
    order = ["call-inliner", "batched-gather-scatter-normalizer", "dot-merger",
             "layout-assignment", "tree-reduction-rewriter", "priority-fusion",
             "multi-output-fusion", "async-collective-creator",
             "latency-hiding-scheduler"]  # fmt: skip
    positions = [names.index(n) for n in order]
    assert positions == sorted(positions), names
    assert names[-1] == "dce"  # what follows the named pipeline stays
    assert "horizontal-fusion" not in names  # XLA's GPU compiler dropped it (July 2025)
    assert "priority-fusion{device=a100_sxm_80}" in text
    assert "{device}" not in text and "h100_sxm" not in text
    assert [p.name for p in parse_pass_pipeline("gpu")] == names[:-1]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpu{devic=h100_sxm}", "pipeline 'gpu' has no option 'devic'"),
        ("gpu{device=h900}", "pipeline 'gpu': unknown device 'h900'"),
    ],
)
def test_gpu_bad_option_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(PipelineError) as e:
        parse_pass_pipeline(spec)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_print_pipeline_and_help_pass_on_the_command_line() -> None:
    exe = [sys.executable, "-m", "hlopass.commands.cli"]
    r = subprocess.run([*exe, "--print-pipeline", "-p", "gpu"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip()
    assert "\n" not in line and line == expanded_pipeline("gpu")
    r = subprocess.run([*exe, "--print-pipeline", "-p", "gpu{device=x}"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)  # fmt: skip
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr and "unknown device 'x'" in r.stderr
    r = subprocess.run([*exe, "--help-pass", "gpu"], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0 and "stages" in r.stdout
    for missing in GPU.missing:  # what is left out is said, not hidden
        assert missing[:20] in r.stdout


UNSEEN = ROOT / "benchmarks" / "fusion_programs"


def _programs() -> list[str]:
    """The corpus's JAX programs and the unseen ones of benchmarks/fusion_programs."""
    unseen = sorted(f"unseen/{p.name}" for p in UNSEEN.iterdir() if (p / "io.npz").is_file())
    if CORPUS is None:
        return unseen
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir()) + unseen


def _folder(program: str) -> Path:
    if program.startswith("unseen/"):
        return UNSEEN / program.split("/", 1)[1]
    assert CORPUS is not None
    return CORPUS / "jax" / program


def _check(program: str, got: list, original: list, want: list, what: str) -> None:
    """Integers exact; floats within the program's derived bound where it has one, else
    no further from XLA's outputs than the interpreter on the unoptimized module is (plus
    one part in 10^6 of the output's scale: the reordering a simplification may do)."""
    assert len(got) == len(want), what
    bounds = program_bounds_or_none(_folder(program))
    for i, (g, o, w) in enumerate(zip(got, original, want, strict=True)):
        g, o, w = np.asarray(g), np.asarray(o), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what} out{i}"
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} out{i}")
        elif bounds is not None:
            assert_within_bound(g, w, bounds[i], what=f"{what} out{i}")
        elif g.size:
            gf, of, wf = (x.astype(np.complex128) for x in (g, o, w))
            err, err0 = np.nanmax(np.abs(gf - wf)), np.nanmax(np.abs(of - wf))
            assert err <= err0 + 1e-6 * np.nanmax(np.abs(wf)), f"{what} out{i}: {err} ({err0})"


@pytest.mark.parametrize("program", _programs())
def test_gpu_pipeline_keeps_io_values(program: str, xla, tmp_path: Path) -> None:
    import hlopass.interpreter as interp

    d = _folder(program)
    source = (d / "before_optimizations.hlo").read_text()
    module = parse_hlo(source, program)
    run_pipeline(module, "gpu", verify_each=True)
    text = print_hlo(module)
    ok, msg = xla.accepts(text)
    assert ok, f"XLA rejects {program} after -p gpu: {msg}"
    args, want = program_io(d)
    original = interp.evaluate(parse_hlo(source, program), *args)
    _check(program, interp.evaluate(parse_hlo(text, program), *args), original, want,
           f"{program} -p gpu (interpreter)")  # fmt: skip
    got = xla_cpu_outputs(plain_text(text), d, tmp_path, f"{program} after -p gpu (lowered)")
    _check(program, got, original, want, f"{program} -p gpu (XLA:CPU)")
