"""The collective simplifiers (`all-reduce-folder`, `all-reduce-simplifier`,
`all-reduce-reassociate`, `reduce-scatter-reassociate`, `reduce-scatter-creator`) keep every
replica's outputs: on the modules of their lit files and a few more, XLA-CPU run on N host
devices and our interpreter on N simulated replicas agree before and after each pass, and
XLA parses every output.

Integers and predicates must match bit for bit. Floats: `reduce-scatter-creator` keeps the
reduction order, so the interpreter's results before and after must be identical; the other
passes regroup sums (`x0+x1+x2+x3` as `(x0+x1)+(x2+x3)`, `n * x` for `x+...+x`, `a+b` of two
reductions as one reduction of `a+b`), and so does XLA-CPU's own collective order against
ours: those are compared within `summation_bound`.

Left out (they cannot run here, their rewrites are checked by the lit files): modules with
more than one partition (XLA-CPU is driven with replicas only and the interpreter has one
partition per replica) and modules with over `MAX_ELEMENTS` parameter elements.
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
from hlopass.interpreter.replicas import replicas_needed
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, is_float
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context
from tests.interp_util import replica_args, with_replica_count

LIT = Path(__file__).resolve().parent.parent / "lit_tests" / "passes" / "collectives"
PASSES = ("all-reduce-folder", "all-reduce-simplifier", "all-reduce-reassociate",
          "reduce-scatter-reassociate", "reduce-scatter-creator")  # fmt: skip
MAX_ELEMENTS = 40_000

OWN = {
    # sums in s32 wrap identically in any order: exact after the rewrite
    "all-reduce-folder": """
HloModule own_folder_s32, replica_count=8
sum {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT add = s32[] add(a, b)
}
ENTRY main {
  p0 = s32[6] parameter(0)
  ar0 = s32[6] all-reduce(p0), replica_groups={{0,4},{1,5},{2,3},{6,7}}, to_apply=sum
  ROOT ar1 = s32[6] all-reduce(ar0), replica_groups={{0,5},{4,1},{2,7},{3,6}}, to_apply=sum
}
""",
    "all-reduce-reassociate": """
HloModule own_reassociate_max_pad, replica_count=4
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY main {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  ar0 = f32[2,3] all-reduce(p0), channel_id=1, replica_groups={{0,2},{1,3}}, to_apply=max
  ar1 = f32[2,3] all-reduce(p1), channel_id=2, replica_groups={{0,2},{1,3}}, to_apply=max
  r0 = f32[6] reshape(ar0)
  r1 = f32[6] reshape(ar1)
  lo = f32[] constant(-inf)
  q0 = f32[8] pad(r0, lo), padding=1_1
  q1 = f32[8] pad(r1, lo), padding=1_1
  ROOT m = f32[8] maximum(q0, q1)
}
""",
    "reduce-scatter-creator": """
HloModule own_creator_global_ids, replica_count=4
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add = f32[] add(a, b)
}
ENTRY main {
  p0 = f32[3,8] parameter(0)
  ar = f32[3,8] all-reduce(p0), channel_id=1, replica_groups={{2,0},{3,1}}, use_global_device_ids=true, to_apply=sum
  table = s32[4] constant({4,4,0,0})
  rid = u32[] replica-id()
  id = s32[1] dynamic-slice(table, rid), dynamic_slice_sizes={1}
  offset = s32[] reshape(id)
  zero = s32[] constant(0)
  r = f32[3,2,4] reshape(ar)
  ROOT ds = f32[3,2,4] dynamic-slice(r, zero, zero, offset), dynamic_slice_sizes={3,2,4}
}
""",
}


def _specs(text: str) -> list[str]:
    """The `-p` pipelines of a lit file's RUN lines."""
    return sorted({m.strip("'") for m in re.findall(r"-p\s+('[^']*'|\S+)", text)})


