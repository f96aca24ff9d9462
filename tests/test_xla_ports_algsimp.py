"""The ports of XLA's algebraic_simplifier_test (`lit_tests/xla_ports/algebraic_simplifier_test*.hlo`):
per section, algsimp says it changed the module exactly when XLA's test says XLA's pass
does (`// XLA-CHANGED:`), and the module computes the same before and after on XLA-CPU.

The lit files check the text; this checks `run -> changed` under the section's pipeline
(`// XLA-PASS:`, else the file's first RUN line) and the values: the module before and the
module after run on XLA-CPU (child processes, all sections in one batch) on special values
(+-0, +-inf, nan, the bounds, subnormals, in a scattered order; random arguments would
double the XLA compiles of some thousand sections for little: the special pool already
mixes magnitudes and signs). Outputs agree bit for bit, except the float outputs of floats-are-real sections, which agree where both are
finite within a bound from the magnitudes involved (as `test_algsimp_families` allows).
A section the pass leaves as it was is not run (the same text computes the same).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.checking.verifier import allow_mixed_precision
from hlopass.dialects.hlo import entry_computation
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import parse_pass_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context
from tests.test_algsimp_families import reassociation_bound, run_replicated, special_values

PORTS = Path(__file__).resolve().parent.parent / "lit_tests" / "xla_ports"
FILES = sorted(p.name for p in PORTS.glob("algebraic_simplifier_test*.hlo"))

NOT_RUN = re.compile(
    r"custom-call|custom_call|rng\(|rng-bit-generator|rng-get-and-update-state|infeed|"
    r"outfeed|send\(|recv\(|token\[\]|after-all|async-start|call-start|-start\(|-done\(|"
    r"[su][124]\[|:T\(|:E\(|:S\("
)
"""Sections left out of the value check, by what they hold: custom-calls (no XLA-CPU
target here), effects (feeds, sends, tokens, async pairs), rng (values differ by design),
sub-byte types and tiled or memory-space layouts (XLA-CPU does not run them as written).
Their text is checked by lit and their `changed` here."""

MAX_ELEMENTS = 1 << 20
"""Sections with a larger array anywhere are left out of the value check (XLA's cases of
huge shapes test the pass's arithmetic on sizes, not values)."""


def _cases() -> list[tuple[str, str, str, str]]:
    """(id, text, pipeline, XLA's changed) per section of the port files."""
    out = []
    for name in FILES:
        text = (PORTS / name).read_text()
        default = re.search(r"-p '([^']*)'", text)
        assert default, name
        seen: dict[str, int] = {}
        for chunk in text.split("\n// -----\n"):
            head = re.search(r"(?m)^// XLA: ([A-Za-z0-9_/]+)", chunk)
            changed = re.search(r"(?m)^// XLA-CHANGED: (true|false)\s*$", chunk)
            assert head and changed, f"{name}: a section without its XLA header:\n{chunk[:300]}"
            spec = re.search(r"(?m)^// XLA-PASS: (.*)$", chunk)
            pipeline = spec.group(1).strip() if spec else default.group(1)
            test = head.group(1)
            seen[test] = seen.get(test, 0) + 1
            # parameterized XLA tests have one section per variant: number the later ones
            suffix = "" if seen[test] == 1 else f"#{seen[test]}"
            out.append((f"{name.removesuffix('.hlo')}:{test}{suffix}", chunk, pipeline,
                        changed.group(1)))  # fmt: skip
    return out


CASES = _cases()


def _parse(text: str, cid: str):
    with allow_mixed_precision(True):  # as XLA's fixture (and the RUN lines)
        return parse_hlo(text, cid)


@cache
def _run(text: str, cid: str, pipeline: str):
    """The module before, after the pipeline, and whether the pipeline said it changed (once
    per section: both tests ask)."""
    before = _parse(text, cid)
    after = _parse(text, cid)
    changed = False
    with allow_mixed_precision(True):
        for p in parse_pass_pipeline(pipeline):
            changed |= p.run(context(), after)
        after.verify()
    return before, after, changed


def test_every_case_is_collected() -> None:
    """Pins how many sections each port file holds (a lost `// -----` shows here)."""
    counts = {f: sum(c[0].split(":")[0] == f.removesuffix(".hlo") for c in CASES) for f in FILES}
    assert counts == {
        "algebraic_simplifier_test.hlo": 191,
        "algebraic_simplifier_test_block_B.hlo": 245,
        "algebraic_simplifier_test_block_C.hlo": 469,
        "algebraic_simplifier_test_block_D.hlo": 155,
    }


@pytest.mark.parametrize("cid,text,pipeline,want", CASES, ids=[c[0] for c in CASES])
def test_changed_as_xla_says(cid: str, text: str, pipeline: str, want: str) -> None:
    before, after, changed = _run(text, cid, pipeline)
    assert changed == (want == "true"), f"{cid}: XLA's Run returns {want} under {pipeline}"
    # and the pass's contract: changed exactly when the printed module differs
    assert changed == (print_hlo(before) != print_hlo(after)), cid


def _too_large(text: str) -> bool:
    for dims in re.findall(r"\[([0-9,]+)\]", text):
        if int(np.prod([int(d) for d in dims.split(",")], dtype=np.int64)) > MAX_ELEMENTS:
            return True
    return False


_TUPLE_PARAMETER = re.compile(r"(?m)^\s*(ROOT\s+)?%?[\w.-]+\s*=\s*\(.*\)\s*parameter\(")


def _runnable(text: str) -> bool:
    """Not left out by `NOT_RUN` or `MAX_ELEMENTS`, and no tuple parameter in the entry
    (its arguments are not made; read from the text: collection parses nothing)."""
    if NOT_RUN.search(text) or _too_large(text):
        return False
    entry = text[text.find("\nENTRY") :]
    entry = entry[: entry.find("\n}")]
    return not _TUPLE_PARAMETER.search(entry)


VALUE_CASES = [c for c in CASES if _runnable(c[1])]


def _arguments(module) -> list[np.ndarray]:
    """Special values for each parameter (a different start in the pool for each)."""
    params = entry_computation(module).parameters()
    return [special_values(p.shape, k) for k, p in enumerate(params)]  # type: ignore[arg-type]


@cache
def _executed() -> dict[str, tuple[list[np.ndarray], dict, dict, str]]:
    """Per value case the pass changed: (arguments, XLA-CPU's result before, after, the
    module after as text). Where XLA-CPU cannot run the input (it errs or aborts: the
    mixed precision and s32 select predicates XLA's fixture allows, which jax's StableHLO
    path refuses; tuple constants; a `bitcast` before its layout assignment; some sharded
    or custom-call inputs), or runs the input but not a pre-layout output holding a bitcast
    or fusion (which XLA must then still accept), the interpreter, checked against XLA-CPU
    op by op elsewhere, computes both sides."""
    from hlopass.interpreter.replicas import replicas_needed

    jobs: list[tuple[str, list[np.ndarray]]] = []
    replicas: list[int] = []
    meta = []
    for cid, text, pipeline, _ in VALUE_CASES:
        before, after, _ = _run(text, cid, pipeline)
        before_text, after_text = print_hlo(before), print_hlo(after)
        if before_text == after_text:
            continue  # (unchanged: the same module computes the same; nothing to run)
        params = entry_computation(before).parameters()
        assert all(isinstance(p.shape, ArrayShape) for p in params), f"{cid}: tuple argument"
        n = replicas_needed(before)
        args = _arguments(before)
        jobs += [(before_text, args), (after_text, args)]
        replicas += [n, n]
        meta.append((cid, args, before_text, after_text))
    results = run_replicated(jobs, replicas)
    out: dict[str, tuple[list[np.ndarray], dict, dict, str]] = {}
    for i, (cid, args, before_text, after_text) in enumerate(meta):
        want, got = results[2 * i], results[2 * i + 1]
        # XLA-CPU runs a module through jax's StableHLO path, which drops the layouts of
        # everything but the entry's signature: a bitcast then reinterprets other memory
        # than the module says, so the interpreter (which keeps every layout) is the judge
        # wherever one appears; XLA must still accept the output.
        has_bitcast = " bitcast(" in before_text + after_text
        if has_bitcast or "outputs" not in want or "outputs" not in got:
            input_refused = "outputs" not in want
            pre_layout = has_bitcast or "fusion(" in before_text
            if input_refused or pre_layout:
                if pre_layout and not input_refused:
                    from hlopass.execution import oracle

                    ok, msg = oracle.accepts(after_text)
                    assert ok, f"{cid}: XLA rejects the output: {msg}"
                want, got = (
                    _interpreted(before_text, cid, args),
                    _interpreted(after_text, cid, args),
                )
        out[cid] = (args, want, got, after_text)
    return out


def _interpreted(text: str, cid: str, args: list[np.ndarray]) -> dict:
    """The interpreter's outputs of `text`, or its error (failing this case only)."""
    try:
        with allow_mixed_precision(True):
            return {"outputs": hlopass.evaluate(_parse(text, cid), *args)}
    except Exception as e:  # (reported by the case's test: the others still run)
        return {"error": f"interpreter: {type(e).__name__}: {e}"}


def _compare(
    what: str, args: list[np.ndarray], got: object, want: object, fast: bool, sums: bool = False
) -> None:
    """`got` is `want` bit for bit (nan where nan, the sign of zero included); under
    floats-are-real, within the bound of a reassociated sum. `sums`: the input holds a dot
    or convolution, whose XLA-CPU kernels add each product to a +0 accumulator, so a sum
    of one -0 product is +0 there, and keep subnormal products, which XLA-CPU's
    elementwise kernels flush to zero; XLA's own rewrites of such a dot into a multiply
    (`DotToMultiply`, strength reduction) then give -0 or 0 there: only a zero's sign, or
    a subnormal against a zero, may differ."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, what
    if g.dtype.kind not in "fcV":  # (ml_dtypes floats, bf16 and the f8 types, are "V")
        assert np.array_equal(g, w), f"{what}\ngot {g}\nwant {w}"
        return
    gf = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
    wf = w.astype(gf.dtype)
    if fast:
        both = np.isfinite(gf) & np.isfinite(wf)
        err = np.abs(gf[both] - wf[both]).max(initial=0.0)
        assert err <= reassociation_bound(args, w), f"{what}\ngot {g}\nwant {w}"
        return
    same = (gf == wf) | (np.isnan(gf) & np.isnan(wf))
    if gf.dtype.kind == "f" and not sums:
        same &= (np.signbit(gf) == np.signbit(wf)) | np.isnan(gf)
    elif gf.dtype.kind == "f":
        import ml_dtypes

        tiny = float(ml_dtypes.finfo(g.dtype).tiny)
        same |= (np.abs(gf) < tiny) & (np.abs(wf) < tiny)  # (subnormal or zero, both)
    assert same.all(), f"{what}\nargs {args}\ngot {g}\nwant {w}"


@pytest.mark.parametrize("cid,text,pipeline,want", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_kept(cid: str, text: str, pipeline: str, want: str, xla) -> None:
    fast = "floats-are-real=true" in pipeline or "float-unsafe=true" in pipeline
    if cid not in _executed():
        before_module, after_module, _ = _run(text, cid, pipeline)
        assert print_hlo(before_module) == print_hlo(after_module), cid
        return  # the pass left the module as it was
    args, before, after, optimized = _executed()[cid]
    assert "outputs" in before, f"XLA-CPU cannot run the input of {cid}: {before}"
    assert "outputs" in after, f"XLA-CPU cannot run the output of {cid}: {after}\n{optimized}"
    for k, (g, w) in enumerate(zip(after["outputs"], before["outputs"], strict=True)):
        sums = " dot(" in text or " convolution(" in text
        _compare(f"{cid} output {k}\n{optimized}", args, g, w, fast, sums)
