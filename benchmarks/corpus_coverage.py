"""Every XLA-accepted corpus module under `--max-kb` KB: does `hlopass.evaluate` run it on
seeded random inputs (tests.interp_util.random_inputs), and does it match XLA-CPU where
XLA-CPU runs it? Integers and pred exactly; floats within the bound tests/error_bound.py
derives from the module and its inputs (magnitudes, reduction lengths), as the tests do;
a module with an op that analysis has no rule for falls back to the fixed per-type
tolerances of tests/test_interpreter_xla_correctness.py (the summary counts them, and
lists each module whose verdict the derived bound changes). A module whose collectives
name N > 1 replicas runs as N replicas (replica r on inputs seeded r) in the interpreter
and in XLA-CPU (N host devices), compared replica by replica. An output with dynamic
dimensions compares only its defined values (`_defined_parts`).

    python3 benchmarks/corpus_coverage.py [--max-kb 300] [--limit-s 60] [--no-xla] [--only S,..]

Prints one line per module that does not run or does not match (with the reason), then the
counts; `KNOWN_XLA_DEFECTS` lists modules where XLA-CPU, not the interpreter, is wrong.
XLA runs in child processes (it may abort on some modules), `--chunk` modules at a time; a
module XLA:CPU cannot compile is retried after `xla_friendly` (fusions inlined, layouts
dropped). Each module's inputs and outputs wait on disk for the comparison, so the process
stays within `--max-gb` of address space above what it held at the start, whatever the
order of the modules, while it evaluates and while it compares.
"""

from __future__ import annotations

import argparse
import collections
import math
import pickle
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import hlopass  # noqa: E402
from hlopass.checking.corpus import corpus_root, modules  # noqa: E402
from hlopass.errors import HloResourceError  # noqa: E402
from hlopass.execution import oracle  # noqa: E402
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
from tests.test_corpus_roundtrip import VERIFIER_REJECTS  # noqa: E402
from tests.test_interpreter_xla_correctness import _compare  # noqa: E402

# Modules where XLA-CPU's result is not the operation's meaning; each is still run and
# compared, and shown as a known XLA defect only while it differs.
KNOWN_XLA_DEFECTS = {
    "xla_tests/hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo#81": (
        "variadic scatter given one parameter as both operands: XLA-CPU 0.10.2 gives both "
        "results one buffer (result 1 == result 0 everywhere) and segfaults on smaller "
        "shapes; with two distinct operands it equals the interpreter bit for bit "
        "(tests/test_interpreter_scatter_vs_xla.py)"
    ),
}


class _TimeLimit(Exception):
    pass


def _alarm(signum, frame):
    raise _TimeLimit


def _cpu_alarm(seconds: float) -> None:
    """_TimeLimit after `seconds` of this process's CPU time (0: none). CPU, not wall: a
    module's verdict should not depend on what else the machine runs."""
    signal.setitimer(signal.ITIMER_PROF, seconds)


def _derived_bounds(
    module, inputs, no_bound: dict[str, str], mid: str, limit_s: int
) -> list | None:
    """Per-output error bounds (tests/error_bound.py), or None where the analysis has no
    rule for an op of the module (compared at the fixed per-type tolerances instead; the
    reason is kept in `no_bound` and counted in the summary)."""
    _cpu_alarm(limit_s)
    try:
        return [e for _, e in error_bounds(module, *inputs)]
    except NoBound as e:
        no_bound[mid] = f"no rule: {str(e)[:60]}"
    except _TimeLimit:
        no_bound[mid] = f"analysis over {limit_s} CPU s"
    except MemoryError:  # the analysis keeps float64 values and bounds of every op
        no_bound[mid] = "analysis out of memory (--max-gb)"
    except Exception as e:  # the analysis's own failure must not count against evaluate
        no_bound[mid] = f"analysis failed: {type(e).__name__}: {str(e)[:60]}"
    return None


