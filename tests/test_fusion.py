"""Fusion passes: semantics on the corpus (interpreter and XLA), defuse, the cost-model
interface, the refusal rules the lit tests cannot reach, options and explanations.

Fusion moves instructions into fused computations without changing any arithmetic, so
the interpreter's outputs after fusion must equal those before it bit for bit; against
XLA's reference outputs (io.npz) the usual dtype tolerance of the pipeline tests applies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hlopass.cost.default_fusion_model import DefaultFusionCostModel
from hlopass.cost.fusion_models import fusion_cost_model
from hlopass.cost.roofline_fusion_model import RooflineFusionCostModel
from hlopass.dialects.hlo import computations, entry_computation
from hlopass.kernel_structure.plan import Kernel
from hlopass.pipeline import PipelineError, parse_pass_pipeline, run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS
from tests.corpus_io import (
    assert_bitwise,
    assert_matches_io,
    fallback_tolerance,
    program_io,
    xla_cpu_outputs,
)
from tests.error_bound import assert_within_bound, program_bounds_or_none
from tests.interp_util import xla_friendly

ROOT = Path(__file__).resolve().parents[1]
SIMPLIFY = "algsimp,constant-folding,dce,cse"
FUSE = "priority-fusion,multi-output-fusion,horizontal-fusion"


def _programs() -> list[str]:
    if CORPUS is None:
        return []
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir())


def _interp():
    import hlopass.interpreter as interp

    return interp


_FUSED: dict[str, tuple[str, str]] = {}


def _fused(program: str) -> tuple[str, str]:
    """(simplified text, simplified + fused text) of jax/<program>."""
    if program not in _FUSED:
        _interp()
        d = CORPUS / "jax" / program  # type: ignore[operator]
        m = parse_hlo((d / "before_optimizations.hlo").read_text(), program)
        run_pipeline(m, SIMPLIFY)
        base = print_hlo(m)
        run_pipeline(m, FUSE, verify_each=True)
        _FUSED[program] = (base, print_hlo(m))
    return _FUSED[program]


@pytest.mark.parametrize("program", _programs() or ["<no corpus>"])
def test_priority_fusion_keeps_outputs(program: str, corpus: Path, xla) -> None:
    base, fused = _fused(program)
    ok, msg = xla.accepts(fused)
    assert ok, f"XLA rejects the fused {program}: {msg}"
    assert print_hlo(parse_hlo(fused, program)) == fused, "not byte-stable through a round trip"
    d = corpus / "jax" / program
    args, want = program_io(d)
    interp = _interp()
    got = interp.evaluate(parse_hlo(fused, program), *args)
    before = interp.evaluate(parse_hlo(base, program), *args)
    assert_bitwise(got, before, f"{program} fused vs unfused")
    # against XLA's reference: no further off than the interpreter on the original module
    original = interp.evaluate(parse_hlo((d / "before_optimizations.hlo").read_text()), *args)
    bounds = program_bounds_or_none(d)
    for i, (g, o, w) in enumerate(zip(got, original, want, strict=True)):
        g, o, w = np.asarray(g), np.asarray(o), np.asarray(w)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{program} out{i} vs XLA")
            continue
        if bounds is not None:
            assert_within_bound(g, w, bounds[i], what=f"{program} out{i} vs XLA")
            continue
        rtol, atol = fallback_tolerance(g.dtype)
        gf, of, wf = (x.astype(np.complex128) for x in (g, o, w))
        err = float(np.nanmax(np.abs(gf - wf))) if g.size else 0.0
        err0 = float(np.nanmax(np.abs(of - wf))) if g.size else 0.0
        scale = float(np.nanmax(np.abs(wf))) if g.size else 0.0
        assert err <= err0 + atol + rtol * scale, f"{program} out{i}: {err} vs XLA ({err0} unfused)"


@pytest.mark.parametrize("program", _programs() or ["<no corpus>"])
def test_priority_fusion_xla_cpu_outputs(program: str, corpus: Path, xla, tmp_path: Path) -> None:
    """XLA:CPU runs our fused module, lowered to what XLA:CPU compiles (fusions inlined,
    bitcasts made explicit: `xla_friendly`), and matches io.npz. XLA:CPU exiting non-zero
    is a failure: the lowered module is plain HLO it must accept."""
    _, fused = _fused(program)
    d = corpus / "jax" / program
    got = xla_cpu_outputs(xla_friendly(fused), d, tmp_path, f"the lowered fused {program}")
    assert_matches_io(got, d, f"{program} (XLA:CPU)")


# --- defuse ------------------------------------------------------------------------------------


def _optimized_files() -> list[str]:
    if CORPUS is None:
        return []
    files = [f"seeds/{p.name}" for p in sorted((CORPUS / "seeds").glob("*.hlo"))]
    for prog in _programs():
        files += [f"jax/{prog}/xla_h100_optimized.hlo", f"jax/{prog}/xla_cpu_optimized.hlo"]
    return files


@pytest.mark.parametrize("rel", _optimized_files() or ["<no corpus>"])
def test_defuse_accepted_and_stable(rel: str, corpus: Path, xla) -> None:
    text = (corpus / rel).read_text()
    m = parse_hlo(text, rel)
    assert run_pipeline(m, "defuse") == (" fusion(" in text)
    out = print_hlo(m)
    assert " fusion(" not in out
    ok, msg = xla.accepts(out)
    assert ok, f"XLA rejects defused {rel}: {msg}"
    assert print_hlo(parse_hlo(out, rel)) == out


@pytest.mark.parametrize("program", _programs() or ["<no corpus>"])
def test_defuse_cpu_optimized_same_outputs(program: str, corpus: Path) -> None:
    """Inlining changes no arithmetic: the interpreter gives the same bits."""
    d = corpus / "jax" / program
    text = (d / "xla_cpu_optimized.hlo").read_text()
    m = parse_hlo(text, program)
    run_pipeline(m, "defuse")
    args, _ = program_io(d)
    interp = _interp()
    want = interp.evaluate(parse_hlo(text, program), *args)
    assert_bitwise(interp.evaluate(parse_hlo(print_hlo(m), program), *args), want, program)


def _refusable() -> list[str]:
    if CORPUS is None:
        return []
    files = ["seeds/000_887393ea171d6a40.hlo"]  # seed 001 (4.7k lines) runs in benchmarks/
    return files + [f"jax/{p}/xla_h100_optimized.hlo" for p in _programs()]


@pytest.mark.parametrize("rel", _refusable() or ["<no corpus>"])
def test_defuse_then_fusion_accepted(rel: str, corpus: Path, xla) -> None:
    m = parse_hlo((corpus / rel).read_text(), rel)
    run_pipeline(m, "defuse," + FUSE, verify_each=True)
    out = print_hlo(m)
    ok, msg = xla.accepts(out)
    assert ok, f"XLA rejects re-fused {rel}: {msg}"
    assert print_hlo(parse_hlo(out, rel)) == out


@pytest.mark.parametrize("rel", _refusable() or ["<no corpus>"])
def test_defuse_then_fusion_same_outputs(rel: str, corpus: Path) -> None:
    """Re-planning XLA's own module changes no arithmetic: on seeded random inputs
    (tests/gpu_plain.seed_inputs) the interpreter gives the original's bits. Seed 001 runs
    in benchmarks/gpu_optimized_exec.py --refuse (minutes in the interpreter)."""
    from tests.gpu_plain import seed_inputs

    text = (corpus / rel).read_text()
    original = parse_hlo(text, rel)
    args = seed_inputs(original, 0)
    interp = _interp()
    want = interp.evaluate(original, *args)
    floats = [np.asarray(w) for w in want if np.asarray(w).dtype.kind in "fc"]
    assert not floats or any(np.isfinite(w).any() for w in floats), "all outputs non-finite"
    m = parse_hlo(text, rel)
    run_pipeline(m, "defuse," + FUSE, verify_each=True)
    refused = parse_hlo(print_hlo(m), rel)
    assert_bitwise(interp.evaluate(refused, *args), want, f"{rel} re-fused vs original")


# --- cost models ------------------------------------------------------------------------------

CHAIN = """HloModule chain
ENTRY chain {
  p0 = f32[1024,1024] parameter(0)
  p1 = f32[1024,1024] parameter(1)
  a = f32[1024,1024] add(p0, p1)
  m = f32[1024,1024] multiply(a, a)
  ROOT n = f32[1024,1024] negate(m)
}
"""


def _kernels(text: str) -> tuple[object, dict[str, Kernel]]:
    m = parse_hlo(text)
    comp = entry_computation(m)
    pos = {id(op): i for i, op in enumerate(comp.instructions)}
    return m, {op.inst_name: Kernel.of(op, pos) for op in comp.instructions}


def test_roofline_model_by_hand() -> None:
    """Bytes only: launch + (inputs + output) / bandwidth, numbers worked out by hand."""
    _, k = _kernels(CHAIN)
    model = RooflineFusionCostModel("h100_sxm")
    bw, mib = 3352320000000.0, 4 * 1024 * 1024
    t = model.estimate_run_times(k["a"], [k["m"]])
    assert t.unfused_us == pytest.approx(2 + (3 * mib + 2 * mib) / bw * 1e6, rel=1e-12)
    assert t.fused_us == pytest.approx(1 + 3 * mib / bw * 1e6, rel=1e-12)


def test_default_model_composes_like_full_analysis() -> None:
    """The producer+consumer estimate from two summaries equals analysing the merged
    kernel (elementwise chain: same emitter, exact utilisations)."""
    _, k = _kernels(CHAIN)
    model = DefaultFusionCostModel("h100_sxm")
    fused = model.fused_time_us(k["a"], k["m"])
    full = model.kernel_time_us(k["m"].merged(k["a"]), [k["m"].root])
    assert fused == pytest.approx(full, rel=1e-12)
    launch = model.device.launch_overhead_us
    assert model.time_us(k["a"]) > launch and fused < model.time_us(k["a"]) + model.time_us(k["m"])


def test_cost_model_invalidation() -> None:
    _, k = _kernels(CHAIN)
    model = fusion_cost_model("default")
    before = model.time_us(k["m"])
    k["m"].absorb(k["a"])
    model.on_instruction_fused(k["a"], k["m"], k["m"])
    after = model.time_us(k["m"])
    assert after == pytest.approx(model.kernel_time_us(k["m"].members, k["m"].outputs))
    assert after != before


def test_cost_model_option_selects_roofline() -> None:
    m1, m2 = parse_hlo(CHAIN), parse_hlo(CHAIN)
    from hlopass.passes.fusion import priority_fusion

    r1 = priority_fusion(m1, cost_model="default").records
    r2 = priority_fusion(m2, cost_model="roofline").records
    fused = {r.producer: r for r in r2 if r.decision == "fused"}
    # by hand: every f32[1024,1024] is 4 MiB; equal gains, so the later producer m goes
    # first (m+n), then a is priced against that kernel
    us = 4 * 1024 * 1024 / 3352320000000.0 * 1e6
    assert (fused["m"].unfused_us, fused["m"].fused_us) == (
        pytest.approx(2 + 4 * us),
        pytest.approx(1 + 2 * us),
    )
    assert (fused["a"].unfused_us, fused["a"].fused_us) == (
        pytest.approx(2 + 5 * us),
        pytest.approx(1 + 3 * us),
    )
    assert print_hlo(m1).count(" fusion(") == print_hlo(m2).count(" fusion(") == 1
    assert {r.unfused_us for r in r1} != {r.unfused_us for r in r2}
    with pytest.raises(PipelineError, match="unknown cost model"):
        parse_pass_pipeline("priority-fusion{cost-model=nope}")


def test_max_fusions_bisects() -> None:
    counts = []
    for n in (0, 1, 2, -1):
        m = parse_hlo(CHAIN)
        run_pipeline(m, f"priority-fusion{{max-fusions={n}}}")
        comp = entry_computation(m)
        counts.append(sum(1 for op in comp.instructions if op.opcode != "parameter"))
    assert counts == [3, 2, 1, 1]


def test_explain_json_lines(tmp_path: Path) -> None:
    src = tmp_path / "chain.hlo"
    src.write_text(CHAIN)
    r = subprocess.run([sys.executable, "-m", "hlopass.commands.cli", str(src), "-p", "priority-fusion",
                        "--explain-fusion=json", "-o", str(tmp_path / "out.hlo")],
                       capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stderr.splitlines()]
    assert {x["producer"] for x in records if x["decision"] == "fused"} == {"a", "m"}
    out = (tmp_path / "out.hlo").read_text()
    for x in records:
        assert x["kernels"] and all(f"%{k} " in out for k in x["kernels"])
        if x["decision"] == "fused":
            assert x["unfused_us"] > x["fused_us"] > 0


# --- rules the greedy order never reaches in a small module ------------------------------------


IN_PLACE = """HloModule inplace
ENTRY inplace {
  p0 = f32[1024,256] parameter(0)
  w = f32[2,256] parameter(1)
  i = s32[] constant(16)
  j = s32[] constant(0)
  s = f32[8,256] slice(p0), slice={[16:24], [0:256]}
  r = f32[8,256] reverse(s), dimensions={0}
  d = f32[1024,256] dynamic-update-slice(p0, r, i, j)
  e = f32[8,256] dynamic-update-slice(s, w, j, j)
  ROOT d2 = f32[1024,256] dynamic-update-slice(p0, e, i, j)
}
"""


def test_in_place_rules_on_built_kernels() -> None:
    from hlopass.passes.fusion import rules

    _, k = _kernels(IN_PLACE)
    producer = k["r"]
    producer.absorb(k["s"])  # {slice, reverse}: two non-elementwise ops reading the buffer
    assert rules.in_place_rule(producer, k["d"]) == rules.IN_PLACE_MULTIPLE_NON_ELEMENTWISE
    consumer = k["d2"]
    consumer.absorb(k["e"])  # two dynamic-update-slices in the consumer
    assert rules.in_place_rule(k["s"], consumer) == rules.IN_PLACE_MULTIPLE_DUS


def test_refusal_reasons_are_xla_texts() -> None:
    from hlopass.passes.fusion import rules

    assert rules.OPERAND_BUDGET.startswith("Number of operands and output buffers")
    assert rules.UNNESTED_REDUCTIONS == "over 8 unnested reductions in fusion"
    assert rules.SHARED_MEMORY.format(49152) == (
        "shared memory usage would be over the budget of 49152B"
    )


def test_fused_computations_named_as_xla() -> None:
    m = parse_hlo(CHAIN)
    run_pipeline(m, "priority-fusion")
    names = sorted(c.comp_name for c in computations(m))
    assert names == ["chain", "fused_negate"]
    root = entry_computation(m).root
    assert root.inst_name == "loop_negate_fusion" and root.attr("kind") == "kLoop"


# --- reachability index of multi-output fusion --------------------------------------------------


def _random_dag(seed: int, n: int) -> tuple[str, list[list[int]]]:
    rng = np.random.default_rng(seed)
    preds: list[list[int]] = [[]]
    lines = ["HloModule dag", "ENTRY dag {", "  v0 = f32[4] parameter(0)"]
    for i in range(1, n):
        a, b = (int(x) for x in rng.integers(0, i, size=2))
        preds.append(sorted({a, b}))
        lines.append(f"  v{i} = f32[4] add(v{a}, v{b})")
    lines.append(f"  ROOT t = (f32[4]) tuple(v{n - 1})")
    lines.append("}")
    return "\n".join(lines) + "\n", preds


def _closure(preds: list[list[int]]) -> list[set[int]]:
    anc: list[set[int]] = []
    for ps in preds:
        s: set[int] = set()
        for p in ps:
            s |= {p} | anc[p]
        anc.append(s)
    return anc


@pytest.mark.parametrize("seed", range(8))
def test_reachability_matches_dfs_before_and_after_a_merge(seed: int) -> None:
    from hlopass.passes.fusion.multi_output_rewrites import Reachability

    text, preds = _random_dag(seed, 40)
    comp = entry_computation(parse_hlo(text))
    ops = [op for op in comp.instructions if op.inst_name.startswith("v")]
    reach = Reachability(comp)
    anc = _closure(preds)
    for i, a in enumerate(ops):
        for j, b in enumerate(ops):
            assert reach.reaches(a, b) == (i in anc[j]), (i, j)
    # merge two unrelated nodes x, y into one node m: m reaches what either reached and is
    # reached by what reached either
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i in range(40) for j in range(i + 1, 40)
             if i not in anc[j] and j not in anc[i]]  # fmt: skip
    i, j = pairs[int(rng.integers(0, len(pairs)))]
    merged = object()
    reach.merged(merged, [ops[i], ops[j]], [])
    for k, b in enumerate(ops):
        if k in (i, j):
            continue
        want_from = i in anc[k] or j in anc[k]
        assert reach.reaches(merged, b) == want_from, ("from", k)
        want_to = k in anc[i] or k in anc[j]
        assert reach.reaches(b, merged) == want_to, ("to", k)
        # paths through the merged node: whatever reaches y now reaches x's readers too
        for k2, c in enumerate(ops):
            if k2 in (i, j) or k2 == k:
                continue
            direct = k in anc[k2]
            through = (k in anc[i] or k in anc[j]) and (i in anc[k2] or j in anc[k2])
            assert reach.reaches(b, c) == (direct or through), (k, k2)


def test_elementwise_short_cut_equals_general_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """One elementwise instruction is summarised by a short cut; it must give the general
    analysis's times on every such instruction of a corpus program."""
    import hlopass.cost.default_fusion_model as fm

    if CORPUS is None:
        pytest.skip("no corpus")
    m = parse_hlo((CORPUS / "jax" / "mlp_adam" / "before_optimizations.hlo").read_text())
    model = DefaultFusionCostModel()
    ops = [op for c in computations(m) for op in c.instructions if fm._plain_elementwise(op)]
    assert len(ops) > 20
    fast = [model._time_of(model._summarize([op], [op])) for op in ops]
    monkeypatch.setattr(fm, "_plain_elementwise", lambda op: False)
    slow = [model._time_of(model._summarize([op], [op])) for op in ops]
    assert fast == pytest.approx(slow, rel=1e-12)


