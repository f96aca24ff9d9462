"""Every case of `lit_tests/passes/algsimp/*.hlo` and `lit_tests/passes/core/*.hlo` keeps
XLA-CPU's values.

Each case (one `// -----` chunk) is run through the pipeline of its file's RUN line, then the
module before and the module after run on XLA-CPU (in child processes: XLA may abort) on
arguments made of special values: +-0, +-1, +-inf, nan, the largest and smallest normal
floats, the integer bounds and their neighbours. Outputs must agree bit for bit (nan where
nan, the sign of zero included), except in files that enable `enable-floats-are-real`:
there only integer and boolean outputs must agree exactly, and float outputs where both
are finite must agree to a bound derived from the case's magnitudes (reassociation).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from hlopass.dialects.hlo import entry_computation
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, is_float, is_integral
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context
from tests import op_grid

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ROOT / "lit_tests" / "passes" / "algsimp"
CORE = ROOT / "lit_tests" / "passes" / "core"
"""Cases of constant-folding, cse and dce at XLA's depth (same value checks)."""
ALGSIMP_FILES = sorted((ROOT / "lit_tests" / "passes").glob("algsimp*.hlo"))
"""The older one-file algsimp cases (`algsimp.hlo`, `algsimp-float-unsafe.hlo`): value checks
only (their must-not-fire cases are in the same files)."""

FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5, -2.5, 3.0, 7.0, -0.125]


def _float_specials(dtype: np.dtype) -> list[float]:
    import ml_dtypes

    fi = ml_dtypes.finfo(dtype)
    return FLOAT_SPECIALS + [float(fi.max), -float(fi.max), float(fi.tiny), -float(fi.tiny)]


def _int_specials(dtype: np.dtype) -> list[int]:
    ii = np.iinfo(dtype)
    vals = [0, 1, ii.max, ii.min, ii.max - 1, ii.min + 1, 2, 7, 3, 8, 64]
    if ii.min < 0:
        vals += [-1, -2, -7, -8]
    return vals


def special_values(shape: ArrayShape, shift: int) -> np.ndarray:
    """An array of `shape` filled (cyclically, starting at `shift`) with special values."""
    dtype = numpy_dtype(shape.element_type)
    n = int(np.prod(shape.dims, dtype=np.int64))
    et = shape.element_type
    if et == "pred":
        pool = np.array([True, False, False, True, True], dtype=bool)
    elif is_float(et):
        pool = np.array(_float_specials(dtype), dtype=np.float64).astype(dtype)
    elif et in ("c64", "c128"):
        re_ = np.array(FLOAT_SPECIALS, dtype=np.float64)
        pool = np.empty(len(re_), dtype=dtype)
        pool.real, pool.imag = re_, np.roll(re_, 3)
    elif is_integral(et):
        pool = np.array(_int_specials(dtype), dtype=object).astype(dtype)
    else:
        raise AssertionError(f"no special values for {et}")
    # and the op-grid differential's table (subnormals, shift amounts, INT_MIN/-1 neighbours)
    pool = np.concatenate([pool, op_grid.special_values(et).astype(pool.dtype)])
    step = next(k for k in (7, 11, 13, 17, 19) if np.gcd(k, len(pool)) == 1)
    idx = (np.arange(n) * step + shift * 3) % len(pool)  # every value, in a scattered order
    return pool[idx].reshape(shape.dims)


def _spec(text: str) -> str:
    m = re.search(r"-p\s+'([^']*)'", text)
    assert m, "RUN line without -p '...'"
    return m.group(1)


def _cases() -> list[tuple[str, str, str]]:
    """(id, pipeline, module text) for every case of the family files."""
    out = []
    for path in sorted([*FAMILIES.glob("*.hlo"), *CORE.glob("*.hlo")]) + ALGSIMP_FILES:
        text = path.read_text()
        spec = _spec(text)
        for i, chunk in enumerate(text.split("\n// -----\n")):
            if "ENTRY" in chunk and "custom_call_target=" not in chunk:
                # (custom-call targets of the cases have no XLA-CPU implementation)
                name = re.search(r"(?m)^HloModule\s+(\S+)", chunk)
                out.append((f"{path.stem}:{name.group(1) if name else i}", spec, chunk))
    return out


