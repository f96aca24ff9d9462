"""Every XLA-accepted corpus module under `--max-kb` KB: does `hlopass.evaluate` run it on
seeded random inputs (tests.interp_util.random_inputs), and does it match XLA-CPU where
XLA-CPU runs it? Integers and pred exactly; floats within the bound tests/error_bound.py
derives from the module and its inputs (magnitudes, reduction lengths), as the tests do;
a module with an op that analysis has no rule for falls back to the fixed per-type
tolerances of tests/test_interpreter_xla_correctness.py (the summary counts them). A module whose
collectives name N > 1 replicas runs as N replicas (replica r on inputs seeded r) in the
interpreter and in XLA-CPU (N host devices), compared replica by replica.

    python3 benchmarks/corpus_coverage.py [--max-kb 300] [--limit-s 60] [--no-xla] [--only S,..]

Prints one line per module that does not run or does not match (with the reason), then the
counts. XLA runs in child processes (it may abort on some modules); a module XLA:CPU cannot
compile is retried after `xla_friendly` (fusions inlined, layouts dropped).
"""

from __future__ import annotations

import argparse
import collections
import math
import resource
import signal
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hlopass  # noqa: E402
from hlopass import oracle  # noqa: E402
from hlopass.corpus import corpus_root, modules  # noqa: E402
from hlopass.interpreter import evaluate_replicas  # noqa: E402
from hlopass.interpreter.core import flatten  # noqa: E402
from hlopass.interpreter.dynamic import sizes_of  # noqa: E402
from hlopass.interpreter.replicas import replicas_needed  # noqa: E402
from tests.error_bound import NoBound, error_bounds  # noqa: E402
from tests.interp_util import (  # noqa: E402
    random_inputs,
    xla_execute_many,
    xla_execute_replicas,
    xla_friendly,
)
from tests.test_interpreter_xla_correctness import _compare  # noqa: E402


class _TimeLimit(Exception):
    pass


def _alarm(signum, frame):
    raise _TimeLimit


def _derived_bounds(module, inputs, no_bound: dict[str, str], mid: str) -> list | None:
    """Per-output error bounds (tests/error_bound.py), or None where the analysis has no
    rule for an op of the module (compared at the fixed per-type tolerances instead; the
    reason is kept in `no_bound` and counted in the summary)."""
    try:
        return [e for _, e in error_bounds(module, *inputs)]
    except NoBound as e:
        no_bound[mid] = f"no rule: {str(e)[:60]}"
    except (_TimeLimit, MemoryError):
        raise
    except Exception as e:  # the analysis's own failure must not count against evaluate
        no_bound[mid] = f"analysis failed: {type(e).__name__}: {str(e)[:60]}"
    return None


