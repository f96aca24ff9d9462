"""`softmax-rewriter-triton` on the port of XLA's softmax_rewriter_triton_test.cc
(`lit_tests/passes/fusion/softmax_rewriter_triton_xla.hlo`), on our guard cases and on the
corpus: the pass changes a module exactly when XLA's test says XLA's does; a fused module
computes what the original did, bit for bit, in the interpreter (the fusion holds the same
instructions on the same operands); XLA's parser reads it as it is, and XLA:CPU, once the
fusions are inlined (`tests.interp_util.xla_friendly`), gives the same bits as on the
original (the same instructions again) and the corpus' reference outputs; the cost model
prices a fusion as one kernel reading its input once.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import hlopass
from hlopass.cost import estimate, get_device
from hlopass.cost.model import kernel_time, kernel_work
from hlopass.dialects.hlo import computations, entry_computation
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import parse_pass_pipeline, run_pipeline
from hlopass.text.xdsl_io import context
from tests.conftest import CORPUS
from tests.corpus_io import program_io
from tests.error_bound import assert_within_bound, program_bounds_or_none
from tests.interp_util import xla_execute_many, xla_friendly

LIT = Path(__file__).resolve().parent.parent / "lit_tests" / "passes" / "fusion"
PORT = LIT / "softmax_rewriter_triton_xla.hlo"
GUARDS = LIT / "softmax_rewriter_triton.hlo"
PASS = "softmax-rewriter-triton"
PROFITABLE = "softmax-rewriter-triton{only-fuse-if-profitable=true}"
MAX_ELEMENTS = 1 << 21
"""Cases with a larger array are left out of the value checks (CPU time); lit checks them."""


def _sections(path: Path) -> list[tuple[str, str, bool]]:
    """(name, module text, changed) per section headed `// XLA: <name>:` or `// CASE:`."""
    out = []
    for chunk in path.read_text().split("\n// -----\n"):
        head = re.search(r"(?m)^// (?:XLA|CASE): (\w+):", chunk)
        changed = re.search(r"(?m)^// (?:XLA-)?CHANGED: (true|false)$", chunk)
        assert head and changed, f"a section of {path.name} without its header"
        out.append((head.group(1), chunk, changed.group(1) == "true"))
    return out


CASES = _sections(PORT)
OWN = _sections(GUARDS)
ALL = CASES + OWN


def _run(text: str, pipeline: str = PASS) -> tuple[ModuleOp, ModuleOp, bool]:
    before = hlopass.parse_hlo(text, "case.hlo")
    after = hlopass.parse_hlo(text, "case.hlo")
    changed = False
    for p in parse_pass_pipeline(pipeline):
        changed |= p.run(context(), after)
    return before, after, changed


def test_every_case_is_collected() -> None:
    assert len(CASES) == 37  # the TEST_Fs of softmax_rewriter_triton_test.cc but two (README)


@pytest.mark.parametrize("name,text,want", ALL, ids=[c[0] for c in ALL])
def test_changed_as_xla_says(name, text, want) -> None:
    before, after, changed = _run(text)
    assert changed == want, f"{name}: XLA's Run returns {want}"
    assert changed == (hlopass.print_hlo(before) != hlopass.print_hlo(after))
    out = hlopass.print_hlo(after)
    assert hlopass.print_hlo(hlopass.parse_hlo(out)) == out, "not byte-stable through a round trip"
    if changed:  # every fusion made carries XLA's Triton config
        for op in entry_computation(after).instructions:
            if op.opcode == "fusion":
                assert op.attr("kind") == "kCustom" and '"kind":"__triton"' in op.attr(
                    "backend_config"
                )


def test_profitability_check_refuses_very_long_rows() -> None:
    """XLA's DoNotFuseNormalizationWithVeryLongRowsIfProfitabilityCheckIsEnabled: a row of
    2^18 f32 does not fit a block's registers (XLA's indexing cost model: never finishes)."""
    text = next(t for n, t, _ in CASES if n.startswith("DoNotFuseNormalizationWithVeryLong"))
    assert _run(text, PASS)[2] and not _run(text, PROFITABLE)[2]
    moderate = next(t for n, t, _ in CASES if n == "CanFuseSingleNormalizationF32")
    assert _run(moderate, PROFITABLE)[2], "a 125-element row is cheaper fused"


def _small(text: str) -> bool:
    for dims in re.findall(r"\[([0-9,]+)\]", text):
        if int(np.prod([int(d) for d in dims.split(",")])) > MAX_ELEMENTS:
            return False
    return True


def _args(module, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    args = []
    for p in entry_computation(module).parameters():
        shape = p.shape
        assert isinstance(shape, ArrayShape)
        values = rng.standard_normal(size=shape.dims) * 3
        args.append(np.asarray(values).astype(numpy_dtype(shape.element_type)))
    return args


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8)


FUSED = [(n, t) for n, t, changed in ALL if changed and _small(t)]


@cache
def _fused() -> dict[str, tuple[list[np.ndarray], str, str]]:
    out = {}
    for name, text in FUSED:
        before, after, _ = _run(text)
        out[name] = (_args(before, 7), hlopass.print_hlo(before), hlopass.print_hlo(after))
    return out


@pytest.mark.parametrize("name,text", FUSED, ids=[f[0] for f in FUSED])
def test_interpreter_values_kept(name, text) -> None:
    args, before_text, after_text = _fused()[name]
    want = hlopass.evaluate(hlopass.parse_hlo(before_text), *args)
    got = hlopass.evaluate(hlopass.parse_hlo(after_text), *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.array_equal(_bits(g), _bits(w)), f"{name} output {k}\n{after_text}"


@cache
def _xla_results() -> list[dict]:
    jobs = []
    for name, _ in FUSED:
        args, before_text, after_text = _fused()[name]
        jobs += [(xla_friendly(before_text), args), (xla_friendly(after_text), args)]
    return xla_execute_many(jobs, timeout=600)


@pytest.mark.parametrize("name,text", FUSED, ids=[f[0] for f in FUSED])
def test_xla_reads_and_runs_our_output(name, text, xla) -> None:
    args, _, after_text = _fused()[name]
    ok, msg = xla.accepts(after_text)
    assert ok, f"XLA's parser rejects our {name}: {msg}"
    i = [f[0] for f in FUSED].index(name)
    want, got = _xla_results()[2 * i], _xla_results()[2 * i + 1]
    assert "outputs" in want, f"XLA-CPU cannot run the input of {name}: {want}"
    assert "outputs" in got, f"XLA-CPU cannot run our output of {name}: {got}"
    for k, (g, w) in enumerate(zip(got["outputs"], want["outputs"], strict=True)):
        assert np.array_equal(_bits(g), _bits(w)), f"{name} output {k}: XLA before vs after"


# --- the cost model ------------------------------------------------------------------------

ROWS = """HloModule rows
max_c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[4096,1024]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  r = f32[4096]{0} reduce(x, ninf), dimensions={1}, to_apply=max_c
  b = f32[4096,1024]{1,0} broadcast(r), dimensions={0}
  ROOT s = f32[4096,1024]{1,0} subtract(x, b)
}
"""


def test_fusion_priced_as_one_kernel_below_the_unfused_plan() -> None:
    """x - max(x) over 4096 rows of 1024 f32 on an H100: one kernel that reads x once
    (16 MiB) and writes the result once, cheaper than priority fusion's two kernels."""
    m = hlopass.parse_hlo(ROWS)
    assert run_pipeline(m, PASS)
    comps = {c.comp_name: c for c in computations(m)}
    (fusion,) = [op for op in entry_computation(m).instructions if op.opcode == "fusion"]
    dev = get_device("h100_sxm")
    w = kernel_work(fusion, comps, dev=dev)
    assert w.kind == "triton"
    assert w.bytes_read == 4096 * 1024 * 4 and w.bytes_written == 4096 * 1024 * 4
    fused = kernel_time(w, dev).time_us
    assert estimate(m, dev).time_us == pytest.approx(fused)
    unfused = hlopass.parse_hlo(ROWS)
    run_pipeline(unfused, "tree-reduction-rewriter,priority-fusion")
    plan = estimate(unfused, dev)
    assert len(plan.kernels) == 2 and fused < plan.time_us


