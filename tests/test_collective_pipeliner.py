"""`collective-pipeliner` keeps every replica's outputs bit for bit: on the lit modules that
XLA-CPU can run and on modules of our own (8 replicas), our interpreter and XLA-CPU on 8
host devices give the same outputs before and after the pass, and XLA parses and runs
every output.

The pipeliner moves each collective to the next iteration (or after the loop) without
changing what it reduces or in which order: every output element is computed by the same
instructions from the same values, so the interpreter's outputs and XLA-CPU's outputs
before and after are equal bit for bit, floats included (XLA-CPU run with excess precision
off, see `executed`). The interpreter and XLA-CPU sum all-reduce terms in different orders;
they are compared within a bound (`near`).

Left out of the runs (checked by the lit file only): `TransformNegativeIndexIterationToZero`
with `last-run=false` and the level-1 cases (`PushAgOver`,
`NoPushAgOverBecauseDifferentSize`), whose modules hold XLA's `InsertedByPreviousStep`
custom-call, which XLA-CPU cannot run (the first runs here with `last-run=true`); the
collective-permute cases, whose permutes name 8 partitions (XLA-CPU is driven with
replicas only, the interpreter has one partition per replica); and
`NotTransformAllGatherWithRecvInChainBackwards` (send / recv run on neither).
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from hlopass.dialects.hlo import entry_computation
from hlopass.interpreter import evaluate_replicas
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context

ROOT = Path(__file__).resolve().parent.parent
LIT = ROOT / "lit_tests" / "passes" / "collectives" / "collective-pipeliner.hlo"
SCAN_PSUM = ROOT / "benchmarks" / "collective_programs" / "scan_psum" / "per_device.hlo"
REPLICAS = 8
"""XLA's tests run on 4 replicas x 2 partitions; their forward modules' groups span 8
devices, the backward ones' all-gathers (no channel: one group of all replicas) 4."""
FOUR = {"TransformIncrementIndexByOneBackwards", "TransformIncrementIndexByOneStartFromOneBackwards",
        "TransformIncrementIndexByOneBackwardsModifyOut",
        "TransformIncrementIndexByOneBackwardsPlusForward"}  # fmt: skip


def replicas(name: str) -> int:
    return 4 if name in FOUR else REPLICAS


BASE = "max-pipelining-per-loop=1000 process-different-sized-ops=true"
BWD = "max-pipelining-per-loop=1000 pipelining-direction=backward op-kind=all-gather"
RUN = {
    # lit case (XLA test name) -> the options of its RUN line
    "TransformIncrementIndexByOne": BASE,
    "TransformIncrementIndexByOneNoReuse": BASE + " reuse-pipelined-op-buffer=false",
    "TransformIncrementIndexByOneNotFirstIdx": BASE,
    "TransformIncrementByTwo": BASE,
    "NoTransformCantProveIndexDoesntWrap": BASE,
    "TransformNegativeIndexIterationToZero": BASE,
    "EscapedInputNoTransform": BASE,
    "TransformWithAg": BASE + " op-kind=all-gather",
    "TransformWithAgWithFormatting": BASE + " op-kind=all-gather",
    "TransformIncrementByTwoFormat": BASE,
    "TransformIncrementByTwoFormatTranspose": BASE,
    "MultiUsesElementwise": BASE + " pipeline-use-tree=true",
    "MultiUsesElementwiseSortFormattingOps": BASE + " pipeline-use-tree=true",
    "ElementWiseUser": BASE + " pipeline-use-tree=true",
    "AllGatherAsFormattingOp": BASE,
    "MultiUsesElementwiseMerge": BASE + " pipeline-use-tree=true",
    "MultiUsesElementwiseFeedTwo": BASE + " pipeline-use-tree=true",
    "MultiUsesElementwiseFeedTwoWithReduce": BASE + " pipeline-use-tree=true",
    "TransformIncrementIndexByOneBackwards": BWD,
    "TransformIncrementIndexByOneStartFromOneBackwards": BWD,
    "TransformIncrementIndexByOneBackwardsModifyOut": BWD,
    "TransformIncrementIndexByOneBackwardsPlusForward": (
        f"collective-pipeliner{{{BWD} last-run=false process-different-sized-ops=true}},"
        f"collective-pipeliner{{{BASE}}}"
    ),
}
TREE = BASE + " pipeline-use-tree=true"
UNCHANGED = {
    "NoTransformCantProveIndexDoesntWrap",
    "EscapedInputNoTransform",
    "TransformIncrementIndexByOneBackwardsModifyOut",
}

