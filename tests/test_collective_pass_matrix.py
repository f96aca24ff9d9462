"""Every collective pass, and `gradient-packing` with several specs, on every data-parallel
program of `benchmarks/collective_programs/` and on every corpus module with collectives
that runs here: every device's outputs are kept (issue 31's semantics point).

Per (module, pipeline) where the pipeline rewrites the module:
- our interpreter on the module's devices, after against before: equal value for value
  where the pass keeps each element's summation order (`ORDER_KEPT`: combining, slicing,
  moving data, adding zeros), else within the bound `error_bounds_devices` derives for two
  correct evaluations of the module before the pass (a reassociated sum is one of them);
- XLA:CPU on as many host devices (one child process for all), after against before, by
  the same rule; where XLA:CPU runs the two through different collective code (its
  all-reduce against our reduce of an all-gather) only the bound holds (`XLA_REORDERS`);
- XLA parses the output, and runs it unless `XLA_CANNOT_RUN` names why not.

Corpus modules are run on random inputs (`interp_util.replica_args`); left out are modules
with more than one partition (XLA:CPU is driven with replicas only), more than
`MAX_ELEMENTS` parameter elements or `MAX_DEVICES` devices, tuple parameters, and those our
interpreter refuses (`test_left_out_modules_are_the_known_ones` lists why).
"""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hlopass
from hlopass.checking.corpus import corpus_root, modules
from hlopass.checking.error_bound import NoBound, error_bounds_devices, within_bound
from hlopass.dialects.hlo import entry_computation
from hlopass.errors import HloError
from hlopass.execution import oracle
from hlopass.interpreter import evaluate_replicas
from hlopass.interpreter.replicas import replicas_needed
from hlopass.ir.shape import ArrayShape
from tests.interp_util import replica_args, with_replica_count, xla_execute_replicas

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from collective_programs.load import NAMES, load  # noqa: E402

ASYNC_ALL = ("async-collective-creator{convert-all-reduce=true convert-all-gather=true "
             "convert-collective-permute=true convert-reduce-scatter=true "
             "convert-all-to-all=true convert-collective-broadcast=true}")  # fmt: skip

# pipeline -> the pass keeps each output element's summation order
SPECS: dict[str, bool] = {
    "all-reduce-combiner": True,
    "all-reduce-combiner{gpu=true}": True,
    "all-gather-combiner": True,
    "all-gather-combiner{gpu=true}": True,
    "reduce-scatter-combiner": True,
    "reduce-scatter-combiner{gpu=true}": True,
    "collective-permute-combiner": True,
    "all-reduce-combiner,all-reduce-contiguous": True,  # one pack, sliced back
    "all-reduce-decomposer": True,  # folds the gathered values onto 0 in group order
    "all-gather-decomposer": True,  # an all-reduce of zeros but one value: exact
    "reduce-scatter-decomposer": True,  # the all-reduce, then the device's slice
    "collective-permute-decomposer": True,  # send/recv pairs move the data
    "reduce-scatter-creator": True,  # the same sums, each device keeping its slice
    ASYNC_ALL: True,
    ASYNC_ALL + ",latency-hiding-scheduler": True,  # only the order changes
    "collective-pipeliner": True,  # moves each iteration's collective, same sums
    "collective-pipeliner{pipelining-direction=backward op-kind=all-gather}": True,
    "all-reduce-folder": False,  # nested group sums as one sum
    "all-reduce-simplifier": False,  # n x v for a sum of n equal values
    "all-reduce-reassociate": False,  # ar(a) + ar(b) as ar(a + b)
    "reduce-scatter-reassociate": False,
    "while-loop-all-reduce-code-motion": False,  # one sum of the loop's partial sums
    'gradient-packing{spec="nccl" max-bytes=4096 max-group=4}': True,
    'gradient-packing{spec="xring"}': True,
    'gradient-packing{spec="nccl#2"}': True,
    'gradient-packing{spec="nccl:1k:xring"}': True,
    'gradient-packing{spec="xring/nccl" gpus-per-host=4}': False,  # host sums first
    'gradient-packing{spec="auto"}': True,
}

# pipelines after which XLA:CPU reduces in another order than before (its all-reduce
# thunk against the reduce of an all-gather our decomposer writes)
XLA_REORDERS = {"all-reduce-decomposer"}