def _runnable(text: str) -> bool:
    module = parse_hlo(text)
    parts = module.attributes.get("hlo.num_partitions")
    if parts is not None and getattr(parts, "data", 1) != 1:
        return False
    params = entry_computation(module).parameters()
    if not all(isinstance(p.shape, ArrayShape) for p in params):
        return False
    return sum(p.shape.num_elements for p in params) <= MAX_ELEMENTS  # type: ignore[attr-defined]


UNRUNNABLE: dict[str, str] = {}
"""Rewritten lit modules whose input the interpreter refuses (its reason)."""

EXPECTED_UNRUNNABLE: set[str] = set()
"""(XLA's reduce_scatter_reassociate_test MismatchReplicaGroups, a group of one replica
that halves its operand, cannot run either, but the pass leaves it alone: not a case.)"""


def _module_name(text: str) -> str:
    return re.search(r"HloModule ([^,\s]+)", text).group(1)  # type: ignore[union-attr]


def _refused(text: str) -> str:
    from hlopass.errors import HloError

    module = parse_hlo(text)
    try:
        evaluate_replicas(module, replica_args(module, replicas_needed(module)))
    except HloError as e:
        return str(e).splitlines()[0]
    return ""


def _run(spec: str, text: str) -> str:
    module = parse_hlo(text)
    for p in parse_pass_pipeline(spec) if spec else []:
        p.run(context(), module)
    return print_hlo(module)


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for name in PASSES:
        text = (LIT / f"{name}.hlo").read_text()
        specs = [s for s in _specs(text) if "algsimp" not in s]
        for k, chunk in enumerate(text.split("// -----")):
            body = "\n".join(ln for ln in chunk.splitlines() if not ln.startswith("//"))
            if "HloModule" not in body or not _runnable(body):
                continue
            text_k = with_replica_count(body)
            outputs = [_run(spec, text_k) for spec in specs]
            for spec, output in zip(specs, outputs, strict=True):
                # a module the pass leaves alone keeps its values trivially; an option's
                # run is a case of its own only where it rewrites otherwise
                if (output == outputs[0] and spec != specs[0]) or output == _run("", text_k):
                    continue
                why = _refused(text_k)
                if why:
                    UNRUNNABLE[f"{name}/{_module_name(text_k)}"] = why
                    continue
                cases.append((f"{name}-{k}-{spec}", spec, text_k))
        if name in OWN:
            cases.append((f"{name}-own", name, OWN[name]))
    return cases


