"""Layout passes (layout-assignment, layout-normalization, copy-elision): outputs kept on
every corpus program (interpreter, XLA's parser, XLA:CPU in a child process), the changed
contract, XLA's rules checked against XLA's own H100 output, options, and the cost model's
pricing of layouts."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest

from hlopass.cost import estimate
from hlopass.cost.layouts import conv_kind, conv_transpose_bytes, reshape_is_bitcast
from hlopass.dialects.hlo import computations, entry_computation
from hlopass.ir.shape import ArrayShape, Layout
from hlopass.pipeline import PipelineError, parse_pass_pipeline, run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.conftest import CORPUS
from tests.error_bound import assert_within_bound, program_bounds_or_none

LAYOUT = "layout-assignment,layout-normalization,copy-elision"
CORE = "fixpoint{passes=algsimp,constant-folding,dce,cse}"
PIPELINES = {
    "layout": ("", LAYOUT),
    "core+layout": (CORE, LAYOUT),
    "cost-policy": ("", "layout-assignment{policy=cost},layout-normalization,copy-elision"),
    # the "followed by the fusion passes": layouts first, then XLA-style fusion
    "core+layout+fusion": (CORE, LAYOUT + ",priority-fusion,multi-output-fusion"),
}


def _programs() -> list[str]:
    if CORPUS is None:
        return ["<no corpus>"]
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir())


def _inputs(d: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    data = np.load(d / "io.npz")
    n_in = sum(1 for k in data.files if k.startswith("in"))
    n_out = sum(1 for k in data.files if k.startswith("out"))
    return [data[f"in{i}"] for i in range(n_in)], [data[f"out{i}"] for i in range(n_out)]


def reduction_length(module) -> int:
    """Sum over the module of the elements each output element of a dot, convolution or
    reduce adds up: an upper bound on the additions any one result goes through."""
    total = 0
    for comp in computations(module):
        for op in comp.instructions:
            opc = op.opcode
            if opc == "dot":
                lhs = op.operands[0].type.data
                total += math.prod(lhs.dims[d] for d in op.attr("lhs_contracting_dims") or ())
            elif opc == "convolution":
                rhs = op.operands[1].type.data
                ki, _ko, ksp = op.attr("dim_labels").kernel
                total += rhs.dims[ki] * math.prod(rhs.dims[d] for d in ksp)
            elif opc in ("reduce", "reduce-window"):
                src = op.operands[0].type.data
                if opc == "reduce":
                    total += math.prod(src.dims[d] for d in op.attr("dimensions") or ())
                else:
                    total += math.prod(w.size for w in op.attr("window").dims)
    return max(total, 1)


def _tolerance(module, want: np.ndarray) -> float:
    """Summation-order difference bound: reduction length x the type's epsilon x the
    output's magnitude (layouts change the order XLA adds in, nothing else)."""
    if want.dtype.kind not in "fc" or want.size == 0:
        return 0.0
    eps = float(np.finfo(want.dtype).eps) if want.dtype.kind in "fc" else 0.0
    scale = float(np.nanmax(np.abs(want.astype(np.complex128)))) or 1.0
    return reduction_length(module) * eps * scale


def _run(d: Path, pre: str, spec: str):
    module = parse_hlo((d / "before_optimizations.hlo").read_text(), str(d))
    if pre:
        run_pipeline(module, pre)
    before = print_hlo(module)
    run_pipeline(module, spec, verify_each=True)
    return before, print_hlo(module)