# --- the corpus ----------------------------------------------------------------------------

SIMPLIFY = "algsimp,constant-folding,dce,cse"
PIPELINES = (PASS, f"{PASS},priority-fusion")


def _programs() -> list[str]:
    if CORPUS is None:
        return []
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir())


@cache
def _corpus_run(program: str, pipeline: str) -> tuple[str, str, str]:
    """(simplified text, the simplified text through `pipeline`, the same before the pass)."""
    d = CORPUS / "jax" / program  # type: ignore[operator]
    m = hlopass.parse_hlo((d / "before_optimizations.hlo").read_text(), program)
    run_pipeline(m, SIMPLIFY)
    base = hlopass.print_hlo(m)
    without = hlopass.parse_hlo(base)
    rest = pipeline.replace(PASS, "").strip(",")
    if rest:
        run_pipeline(without, rest)
    run_pipeline(m, pipeline, verify_each=True)
    return base, hlopass.print_hlo(m), hlopass.print_hlo(without)


RUNS = [(p, q) for p in _programs() for q in PIPELINES] or [("<no corpus>", PASS)]
TRITON = '"kind":"__triton"'
"""What a generic Triton fusion's backend config says (priority fusion renames the fusions it
grows `fusion`, as XLA's does)."""


@pytest.mark.parametrize("program,pipeline", RUNS)
def test_corpus_values_kept_in_the_interpreter(program, pipeline, corpus) -> None:
    base, out, _ = _corpus_run(program, pipeline)
    args, _ = program_io(corpus / "jax" / program)
    again = hlopass.print_hlo(hlopass.parse_hlo(out))
    # (the second print: the first keeps the module's computation order, which dce leaves
    # unsorted on some programs, with or without this pass)
    assert hlopass.print_hlo(hlopass.parse_hlo(again)) == again
    want = hlopass.evaluate(hlopass.parse_hlo(base), *args)
    got = hlopass.evaluate(hlopass.parse_hlo(out), *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert np.array_equal(_bits(g), _bits(w)), f"{program} out{k} after {pipeline}"


def _changed_runs() -> list[tuple[str, str]]:
    return [(p, q) for p, q in RUNS if p != "<no corpus>" and TRITON in _corpus_run(p, q)[1]]


@cache
def _corpus_xla() -> dict[tuple[str, str], dict]:
    jobs, keys = [], []
    for program, pipeline in _changed_runs():
        args, _ = program_io(CORPUS / "jax" / program)  # type: ignore[operator]
        jobs.append((xla_friendly(_corpus_run(program, pipeline)[1]), args))
        keys.append((program, pipeline))
    return dict(zip(keys, xla_execute_many(jobs, timeout=900), strict=True))


def test_corpus_programs_with_normalizations_are_fused(corpus) -> None:
    """The three programs with softmaxes or layer norms get Triton fusions; the others stay
    as they were."""
    changed = {p for p, q in _changed_runs() if q == PASS}
    assert {"attention_block", "softmax_xent", "layernorm_gelu_mlp"} <= changed


@pytest.mark.parametrize("program,pipeline", RUNS)
def test_corpus_xla_reads_and_runs_our_output(program, pipeline, corpus, xla) -> None:
    _, out, without = _corpus_run(program, pipeline)
    if TRITON not in out:
        assert out == without, "the pass changed a program without a normalization diamond"
        return
    ok, msg = xla.accepts(out)
    assert ok, f"XLA's parser rejects {program} after {pipeline}: {msg}"
    res = _corpus_xla()[(program, pipeline)]
    assert "outputs" in res, f"XLA-CPU fails on {program} after {pipeline}: {res}"
    d = corpus / "jax" / program
    _, want = program_io(d)
    bounds = program_bounds_or_none(d)
    for k, (g, w) in enumerate(zip(res["outputs"], want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{program} out{k}")
        elif bounds is not None:
            assert_within_bound(g, w, bounds[k], what=f"{program} out{k} (XLA:CPU)")
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{program} out{k}")


def test_match_reasons_as_xla_explains_them() -> None:
    """XLA's FusionDecisionIsCapturedExplicitly: asked of each of the 6 instructions of its
    module, the matcher matches none, each refusal naming a non-binary root or the
    reduction's identity (a convert of an f8 parameter)."""
    from hlopass.passes.fusion.softmax_match import Matcher

    text = next(t for n, t, _ in CASES if n == "FusionDecisionIsCapturedExplicitly")
    m = hlopass.parse_hlo(text)
    comps = {c.comp_name: c for c in computations(m)}
    matcher = Matcher(comps, (8, 6))  # XLA's fixture: an RTX A6000
    reasons = [str(matcher.match(op)) for op in entry_computation(m).instructions]
    assert len(reasons) == 6 and all(r.endswith(".") for r in reasons)  # (no producer)
    assert all("Root is not elementwise binary" in r
               or "identity is not a constant or a supported convert" in r for r in reasons)  # fmt: skip
    assert sum("identity" in r for r in reasons) == 1


def test_warps_follow_the_tile() -> None:
    """Every fusion's warps are XLA's GetNumWarps of its padded tile (by hand: a row of
    1000 pads to 1024, 1 row -> 2 warps, 2 -> 4, ..., 16 -> 4, 32 -> 8)."""
    from hlopass.passes.fusion.softmax_rewriter_triton import block_config, num_warps

    assert [num_warps(r * 1024) for r in (1, 2, 16, 32, 64)] == [2, 4, 4, 8, 16]
    assert num_warps(512) == 1 and num_warps(1 << 17) == 32
    assert '"num_warps":"4","output_tiles":[{"sizes":["2","1000"]}]' in block_config([2, 1000])


def _triton_reduces(text: str) -> int:
    """Reductions computed inside generic Triton fusions (by the fused computations the
    `__triton` fusions call)."""
    m = hlopass.parse_hlo(text)
    comps = {c.comp_name: c for c in computations(m)}
    called = [op.attr("calls") for c in comps.values() for op in c.instructions
              if op.opcode == "fusion" and TRITON in (op.attr("backend_config") or "")]  # fmt: skip
    return sum(op.opcode == "reduce" for name in called for op in comps[name].instructions)


@pytest.mark.parametrize("program", [p for p in _programs() if p != "<no corpus>"] or ["-"])
def test_priority_fusion_keeps_normalizations_in_triton_fusions(program, corpus) -> None:
    """Priority fusion grows the Triton fusions (producers, consumers and neighbouring
    diamonds fused in, as XLA's does) but never takes a normalization out of Triton: every
    reduction the pass put into one is still computed in one (copies may add more)."""
    alone = _triton_reduces(_corpus_run(program, PASS)[1])
    after = _triton_reduces(_corpus_run(program, PIPELINES[1])[1])
    assert after >= alone


def _xla_triton_fusions(program: str) -> list[tuple[object, dict, dict]]:
    """(fusion, computations, XLA's block-level config) of each normalization fusion of
    XLA's H100 plan of `program`."""
    import json

    m = hlopass.parse_hlo((CORPUS / "jax" / program / "xla_h100_optimized.hlo").read_text())  # type: ignore[operator]
    comps = {c.comp_name: c for c in computations(m)}
    out = []
    for op in entry_computation(m).instructions:
        cfg = op.attr("backend_config") or ""
        if op.opcode == "fusion" and '"kind":"__triton"' in cfg:
            blc = json.loads(cfg)["fusion_backend_config"]["block_level_fusion_config"]
            out.append((op, comps, blc))
    return out


@pytest.mark.parametrize("program", ["softmax_xent", "layernorm_gelu_mlp"])
def test_tiling_of_xla_fusions_is_xlas(program, corpus) -> None:
    """Asked to tile XLA's own normalization fusions of these programs (a row of 1000 and
    one of 256 f32), ours picks XLA's output tile and warps (XLA's dump). In attention_block
    XLA's fusions, merged by its priority fusion, get [1,2,256] and [1,8,1,64]; ours [1,1,256]
    and [1,1,16,64] (our cost model, and a search of one dimension before the row)."""
    from hlopass.passes.fusion.softmax_rewriter_triton import Pricer, num_warps

    fusions = _xla_triton_fusions(program)
    assert fusions
    for op, comps, blc in fusions:
        tile, _ = Pricer("h100_sxm").best_tile(op, comps)  # type: ignore[arg-type]
        assert [str(t) for t in tile] == blc["output_tiles"][0]["sizes"]
        padded = int(np.prod([1 << max(0, t - 1).bit_length() for t in tile]))
        assert str(num_warps(padded)) == blc["num_warps"]