def _address_space() -> int:
    """Bytes of address space this process maps now (VmSize)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _defined_parts(got: list, want: list, bound: list | None) -> tuple[list, list, list | None]:
    """For an output with dynamic dimensions (SliceToDynamic, set-dimension-size; the
    interpreter notes their run-time sizes beside the bounded array), only its defined
    values: XLA-CPU hands back the dynamic array's buffer as it is, the defined values
    packed at the front in row-major order and the rest of the bounded shape
    uninitialised, while the interpreter keeps them in place inside the bounded array."""
    got, want = list(got), list(want)
    bound = list(bound) if bound is not None else None
    for i, g in enumerate(got):
        sizes = sizes_of(g)
        if i >= len(want) or sizes == g.shape or np.shape(want[i]) != g.shape:
            continue
        region = tuple(slice(0, s) for s in sizes)
        n = math.prod(sizes)
        got[i] = g[region].reshape(-1)
        want[i] = np.asarray(want[i]).reshape(-1)[:n]
        if bound is not None:
            bound[i] = np.broadcast_to(bound[i], g.shape)[region].reshape(-1)
    return got, want, bound


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-kb", type=int, default=300)
    ap.add_argument("--limit-s", type=int, default=60, help="interpreter time per module")
    ap.add_argument("--no-xla", action="store_true", help="only whether evaluate runs them")
    ap.add_argument("--only", default="", help="comma-separated substrings of module ids")
    ap.add_argument("--max-gb", type=int, default=6, help="address-space limit (GB)")
    args = ap.parse_args()
    root = corpus_root()
    if root is None or not oracle.available():
        print("needs the corpus and jax")
        return 0
    signal.signal(signal.SIGALRM, _alarm)
    # a module needing more memory fails with MemoryError instead of the OOM killer
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    status: dict[str, str] = {}
    ours, cases = {}, []
    bounds: dict[str, list | None] = {}  # module id -> derived bound per output (1 replica)
    no_bound: dict[str, str] = {}  # module id -> why it has no derived bound
    replicated: set[str] = set()
    t0 = time.perf_counter()
    for m in modules(root):
        if args.only and not any(k in m.id for k in args.only.split(",")):
            continue
        if len(m.text) > args.max_kb * 1000 or not oracle.accepts(m.text)[0]:
            continue
        # --max-gb beyond what this process holds already (the outputs kept for the
        # comparison), so that a module's verdict does not depend on the ones before it
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + (args.max_gb << 30), hard))
        try:
            module = hlopass.parse_hlo(m.text, m.id)
            n = replicas_needed(module)
            inputs = [random_inputs(module, r) for r in range(n)]
        except Exception as e:
            status[m.id] = f"parse: {type(e).__name__}: {str(e)[:120]}"
            continue
        signal.alarm(args.limit_s)
        try:
            if n == 1:
                ours[m.id] = hlopass.evaluate(module, *inputs[0])
                bounds[m.id] = _derived_bounds(module, inputs[0], no_bound, m.id)
            else:
                ours[m.id] = evaluate_replicas(module, inputs)
                replicated.add(m.id)
            flat = [[a for x in ins for a in flatten(x)] for ins in inputs]
            cases.append((m.id, m.text, flat if n > 1 else flat[0]))
        except hlopass.UnsupportedOpError as e:
            status[m.id] = f"unsupported: {str(e)[:150]}"
        except _TimeLimit:
            status[m.id] = f"interpreter over {args.limit_s} s"
        except Exception as e:
            status[m.id] = f"interpreter error: {type(e).__name__}: {str(e)[:120]}"
        finally:
            signal.alarm(0)
        print(f"{m.id:90} {status.get(m.id, 'runs')}", file=sys.stderr, flush=True)
    # the limit was for one module's run; all the outputs together are compared below
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    ran = len(ours)
    print(f"{len(replicated)} of them run as several replicas", file=sys.stderr)
    if args.no_xla:
        for mid, _, _ in cases:
            status[mid] = "runs"
        cases = []
    fixed_verdicts: dict[str, str | None] = {}  # what the fixed tolerances would have said

    def verdict(mid: str, want: list, text: str) -> str:
        got, want, bound = _defined_parts(ours[mid], want, bounds.get(mid))
        fixed_verdicts[mid] = _compare(got, want, text)
        return _compare(got, want, text, bound) or "match"

    multi = [c for c in cases if c[0] in replicated]
    cases = [c for c in cases if c[0] not in replicated]
    results = xla_execute_many([(t, a) for _, t, a in cases]) if cases else []
    retry = []
    for (mid, text, a), r in zip(cases, results, strict=True):
        if "outputs" in r:
            status[mid] = verdict(mid, r["outputs"], text)
        else:
            retry.append((mid, text, a, r.get("error") or r.get("crash")))
    for (mid, text, _a), r in zip(multi, xla_execute_replicas([c[1:] for c in multi]),
                                  strict=True):  # fmt: skip
        if "outputs" not in r:
            why = str(r.get("error") or r.get("crash"))[:120]
            status[mid] = f"runs ({len(ours[mid])} replicas); XLA:CPU does not: {why}"
            continue
        diffs = [_compare(g, w, text) for g, w in zip(ours[mid], r["outputs"], strict=True)]
        bad = [f"replica {k}: {d}" for k, d in enumerate(diffs) if d]
        status[mid] = bad[0] if bad else "match"
    friendly = []
    for mid, text, a, why in retry:
        try:
            friendly.append((mid, xla_friendly(text), a, why))
        except Exception:
            status[mid] = f"runs; XLA:CPU does not: {str(why)[:120]}"
    reruns = xla_execute_many([(t, a) for _, t, a, _ in friendly]) if friendly else []
    for (mid, text, _a, why), r in zip(friendly, reruns, strict=True):
        if "outputs" in r:
            status[mid] = verdict(mid, r["outputs"], text)
        else:
            status[mid] = f"runs; XLA:CPU does not: {str(why)[:120]}"
    kinds = collections.Counter()
    for mid, s in sorted(status.items()):
        kind = s if s in ("match", "runs") else s.split(":")[0] if ":" in s else s
        kinds[kind] += 1
        if s not in ("match", "runs"):
            print(f"{mid:90} {s}")
    matched = kinds["match"]
    for mid in sorted(fixed_verdicts):
        if bounds.get(mid) is not None and (fixed_verdicts[mid] is None) != (
            status[mid] == "match"
        ):
            print(f"{mid:90} fixed tolerance: {fixed_verdicts[mid] or 'match'}; derived bound: "
                  f"{status[mid]}")  # fmt: skip
    compared = [m for m, s in status.items() if m in ours and not s.startswith("runs")]
    fixed = [m for m in compared if bounds.get(m) is None]
    why = collections.Counter(
        no_bound.get(m, "several replicas") for m in fixed)  # fmt: skip
    print(f"\n{len(compared) - len(fixed)} of the {len(compared)} modules compared with XLA-CPU "
          f"within a derived bound; {len(fixed)} at the fixed per-type tolerances: {dict(why)}")  # fmt: skip
    print(f"\n{len(status)} XLA-accepted corpus modules under {args.max_kb} KB: {ran} run under "
          f"evaluate ({matched} match XLA-CPU); by outcome: {dict(kinds)}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