@pytest.mark.parametrize("pipeline", list(PIPELINES))
@pytest.mark.parametrize("program", _programs())
def test_layout_pipeline_keeps_outputs(program: str, pipeline: str, corpus: Path, xla) -> None:
    """Layouts are physical only: the interpreter gives bit-identical outputs before and
    after (the passes only move data), equal to XLA's reference (io.npz) within the
    summation bound; XLA's parser accepts the printed module."""
    import hlopass.interpreter as interp

    d = corpus / "jax" / program
    pre, spec = PIPELINES[pipeline]
    before, after = _run(d, pre, spec)
    ok, msg = xla.accepts(after)
    assert ok, f"XLA rejects {program} after {spec}: {msg}"
    args, wants = _inputs(d)
    base = interp.evaluate(parse_hlo(before, program), *args)
    module = parse_hlo(after, program)
    got = interp.evaluate(module, *args)
    assert len(got) == len(wants) == len(base)
    bounds = program_bounds_or_none(d)
    for i, (g, b, w) in enumerate(zip(got, base, wants, strict=True)):
        assert g.shape == w.shape and g.dtype == b.dtype, f"out{i}"
        np.testing.assert_array_equal(g, b, err_msg=f"{program} out{i}: changed by {spec}")
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{program} out{i} vs XLA")
        elif bounds is not None:
            assert_within_bound(g, w, bounds[i], what=f"{program} out{i} vs XLA")
        else:
            err = np.nanmax(np.abs(g.astype(np.complex128) - w.astype(np.complex128)), initial=0)
            err_base = np.nanmax(
                np.abs(b.astype(np.complex128) - w.astype(np.complex128)), initial=0
            )
            assert err <= err_base + _tolerance(module, w), f"{program} out{i}: {err}"


def test_layout_pipeline_xla_cpu_outputs(corpus: Path, xla) -> None:
    """XLA:CPU runs the module every pipeline prints (alone, after the core passes, with
    policy=cost, followed by the fusion passes; child process) and gives io.npz's outputs
    within the summation bound, on every program. XLA:CPU cannot compile bitcasts between
    layouts or fusions (they exist only after its own layout assignment), so each module
    first goes through `xla_friendly`: fusions inlined and every bitcast lowered to the
    transpose/reshape its source and result layouts mean, which is what checks that our
    bitcasts keep every element in place."""
    from tests.interp_util import xla_execute_many, xla_friendly

    programs = [p for p in _programs() if p != "<no corpus>"]
    cases, keys = [], []
    for p in programs:
        d = corpus / "jax" / p
        args, _ = _inputs(d)
        for name, (pre, spec) in PIPELINES.items():
            cases.append((xla_friendly(_run(d, pre, spec)[1]), args))
            keys.append((p, name))
    results = xla_execute_many(cases)
    bounds = {p: program_bounds_or_none(corpus / "jax" / p) for p in programs}
    for (p, name), (text, _), r in zip(keys, cases, results, strict=True):
        assert "outputs" in r, f"{p} {name}: {r}"
        module = parse_hlo(text, p)
        _, wants = _inputs(corpus / "jax" / p)
        assert len(r["outputs"]) == len(wants), f"{p} {name}"
        for i, (g, w) in enumerate(zip(r["outputs"], wants, strict=True)):
            assert g.shape == w.shape and g.dtype == w.dtype, f"{p} {name} out{i}"
            if g.dtype.kind in "biu":
                np.testing.assert_array_equal(g, w, err_msg=f"{p} {name} out{i}")
            elif bounds[p] is not None:
                assert_within_bound(g, w, bounds[p][i], what=f"{p} {name} out{i}")
            else:
                np.testing.assert_allclose(
                    g.astype(np.complex128), w.astype(np.complex128), rtol=0,
                    atol=_tolerance(module, w), equal_nan=True, err_msg=f"{p} {name} out{i}",
                )  # fmt: skip


@pytest.mark.parametrize("program", _programs())
def test_changed_flag_on_corpus(program: str, corpus: Path) -> None:
    """Each layout pass says it changed the module exactly when the printed text changed."""
    module = parse_hlo((corpus / "jax" / program / "before_optimizations.hlo").read_text())
    for spec in ("layout-assignment", "layout-normalization", "copy-elision") * 2:
        t0 = print_hlo(module)
        changed = run_pipeline(module, spec)
        assert changed == (t0 != print_hlo(module)), f"{program}: {spec}"