# --- horizontal fusion ------------------------------------------------------------------------

SIDE_BY_SIDE = """HloModule side_by_side

ENTRY main {
  p0 = f32[1024]{0} parameter(0)
  p1 = f32[1024]{0} parameter(1)
  p2 = f32[16,16]{1,0} parameter(2)
  p3 = f32[512,4]{1,0} parameter(3)
  a = f32[1024]{0} exponential(p0)
  b = f32[1024]{0} negate(p1)
  c = f32[16,16]{1,0} log(p2)
  d = f32[512,4]{1,0} sqrt(p3)
  ROOT t = (f32[1024]{0}, f32[1024]{0}, f32[16,16]{1,0}, f32[512,4]{1,0}) tuple(a, b, c, d)
}
"""


class _WideKernelsAreSlow(RooflineFusionCostModel):
    """A model that charges 10 µs per output beyond the first: every merge is slower."""

    name = "wide-is-slow"

    def kernel_time_us(self, members, outputs):  # type: ignore[no-untyped-def]
        return super().kernel_time_us(members, outputs) + 10.0 * (len(outputs) - 1)


def test_horizontal_fusion_refuses_when_the_model_says_slower(monkeypatch) -> None:
    from hlopass.cost import fusion_models
    from hlopass.passes.fusion import horizontal_fusion

    m = parse_hlo(SIDE_BY_SIDE)
    changed, records = horizontal_fusion(m)
    assert changed and " fusion(" in print_hlo(m)
    assert {r.decision for r in records} == {"fused"}
    monkeypatch.setitem(fusion_models.COST_MODELS, "wide-is-slow", _WideKernelsAreSlow)
    m = parse_hlo(SIDE_BY_SIDE)
    changed, records = horizontal_fusion(m, cost_model="wide-is-slow")
    assert not changed and " fusion(" not in print_hlo(m)
    slower = [r for r in records if r.reason == "will execute slower if fused"]
    assert slower and all(r.fused_us > r.unfused_us for r in slower)  # type: ignore[operator]


