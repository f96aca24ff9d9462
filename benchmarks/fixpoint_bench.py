"""The fixpoint pipeline as users run it (issue 14): `hlopass-opt FILE -p PIPELINE` as a
fresh process with the default collector, with and without `--verify-each`, on Llama 3.1 8B
and Mixtral 8x7B; the median of several processes, wall and CPU time, per instruction.

The plain round trip (`hlopass-opt FILE -o OUT`: interpreter start, imports, parse, print)
is timed in the same run, so the pipeline's own share (process minus round trip) is shown
beside the process figure the target is on. CPU time (user + system of the child) is what a
shared machine's wall clock hides.

    python benchmarks/fixpoint_bench.py              # Llama 1x8 and Mixtral 2x8, 5 runs each
    python benchmarks/fixpoint_bench.py --runs 3 --only mixtral
    python benchmarks/fixpoint_bench.py FILE...      # other modules

Targets (issue 14): Mixtral <= 3 s and <= 70 us per instruction; --verify-each <= 1.5x.
`--check` exits 1 when one is missed.

`--compare` also runs the pipeline in this process with `fixpoint{exhaustive=true}` (whole
walks, no instruction-level dirty tracking: `hlopass.driver.worklist`) and checks that the module
it ends with is byte for byte the fast one (the test suite does this for every smaller
corpus module).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = (
    "xla_tests/tools__benchmarks__hlo__hlo_llama31_8b_bf16_1x8.hlo",
    "xla_tests/tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo",
)
PIPELINE = "fixpoint{passes=algsimp,constant-folding,dce,cse}"
TARGET_S = 3.0
TARGET_US = 70.0
VERIFY_EACH_TARGET = 1.5


def _opt() -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from hlopass.commands.cli import opt_main; sys.exit(opt_main())",
    ]


def _process(cmd: list[str]) -> tuple[float, float, int]:
    """Wall time, CPU time (user + system) and max RSS (bytes) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(
            f"fixpoint_bench: error: {' '.join(cmd[3:])} failed: {done.stderr.strip()}"
        )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss * 1024


def _median(cmd: list[str], runs: int) -> tuple[float, float, int]:
    rows = [_process(cmd) for _ in range(runs)]
    return (
        statistics.median(r[0] for r in rows),
        statistics.median(r[1] for r in rows),
        max(r[2] for r in rows),
    )


_COMPARE = """
import sys
from hlopass import parse_hlo, print_hlo
from hlopass.pipeline import run_pipeline
text = open(sys.argv[1]).read()
outs = []
for spec in sys.argv[2:]:
    module = parse_hlo(text)
    run_pipeline(module, spec)
    outs.append(print_hlo(module))
sys.exit(0 if outs[0] == outs[1] else 1)
"""


def _compare(path: Path) -> bool:
    """The pipeline's output equals the one with whole walks (`exhaustive=true`); in a
    child process, so that this one stays small (a child forked from a big parent shows
    the parent's pages in its max RSS)."""
    specs = [PIPELINE, PIPELINE[:-1] + " exhaustive=true}"]
    done = subprocess.run([sys.executable, "-c", _COMPARE, str(path), *specs], check=False)
    return done.returncode == 0


def instructions(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if " = " in line)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("files", nargs="*", type=Path, help="modules (default: Llama 1x8, Mixtral 2x8)")
    p.add_argument("--runs", type=int, default=5, help="fresh processes per figure (median)")
    p.add_argument("--only", help="only the default files whose name contains this")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    p.add_argument("--compare", action="store_true",
                   help="also check the output equals fixpoint{exhaustive=true}'s")  # fmt: skip
    args = p.parse_args(argv)
    files = list(args.files)
    if not files:
        from hlopass.checking.corpus import corpus_root

        root = corpus_root()
        if root is None:
            print("fixpoint_bench: error: no files given and no corpus", file=sys.stderr)
            return 1
        files = [Path(root) / f for f in FILES if args.only is None or args.only in f]
    from io_bench import fresh_bytecode  # (this directory: the scripts are run as files)

    fresh_bytecode()
    print(f"pipeline -p '{PIPELINE}', median of {args.runs} fresh processes "
          f"(load average {os.getloadavg()[0]:.1f} at start); hlopass's bytecode written "
          "first, as installed")  # fmt: skip
    misses: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.hlo")
        for f in files:
            n = instructions(f)
            rt_wall, rt_cpu, _ = _median([*_opt(), str(f), "-o", out], args.runs)
            wall, cpu, rss = _median([*_opt(), str(f), "-p", PIPELINE, "-o", out], args.runs)
            v_wall, v_cpu, v_rss = _median(
                [*_opt(), str(f), "-p", PIPELINE, "--verify-each", "-o", out], args.runs
            )
            print(f"\n{f.name}: {n} instructions")
            print(f"  {'':24s} {'wall s':>8s} {'cpu s':>8s} {'cpu us/instr':>13s}")
            for label, w, c in (
                ("round trip (no passes)", rt_wall, rt_cpu),
                ("pipeline, process", wall, cpu),
                ("  of which the passes", wall - rt_wall, cpu - rt_cpu),
                ("--verify-each, process", v_wall, v_cpu),
                ("  of which the passes", v_wall - rt_wall, v_cpu - rt_cpu),
            ):
                print(f"  {label:24s} {w:8.2f} {c:8.2f} {c / n * 1e6:13.1f}")
            print(f"  --verify-each / plain: wall {v_wall / wall:.2f}x, cpu {v_cpu / cpu:.2f}x; "
                  f"max RSS {max(rss, v_rss) / 2**20:.0f} MiB")  # fmt: skip
            if "mixtral" in f.name and (cpu > TARGET_S or cpu / n * 1e6 > TARGET_US):
                misses.append(f"{f.name}: {cpu:.2f} s CPU, {cpu / n * 1e6:.0f} us/instr")
            if v_cpu / cpu > VERIFY_EACH_TARGET:
                misses.append(f"{f.name}: --verify-each {v_cpu / cpu:.2f}x")
            if args.compare:
                same = _compare(f)
                print(f"  fast vs exhaustive walks: {'identical' if same else 'DIFFERENT'}")
                if not same:
                    misses.append(f"{f.name}: output differs from fixpoint{{exhaustive=true}}")
    print("\ntargets (Mixtral <= 3 s and <= 70 us/instr CPU as a process, --verify-each <= 1.5x):",
          "met" if not misses else "MISSED: " + "; ".join(misses))  # fmt: skip
    return 1 if misses and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