CASES = _cases()


@cache
def _executed() -> dict[str, tuple[list[np.ndarray], dict, dict, str]]:
    """Per case id: (arguments, XLA-CPU's result before, after, the optimized text).

    XLA-CPU aborts compiling some modules that already hold multi-output fusions (a layout
    CHECK, `has_layout()`, in its pipeline) and refuses `bitcast`s before its layout
    assignment; for those the output must still pass XLA's parser and verifier, and the
    interpreter (checked against XLA-CPU op by op elsewhere) computes both sides."""

    from hlopass.interpreter.replicas import replicas_needed

    jobs: list[tuple[str, list[np.ndarray]]] = []
    replicas: list[int] = []
    meta = []
    for cid, spec, text in CASES:
        module = parse_hlo(text, cid)
        params = entry_computation(module).parameters()
        args = []
        for k, p in enumerate(params):
            assert isinstance(p.shape, ArrayShape), f"{cid}: tuple parameters are not generated"
            args.append(special_values(p.shape, k))
        # the input as printed (layouts made explicit: XLA-CPU needs them inside fusions)
        before = print_hlo(module)
        replicas += [replicas_needed(module)] * 2  # collectives over groups of several
        changed = any(p.run(context(), module) for p in parse_pass_pipeline(spec))
        module.verify()
        after = print_hlo(module)
        # XLA's `run -> changed` contract: the pass says it changed exactly what it did
        assert changed == (before != after), f"{cid}: changed={changed}"
        jobs += [(before, args), (after, args)]
        meta.append((cid, args, after, before))
    results = run_replicated(jobs, replicas)
    out = {}
    for i, (cid, args, after, before) in enumerate(meta):
        want, got = results[2 * i], results[2 * i + 1]
        pre_layout = "fusion(" in before or " bitcast(" in before
        if ("crash" in want or "crash" in got or "error" in want) and pre_layout:
            from hlopass.execution import oracle

            ok, msg = oracle.accepts(after)
            assert ok, f"{cid}: XLA rejects the output: {msg}"
            import hlopass

            want = {"outputs": hlopass.evaluate(parse_hlo(before), *args)}
            got = {"outputs": hlopass.evaluate(parse_hlo(after), *args)}
        out[cid] = (args, want, got, after)
    return out


def run_replicated(jobs: list[tuple[str, list[np.ndarray]]], replicas: list[int]) -> list[dict]:
    """XLA-CPU's result of each job; a job whose collectives name n > 1 replicas runs on n
    replicas, each on the job's arguments, its outputs those of every replica in turn."""
    from tests.interp_util import xla_execute_many, xla_execute_replicas

    out: list[dict] = [{} for _ in jobs]
    single = [k for k, n in enumerate(replicas) if n == 1]
    for k, r in zip(single, xla_execute_many([jobs[k] for k in single]), strict=True):
        out[k] = r
    multi = [k for k, n in enumerate(replicas) if n > 1]
    if multi:
        cases = [(jobs[k][0], [jobs[k][1]] * replicas[k]) for k in multi]
        for k, r in zip(multi, xla_execute_replicas(cases), strict=True):
            out[k] = {"outputs": [a for per in r["outputs"] for a in per]} if "outputs" in r else r
    return out


def reassociation_bound(args: list[np.ndarray], want: np.ndarray) -> float:
    """Reassociation error bound: a few ulps of the largest finite magnitude involved."""
    mags = [np.abs(a[np.isfinite(a)]).max(initial=0.0) for a in args if a.dtype.kind == "f"]
    mag = max([float(np.abs(want[np.isfinite(want)]).max(initial=0.0)), *mags, 1.0])
    import ml_dtypes

    return 8 * float(ml_dtypes.finfo(want.dtype).eps) * mag