# --- XLA's rules against XLA's own output ----------------------------------------------------

CUDNN = {
    "__cudnn$convForward": "forward",
    "__cudnn$convBiasActivationForward": "forward",
    "__cudnn$convBackwardInput": "backward_input",
    "__cudnn$convBackwardFilter": "backward_filter",
}


@pytest.mark.parametrize("program", ["cnn_train", "conv_nchw"])
def test_conv_kinds_match_xla(program: str, corpus: Path) -> None:
    """The cuDNN call kinds we read off each convolution are the ones XLA made (H100 output)."""
    d = corpus / "jax" / program
    ours = sorted(
        conv_kind(op)
        for c in computations(parse_hlo((d / "before_optimizations.hlo").read_text()))
        for op in c.instructions
        if op.opcode == "convolution"
    )
    theirs = sorted(
        CUDNN[op.attr("custom_call_target")]
        for c in computations(parse_hlo((d / "xla_h100_optimized.hlo").read_text()))
        for op in c.instructions
        if op.opcode == "custom-call" and op.attr("custom_call_target") in CUDNN
    )
    assert ours == theirs


@pytest.mark.parametrize(
    "element_type,device,spatial,nhwc",
    [
        ("f32", "h100_sxm", 2, True), ("bf16", "h100_sxm", 2, True), ("f64", "h100_sxm", 2, False),
        ("f32", "h100_sxm", 3, True), ("f32", "a100_sxm_80", 2, False),
        ("bf16", "a100_sxm_80", 2, True), ("f16", "v100", 2, True), ("f32", "v100", 2, False),
        ("bf16", "v100", 3, False), ("s8", "v100", 2, True), ("f8e4m3fn", "h100_sxm", 2, True),
    ],
)  # fmt: skip
def test_conv_layout_heuristic(element_type: str, device: str, spatial: int, nhwc: bool) -> None:
    """XLA's HeuristicLayoutAssignment (layout_assignment.cc), case by case."""
    from hlopass.passes.layout.rules import conv_prefers_nhwc

    assert conv_prefers_nhwc(element_type, spatial, device) is nhwc


def test_conv_layouts_match_xla_on_cnn(corpus: Path) -> None:
    """policy=xla gives every cuDNN tensor of cnn_train XLA's physical order (NHWC roles):
    the convolution's result and operand layouts, compared with the custom-calls XLA made."""
    from hlopass.passes.layout.compare import match_conv, ours_conv, xla_conv

    d = corpus / "jax" / "cnn_train"
    module = parse_hlo((d / "before_optimizations.hlo").read_text())
    run_pipeline(module, "layout-assignment")
    xla_mod = parse_hlo((d / "xla_h100_optimized.hlo").read_text())
    theirs = [
        op
        for c in computations(xla_mod)
        for op in c.instructions
        if op.opcode == "custom-call" and op.attr("custom_call_target") in CUDNN
    ]
    used: set[int] = set()
    convs = [op for op in entry_computation(module).instructions if op.opcode == "convolution"]
    assert len(convs) == 5
    for op in convs:
        j = match_conv(op, theirs, used)
        assert j is not None and j not in used
        used.add(j)
        ours_sig = {k: v[1] for k, v in ours_conv(op)[1].items()}
        theirs_sig = {k: v[1] for k, v in xla_conv(theirs[j])[1].items()}
        assert ours_sig == theirs_sig, op.inst_name