# pipeline -> XLA:CPU's refusals of outputs XLA parses: its execution path goes through
# StableHLO, which has no tuple reduce-scatter or collective-permute, no rank-changing
# bitcast (XLA:CPU refuses `bitcast(f32[4,8]) -> f32[32]` on its own), no async tuple
# collectives, and XLA:CPU has no send/recv
XLA_CANNOT_RUN: dict[str, tuple[str, ...]] = {
    "collective-permute-decomposer": ("send",),
    "reduce-scatter-combiner": ("requires a single operand",),
    "reduce-scatter-combiner{gpu=true}": ("requires a single operand",),
    "collective-permute-combiner": ("requires a single operand",),
    "all-reduce-combiner,all-reduce-contiguous": ("layout minor_to_major field contains",),
    ASYNC_ALL: ("is not supported in StableHLO", "expected async done to have exactly one"),
    ASYNC_ALL + ",latency-hiding-scheduler": (
        "is not supported in StableHLO",
        "expected async done to have exactly one",
    ),
}

# (module, pipeline) -> XLA:CPU's failure on that output alone
XLA_FAILS_ON = {
    # the same operand twice in one tuple all-reduce (XLA's combiner does the same)
    ("parser/AllReduceAllReduce", "all-reduce-combiner"): "does not have a layout",
}

_SUB_BYTE = "xla_tests/service__gpu__tests__sub_byte_collectives.hlo#"
# (module, pipeline) never handed to XLA:CPU, only our interpreter holds them: on the async
# form of a packed s4 all-gather XLA:CPU aborts in malloc, deadlocks (a CI run hung 900 s in
# its mutex) or returns other values from one run to the next, and what it breaks can take
# the child process's next jobs with it
XLA_NOT_RUN = {(_SUB_BYTE + k, spec) for k in "01"
               for spec in (ASYNC_ALL, ASYNC_ALL + ",latency-hiding-scheduler")}  # fmt: skip

# modules XLA:CPU cannot run before any pass: only our interpreter holds them
XLA_CANNOT_RUN_INPUT = {
    "xla_tests/hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo#128":
        "Unsupported reduction computation",  # a variadic all-reduce
    "xla_tests/hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo#129":
        "Unsupported reduction computation",
    "xla_tests/service__gpu__tests__sub_byte_collectives.hlo#2": "should have a split dimension",
    "xla_tests/service__gpu__tests__sub_byte_collectives.hlo#3": "`collective-broadcast` is not",
    "parser/CollectiveBroadcast": "`collective-broadcast` is not supported",
    "parser/CombinedCollectivePermute": "requires a single operand",
    "parser/CombinedCollectivePermuteStartAndDone": "op result #0 must be ranked tensor",
}  # fmt: skip

# programs too heavy for a run per pass (large_grads: 16 s of CPU per interpreter run, 64 MiB
# of weights on each of 8 devices): tests/test_collective_programs.py holds their pipeline
HEAVY = {"large_grads"}

MAX_ELEMENTS = 40_000
MAX_DEVICES = 8
_COLLECTIVE = re.compile(r" (all-reduce|all-gather|reduce-scatter|collective-permute|"
                         r"all-to-all|collective-broadcast)(-start)?\(")  # fmt: skip


def _left_out(text: str) -> str:
    """Why a corpus module cannot run here ('' when it can)."""
    module = hlopass.parse_hlo(text)
    parts = module.attributes.get("hlo.num_partitions")
    if parts is not None and getattr(parts, "data", 1) != 1:
        return "partitions"
    params = entry_computation(module).parameters()
    if not all(isinstance(p.shape, ArrayShape) for p in params):
        return "tuple parameter"
    if sum(p.shape.num_elements for p in params) > MAX_ELEMENTS:  # type: ignore[attr-defined]
        return "size"
    n = replicas_needed(module)
    if n > MAX_DEVICES:
        return "devices"
    try:
        evaluate_replicas(module, replica_args(module, n))
    except HloError as e:
        return f"interpreter: {str(e).splitlines()[0]}"
    return ""


