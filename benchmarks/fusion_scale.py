"""How fusion scales: the fusion pipeline on modules from 0.3k to 44k instructions.

For each module, a fresh process parses it and runs `defuse` (optimized inputs only), then
the pipeline `fusion_vs_xla.py` runs (`call-inliner,algsimp,constant-folding,dce,cse,
tree-reduction-rewriter,priority-fusion,multi-output-fusion,horizontal-fusion`), timing each
pass. The first table gives seconds and µs per instruction for the fusion passes together
(wall and CPU time of the process: on a loaded machine the CPU column is the one to compare)
and for the whole pipeline; the second each pass's CPU seconds and CPU µs per instruction;
the growth lines divide each module's CPU µs per instruction by seed 001's (near 1 =
linear). The whole command (`hlopass-opt -p ...`, fresh process, parse and print included)
is timed too. Medians of `--runs` fresh processes.

    python benchmarks/fusion_scale.py [--runs N] [--only SUBSTRING] [--no-command]
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
sys.path.insert(0, str(ROOT / "benchmarks"))
from fusion_vs_xla import PIPELINE  # noqa: E402

PASSES = PIPELINE.split(",")
FUSE = ["priority-fusion", "multi-output-fusion", "horizontal-fusion"]
BASELINE = "seed 001 (defused)"

CHILD = r"""
import json, sys, time
from hlopass.text.importer import parse_hlo
from hlopass.text.exporter import print_hlo
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
    assert all(p in PASSES for p in FUSE), PIPELINE
    print(f"pipeline: {PIPELINE}")
    print(f"{'module':20s} {'instr':>7s} {'fusions':>7s} {'fusion s':>9s} {'us/instr':>9s} "
          f"{'cpu s':>7s} {'us/instr':>9s} {'pipeline s':>10s} {'us/instr':>9s} {'command s':>9s}")  # fmt: skip
    per_pass: dict[str, tuple[int, dict[str, float]]] = {}
    for label, rel, defuse in MODULES:
        if args.only and args.only not in label and label != BASELINE:
            continue
        path = CORPUS / rel
        if not path.exists():
            print(f"{label:20s} (not in the corpus)")
            continue
        passes = (["defuse"] if defuse else []) + PASSES
        rows = [run_child(path, passes) for _ in range(args.runs)]
        fusion = statistics.median(sum(r[p] for p in FUSE) for r in rows)
        cpu = statistics.median(sum(r[p + ":cpu"] for p in FUSE) for r in rows)
        pipeline = statistics.median(sum(r[p] for p in PASSES) for r in rows)
        command = (float("nan") if args.no_command
                   else statistics.median(run_command(path, passes) for _ in range(args.runs)))  # fmt: skip
        n = rows[0]["instructions"]
        cpus = {p: statistics.median(r[p + ":cpu"] for r in rows) for p in PASSES}
        cpus["fusion passes"] = cpu
        cpus["pipeline"] = statistics.median(sum(r[p + ":cpu"] for p in PASSES) for r in rows)
        per_pass[label] = (n, cpus)
        print(f"{label:20s} {n:7d} {rows[0]['fusions']:7d} {fusion:9.2f} {fusion / n * 1e6:9.1f} "
              f"{cpu:7.2f} {cpu / n * 1e6:9.1f} "
              f"{pipeline:10.2f} {pipeline / n * 1e6:9.1f} {command:9.2f}", flush=True)  # fmt: skip
    print_per_pass(per_pass)


def print_per_pass(per_pass: dict[str, tuple[int, dict[str, float]]]) -> None:
    """Each pass's CPU seconds / CPU µs per instruction, and the growth against seed 001."""
    if not per_pass:
        return
    cols = [*PASSES, "fusion passes", "pipeline"]
    print("\nCPU s / CPU us per instruction, per pass")
    for label, (n, cpus) in per_pass.items():
        cells = " ".join(f"{p}={cpus[p]:.2f}s/{cpus[p] / n * 1e6:.0f}us" for p in cols)
        print(f"{label:20s} {cells}")
    base = per_pass.get(BASELINE)
    if base is None:
        return
    print(f"\ngrowth: CPU us/instr of each module / {BASELINE}'s")
    for label, (n, cpus) in per_pass.items():
        if label == BASELINE:
            continue
        cells = " ".join(
            f"{p}={(cpus[p] / n) / (base[1][p] / base[0]):.2f}x"
            for p in (*FUSE, "fusion passes", "pipeline")
            if base[1][p] > 0
        )
        print(f"{label:20s} {cells}")


if __name__ == "__main__":
    main()