def _address_space() -> int:
    """Bytes of address space this process maps now (VmSize)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def _defined_parts(
    got: list, want: list, bound: list | None, sizes: list
) -> tuple[list, list, list | None]:
    """For an output with dynamic dimensions (SliceToDynamic, set-dimension-size; the
    interpreter notes their run-time `sizes` beside the bounded array), only its defined
    values: XLA-CPU hands back the dynamic array's buffer as it is, the defined values
    packed at the front in row-major order and the rest of the bounded shape
    uninitialised (tests/test_interpreter_dynamic_vs_xla.py), while the interpreter keeps
    them in place inside the bounded array."""
    got, want = list(got), list(want)
    bound = list(bound) if bound is not None else None
    for i, (g, s) in enumerate(zip(got, sizes, strict=True)):
        if i >= len(want) or s == g.shape or np.shape(want[i]) != g.shape:
            continue
        region = tuple(slice(0, k) for k in s)
        got[i] = g[region].reshape(-1)
        want[i] = np.asarray(want[i]).reshape(-1)[: math.prod(s)]
        if bound is not None:
            bound[i] = np.broadcast_to(bound[i], g.shape)[region].reshape(-1)
    return got, want, bound


class _Stash:
    """Each run module's inputs, and its outputs, bounds and dynamic sizes, on disk (two
    files) until compared."""

    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.count = 0

    def put(self, record: dict) -> tuple[Path, Path, int]:
        """(inputs file, results file, their bytes)."""
        base = self.folder / str(self.count)
        self.count += 1
        paths = base.with_suffix(".in.pkl"), base.with_suffix(".out.pkl")
        parts = {"inputs": record["inputs"]}, {k: v for k, v in record.items() if k != "inputs"}
        for path, part in zip(paths, parts, strict=True):
            with open(path, "wb") as f:
                pickle.dump(part, f, protocol=pickle.HIGHEST_PROTOCOL)
        return paths[0], paths[1], sum(p.stat().st_size for p in paths)

    @staticmethod
    def get(path: Path) -> dict:
        with open(path, "rb") as f:
            return pickle.load(f)


def _chunks(ran: list, most: int, most_bytes: int):
    """Consecutive modules, at most `most` and `most_bytes` of stashed data a chunk (a
    bigger module alone)."""
    chunk, size = [], 0
    for item in ran:
        if chunk and (len(chunk) >= most or size + item[2][2] > most_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item[2][2]
    if chunk:
        yield chunk


def _run_modules(args, root, stash: _Stash, status: dict, no_bound: dict) -> list:
    """Evaluate every selected module; returns (id, text, stash entry, replicas) of those
    that ran."""
    ran = []
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    # a module needing more memory fails with MemoryError instead of the OOM killer
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + (args.max_gb << 30), hard))
    try:
        for m in modules(root):
            if args.only and not any(k in m.id for k in args.only.split(",")):
                continue
            if len(m.text) > args.max_kb * 1000 or not oracle.accepts(m.text)[0]:
                continue
            record = _run_one(args, m, status, no_bound)
            if record is not None:
                ran.append((m.id, m.text, stash.put(record), record["replicas"]))
            print(f"{m.id:90} {status.get(m.id, 'runs')}", file=sys.stderr, flush=True)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    return ran


def _run_one(args, m, status: dict, no_bound: dict) -> dict | None:
    try:
        module = hlopass.parse_hlo(m.text, m.id)
        n = replicas_needed(module)
        inputs = [random_inputs(module, r) for r in range(n)]
    except Exception as e:
        if m.id in VERIFIER_REJECTS:  # XLA's verifier rejects it too (the corpus test's list)
            status[m.id] = f"XLA's verifier rejects: {VERIFIER_REJECTS[m.id]}"
        else:
            status[m.id] = f"parse: {type(e).__name__}: {str(e)[:120]}"
        return None
    _cpu_alarm(args.limit_s)
    try:
        if n == 1:
            outs = hlopass.evaluate(module, *inputs[0])
            _cpu_alarm(0)
            bound = _derived_bounds(module, inputs[0], no_bound, m.id, args.limit_s)
            sizes = [sizes_of(o) for o in outs]
        else:
            outs, bound, sizes = evaluate_replicas(module, inputs), None, None
        flat = [[a for x in ins for a in flatten(x)] for ins in inputs]
        return {"outs": outs, "bound": bound, "sizes": sizes, "replicas": n,
                "inputs": flat if n > 1 else flat[0]}  # fmt: skip
    except hlopass.UnsupportedOpError as e:
        status[m.id] = f"unsupported: {str(e)[:150]}"
    except _TimeLimit:
        status[m.id] = f"interpreter over {args.limit_s} CPU s"
    except HloResourceError as e:  # a result past the memory limit: does not fit in memory
        status[m.id] = f"out of memory: {str(e)[:120]}"
    except Exception as e:
        status[m.id] = f"interpreter error: {type(e).__name__}: {str(e)[:120]}"
    finally:
        _cpu_alarm(0)
    return None


def _xla_many(cases: list) -> list[dict]:
    """xla_execute_many, except that a module with `rng` runs alone in a fresh child: XLA
    keys each rng from a process-global generator that every compilation advances, so its
    values are defined for the first compilation in a process (hlopass/interpreter/rng.py)."""
    out: list = [None] * len(cases)
    plain = [i for i, (text, _) in enumerate(cases) if " rng(" not in text]
    for i, r in zip(plain, xla_execute_many([cases[i] for i in plain]) if plain else [], strict=True):  # fmt: skip
        out[i] = r
    for i, case in enumerate(cases):
        if out[i] is None:
            out[i] = xla_execute_many([case])[0]
    return out


def _compare_chunk(chunk: list, status: dict, fixed_verdicts: dict, derived: set) -> None:
    """Run one chunk of modules on XLA-CPU and compare (see the module docstring); each
    module's results are read from disk only for its own comparison."""
    inputs = {mid: _Stash.get(entry[0])["inputs"] for mid, _, entry, _ in chunk}
    results_of = {mid: entry[1] for mid, _, entry, _ in chunk}
    texts = {mid: text for mid, text, _, _ in chunk}

    def verdict(mid: str, want: list) -> str:
        r = _Stash.get(results_of[mid])
        got, want, bound = _defined_parts(r["outs"], want, r["bound"], r["sizes"])
        fixed_verdicts[mid] = _blockwise(got, want, texts[mid])
        if bound is not None:
            derived.add(mid)
        return _blockwise(got, want, texts[mid], bound) or "match"

    def replicas_verdict(mid: str, want: list) -> str:
        ours = _Stash.get(results_of[mid])["outs"]
        diffs = [_blockwise(g, w, texts[mid]) for g, w in zip(ours, want, strict=True)]
        bad = [f"replica {k}: {d}" for k, d in enumerate(diffs) if d]
        return bad[0] if bad else "match"

    single = [mid for mid, _, _, n in chunk if n == 1]
    multi = [mid for mid, _, _, n in chunk if n > 1]
    retry = []
    results = _xla_many([(texts[m], inputs[m]) for m in single]) if single else []
    for k, mid in enumerate(single):
        r, results[k] = results[k], None  # freed as soon as compared
        if "outputs" in r:
            status[mid] = _guarded(verdict, mid, r["outputs"])
        else:
            retry.append((mid, r.get("error") or r.get("crash")))
    results = xla_execute_replicas([(texts[m], inputs[m]) for m in multi]) if multi else []
    for k, mid in enumerate(multi):
        r, results[k] = results[k], None
        if "outputs" not in r:
            why = str(r.get("error") or r.get("crash"))[:120]
            status[mid] = f"runs (several replicas); XLA:CPU does not: {why}"
            continue
        status[mid] = _guarded(replicas_verdict, mid, r["outputs"])
    friendly = []
    for mid, why in retry:
        try:
            friendly.append((mid, xla_friendly(texts[mid]), why))
        except Exception:
            status[mid] = f"runs; XLA:CPU does not: {str(why)[:120]}"
    results = _xla_many([(t, inputs[m]) for m, t, _ in friendly]) if friendly else []
    for k, (mid, _, why) in enumerate(friendly):
        r, results[k] = results[k], None
        if "outputs" in r:
            status[mid] = _guarded(verdict, mid, r["outputs"])
        else:
            status[mid] = f"runs; XLA:CPU does not: {str(why)[:120]}"


