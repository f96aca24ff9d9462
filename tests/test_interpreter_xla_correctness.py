"""XLA's own numerical-correctness modules, run on the interpreter and on XLA:CPU.

The modules: every module of `xla_tests/*.hlo` in the corpus whose file has a RUN line
with `cpu_test_correctness` or `gpu_test_correctness` (XLA's emitter tests; multi-module
files are split at `// -----`). Each runs on seeded random arguments
(`tests.interp_util.random_inputs`: floats uniform in [-2, 2), integers that index
dynamic-slice/dynamic-update-slice/gather/scatter in range, scatter indices unique where
the scatter needs it, reduce init parameters set to the combiner's identity) on
`hlopass.evaluate` and on XLA:CPU through jaxlib, in a child process (XLA may abort).

XLA:CPU's execution path (hlo_to_stablehlo) rejects or CHECK-fails on some of these
already-fused, layout-assigned modules; those run on XLA after `xla_friendly` (fusions
inlined, bitcasts spelled as transpose/reshape/bitcast-convert, layouts dropped), and the
summary marks them `rewritten`. The interpreter always runs the original module.

Comparison: integers and pred exactly; floats within the bound `tests.error_bound` derives
from the module and its arguments (or the module's own `--abs_error_bound` /
`--rel_error_bound` where looser). Modules with an op the analysis has no rule for fall
back to the per-type tolerances of `TOLERANCE` (the summary counts them). Why those:
- f32/c64: rtol 1e-4, atol 1e-4. XLA:CPU contracts a*b+c into FMAs and vectorizes
  reductions (another summation order); the interpreter rounds every op and sums with
  numpy's pairwise summation. Chains with cancellation (loop__mof_reshapes) reach a
  relative ~1e-4, and sums of thousands of O(1) values that cancel to ~0.01
  (reduce_column__odd_sizes) an absolute ~3e-5.
- f16/bf16: rtol 1e-2, atol 5e-2. XLA:CPU accumulates an f16 reduce in f16, one element
  after the other; the interpreter accumulates in f32 and rounds once. A 64-element f16
  sum of values in [-2, 2) differs by up to ~0.02 (a few ulps of the sum).
- f64/c128: rtol 1e-10, atol 1e-12.

`NOT_RUNNING` lists every module that cannot run (or is known not to match) with its
reason; the test asserts the actual set equals it, so both regressions and fixes show.
The summary table prints with `pytest -s` (or `-rP`).
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import hlopass
from hlopass.checking.corpus import corpus_root, modules
from hlopass.interpreter.core import flatten
from tests.error_bound import NoBound, error_bounds, is_float, within_bound
from tests.interp_util import random_inputs, xla_execute_many, xla_friendly

SEED = 0
CORRECTNESS = re.compile(r"RUN:.*\b(cpu|gpu)_test_correctness\b")
TOLERANCE = {  # element type -> (rtol, atol)
    "float32": (1e-4, 1e-4),
    "complex64": (1e-4, 1e-4),
    "float16": (1e-2, 5e-2),
    "bfloat16": (1e-2, 5e-2),
    "float64": (1e-10, 1e-12),
    "complex128": (1e-10, 1e-12),
}
DEFAULT_TOLERANCE = (1e-2, 5e-2)  # 8-bit and smaller floats

# module id -> why it cannot run (a prefix of the recorded reason). Empty: all 110 run
# and match on this jaxlib (0.10.2).
NOT_RUNNING: dict[str, str] = {}


def _correctness_modules():
    root = corpus_root()
    if root is None:
        return []
    return [m for m in modules(root, ("xla_tests",)) if CORRECTNESS.search(m.text)]


def _bounds(text: str) -> tuple[float, float]:
    rel = [float(x) for x in re.findall(r"--rel_error_bound=([0-9.eE+-]+)", text)]
    abs_ = [float(x) for x in re.findall(r"--abs_error_bound=([0-9.eE+-]+)", text)]
    return max(rel, default=0.0), max(abs_, default=0.0)


def _compare(
    got: list[np.ndarray], want: list[np.ndarray], text: str, bounds: list | None = None
) -> str | None:
    """None when equal within tolerance, else a one-line description of the difference.
    With `bounds` (tests.error_bound) floats are compared within the derived bound, or the
    module's own `--abs/rel_error_bound` where it states a looser one."""
    if len(got) != len(want):
        return f"{len(got)} outputs, XLA has {len(want)}"
    rel, abs_ = _bounds(text)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"out{i}: {g.dtype}{list(g.shape)} vs XLA {w.dtype}{list(w.shape)}"
        if g.dtype.kind in "iub" or not is_float(g):  # ml_dtypes' int4/uint4 have kind V
            if not np.array_equal(g, w):
                return f"out{i}: {int((g != w).sum())} of {g.size} elements differ"
            continue
        kind = np.complex128 if g.dtype.kind == "c" else np.float64
        gg, ww = g.astype(kind), w.astype(kind)
        if bounds is not None:
            rtol, atol = rel, abs_
            close = within_bound(g, w, bounds[i])
            if rel or abs_:
                close |= np.isclose(gg, ww, rtol=rel, atol=abs_, equal_nan=True)
        else:
            rtol, atol = TOLERANCE.get(g.dtype.name, DEFAULT_TOLERANCE)
            rtol, atol = max(rtol, rel), max(atol, abs_)
            close = np.isclose(gg, ww, rtol=rtol, atol=atol, equal_nan=True)
        if not close.all():
            k = int(np.argmin(close.reshape(-1)))
            return (f"out{i}: {int((~close).sum())} of {g.size} elements differ beyond "
                    f"{'the derived bound' if bounds is not None else ''} rtol {rtol:g} atol {atol:g}, e.g. {gg.reshape(-1)[k]} vs XLA {ww.reshape(-1)[k]}")  # fmt: skip
    return None