def test_layout_plans_vs_xla_h100(corpus: Path) -> None:
    """benchmarks/layout_vs_xla.py's targets: with policy=xla, at least 90% of the dot and
    convolution tensors of the corpus have XLA's H100 layout (read from
    xla_h100_optimized.hlo); with policy=cost, the estimated time is at most that of
    XLA's plan (forced onto our module) on every program."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "layout_vs_xla.py"
    spec = importlib.util.spec_from_file_location("layout_vs_xla", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    agree = total = programs = 0
    for d in sorted((corpus / "jax").iterdir()):
        r = bench.program(d, "h100_sxm", False)
        if r is None:
            continue
        a, t, unmatched, _t_rules, t_xla_plan, t_cost = r
        assert unmatched == 0, d.name
        assert t_cost <= t_xla_plan * (1 + 1e-9), f"{d.name}: {t_cost} > {t_xla_plan}"
        agree, total, programs = agree + a, total + t, programs + 1
    assert programs >= 5 and total >= 3 * programs
    assert agree >= 0.9 * total, f"{agree}/{total}"


# --- options, explain ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["layout-assignment{policy=fastest}", "layout-assignment{device=tpu_v5}"]
)
def test_bad_options_are_one_line_errors(spec: str) -> None:
    with pytest.raises(PipelineError) as e:
        parse_pass_pipeline(spec)
    assert "\n" not in str(e.value) and "layout-assignment" in str(e.value)


CONV = """HloModule m, entry_computation_layout={(bf16[8,16,32,32]{3,2,1,0}, bf16[16,16,3,3]{3,2,1,0})->bf16[8,16,32,32]{3,2,1,0}}

ENTRY e {
  x = bf16[8,16,32,32] parameter(0)
  w = bf16[16,16,3,3] parameter(1)
  ROOT c = bf16[8,16,32,32] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01
}
"""


def test_explain_lists_every_candidate_and_the_winner() -> None:
    from hlopass.passes.layout.assignment import plan_time
    from hlopass.passes.layout.strategy import CONV_CANDIDATES, choose

    module = parse_hlo(CONV)
    out = io.StringIO()
    choices = choose(module, "h100_sxm", "cost", lambda c: plan_time(module, c), out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("layout cluster 0 in e: convolution c (bf16)")
    times = {ln.split()[0]: float(ln.split()[1]) for ln in lines[1:-1]}
    assert set(times) == set(CONV_CANDIDATES)
    winner = lines[-1].split()[1]
    assert times[winner] == min(times.values())
    assert choices.per_op["c"] in ("xla", "nchw", "nhwc", "keep")


# --- the cost model prices layouts -------------------------------------------------------------


def test_cost_prices_cudnn_transposes_of_non_native_conv_layouts() -> None:
    """bf16 NCHW on H100: cuDNN transposes input, filter and output (read + write each);
    in NHWC nothing; on V100 f32 (no tensor cores for f32) NCHW is native."""
    module = parse_hlo(CONV)
    (conv,) = [op for op in entry_computation(module).instructions if op.opcode == "convolution"]
    moved = 2 * 2 * (8 * 16 * 32 * 32 + 16 * 16 * 3 * 3 + 8 * 16 * 32 * 32)
    assert conv_transpose_bytes(conv, "h100_sxm") == moved
    t_nchw = estimate(module, "h100_sxm").time_us
    run_pipeline(module, "layout-assignment")  # XLA's rule: NHWC copies around the conv
    assert conv_transpose_bytes(conv, "h100_sxm") == 0
    f32 = parse_hlo(CONV.replace("bf16", "f32"))
    (c32,) = [op for op in entry_computation(f32).instructions if op.opcode == "convolution"]
    assert conv_transpose_bytes(c32, "v100") == 0
    assert t_nchw > 0


def test_cost_prices_reshapes_that_move_data() -> None:
    text = """HloModule m