_LOOP = """
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
  p = (s32[], f32[4,6], f32[4,6], s32[4,3], f32[6]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(BOUND)
  ROOT lt = pred[] compare(i, n), direction=DIR
}
body {
  p = (s32[], f32[4,6], f32[4,6], s32[4,3], f32[6]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  out = f32[4,6] get-tuple-element(p), index=1
  x = f32[4,6] get-tuple-element(p), index=2
  outk = s32[4,3] get-tuple-element(p), index=3
  w = f32[6] get-tuple-element(p), index=4
  zero = s32[] constant(0)
  ds = f32[1,6] dynamic-slice(x, i, zero), dynamic_slice_sizes={1,6}
  fi = f32[] convert(i)
  fb = f32[1,6] broadcast(fi), dimensions={}
  wb = f32[1,6] reshape(w)
  d = f32[1,6] multiply(ds, fb)
  d2 = f32[1,6] add(d, wb)
  ar = f32[1,6] all-reduce(d2), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=sum_f
  sc = f32[1,6] multiply(ar, wb)
  st = f32[4,6] dynamic-update-slice(out, sc, i, zero)
  ki = s32[1,3] broadcast(i), dimensions={}
  ark = s32[1,3] all-reduce(ki), channel_id=2, replica_groups={}, to_apply=sum_i
  stk = s32[4,3] dynamic-update-slice(outk, ark, i, zero)
  w2 = f32[6] multiply(w, w)
  step = s32[] constant(STEP)
  i2 = s32[] add(i, step)
  ROOT t = (s32[], f32[4,6], f32[4,6], s32[4,3], f32[6]) tuple(i2, st, x, stk, w2)
}
ENTRY main {
  start = s32[] constant(START)
  out = f32[4,6] parameter(0)
  x = f32[4,6] parameter(1)
  outk = s32[4,3] parameter(2)
  w = f32[6] parameter(3)
  t = (s32[], f32[4,6], f32[4,6], s32[4,3], f32[6]) tuple(start, out, x, outk, w)
  l = (s32[], f32[4,6], f32[4,6], s32[4,3], f32[6]) while(t), condition=cond, body=body
  a = f32[4,6] get-tuple-element(l), index=1
  b = s32[4,3] get-tuple-element(l), index=3
  ROOT r = (f32[4,6], s32[4,3]) tuple(a, b)
}
"""


_BACKWARD = """
cond {
  p = (s32[], f32[8,2], f32[4,2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(BOUND)
  ROOT c = pred[] compare(i, n), direction=DIR
}
body {
  p = (s32[], f32[8,2], f32[4,2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  w = f32[8,2] get-tuple-element(p), index=1
  acc = f32[4,2] get-tuple-element(p), index=2
  one = s32[] constant(1)
  k = s32[] subtract(i, one)
  zero = s32[] constant(0)
  ds = f32[1,2] dynamic-slice(w, k, zero), dynamic_slice_sizes={1,2}
  ng = f32[1,2] negate(ds)
  ag = f32[4,2] all-gather(ng), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}
  fk = f32[] convert(k)
  fb = f32[4,2] broadcast(fk), dimensions={}
  m = f32[4,2] multiply(ag, fb)
  acc2 = f32[4,2] add(acc, m)
  step = s32[] constant(STEP)
  i2 = s32[] add(i, step)
  ROOT t = (s32[], f32[8,2], f32[4,2]) tuple(i2, w, acc2)
}
ENTRY main {
  start = s32[] constant(START)
  w = f32[8,2] parameter(0)
  acc = f32[4,2] parameter(1)
  t = (s32[], f32[8,2], f32[4,2]) tuple(start, w, acc)
  l = (s32[], f32[8,2], f32[4,2]) while(t), condition=cond, body=body
  ROOT a = f32[4,2] get-tuple-element(l), index=2
}
"""


