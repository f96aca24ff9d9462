"""`check_equivalent(before, after)`: does a rewrite keep a module's values?

Both modules run under the interpreter on the same seeded random inputs
(`hlopass.execution.inputs.random_inputs`) or on the inputs given; with `xla=True` the rewritten
module also runs on XLA:CPU (jaxlib, in a child process: XLA aborts the process on some
inputs). Integers, booleans and bit patterns must be equal. Floating-point outputs may
differ by what two correct implementations of `before` may differ by, derived from the
computation on these inputs (`hlopass.checking.error_bound`: summation order and FMA per dot and
reduction, a few ulps per library function, nothing for correctly rounded ops), so a tolerance
tuned to one CPU never decides. A rewrite that changes rounding on purpose (fast-math
reassociation) can ask for a fixed tolerance instead: `ulps=N` units in the last place of the
larger magnitude, plus a floor of `ulps` x eps x the largest input magnitude (for results that
cancel to near zero); `ulps=0` asks for bit-exactness. Where the analysis has no rule for an
op of `before`, the comparison falls back to 64 ulps and the result says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlopass.errors import HloError


@dataclass
class OutputDiff:
    index: int
    dtype: str
    shape: tuple[int, ...]
    mismatches: int
    max_abs_error: float
    note: str = ""


@dataclass
class Equivalence:
    """The outcome: `ok`, and per output what differed (empty when nothing did)."""

    ok: bool
    outputs: int
    diffs: list[OutputDiff] = field(default_factory=list)
    against: str = "interpreter"

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"equivalent: {self.outputs} outputs agree ({self.against})"
        lines = [f"NOT equivalent ({self.against}):"]
        for d in self.diffs:
            lines.append(
                f"  output {d.index} {d.dtype}{list(d.shape)}: {d.mismatches} elements differ, "
                f"max |error| {d.max_abs_error:.3g}{f' ({d.note})' if d.note else ''}"
            )
        return "\n".join(lines)


def check_equivalent(
    before: Any,
    after: Any,
    inputs: list[Any] | None = None,
    *,
    seed: int = 0,
    ulps: int | None = None,
    xla: bool = False,
) -> Equivalence:
    """Run `before` and `after` (modules or HLO text) on the same inputs and compare, within
    the bound derived from `before` (or `ulps` units in the last place when given)."""
    import hlopass
    from hlopass.execution.inputs import random_inputs

    before_m = _module(before)
    after_m = _module(after)
    args = list(inputs) if inputs is not None else random_inputs(before_m, seed)
    want = hlopass.evaluate(before_m, *args)
    got = hlopass.evaluate(after_m, *args)
    rule = _Rule.derive(before_m, args) if ulps is None else _Rule(ulps, _input_scale(args))
    result = _compare(want, got, rule, "interpreter" + rule.note)
    if not result.ok or not xla:
        return result
    xla_out = execute_on_xla(hlopass.print_hlo(after_m), _flat(args))
    return _compare(want, xla_out, rule, "interpreter vs XLA:CPU" + rule.note)


@dataclass
class _Rule:
    """How far two float outputs may differ: per-output derived bounds, or `ulps`."""

    ulps: int
    scale: float
    bounds: list[np.ndarray] | None = None
    note: str = ""

    @staticmethod
    def derive(module: Any, args: list[Any]) -> _Rule:
        from hlopass.checking.error_bound import NoBound, error_bounds

        try:
            return _Rule(0, 0.0, [e for _, e in error_bounds(module, *args)])
        except NoBound as e:
            return _Rule(64, _input_scale(args), None, f"; no derived bound ({e}): 64 ulps")


def _module(m: Any) -> Any:
    import hlopass

    return hlopass.parse_hlo(m, "<text>") if isinstance(m, str) else m


def _flat(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out.extend(_flat(list(a)) if isinstance(a, tuple) else [a])
    return out


def _input_scale(args: list[Any]) -> float:
    m = 0.0
    for a in _flat(args):
        arr = np.asarray(a)
        if arr.size and arr.dtype.kind in "fc":
            finite = np.abs(arr.astype(np.complex128 if arr.dtype.kind == "c" else np.float64))
            finite = finite[np.isfinite(finite)]
            if finite.size:
                m = max(m, float(finite.max()))
    return m


def _compare(want: list[Any], got: list[Any], rule: _Rule, against: str) -> Equivalence:
    want, got = _flat(list(want)), _flat(list(got))
    if len(want) != len(got):
        d = OutputDiff(-1, "", (), 0, 0.0, f"{len(want)} outputs before, {len(got)} after")
        return Equivalence(False, len(want), [d], against)
    diffs = [
        d for i, (w, g) in enumerate(zip(want, got, strict=True)) if (d := _diff(i, w, g, rule))
    ]
    return Equivalence(not diffs, len(want), diffs, against)


def _diff(i: int, want: Any, got: Any, rule: _Rule) -> OutputDiff | None:
    w, g = np.asarray(want), np.asarray(got)
    if w.shape != g.shape or w.dtype != g.dtype:
        return OutputDiff(i, str(g.dtype), g.shape, g.size, float("nan"),
                          f"expected {w.dtype}{list(w.shape)}")  # fmt: skip
    if w.dtype.kind in "fc" and rule.bounds is not None:
        return _beyond_bound(i, w, g, rule.bounds[i])
    ulps, scale = rule.ulps, rule.scale
    if w.dtype.kind not in "fc" or ulps == 0:
        same = _bits(w) == _bits(g)
        bad = int((~same).sum())
        return (
            OutputDiff(i, str(w.dtype), w.shape, bad, float("nan"), "bit patterns") if bad else None
        )
    wide = np.complex128 if w.dtype.kind == "c" else np.float64
    a, b = w.astype(wide), g.astype(wide)
    eps = float(np.finfo(w.dtype).eps) if w.dtype.itemsize > 2 else _small_eps(w.dtype)
    tol = ulps * eps * np.maximum(np.maximum(np.abs(a), np.abs(b)), scale)
    err = np.abs(a - b)
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & (a == b)
    ok = both_nan | same_inf | (err <= tol)
    bad = int((~ok).sum())
    if not bad:
        return None
    finite_err = err[~ok & np.isfinite(err)]
    return OutputDiff(
        i, str(w.dtype), w.shape, bad, float(finite_err.max()) if finite_err.size else float("inf")
    )


def _beyond_bound(i: int, w: np.ndarray, g: np.ndarray, bound: np.ndarray) -> OutputDiff | None:
    from hlopass.checking.error_bound import SAFETY, within_bound

    ok = within_bound(g, w, np.broadcast_to(bound, w.shape))
    bad = int((~ok).sum())
    if not bad:
        return None
    wide = np.complex128 if w.dtype.kind == "c" else np.float64
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(w.astype(wide) - g.astype(wide))[~ok]
    finite = err[np.isfinite(err)]
    worst = float(finite.max()) if finite.size else float("inf")
    allowed = float(SAFETY * np.broadcast_to(bound, w.shape)[~ok].max())
    return OutputDiff(i, str(w.dtype), w.shape, bad, worst, f"derived bound {allowed:.3g}")


def _small_eps(dtype: np.dtype) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).eps)


def _bits(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "b" or a.dtype.itemsize not in (1, 2, 4, 8):
        return a
    return a.view(f"u{a.dtype.itemsize}")


# --- XLA:CPU in a child process --------------------------------------------------------------


def execute_on_xla(text: str, args: list[Any], timeout: float = 600) -> list[Any]:
    """Run HLO `text` on XLA:CPU in a child process; HloError if XLA rejects or aborts."""
    with tempfile.TemporaryDirectory() as tmp:
        hlo, inp, out = (os.path.join(tmp, n) for n in ("m.hlo", "in.npz", "out.npz"))
        with open(hlo, "w") as f:
            f.write(text)
        _save(inp, "in", args)
        proc = subprocess.run([sys.executable, "-m", "hlopass.checking.equivalence", hlo, inp, out],
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stdout + proc.stderr).strip().splitlines()
            raise HloError(
                f"error: XLA:CPU could not run the module: {tail[-1] if tail else proc.returncode}"
            )
        return _load(out, "out")


def _save(path: str, prefix: str, arrays: list[Any]) -> None:
    names = [np.asarray(a).dtype.name for a in arrays]
    data = {f"{prefix}{k}": np.asarray(a) for k, a in enumerate(arrays)}
    np.savez(path, dtypes=np.array(names, dtype="U32"), **data)  # type: ignore[arg-type]


def _load(path: str, prefix: str) -> list[Any]:
    import ml_dtypes

    with np.load(path) as d:
        out = []
        for k, name in enumerate(str(n) for n in d["dtypes"]):
            a = d[f"{prefix}{k}"]
            out.append(a.view(np.dtype(getattr(ml_dtypes, name))) if a.dtype.kind == "V" else a)
    return out


def _child(hlo: str, inp: str, out: str) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from hlopass.execution import oracle

    with open(hlo) as f:
        text = f.read()
    try:
        _save(out, "out", oracle.execute(text, _load(inp, "in")))
    except Exception as e:  # XLA's rejection, as one line for the parent
        print(json.dumps({"error": (str(e).splitlines() or [type(e).__name__])[0]}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:4]))