ENTRY e {
  p = f32[512,1024]{0,1} parameter(0)
  ROOT r = f32[524288]{0} reshape(p)
}
"""
    moving = estimate(parse_hlo(text), "h100_sxm")
    free = estimate(parse_hlo(text.replace("{0,1}", "{1,0}")), "h100_sxm")
    assert [k.name for k in moving.kernels] == ["r"] and free.kernels == []
    assert moving.kernels[0].bytes_accessed == 2 * 4 * 512 * 1024


@pytest.mark.parametrize(
    "src,src_m2m,dst,dst_m2m,bitcast",
    [
        ((4, 8), (1, 0), (32,), (0,), True),
        ((4, 8), (0, 1), (32,), (0,), False),
        ((1, 8), (0, 1), (8,), (0,), True),
        ((4, 8), (0, 1), (8, 4), (1, 0), False),
        ((2, 3, 4), (2, 1, 0), (6, 4), (1, 0), True),
        ((4, 8), (0, 1), (4, 8), (1, 0), False),
    ],
)  # fmt: skip
def test_reshape_is_bitcast(src, src_m2m, dst, dst_m2m, bitcast) -> None:
    """Worked by hand: f32[4,8]{0,1} holds (a, b) at b*4+a, so its row-major reshape to
    [8,4]{1,0} puts logical (0,1) = (a=0, b=1) at offset 1, not 4: no bitcast."""
    s = ArrayShape("f32", src, (), Layout(src_m2m))
    d = ArrayShape("f32", dst, (), Layout(dst_m2m))
    assert reshape_is_bitcast(s, d) is bitcast


def test_reshape_is_bitcast_matches_element_offsets() -> None:
    """The run-based rule agrees with comparing every element's memory offset (brute force)
    on random shapes and layouts."""
    import random

    from hlopass.cost.layouts import physical_offsets

    rng = random.Random(7)

    def split(n: int, k: int) -> list[int]:
        dims = []
        for _ in range(k - 1):
            d = rng.choice([f for f in range(1, n + 1) if n % f == 0])
            dims.append(d)
            n //= d
        return [*dims, n]

    seen = {True: 0, False: 0}
    for _ in range(600):
        n = rng.choice([4, 6, 8, 12, 24, 36])
        a, b = split(n, rng.randint(1, 4)), split(n, rng.randint(1, 3))
        pa, pb = list(range(len(a))), list(range(len(b)))
        rng.shuffle(pa)
        rng.shuffle(pb)
        s = ArrayShape("f32", tuple(a), (), Layout(tuple(pa)))
        d = ArrayShape("f32", tuple(b), (), Layout(tuple(pb)))
        want = bool(np.array_equal(physical_offsets(s), physical_offsets(d)))
        assert reshape_is_bitcast(s, d) is want, (s, d)
        seen[want] += 1
    assert min(seen.values()) > 50


@pytest.mark.parametrize("program", ["cnn_train", "attention_block", "mlp_adam"])
def test_interpreter_ignores_layouts(program: str, corpus: Path) -> None:
    """Random layouts forced on every convolution and dot (copies wherever needed), then
    normalized: the interpreter's outputs do not change by a bit."""
    import random

    import hlopass.interpreter as interp
    from hlopass.passes.layout.assignment import assign_layouts
    from hlopass.passes.layout.engine import Choices

    d = corpus / "jax" / program
    module = parse_hlo((d / "before_optimizations.hlo").read_text())
    args, _ = _inputs(d)
    base = interp.evaluate(parse_hlo(print_hlo(module)), *args)
    rng = random.Random(program)
    choices = Choices("h100_sxm")
    for c in computations(module):
        for op in c.instructions:
            if op.opcode in ("dot", "convolution"):
                perms = []
                for v in (*op.operands[:2], op.result):
                    p = list(range(v.type.data.rank))
                    rng.shuffle(p)
                    perms.append(tuple(p))
                choices.forced[op.inst_name] = tuple(perms)  # type: ignore[assignment]
    assert choices.forced
    assign_layouts(module, choices)
    run_pipeline(module, "layout-normalization,copy-elision", verify_each=True)
    got = interp.evaluate(parse_hlo(print_hlo(module)), *args)
    for g, b in zip(got, base, strict=True):
        np.testing.assert_array_equal(g, b)