def _own(name: str, start: int, bound: int, step: int, direction: str, loop: str = _LOOP) -> str:
    text = loop.replace("START", str(start)).replace("BOUND", str(bound))
    text = text.replace("STEP", str(step)).replace("DIR", direction)
    return f"HloModule {name}, replica_count={REPLICAS}\n" + text


OWN = {
    # two all-reduces (f32 in groups of four, s32 over all) storing at the same index: one
    # carried index; the f32 one is followed by an elementwise multiply (pipeline-use-tree)
    # with a loop-varying `wb`, carried
    "own_two_stores": (_own("own_two_stores", 0, 4, 1, "LT"), TREE),
    # the same counting down from 3 (`i > -1`, step -1)
    "own_counting_down": (_own("own_counting_down", 3, -1, -1, "GT"), TREE),
    # at most one collective per loop (XLA checks the limit after adding one)
    "own_one_per_loop": (
        _own("own_one_per_loop", 0, 4, 1, "LT"),
        "max-pipelining-per-loop=1 pipeline-use-tree=true",
    ),  # fmt: skip
    # without pipeline-use-tree the multiply after the f32 all-reduce is no formatting op:
    # only the s32 one moves (one carried index)
    "own_no_tree": (_own("own_no_tree", 0, 4, 1, "LT"), BASE),
    # backward: an all-gather (groups of four) of a slice of an invariant element at i - 1
    # (the scalar k is also read outside the chain), i = 1, 3, 5, 7
    "own_backward": (_own("own_backward", 1, 9, 2, "LT", _BACKWARD), BWD),
    # the same counting down, i = 8, 6, 4, 2
    "own_backward_down": (_own("own_backward_down", 8, 0, -2, "GT", _BACKWARD), BWD),
}


def lit_modules() -> dict[str, str]:
    """The lit file's modules by XLA test name, with `replica_count` in the header."""
    out = {}
    for chunk in LIT.read_text().split("// -----"):
        name = re.search(r"// XLA: \S+_test\.cc (\w+)", chunk)
        body = "\n".join(ln for ln in chunk.splitlines() if not ln.startswith("//"))
        if name is None or "HloModule" not in body:
            continue
        n = replicas(name.group(1))
        out[name.group(1)] = re.sub(r"^(HloModule [^,\s]+)", rf"\1, replica_count={n}",
                                    body.strip(), count=1, flags=re.M)  # fmt: skip
    return out


def arguments(module, n: int) -> list[list[np.ndarray]]:
    """Per replica (`n`): random values of each entry parameter (small integers for s32)."""
    rng = np.random.default_rng(5)
    per: list[list[np.ndarray]] = [[] for _ in range(n)]
    for p in entry_computation(module).parameters():
        shape = p.shape
        assert isinstance(shape, ArrayShape)
        dt = np.dtype(numpy_dtype(shape.element_type))
        for r in range(n):
            if dt.kind in "iu":
                per[r].append(rng.integers(-100, 100, shape.dims).astype(dt))
            else:
                per[r].append(rng.standard_normal(shape.dims).astype(dt))
    return per


def run_pass(text: str, options: str) -> tuple[bool, str]:
    """Run `collective-pipeliner{options}` (or, when `options` names passes, that
    pipeline) on `text`."""
    module = parse_hlo(text)
    pipeline = (
        options if options.startswith("collective-") else f"collective-pipeliner{{{options}}}"
    )
    passes = parse_pass_pipeline(pipeline)
    changed = any(p.run(context(), module) for p in passes)
    module.verify()
    return changed, print_hlo(module)