@pytest.mark.parametrize("cid,spec,text", CASES, ids=[c[0] for c in CASES])
def test_family_case_keeps_xla_cpu_values(cid: str, spec: str, text: str, xla) -> None:
    args, before, after, optimized = _executed()[cid]
    assert "outputs" in before, f"XLA-CPU cannot run the input of {cid}: {before}"
    assert "outputs" in after, f"XLA-CPU cannot run the output of {cid}: {after}\n{optimized}"
    fast = "floats-are-real=true" in spec or "float-unsafe=true" in spec
    for k, (g, w) in enumerate(zip(after["outputs"], before["outputs"], strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        what = f"{cid} output {k}\n{optimized}"
        assert g.shape == w.shape and g.dtype == w.dtype, what
        if g.dtype.kind not in "fc" and g.dtype.kind != "V":
            assert np.array_equal(g, w), f"{what}\ngot {g}\nwant {w}"
            continue
        gf = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
        wf = w.astype(gf.dtype)
        if fast:
            both = np.isfinite(gf) & np.isfinite(wf)
            err = np.abs(gf[both] - wf[both]).max(initial=0.0)
            assert err <= reassociation_bound(args, w), f"{what}\ngot {g}\nwant {w}"
            continue
        same = (gf == wf) | (np.isnan(gf) & np.isnan(wf))
        if gf.dtype.kind == "f":
            same &= (np.signbit(gf) == np.signbit(wf)) | np.isnan(gf)
        assert same.all(), f"{what}\nargs {args}\ngot {g}\nwant {w}"


def test_every_family_file_has_fire_and_kept_cases() -> None:
    """Each family file has cases that fire and cases (`*_kept`) that must not."""
    files = sorted([*FAMILIES.glob("*.hlo"), *CORE.glob("*.hlo")])
    assert len(files) >= 10
    for path in files:
        text = path.read_text()
        names = re.findall(r"(?m)^HloModule\s+(\S+)", text)
        assert any(n.endswith("_kept") for n in names), f"{path.name}: no must-not-fire case"
        assert any(not n.endswith("_kept") for n in names), f"{path.name}: no firing case"
        assert text.count("CHECK-LABEL") == len(names), f"{path.name}: a case without a label"


NOT_ON_XLA_CPU = {
    "AbsOfBatchNormVariance": "reads a cuDNN batch-norm custom-call's result: no CPU kernel",
    "LayoutConstraintToCopy": "a LayoutConstraint custom-call, which XLA-CPU does not run",
    "SliceToDynamicOfPadToStatic": "PadToStatic/SliceToDynamic custom-calls: not on XLA-CPU",
    "BitcastConvertToBitcast": "a bitcast changing the element type: jax's path refuses it",
    "ConvolutionToBitcastDot": "layout-sensitive bitcasts: jax's path drops their layouts",
    "TupleConstantToTuple": "a tuple constant: jax's path refuses it",
}
"""Patterns whose rewrite no XLA-CPU run can check (their inputs or outputs do not run
there); their cases are in `lit_tests/xla_ports/` (text), where
`tests/test_xla_ports_algsimp.py` checks the runnable ones on the interpreter."""


def test_every_algsimp_pattern_fires_in_a_value_checked_case() -> None:
    """Each algsimp pattern rewrites at least one of the cases above, so the XLA-CPU value
    check (special values, integer bounds) covers every rewrite."""
    from hlopass.passes import algsimp
    from hlopass.passes.algsimp import barriers

    fired: set[str] = set()
    for cid, spec, text in CASES:
        module = parse_hlo(text, cid)
        for p in parse_pass_pipeline(spec):
            hook = (lambda name, _what: fired.add(name)) if p.name == "algsimp" else None
            p.run(context(), module, hook)  # type: ignore[attr-defined]
    every = {c.__name__ for c in algsimp.PATTERNS} | {
        barriers.OptBarrierDropUnusedElements.__name__
    }
    assert not fired & set(NOT_ON_XLA_CPU), "fires in a value-checked case now: unlist it"
    every -= set(NOT_ON_XLA_CPU)
    assert not every - fired, (
        f"algsimp patterns no value-checked case fires: {sorted(every - fired)}"
    )
