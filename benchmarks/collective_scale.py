"""How the collective combiners scale: each combiner on the corpus's sharded LLM modules.

For each module (Llama 3.1 70B fp8 16x8 / 32x8, 405B bf16 / fp8, Llama 3.1 8B and Mixtral
8x7B on 1x8 and 2x8), a fresh process per (module, pass) parses it and runs one of
`all-reduce-combiner`, `all-gather-combiner`, `reduce-scatter-combiner`,
`collective-permute-combiner` and their `{gpu=true}` forms (the permute combiner has none),
printing the module's instructions and collectives, the pass's CPU seconds and CPU µs per
instruction. The linearity check runs the same pass on the module doubled (`doubled`: every
computation with a collective holds a second copy of its instructions, reading the same
parameters, so each computation the combiner works on is twice as long) and prints the time ratio: near 2 is linear,
near 4 quadratic. Medians of `--runs` processes.

    python benchmarks/collective_scale.py [--runs N] [--only SUBSTRING] [--passes P1,P2]
                                          [--doublings K]   # x2^K instead of x2

Measured 2026-12-03, one run each (2 shared cores, CPU seconds wander by 20-30%), after
`combine_scan` searched reachability forward from a group's members instead of along its
span. x1 / x2 / x4 CPU seconds; the instructions grow x1.69 / x3.08 (Mixtral 2x8: 43.7k /
74.1k / 134.8k) and x1.70 / x3.09 (Llama 3.1 8B 2x8: 31.9k / 54.1k / 98.6k):

    pass                               Mixtral 2x8          Llama 8B 2x8
    all-reduce-combiner                0.50 / 1.26 / 2.48   0.35 / 0.76 / 1.53
    all-reduce-combiner{gpu=true}      0.52 / 1.17 / 2.69   0.35 / 0.73 / 1.50
    all-gather-combiner                0.42 / 0.81 / 1.66   0.30 / 0.58 / 1.08
    all-gather-combiner{gpu=true}      0.43 / 0.83 / 1.75   0.32 / 0.58 / 1.07
    reduce-scatter-combiner            0.16 / 0.25 / 0.35   0.12 / 0.17 / 0.27
    reduce-scatter-combiner{gpu=true}  0.20 / 0.25 / 0.35   0.12 / 0.17 / 0.26
    collective-permute-combiner        0.13 / 0.18 / 0.25   0.09 / 0.13 / 0.18

Before, all-reduce-combiner{gpu=true} on Mixtral took 0.58 / 1.26 / 3.52 s (x6.1 at x4:
each scan carried reachability along its whole span, 525k instructions walked at x4).
Now the x4 ratios are x2.2-2.6 for reduce-scatter and permute, x2.8-4.8 for all-gather
and all-reduce: still above the instruction ratio, because the members' descendants
inside a group's span are most of the span on these modules (184k instructions reached
at x4 for all-reduce-combiner): a group's reachability is still found per group.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "xla_tests"
PREFIX = "tools__benchmarks__hlo__hlo_"
MODULES = [
    "llama31_70b_fp8_16x8", "llama31_70b_fp8_32x8", "llama31_405b_bf16_16x8",
    "llama31_405b_fp8_16x8", "llama31_8b_bf16_1x8", "llama31_8b_bf16_2x8",
    "mixtral_8x7b_bf16_1x8", "mixtral_8x7b_bf16_2x8",
]  # fmt: skip
PASSES = [
    "all-reduce-combiner", "all-reduce-combiner{gpu=true}", "all-gather-combiner",
    "all-gather-combiner{gpu=true}", "reduce-scatter-combiner",
    "reduce-scatter-combiner{gpu=true}", "collective-permute-combiner",
]  # fmt: skip

CHILD = r"""
import json, re, sys, time
from hlopass.text.importer import parse_hlo
from hlopass.pipeline import run_pipeline
from hlopass.dialects.hlo import computations
path, spec = sys.argv[1], sys.argv[2]
m = parse_hlo(open(path).read(), path)
ops = [op for c in computations(m) for op in c.instructions]
kinds = re.compile(r"(all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)(-start)?$")
out = {"instructions": len(ops), "collectives": sum(1 for o in ops if kinds.match(o.opcode))}
c = time.process_time(); changed = run_pipeline(m, spec); out["cpu"] = time.process_time() - c
out["after"] = sum(1 for c in computations(m) for o in c.instructions if kinds.match(o.opcode))
print(json.dumps(out))
"""

_HEADER = re.compile(r"^(ENTRY )?%?[\w.\-]+ .*\{\s*$")
_INSTR = re.compile(r"^(\s*)(ROOT )?%?([\w.\-]+) = ")
_NAME = re.compile(r"%([\w.\-]+)")
_CHANNEL = re.compile(r"channel_id=(\d+)")
_COLLECTIVE = re.compile(
    r" (all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)"
    r"(-start)?\("
)


def doubled(text: str, tag: str = ".dup") -> str:
    """`text` with the instructions of every computation that holds a collective copied once
    more after themselves: the copies are named `<name>.dup`, read the originals' parameters
    and the other copies, take fresh channel ids, and are not the ROOT (dead code the
    combiners still walk). Reductions and other small callees stay as they are (a reducer
    with a second add would no longer be the trivial reduction the all-reduce key needs)."""
    top = max((int(v) for v in _CHANNEL.findall(text)), default=0)
    out: list[str] = []
    body: list[str] = []
    inside = False
    for line in text.splitlines():
        if not inside:
            out.append(line)
            inside = bool(_HEADER.match(line))
            body = []
            continue
        if line.strip() == "}":
            twice = any(_COLLECTIVE.search(b) for b in body)
            out += body + (_copies(body, top, tag) if twice else []) + [line]
            inside = False
            continue
        body.append(line)
    return "\n".join(out) + "\n"


def _copies(body: list[str], channel_offset: int, tag: str) -> list[str]:
    names = set()
    for line in body:
        m = _INSTR.match(line)
        if m and " parameter(" not in line:
            names.add(m.group(3))
    copies = []
    for line in body:
        m = _INSTR.match(line)
        if not m or " parameter(" in line:
            continue
        line = line.replace("ROOT ", "", 1) if m.group(2) else line
        line = _NAME.sub(
            lambda n: f"%{n.group(1)}{tag}" if n.group(1) in names else n.group(0), line
        )
        if not line.lstrip().startswith("%"):  # a module written without `%` sigils
            line = re.sub(r"^(\s*)([\w.\-]+) = ", rf"\1\2{tag} = ", line)
        line = _CHANNEL.sub(lambda c: f"channel_id={int(c.group(1)) + channel_offset}", line)
        copies.append(line)
    return copies


def run_child(path: Path, spec: str) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), spec],
                       capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines() or ["(no output)"]
        raise SystemExit(f"{path.name} {spec}: {lines[-1]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def median_run(path: Path, spec: str, runs: int) -> tuple[dict, float]:
    rows = [run_child(path, spec) for _ in range(runs)]
    return rows[0], statistics.median(r["cpu"] for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    ap.add_argument("--runs", type=int, default=1, help="processes per (module, pass); median")
    ap.add_argument("--only", default="", help="only modules whose name contains this")
    ap.add_argument("--passes", default=",".join(PASSES), help="comma-separated pass specs")
    ap.add_argument("--doublings", type=int, default=1, help="double the module this often")
    args = ap.parse_args(argv)
    specs = [p for p in re.split(r",(?![^{]*\})", args.passes) if p]
    print(f"{'module':24s} {'pass':34s} {'instr':>7s} {'coll':>5s} {'cpu s':>7s} "
          f"{'us/instr':>8s} {'xN instr':>8s} {'xN cpu s':>8s} {'xN/x1':>6s}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODULES:
            if args.only not in name:
                continue
            path = CORPUS / f"{PREFIX}{name}.hlo"
            if not path.exists():
                print(f"{name:24s} (not in the corpus)")
                continue
            twice = Path(tmp) / f"{name}.x2.hlo"
            text = path.read_text()
            for d in range(args.doublings):
                text = doubled(text, f".dup{d}")
            twice.write_text(text)
            for spec in specs:
                row, cpu = median_run(path, spec, args.runs)
                row2, cpu2 = median_run(twice, spec, args.runs)
                n, n2 = row["instructions"], row2["instructions"]
                ratio = cpu2 / cpu if cpu > 0 else float("nan")
                print(f"{name:24s} {spec:34s} {n:7d} {row['collectives']:5d} {cpu:7.3f} "
                      f"{cpu / n * 1e6:8.2f} {n2:8d} {cpu2:8.3f} {ratio:6.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