_BLOCK = 1 << 22  # elements compared at once: _compare makes several float64 copies


def _blockwise(got: list, want: list, text: str, bound: list | None = None) -> str | None:
    """`_compare` block by block along each flattened output, so a big output does not need
    several float64 copies of itself at once; the first differing block is reported."""
    if len(got) != len(want) or any(
        np.shape(g) != np.shape(w) or np.asarray(g).dtype != np.asarray(w).dtype
        for g, w in zip(got, want, strict=True)
    ):
        return _compare(got, want, text, bound)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g).reshape(-1), np.asarray(w).reshape(-1)
        b = None if bound is None else np.asarray(bound[i])
        if b is not None and b.ndim and b.size != g.size:
            b = np.broadcast_to(b, np.shape(got[i]))
        for s in range(0, max(g.size, 1), _BLOCK):
            part = slice(s, s + _BLOCK)
            bb = None if b is None else [b if b.ndim == 0 else b.reshape(-1)[part]]
            why = _compare([g[part]], [w[part]], text, bb)
            if why:
                where = f" (elements {s}..{min(s + _BLOCK, g.size)})" if g.size > _BLOCK else ""
                return f"out{i}{why.removeprefix('out0')}{where}"
    return None


# address space one comparison may add to what the process maps (not for the XLA children)
_COMPARE_CAP = [0]