@cache
def _modules() -> tuple[dict[str, tuple[str, list[list[np.ndarray]]]], dict[str, str]]:
    """name -> (text, arguments per device), and the corpus modules left out with why."""
    out = {f"program/{n}": (load(n).per_device, load(n).inputs) for n in NAMES if n not in HEAVY}
    left: dict[str, str] = {}
    root = corpus_root()
    for m in modules(root) if root is not None else []:
        if len(m.text) > 50_000 or not _COLLECTIVE.search(m.text):
            continue
        try:  # our print of it: a header for the replica count, even on headerless text
            text = with_replica_count(hlopass.print_hlo(hlopass.parse_hlo(m.text)))
        except HloError as e:
            left[m.id] = f"parse: {str(e).splitlines()[0]}"
            continue
        why = _left_out(text)
        if why:
            left[m.id] = why
            continue
        module = hlopass.parse_hlo(text)
        out[m.id] = (text, replica_args(module, replicas_needed(module)))
    return out, left


def _after(spec: str, text: str) -> str:
    module = hlopass.parse_hlo(text)
    hlopass.run_pipeline(module, spec)
    return hlopass.print_hlo(module)


@cache
def _runs() -> dict[str, dict[str, Any]]:
    """Per module: its args, our run before, XLA:CPU's before, and per rewriting pipeline
    the text after with our run and XLA:CPU's."""
    mods, _ = _modules()
    out: dict[str, dict[str, Any]] = {}
    jobs: list[tuple[str, list[list[np.ndarray]]]] = []
    for name, (text, args) in mods.items():
        before = hlopass.print_hlo(hlopass.parse_hlo(text))
        afters = {s: _after(s, text) for s in SPECS}
        afters = {s: t for s, t in afters.items() if t != before}
        out[name] = {"text": text, "args": args, "job": len(jobs), "after": afters}
        ran = [s for s in afters if (name, s) not in XLA_NOT_RUN]
        out[name]["ran"] = ran
        jobs += [(text, args)] + [(afters[s], args) for s in ran]
    results = xla_execute_replicas(jobs) if oracle.available() else [{}] * len(jobs)
    for run in out.values():
        k = run["job"]
        run["xla_before"] = results[k]
        run["xla_after"] = dict(zip(run["ran"], results[k + 1 :], strict=False))
    return out


