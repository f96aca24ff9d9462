"""Parser strictness against XLA's: on mutants of corpus modules (hlopass.checking.fuzz's mutations),
does `hlopass.parse_hlo` accept exactly what XLA's parser and verifier accept?

    python3 benchmarks/parser_verdicts_vs_xla.py [--count 2000] [--seed 0] [--examples 2]

Prints the disagreements grouped by direction and mutation kind with a few examples (the
mutated line and both messages), then the counts. The known, intended differences are the
ones tests/test_parser_strictness.py lists with their reasons.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlopass.checking import fuzz  # noqa: E402
from hlopass.checking.corpus import corpus_root  # noqa: E402
from hlopass.errors import HloError  # noqa: E402
from hlopass.text.importer import parse_hlo  # noqa: E402


def _ours(text: str) -> tuple[bool, str]:
    try:
        parse_hlo(text)
    except HloError as e:
        return False, str(e).splitlines()[0]
    except Exception as e:  # a crash is a finding of its own
        return False, f"CRASH {type(e).__name__}: {e}"
    return True, ""


_COMPILE_CHILD = """
import json, sys
from hlopass.execution import oracle
for line in sys.stdin:
    try:
        oracle.compile(json.loads(line))
        print(json.dumps([True, ""]), flush=True)
    except Exception as e:
        print(json.dumps([False, str(e).strip().splitlines()[-1][:200]]), flush=True)
"""


def _xla_compiles(texts: list[str]) -> list[tuple[bool | None, str]]:
    """XLA's verdict after its verifier too: does XLA-CPU compile the module (one child
    process, restarted after an abort, which counts as None)?"""
    out: list[tuple[bool | None, str]] = []
    while len(out) < len(texts):
        rest = texts[len(out) :]
        proc = subprocess.run([sys.executable, "-c", _COMPILE_CHILD], input="\n".join(
            json.dumps(t) for t in rest) + "\n", capture_output=True, text=True,
            env=dict(os.environ, JAX_PLATFORMS="cpu"), timeout=1800)  # fmt: skip
        got = [tuple(json.loads(ln)) for ln in proc.stdout.splitlines() if ln.startswith("[")]
        out += got  # type: ignore[arg-type]
        if len(out) < len(texts):
            out.append((None, f"XLA aborted (rc {proc.returncode})"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--examples", type=int, default=2)
    ap.add_argument("--max-chars", type=int, default=6000)
    args = ap.parse_args()
    root = corpus_root()
    if root is None:
        print("needs the corpus")
        return 0
    t0 = time.perf_counter()
    seeds = fuzz.seed_texts(root, args.max_chars)
    rng = random.Random(args.seed)
    cases = []
    it = fuzz.mutants(seeds, rng)
    for _ in range(args.count):
        kinds, text = next(it)
        cases.append((kinds, text))
    xla = fuzz.xla_accepts_many([t for _, t in cases])
    groups: dict[tuple[str, str], list] = collections.defaultdict(list)
    agree = crashes = aborted = 0
    for (kinds, text), (xla_ok, xla_why) in zip(cases, xla, strict=True):
        ok, why = _ours(text)
        crashes += why.startswith("CRASH")
        if xla_ok is None:
            aborted += 1
            continue
        if ok == xla_ok:
            agree += 1
            continue
        direction = "we accept, XLA rejects" if ok else "we reject, XLA accepts"
        groups[(direction, kinds)].append((text, why, xla_why))
    # what only our verifier refuses: does XLA's verifier (XLA-CPU's compile) refuse it too?
    rejected = [(k, item) for (d, k), v in groups.items() if d.startswith("we reject")
                for item in v]  # fmt: skip
    verdicts = _xla_compiles([text for _, (text, _, _) in rejected])
    for (kinds, item), (ok, why) in zip(rejected, verdicts, strict=True):
        if ok is False:
            groups[("we reject, XLA accepts", kinds)].remove(item)
            groups[("both reject (XLA's verifier)", kinds)].append((item[0], item[1], why))
    groups = {k: v for k, v in groups.items() if v}
    for (direction, kinds), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(items):5d}  {direction:24} {kinds}")
        for _text, why, xla_why in items[: args.examples]:
            print(f"         ours: {why[:150]}")
            print(f"         XLA:  {xla_why[:150]}")
    accept = sum(len(v) for (d, _), v in groups.items() if d.startswith("we accept"))
    reject = sum(len(v) for (d, _), v in groups.items() if d.startswith("we reject"))
    verifier = sum(len(v) for (d, _), v in groups.items() if d.startswith("both"))
    print(f"\n{len(cases)} mutants: {agree} same verdict, {accept} we accept and XLA rejects, "
          f"{reject} we reject and XLA accepts (parser and compile), {verifier} we reject and "
          f"XLA's parser accepts but its verifier rejects, {aborted} XLA aborted, {crashes} crashes "
          f"of ours; {time.perf_counter() - t0:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