CASES = [(n, t, RUN[n]) for n, t in lit_modules().items() if n in RUN]
CASES += [(n, t, o) for n, (t, o) in OWN.items()]


@cache
def executed() -> dict[str, dict]:
    """Per case: both texts, interpreter and XLA-CPU outputs before and after."""
    from tests.interp_util import xla_execute_replicas

    out: dict[str, dict] = {}
    jobs = []
    for name, text, options in CASES:
        module = parse_hlo(text)
        per = arguments(module, replicas(name))
        before = print_hlo(module)
        changed, after = run_pass(before, options)
        out[name] = {"changed": changed, "before": before, "after": after,
                     "interp": [evaluate_replicas(parse_hlo(t), per) for t in (before, after)]}  # fmt: skip
        jobs += [(before, per), (after, per)]
    # XLA-CPU by default drops the bf16 rounding between an op and a following
    # all-reduce it widens to f32 (excess precision); the pipelined module stores that
    # value into a bf16 buffer first, so only with excess precision off do both round alike
    saved = os.environ.get("XLA_FLAGS")
    os.environ["XLA_FLAGS"] = f"{saved or ''} --xla_allow_excess_precision=false".strip()
    try:
        results = xla_execute_replicas(jobs)
    finally:
        if saved is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = saved
    for k, (name, _, _) in enumerate(CASES):
        out[name]["xla"] = results[2 * k : 2 * k + 2]
    return out