class Row:
    def __init__(self, mid: str):
        self.id = mid
        self.status = ""  # "match" | reason it cannot run / mismatch
        self.seconds = 0.0
        self.rewritten = False
        self.bounds: list | None = None  # derived error bounds (None: per-type tolerances)


@pytest.fixture(scope="module")
def correctness_rows(corpus, xla) -> list[Row]:
    mods = _correctness_modules()
    rows: list[Row] = []
    ours: dict[int, list[np.ndarray]] = {}
    cases: list[tuple[int, str, list[np.ndarray]]] = []
    for m in mods:
        row = Row(m.id)
        rows.append(row)
        try:
            module = hlopass.parse_hlo(m.text, m.id)
        except Exception as e:
            row.status = f"parse_hlo fails: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
            continue
        args = random_inputs(module, SEED)
        start = time.perf_counter()
        try:
            got = hlopass.evaluate(module, *args)
        except hlopass.UnsupportedOpError as e:
            row.status = f"interpreter: {e}"
            continue
        row.seconds = time.perf_counter() - start
        try:
            row.bounds = [e for _, e in error_bounds(module, *args)]
        except NoBound:
            row.bounds = None
        ours[len(rows) - 1] = got
        cases.append((len(rows) - 1, m.text, [a for x in args for a in flatten(x)]))
    results = xla_execute_many([(text, args) for _, text, args in cases])
    retry = []
    for (k, text, args), r in zip(cases, results, strict=True):
        if "outputs" in r:
            rows[k].status = _compare(ours[k], r["outputs"], text, rows[k].bounds) or "match"
        else:
            retry.append((k, text, args, r.get("error") or r.get("crash")))
    friendly = []
    for k, text, args, why in retry:
        try:
            friendly.append((k, xla_friendly(text), args, why))
        except Exception as e:
            rows[k].status = f"XLA:CPU: {why}; rewrite failed: {type(e).__name__}: {e}"
    results = xla_execute_many([(text, args) for _, text, args, _ in friendly])
    for (k, _, _, why), r in zip(friendly, results, strict=True):
        if "outputs" in r:
            rows[k].rewritten = True
            rows[k].status = (
                _compare(ours[k], r["outputs"], mods[k].text, rows[k].bounds) or "match"
            )
        else:
            rows[k].status = f"XLA:CPU: {why}; after rewrite: {r.get('error') or r.get('crash')}"
    _print_summary(rows)
    return rows


def _print_summary(rows: list[Row]) -> None:
    ok = [r for r in rows if r.status == "match"]
    print(f"\nXLA correctness modules: {len(rows)} total, {len(ok)} run and match "
          f"({sum(r.rewritten for r in ok)} on XLA after rewrite), {len(rows) - len(ok)} not; "
          f"{sum(r.bounds is not None for r in rows)} compared within derived error bounds")  # fmt: skip
    print(f"{'module':<92} {'ours s':>7}  result")
    for r in rows:
        name = r.id.removeprefix("xla_tests/")
        note = r.status + (" (XLA ran the rewrite)" if r.rewritten else "")
        print(f"{name:<92} {r.seconds:7.3f}  {note}")


def test_correctness_modules_found(correctness_rows):
    assert len(correctness_rows) >= 100, "expected XLA's ~110 correctness modules in the corpus"


def test_correctness_modules_match_xla(correctness_rows):
    failing = {r.id: r.status for r in correctness_rows if r.status != "match"}
    unexpected = {
        k: v for k, v in failing.items() if k not in NOT_RUNNING or not v.startswith(NOT_RUNNING[k])
    }
    fixed = sorted(k for k in NOT_RUNNING if k not in failing)
    lines = [f"  {k}: {v}" for k, v in sorted(unexpected.items())]
    lines += [f"  {k}: now runs and matches (remove it from NOT_RUNNING)" for k in fixed]
    assert not lines, "correctness modules differ from the expected list:\n" + "\n".join(lines)


def test_every_module_has_a_derived_bound(correctness_rows):
    """No module falls back to the per-type `TOLERANCE` table: each float output is
    compared within the bound derived from its computation (tests/error_bound.py)."""
    missing = [r.id for r in correctness_rows if r.bounds is None]
    assert not missing, f"no derived bound for {missing[:5]}"