def test_horizontal_fusion_keeps_bits_on_random_inputs() -> None:
    """Both forms (loop: a, b; sliced: c, d) under the interpreter: the same bits as the
    unfused module (the sliced form's reshape/concatenate/slice/bitcast move data only)."""
    from tests.gpu_plain import seed_inputs

    m = parse_hlo(SIDE_BY_SIDE)
    args = seed_inputs(m, 3)
    interp = _interp()
    want = interp.evaluate(parse_hlo(SIDE_BY_SIDE), *args)
    run_pipeline(m, "horizontal-fusion")
    text = print_hlo(m)
    assert "kind=kLoop" in text and "kind=kInput" in text, text
    assert_bitwise(interp.evaluate(parse_hlo(text), *args), want, "horizontal fusion")


# --- max-temp-bytes ---------------------------------------------------------------------------


@pytest.mark.parametrize("program", _programs() or ["<no corpus>"])
def test_live_bytes_start_from_the_memory_model(program: str, corpus: Path) -> None:
    """The guard's live ranges (segment tree) give hlopass.ir.memory's peak of every
    computation without control flow, before any fusion, and after a planned fusion the
    tree equals a fresh sweep of the same ranges."""
    from hlopass.ir.memory import peak_live_bytes
    from hlopass.passes.fusion.graph import FusionGraph
    from hlopass.passes.fusion.memory_guard import LiveBytes
    from hlopass.passes.fusion.priority import fusible_computations

    m = parse_hlo((corpus / "jax" / program / "before_optimizations.hlo").read_text(), program)
    checked = 0
    for comp in fusible_computations(m):
        if any(op.opcode in ("while", "call", "conditional") for op in comp.instructions):
            continue
        g = FusionGraph(comp)
        live = LiveBytes(comp, g.position)
        want = peak_live_bytes(m, comp.comp_name).peak_bytes
        assert live.peak == want, comp.comp_name
        checked += 1
        # fuse every single-reader elementwise producer; compare with a sweep
        for op in g.ops:
            k = g.kernel[id(op)]
            readers = g.consumers(k)
            if op.opcode in ("parameter", "constant") or len(readers) != 1 or g.is_root(op):
                continue
            live.apply(k, readers, dies=True)
        delta = [0] * (len(g.ops) + 2)
        for b, size in enumerate(live.size):
            if b not in live.removed:
                delta[live.start[b]] += size
                delta[live.last[b] + 1] -= size
        run, best = 0, 0
        for i in range(len(g.ops) + 1):
            run += delta[i]
            best = max(best, run)
        assert live.peak == best, comp.comp_name
    assert checked, "no computation without control flow"


@pytest.mark.parametrize(
    "pass_name", ["priority-fusion", "multi-output-fusion", "horizontal-fusion"]
)
@pytest.mark.parametrize("option", ["device=nope", "cost-model=nope"])
def test_bad_fusion_option_is_one_line(pass_name: str, option: str, tmp_path: Path) -> None:
    src = tmp_path / "m.hlo"
    src.write_text(SIDE_BY_SIDE)
    r = subprocess.run([sys.executable, "-m", "hlopass.commands.cli", str(src), "-p", f"{pass_name}{{{option}}}"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"{src}: error: bad option for pass '{pass_name}': unknown "), lines