def _equal(got: list, want: list, what: str) -> None:
    for r, (g_r, w_r) in enumerate(zip(got, want, strict=True)):
        assert len(g_r) == len(w_r), f"{what}: device {r}: {len(g_r)} outputs, {len(w_r)}"
        for k, (g, w) in enumerate(zip(g_r, w_r, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: device {r} out {k}"
            same = g == w
            if g.dtype.kind in "fc" or g.dtype.kind == "V":
                g64, w64 = g.astype(np.complex128), w.astype(np.complex128)
                same = (g64 == w64) | (np.isnan(g64) & np.isnan(w64))
            assert np.all(same), f"{what}: device {r} out {k}: {int((~same).sum())} differ"


def _bounded(got: list, want: list, bounds: list, what: str) -> None:
    """Every device's outputs within the derived bound of `want`'s (integers equal)."""
    for r, (g_r, w_r, b_r) in enumerate(zip(got, want, bounds, strict=True)):
        for k, (g, w, (_, bound)) in enumerate(zip(g_r, w_r, b_r, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            if g.dtype.kind not in "fc":
                assert np.array_equal(g, w), f"{what}: device {r} out {k}"
                continue
            ok = within_bound(g, w, bound)
            assert ok.all(), f"{what}: device {r} out {k}: {int((~ok).sum())} beyond the bound"


def _cases() -> list[str]:
    mods, _ = _modules()
    return list(mods)


@pytest.mark.parametrize("name", _cases())
def test_every_pass_keeps_every_device_outputs(name: str, xla) -> None:
    run = _runs()[name]
    args, module = run["args"], hlopass.parse_hlo(run["text"])
    ours_before = evaluate_replicas(module, args)
    bounds: list | None = []
    xla_before = run["xla_before"]
    if name in XLA_CANNOT_RUN_INPUT:
        assert XLA_CANNOT_RUN_INPUT[name] in str(xla_before), f"{name}: {xla_before}"
    else:
        assert "outputs" in xla_before, f"{name}: XLA:CPU cannot run the input: {xla_before}"
    for spec, after in run["after"].items():
        what = f"{name} after {spec}"
        ok, msg = xla.accepts(after)
        assert ok, f"{what}: XLA rejects the output: {msg}"
        ours_after = evaluate_replicas(hlopass.parse_hlo(after), args)
        if not SPECS[spec]:
            bounds = bounds or _bounds(module, args)
        if SPECS[spec] or bounds is None:
            _equal(ours_after, ours_before, f"{what}, interpreter")
        else:
            _bounded(ours_after, ours_before, bounds, f"{what}, interpreter")
        if name in XLA_CANNOT_RUN_INPUT or (name, spec) in XLA_NOT_RUN:
            continue
        _check_xla(name, spec, run["xla_after"][spec], xla_before, module, args)


def _check_xla(name: str, spec: str, got: dict, before: dict, module: Any,
               args: list) -> None:  # fmt: skip
    what = f"{name} after {spec}, XLA:CPU"
    if "outputs" not in got:
        known = XLA_CANNOT_RUN.get(spec, ()) + (XLA_FAILS_ON.get((name, spec), "-"),)
        assert any(k in str(got) for k in known if k), f"{what}: {got}"
        return
    if SPECS[spec] and spec not in XLA_REORDERS:
        _equal(got["outputs"], before["outputs"], what)
        return
    bounds = _bounds(module, args)
    if bounds is None:
        _equal(got["outputs"], before["outputs"], what)
    else:
        _bounded(got["outputs"], before["outputs"], bounds, what)


def _bounds(module: Any, args: list) -> list | None:
    """The derived bound of every device's outputs; None where no rule covers the module
    (an all-reduce whose combiner is not a sum, product, max or min: held to equality)."""
    try:
        return error_bounds_devices(module, args, len(args))
    except NoBound:
        return None


def test_every_pipeline_rewrites_some_module() -> None:
    """Else the matrix says nothing about that pass (its lit file still does)."""
    fired = {s for run in _runs().values() for s in run["after"]}
    assert set(SPECS) - fired == NEVER_FIRES, sorted(set(SPECS) - fired)


# pipelines no module of the matrix gives anything to do (their lit files and
# tests/test_collective_simplifiers.py hold them on modules written for them)
NEVER_FIRES = {
    "all-reduce-folder",  # no all-reduce of an all-reduce's result
    "all-reduce-reassociate",  # no add of two all-reduces
    "reduce-scatter-reassociate",
    "reduce-scatter-creator",  # no dynamic-slice of an all-reduce by the device's id
    "while-loop-all-reduce-code-motion",  # scan_psum's psum sits in a called computation
    "collective-permute-decomposer",  # no permute of a cycle-free chain: XLA's guard
    # no loop stores a collective's result with a dynamic-update-slice by its induction
    # variable (scan_psum adds its psums to accumulators): tests/test_collective_pipeliner.py
    "collective-pipeliner",
    "collective-pipeliner{pipelining-direction=backward op-kind=all-gather}",
}


def test_left_out_modules_are_the_known_ones() -> None:
    _, left = _modules()
    kinds = {why.split(":")[0] for why in left.values()}
    assert kinds <= {"partitions", "tuple parameter", "size", "devices", "interpreter", "parse"}, (
        left
    )
    assert len(_modules()[0]) - len(set(NAMES) - HEAVY) >= 30, (
        "fewer corpus modules run than expected"
    )


_COMBINED_START = """HloModule combined_start, replica_count=4
ENTRY e {
  a = f32[3,2] parameter(0)
  b = s32[5] parameter(1)
  s = ((f32[3,2], s32[5]), (f32[3,2], s32[5])) collective-permute-start(a, b), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT d = (f32[3,2], s32[5]) collective-permute-done(s)
}
"""

_SEPARATE = """HloModule separate, replica_count=4
ENTRY e {
  a = f32[3,2] parameter(0)
  b = s32[5] parameter(1)
  pa = f32[3,2] collective-permute(a), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  pb = s32[5] collective-permute(b), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT t = (f32[3,2], s32[5]) tuple(pa, pb)
}
"""


def test_combined_permute_start_moves_each_operand(xla) -> None:
    """The combined async form (XLA's CombinedCollectivePermuteStartAndDone), which XLA:CPU
    cannot run, against its operands permuted one by one, which it can: device r gets
    device r-1's values (by hand: the ring {0->1, 1->2, 2->3, 3->0})."""
    module = hlopass.parse_hlo(_COMBINED_START)
    args = replica_args(module, 4)
    got = evaluate_replicas(module, args)
    for r in range(4):
        assert [x.tolist() for x in got[r]] == [x.tolist() for x in args[(r - 1) % 4]], r
    (want,) = xla_execute_replicas([(_SEPARATE, args)])
    _equal(got, want["outputs"], "combined start vs XLA:CPU's separate permutes")