def _guarded(compare, mid: str, want: list) -> str:
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    cap = _address_space() + _COMPARE_CAP[0] if _COMPARE_CAP[0] else hard
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        return compare(mid, want)
    except MemoryError:
        return "compare: out of memory (--max-gb)"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-kb", type=int, default=300)
    ap.add_argument(
        "--limit-s",
        type=int,
        default=60,
        help="CPU seconds per module for evaluate, and again for its error bound",
    )
    ap.add_argument("--no-xla", action="store_true", help="only whether evaluate runs them")
    ap.add_argument("--only", default="", help="comma-separated substrings of module ids")
    ap.add_argument("--max-gb", type=int, default=6, help="address space above the start (GB)")
    ap.add_argument("--chunk", type=int, default=24, help="modules per XLA child batch")
    ap.add_argument("--chunk-mb", type=int, default=256, help="stashed data per XLA batch")
    args = ap.parse_args()
    root = corpus_root()
    if root is None or not oracle.available():
        print("needs the corpus and jax")
        return 0
    signal.signal(signal.SIGPROF, _alarm)
    status: dict[str, str] = {}
    no_bound: dict[str, str] = {}  # module id -> why it has no derived bound
    fixed_verdicts: dict[str, str | None] = {}  # what the fixed tolerances would have said
    derived: set[str] = set()  # compared within a derived bound
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="corpus_coverage_") as tmp:
        ran = _run_modules(args, root, _Stash(tmp), status, no_bound)
        print(f"{sum(n > 1 for *_, n in ran)} of them run as several replicas", file=sys.stderr)
        for mid, *_ in ran:
            status[mid] = "runs"
        if not args.no_xla:
            _COMPARE_CAP[0] = args.max_gb << 30
            for chunk in _chunks(ran, args.chunk, args.chunk_mb << 20):
                _compare_chunk(chunk, status, fixed_verdicts, derived)
                print(f"compared {chunk[-1][0]}", file=sys.stderr, flush=True)
    _report(args, status, len(ran), fixed_verdicts, derived, no_bound, t0)
    return 0


def _report(args, status, ran, fixed_verdicts, derived, no_bound, t0) -> None:
    kinds = collections.Counter()
    for mid, s in sorted(status.items()):
        if s not in ("match", "runs") and mid in KNOWN_XLA_DEFECTS:
            s = status[mid] = f"known XLA-CPU defect: {KNOWN_XLA_DEFECTS[mid]} ({s})"
        kind = s if s in ("match", "runs") else s.split(":")[0] if ":" in s else s
        kinds[kind] += 1
        if s not in ("match", "runs"):
            print(f"{mid:90} {s}")
    for mid in sorted(fixed_verdicts):
        if mid in derived and (fixed_verdicts[mid] is None) != (status[mid] == "match"):
            print(f"{mid:90} fixed tolerance: {fixed_verdicts[mid] or 'match'}; derived bound: "
                  f"{status[mid]}")  # fmt: skip
    compared = [m for m in fixed_verdicts if not status[m].startswith("runs")]
    fixed = [m for m in compared if m not in derived]
    why = collections.Counter(no_bound.get(m, "several replicas") for m in fixed)
    print(f"\n{len(compared) - len(fixed)} of the {len(compared)} modules compared with XLA-CPU "
          f"within a derived bound; {len(fixed)} at the fixed per-type tolerances: {dict(why)}")  # fmt: skip
    print(f"\n{len(status)} XLA-accepted corpus modules under {args.max_kb} KB: {ran} run under "
          f"evaluate ({kinds['match']} match XLA-CPU); by outcome: {dict(kinds)}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
