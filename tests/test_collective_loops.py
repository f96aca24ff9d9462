"""`while-loop-all-reduce-code-motion` keeps every replica's outputs: on the lit modules that
run (4 replicas, 3 loop iterations), our interpreter and XLA-CPU on 4 host devices agree
before and after the pass, and XLA parses every output.

The motion regroups sums: before it, iteration t adds `x_0t + ... + x_3t` (one all-reduce)
to the buffer; after it, each replica sums its own `x_r1 + ... + x_rT` and one all-reduce
adds the four partial sums. Both are orders of the same N = 1 + R*T*A terms (R replicas, T
iterations, A all-reduces feeding one buffer, here 1), and any order of N terms is within
(N - 1) * u * sum|terms| of the exact sum, u the unit roundoff (eps / 2) of the narrowest
float type the module computes in (a bf16 all-reduce rounds its partial sums to bf16). Two
orders then differ by at most 2 (N - 1) u sum|terms| = (N - 1) eps sum|terms|, sum|terms| <=
N * M with M the largest argument magnitude; `motion_bound` returns that. XLA-CPU's own
all-reduce order against ours is a reordering of the same terms too, within the same bound.
Integers must match bit for bit.

Left out: the lit modules whose accumulation buffers are `constant({...})` (elided
literals), `AllReduceConvertAccumulateUse` (a bf16 all-reduce with an f32 reducer, which
XLA's test verifies with mixed precision allowed) or whose loops run over shapes the tests' 4 x 3 schedule does not fit (XLA's
nested loop, the call-graph cases); their rewrites are checked by the lit file only.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hlopass.dialects.hlo import computations, entry_computation
from hlopass.interpreter import evaluate_replicas
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, is_float
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context

LIT = Path(__file__).resolve().parent.parent / "lit_tests" / "passes" / "collectives"
PASS = "while-loop-all-reduce-code-motion"
REPLICAS = 4
TRIP_END = 4
"""Every s32 scalar argument: the lit loops count from 1 while `i < end`, 3 iterations."""
RUN = (
    "AllReduceAccumulate", "AllReduceAccumulateUse", "TypeCastAllReduceAccumulate",
    "MultipleLoopCalls", "PreserveFrontendAttributes", "RepeatedlyAccumulatedAllReduce",
)  # fmt: skip
"""The lit cases run here (XLA test names); the last is left alone by the pass."""

OWN = {
    # a buffer that does not start at zero, groups of two, and an s32 sum that must stay exact
    "own_nonzero_init": """
HloModule own_nonzero_init, replica_count=4
sum_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
sum_i {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}
cond {
  p = (s32[], s32[], f32[3,5], f32[3,5], s32[7], s32[7]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], s32[], f32[3,5], f32[3,5], s32[7], s32[7]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] get-tuple-element(p), index=1
  x = f32[3,5] get-tuple-element(p), index=2
  acc = f32[3,5] get-tuple-element(p), index=3
  k = s32[7] get-tuple-element(p), index=4
  acck = s32[7] get-tuple-element(p), index=5
  fi = f32[] convert(i)
  fb = f32[3,5] broadcast(fi), dimensions={}
  d = f32[3,5] multiply(x, fb)
  ar = f32[3,5] all-reduce(d), channel_id=1, replica_groups={{0,1},{2,3}}, to_apply=sum_f
  acc2 = f32[3,5] add(acc, ar)
  ib = s32[7] broadcast(i), dimensions={}
  dk = s32[7] multiply(k, ib)
  ark = s32[7] all-reduce(dk), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=sum_i
  acck2 = s32[7] add(ark, acck)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[], f32[3,5], f32[3,5], s32[7], s32[7]) tuple(i2, n, x, acc2, k, acck2)
}
ENTRY main {
  n = s32[] parameter(0)
  x = f32[3,5] parameter(1)
  init = f32[3,5] parameter(2)
  k = s32[7] parameter(3)
  initk = s32[7] parameter(4)
  one = s32[] constant(1)
  t = (s32[], s32[], f32[3,5], f32[3,5], s32[7], s32[7]) tuple(one, n, x, init, k, initk)
  w = (s32[], s32[], f32[3,5], f32[3,5], s32[7], s32[7]) while(t), condition=cond, body=body
  a = f32[3,5] get-tuple-element(w), index=3
  b = s32[7] get-tuple-element(w), index=5
  ROOT r = (f32[3,5], s32[7]) tuple(a, b)
}
""",
}

SCAN_PSUM = Path(__file__).resolve().parent.parent / "benchmarks" / "collective_programs"
SCAN_PSUM = SCAN_PSUM / "scan_psum" / "per_device.hlo"


def lit_modules() -> dict[str, str]:
    """The lit file's modules by XLA test name, with `replica_count` in the header."""
    out = {}
    for chunk in (LIT / f"{PASS}.hlo").read_text().split("// -----"):
        name = re.search(r"// XLA: \S+_test\.cc (\w+)", chunk)
        body = "\n".join(ln for ln in chunk.splitlines() if not ln.startswith("//"))
        if name is None or "HloModule" not in body:
            continue
        out[name.group(1)] = re.sub(r"^(HloModule [^,\s]+)", rf"\1, replica_count={REPLICAS}",
                                    body.strip(), count=1, flags=re.M)  # fmt: skip
    return out