def same(got, want, what: str) -> None:
    assert len(got) == len(want), what
    for r, (g_r, w_r) in enumerate(zip(got, want, strict=True)):
        for i, (g, w) in enumerate(zip(g_r, w_r, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: replica {r} output {i}"
            assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), (
                f"{what}: replica {r} output {i}\ngot {g}\nwant {w}"
            )


def near(got, want, what: str) -> None:
    """Interpreter against XLA-CPU: the two sum an all-reduce's terms in different orders
    (and XLA-CPU widens bf16 ones to f32), so floats agree to within R * eps of the
    largest magnitude per all-reduce; 8 of those (the formatting ops after an all-reduce
    multiply at most three such values) bound each output. A check of the runs, not of
    the pass: that one is `same` above."""
    for r, (g_r, w_r) in enumerate(zip(got, want, strict=True)):
        for i, (g, w) in enumerate(zip(g_r, w_r, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            if g.dtype.kind in "biu":
                assert np.array_equal(g, w), f"{what}: replica {r} output {i}"
                continue
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            eps = float(ml_dtypes.finfo(g.dtype).eps)
            bound = 8 * len(got) * eps * float(np.abs(w64).max(initial=0.0))
            err = float(np.abs(g64 - w64).max(initial=0.0))
            assert err <= bound, f"{what}: replica {r} output {i}: off by {err} > {bound}"


def test_cases_are_the_named_ones() -> None:
    assert sorted(n for n, _, _ in CASES) == sorted(list(RUN) + list(OWN))


@pytest.mark.parametrize("name", [n for n, _, _ in CASES])
def test_pipelining_keeps_every_replicas_outputs(name: str, xla) -> None:
    run = executed()[name]
    assert run["changed"] == (name not in UNCHANGED), name
    assert (run["after"] != run["before"]) == run["changed"], name
    ok, msg = xla.accepts(run["after"])
    assert ok, f"{name}: XLA rejects the output: {msg}\n{run['after']}"
    want_xla, got_xla = run["xla"]
    assert "outputs" in want_xla, f"{name}: XLA-CPU cannot run the input: {want_xla}"
    assert "outputs" in got_xla, f"{name}: XLA-CPU cannot run the output: {got_xla}"
    interp_before, interp_after = run["interp"]
    same(interp_after, interp_before, f"{name} interpreter after vs before")
    same(got_xla["outputs"], want_xla["outputs"], f"{name} XLA-CPU after vs before")
    near(interp_before, want_xla["outputs"], f"{name} interpreter vs XLA-CPU before")
    near(interp_after, got_xla["outputs"], f"{name} interpreter vs XLA-CPU after")


def test_own_loops_move_what_they_should() -> None:
    """By hand: in `own_two_stores` both all-reduces move; they store at one index `i`
    (one carried index) and the f32 one's formatting multiply reads `wb`, made outside the
    chain (carried): 5 + 2 tuple elements, and both all-reduces run once more after the
    loop (the peeled first iteration has none; it runs those not moved). With at most one per loop only the f32 one (first
    in the body) moves: the same 7 elements, one all-reduce after the loop; without
    pipeline-use-tree only the s32 one: 6 elements (the index only)."""
    for name, moved, size in (("own_two_stores", 2, 7), ("own_counting_down", 2, 7),
                              ("own_one_per_loop", 1, 7), ("own_no_tree", 1, 6)):  # fmt: skip
        text, options = OWN[name]
        changed, after = run_pass(text, options)
        assert changed, name
        (loop,) = [ln for ln in after.splitlines() if " while(" in ln]
        state = loop.split(" = ", 1)[1].split(" while(")[0]
        assert state.count("[") == size, (name, state)
        body, entry = after.split("ENTRY", 1)
        peeled, trailing = entry.split(loop, 1)
        assert trailing.count("all-reduce(") == moved, name
        # the peeled first iteration runs the all-reduces left in the loop
        assert peeled.count("all-reduce(") == 2 - moved, name
        assert body.count("all-reduce(") == 2, name


def test_scan_psum_is_left_alone() -> None:
    """The JAX scan's psums sit in `closed_call.6`, a `call` from the while body, and are
    added into the gradient accumulators (no dynamic-update-slice): XLA looks only at the
    body's own instructions for `should_process`, and an accumulation is no store; even
    with the call inlined first the `add` is not one of the formatting ops."""
    text = SCAN_PSUM.read_text()
    for pipeline in ("collective-pipeliner", "call-inliner,collective-pipeliner"):
        module = parse_hlo(text)
        passes = parse_pass_pipeline(pipeline)
        changed = [p.run(context(), module) for p in passes]
        assert not changed[-1], pipeline


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("pipelining-direction=forward-sink", "forward-sink is not implemented"),
        ("pipelining-direction=sideways", "must be one of forward, backward, forward-sink"),
        ("op-kind=all-reduce,add", "op-kind must list collectives"),
    ],
)
def test_refused_options_name_themselves(options: str, message: str) -> None:
    """What is not implemented is refused when the pipeline is read, in one line."""
    with pytest.raises(Exception, match=message) as err:
        parse_pass_pipeline(f"collective-pipeliner{{{options}}}")
    assert "\n" not in str(err.value)


def test_a_body_holding_a_loop_is_left_alone() -> None:
    """`own_two_stores` with an inner while in its body: the peeled copies would share the
    inner loop's computations, so the loop is left alone (XLA clones them)."""
    text, options = OWN["own_two_stores"]
    inner = """
inner_cond {
  q = (s32[]) parameter(0)
  j = s32[] get-tuple-element(q), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(j, two), direction=LT
}
inner_body {
  q = (s32[]) parameter(0)
  j = s32[] get-tuple-element(q), index=0
  one = s32[] constant(1)
  j2 = s32[] add(j, one)
  ROOT t = (s32[]) tuple(j2)
}
"""
    text = text.replace("\ncond {", inner + "\ncond {", 1)
    text = text.replace(
        "  w2 = f32[6] multiply(w, w)\n",
        "  it = (s32[]) tuple(zero)\n  iw = (s32[]) while(it), condition=inner_cond,"
        " body=inner_body\n  w2 = f32[6] multiply(w, w)\n",
    )
    assert run_pass(OWN["own_two_stores"][0], options)[0]
    changed, _ = run_pass(text, options)
    assert not changed