def summation_bound(per: list[list[np.ndarray]], module) -> float:
    """A bound on how far two summation orders of the same terms can drift: each order is
    off by at most (k - 1) * eps * sum|terms| from the exact sum, k the number of terms
    (replicas x float parameters), sum|terms| <= k * M with M the largest magnitude of an
    argument; eps of the narrowest float type the module computes in."""
    floats = [
        a for args in per for a in args if a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16
    ]
    mag = max([float(np.abs(a.astype(np.float64)).max(initial=0.0)) for a in floats] + [1.0])
    k = len(per) * max(1, len(floats) // len(per))
    types = {op.shape.element_type for c in computations(module) for op in c.instructions
             if isinstance(op.shape, ArrayShape) and is_float(op.shape.element_type)}  # fmt: skip
    eps = max([float(ml_dtypes.finfo(numpy_dtype(t)).eps) for t in types] + [0.0])
    return 2 * (k - 1) * eps * k * mag


CASES = _cases()


@cache
def _executed() -> dict[str, dict]:
    """Per case: args, both texts, the interpreter's and XLA-CPU's outputs before and after."""
    from tests.interp_util import xla_execute_many, xla_execute_replicas

    out: dict[str, dict] = {}
    jobs: list[tuple[str, list[list[np.ndarray]]]] = []
    index: list[int] = []  # per case: its job after the pass (its input's when unchanged)
    for cid, spec, text in CASES:
        module = parse_hlo(text)
        n = replicas_needed(module)
        per = replica_args(module, n)
        before = print_hlo(module)
        changed = any(p.run(context(), module) for p in parse_pass_pipeline(spec))
        module.verify()
        after = print_hlo(module)
        assert changed == (before != after), f"{cid}: changed={changed}"
        out[cid] = {"args": per, "before": before, "after": after, "module": parse_hlo(before),
                    "interp": [evaluate_replicas(parse_hlo(t), per) for t in (before, after)]}  # fmt: skip
        jobs += [(before, per), (after, per)] if after != before else [(before, per)]
        index.append(len(jobs) - 1)
    many = [i for i, (_, per) in enumerate(jobs) if len(per) == 1]
    multi = [i for i, (_, per) in enumerate(jobs) if len(per) > 1]
    results: list[dict] = [{} for _ in jobs]
    for i, r in zip(
        many, xla_execute_many([(jobs[i][0], jobs[i][1][0]) for i in many]), strict=True
    ):
        results[i] = {"outputs": [r["outputs"]]} if "outputs" in r else r
    for i, r in zip(multi, xla_execute_replicas([jobs[i] for i in multi]), strict=True):
        results[i] = r
    for k, (cid, _, _) in enumerate(CASES):
        last = index[k]
        first = last - 1 if out[cid]["after"] != out[cid]["before"] else last
        out[cid]["xla"] = [results[first], results[last]]
    return out


def _close(got: list[list[np.ndarray]], want: list[list[np.ndarray]], bound: float,
           what: str) -> None:  # fmt: skip
    for r, (g_r, w_r) in enumerate(zip(got, want, strict=True)):
        for i, (g, w) in enumerate(zip(g_r, w_r, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: replica {r} output {i}"
            if g.dtype.kind in "biu" or bound == 0:
                assert np.array_equal(g, w), f"{what}: replica {r} output {i}\ngot {g}\nwant {w}"
                continue
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(g64) & np.isfinite(w64)
            assert np.array_equal(g64[~finite], w64[~finite], equal_nan=True), (
                f"{what}: replica {r} output {i}: infinities or NaNs differ\ngot {g}\nwant {w}"
            )
            err = np.abs(g64[finite] - w64[finite]).max(initial=0.0)
            assert err <= bound, f"{what}: replica {r} output {i}: off by {err} > {bound}"


@pytest.mark.parametrize("cid,spec,text", CASES, ids=[c[0] for c in CASES])
def test_pass_keeps_every_replicas_outputs(cid: str, spec: str, text: str, xla) -> None:
    run = _executed()[cid]
    ok, msg = xla.accepts(run["after"])
    assert ok, f"{cid}: XLA rejects the output: {msg}\n{run['after']}"
    want_xla, got_xla = run["xla"]
    assert "outputs" in want_xla, f"{cid}: XLA-CPU cannot run the input: {want_xla}"
    assert "outputs" in got_xla, f"{cid}: XLA-CPU cannot run the output: {got_xla}\n{run['after']}"
    bound = summation_bound(run["args"], run["module"])
    interp_before, interp_after = run["interp"]
    same_order = spec == "reduce-scatter-creator"
    _close(interp_after, interp_before, 0 if same_order else bound, f"{cid} interpreter")
    _close(got_xla["outputs"], want_xla["outputs"], bound, f"{cid} XLA-CPU")
    _close(interp_before, want_xla["outputs"], bound, f"{cid} interpreter vs XLA-CPU before")
    _close(interp_after, got_xla["outputs"], bound, f"{cid} interpreter vs XLA-CPU after")


def test_only_the_known_modules_are_left_out() -> None:
    """The lit modules left out of the value checks are exactly the ones named, each for
    its reason (a new lit case the interpreter cannot run must be looked at)."""
    assert set(UNRUNNABLE) == EXPECTED_UNRUNNABLE, UNRUNNABLE


def test_cases_cover_every_pass_with_rewrites(xla) -> None:
    """Each pass rewrites some of the modules checked here (else the test proves little)."""
    run = _executed()
    for name in PASSES:
        fired = [cid for cid, spec, _ in CASES if spec.startswith(name)
                 and run[cid]["before"] != run[cid]["after"]]  # fmt: skip
        assert len(fired) >= 2, f"{name}: only {fired} change"