def arguments(module) -> list[list[np.ndarray]]:
    """Per replica: random floats, every s32 scalar `TRIP_END`."""
    rng = np.random.default_rng(11)
    per: list[list[np.ndarray]] = [[] for _ in range(REPLICAS)]
    for p in entry_computation(module).parameters():
        shape = p.shape
        dt = np.dtype(numpy_dtype(shape.element_type))
        for r in range(REPLICAS):
            if dt.kind in "iu" and not shape.dims:
                per[r].append(np.full(shape.dims, TRIP_END, dt))
            elif dt.kind in "iu":
                per[r].append(rng.integers(-(2**30), 2**30, shape.dims).astype(dt))  # wraps
            else:
                per[r].append(rng.standard_normal(shape.dims).astype(dt))
    return per


SCALE = {"own_nonzero_init": TRIP_END - 1}
"""Cases whose deltas are an argument times the iteration number (M grows by that)."""


def motion_bound(per: list[list[np.ndarray]], module, scale: float = 1.0) -> float:
    """(N - 1) eps N M: two summation orders of N = 1 + R*T terms of magnitude <= M (the
    largest argument magnitude times `scale`)."""
    trips = TRIP_END - 1
    floats = [
        a for args in per for a in args if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16
    ]
    mag = max([float(np.abs(a.astype(np.float64)).max(initial=0.0)) for a in floats] + [1.0])
    n = 1 + len(per) * trips
    types = {op.shape.element_type for c in computations(module) for op in c.instructions
             if isinstance(op.shape, ArrayShape) and is_float(op.shape.element_type)}  # fmt: skip
    eps = max([float(ml_dtypes.finfo(numpy_dtype(t)).eps) for t in types] + [0.0])
    return (n - 1) * eps * n * mag * scale


def run_pass(text: str) -> tuple[bool, str]:
    module = parse_hlo(text)
    changed = any(p.run(context(), module) for p in parse_pass_pipeline(PASS))
    module.verify()
    return changed, print_hlo(module)


CASES = [(name, text) for name, text in lit_modules().items() if name in RUN]
CASES += [(name, text.strip()) for name, text in OWN.items()]


@cache
def executed() -> dict[str, dict]:
    """Per case: args, both texts, interpreter and XLA-CPU outputs before and after."""
    from tests.interp_util import xla_execute_replicas

    out: dict[str, dict] = {}
    jobs: list[tuple[str, list[list[np.ndarray]]]] = []
    for name, text in CASES:
        module = parse_hlo(text)
        per = arguments(module)
        before = print_hlo(module)
        changed, after = run_pass(before)
        assert changed == (after != before), name
        out[name] = {"args": per, "before": before, "after": after, "module": module,
                     "interp": [evaluate_replicas(parse_hlo(t), per) for t in (before, after)]}  # fmt: skip
        jobs += [(before, per), (after, per)]
    results = xla_execute_replicas(jobs)
    for k, (name, _) in enumerate(CASES):
        out[name]["xla"] = results[2 * k : 2 * k + 2]
    return out


def close(got, want, bound: float, what: str) -> None:
    for r, (g_r, w_r) in enumerate(zip(got, want, strict=True)):
        for i, (g, w) in enumerate(zip(g_r, w_r, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: replica {r} output {i}"
            if g.dtype.kind in "biu" or bound == 0:
                assert np.array_equal(g, w), f"{what}: replica {r} output {i}\ngot {g}\nwant {w}"
                continue
            err = np.abs(g.astype(np.float64) - w.astype(np.float64)).max(initial=0.0)
            assert err <= bound, f"{what}: replica {r} output {i}: off by {err} > {bound}"


def test_cases_are_the_named_ones() -> None:
    assert sorted(n for n, _ in CASES) == sorted(RUN + tuple(OWN))


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_motion_keeps_every_replicas_outputs(name: str, xla) -> None:
    run = executed()[name]
    assert (run["after"] != run["before"]) == (name != "RepeatedlyAccumulatedAllReduce")
    ok, msg = xla.accepts(run["after"])
    assert ok, f"{name}: XLA rejects the output: {msg}\n{run['after']}"
    want_xla, got_xla = run["xla"]
    assert "outputs" in want_xla, f"{name}: XLA-CPU cannot run the input: {want_xla}"
    assert "outputs" in got_xla, f"{name}: XLA-CPU cannot run the output: {got_xla}"
    bound = motion_bound(run["args"], run["module"], SCALE.get(name, 1.0))
    interp_before, interp_after = run["interp"]
    close(interp_after, interp_before, bound, f"{name} interpreter")
    close(got_xla["outputs"], want_xla["outputs"], bound, f"{name} XLA-CPU")
    close(interp_before, want_xla["outputs"], bound, f"{name} interpreter vs XLA-CPU before")
    close(interp_after, got_xla["outputs"], bound, f"{name} interpreter vs XLA-CPU after")


def test_motion_moves_the_sum_out_of_the_loop() -> None:
    """The bound is not vacuous: buffer 3 accumulates `sum_r param.1` three times from zero,
    the interpreter gets that within the bound before and after the motion, and the sum is
    larger than the bound."""
    text = dict(CASES)["AllReduceAccumulate"]
    module = parse_hlo(text)
    per = arguments(module)
    bound = motion_bound(per, module)
    exact = 3 * sum(args[1].astype(np.float64) for args in per)
    for t in (text, run_pass(text)[1]):
        out = evaluate_replicas(parse_hlo(t), per)
        for r in range(REPLICAS):
            assert np.abs(out[r][3] - exact).max() <= bound
    assert np.abs(exact).max() > 100 * bound


def test_scan_psum_is_left_alone() -> None:
    """The JAX scan's psums sit in `closed_call.6`, a `call` from the while body, and the
    accumulated gradients reach the body's root through that call's tuple: XLA's matcher
    looks only at all-reduces in the body itself (its `AllReduceInsideCalledComputation
    NotHoisted` case), so it needs the call inlined first; ours likewise."""
    changed, _ = run_pass(SCAN_PSUM.read_text())
    assert not changed
