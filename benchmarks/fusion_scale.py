"""How fusion scales: the fusion pipeline on modules from 0.5k to 44k instructions.

For each module, a fresh process parses it and runs `defuse` (optimized inputs only), the
simplifier passes and the fusion passes (`priority-fusion`, `multi-output-fusion`,
`horizontal-fusion`), timing each; the table gives seconds and µs per instruction for the
fusion passes together (wall and CPU time of the process: on a loaded machine the CPU
column is the one to compare) and for the whole pipeline, so growth is visible (near-constant
µs/instruction = linear). The whole command (`hlopass-opt -p ...`, fresh process, parse and
print included) is timed too.

    python benchmarks/fusion_scale.py [--runs N] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
MODULES = [
    ("seed 000 (defused)", "seeds/000_887393ea171d6a40.hlo", True),
    ("seed 001 (defused)", "seeds/001_c2c20f964a2c12a7.hlo", True),
    ("llama 3.1 8B", "xla_tests/tools__benchmarks__hlo__hlo_llama31_8b_bf16_1x8.hlo", False),
    ("mixtral 8x7B", "xla_tests/tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo", False),
]
SIMPLIFY = ["algsimp", "constant-folding", "dce", "cse"]
FUSE = ["priority-fusion", "multi-output-fusion", "horizontal-fusion"]

CHILD = r"""
import json, sys, time
from hlopass.importer import parse_hlo
from hlopass.exporter import print_hlo
from hlopass.pipeline import run_pipeline
from hlopass.dialects.hlo import computations
path, passes = sys.argv[1], sys.argv[2].split(",")
t = time.perf_counter(); m = parse_hlo(open(path).read(), path); out = {"parse": time.perf_counter() - t}
out["instructions"] = sum(1 for c in computations(m) for _ in c.instructions)
for p in passes:
    t, c = time.perf_counter(), time.process_time(); run_pipeline(m, p)
    out[p] = time.perf_counter() - t; out[p + ":cpu"] = time.process_time() - c
    if p == "defuse":
        out["instructions"] = sum(1 for c in computations(m) for _ in c.instructions)
t = time.perf_counter(); text = print_hlo(m); out["print"] = time.perf_counter() - t
out["fusions"] = text.count(" fusion(")
print(json.dumps(out))
"""


def run_child(path: Path, passes: list[str]) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), ",".join(passes)],
                       capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    if r.returncode != 0:
        raise SystemExit(f"{path}: {r.stderr.strip().splitlines()[-1]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_command(path: Path, passes: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        r = subprocess.run(["hlopass-opt", str(path), "-p", ",".join(passes), "-o",
                            str(Path(tmp) / "out.hlo")], capture_output=True, text=True)  # fmt: skip
        dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{path}: {r.stderr.strip()}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per module (median reported)")
    ap.add_argument("--only", default="", help="only modules whose label contains this")
    ap.add_argument("--no-command", action="store_true", help="skip timing the hlopass-opt command")
    args = ap.parse_args()
    print(f"{'module':20s} {'instr':>7s} {'fusions':>7s} {'fusion s':>9s} {'us/instr':>9s} "
          f"{'cpu s':>7s} {'us/instr':>9s} {'pipeline s':>10s} {'us/instr':>9s} {'command s':>9s}")  # fmt: skip
    for label, rel, defuse in MODULES:
        if args.only and args.only not in label:
            continue
        path = CORPUS / rel
        if not path.exists():
            print(f"{label:20s} (not in the corpus)")
            continue
        passes = (["defuse"] if defuse else []) + SIMPLIFY + FUSE
        rows = [run_child(path, passes) for _ in range(args.runs)]
        fusion = statistics.median(sum(r[p] for p in FUSE) for r in rows)
        cpu = statistics.median(sum(r[p + ":cpu"] for p in FUSE) for r in rows)
        parts = {p: (statistics.median(r[p] for r in rows),
                     statistics.median(r[p + ":cpu"] for r in rows)) for p in FUSE}  # fmt: skip
        pipeline = statistics.median(sum(r[p] for p in passes) for r in rows)
        command = (float("nan") if args.no_command
                   else statistics.median(run_command(path, passes) for _ in range(args.runs)))  # fmt: skip
        n = rows[0]["instructions"]
        print(f"{label:20s} {n:7d} {rows[0]['fusions']:7d} {fusion:9.2f} {fusion / n * 1e6:9.1f} "
              f"{cpu:7.2f} {cpu / n * 1e6:9.1f} "
              f"{pipeline:10.2f} {pipeline / n * 1e6:9.1f} {command:9.2f}  "
              + " ".join(f"{p}={t:.2f}s/{c:.2f}s cpu" for p, (t, c) in parts.items()),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
