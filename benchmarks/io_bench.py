"""Parse and print speed (and peak memory) of hlopass against XLA's own parser and printer.

Both sides run in the same process on the same text, best of N, so the ratios are
comparable across machines. Print is timed twice: repeated prints of one module (both
printers warm), and the first print of freshly parsed modules (nothing cached on the module
yet, as in a parse-then-print tool); both must meet the target. Each file is measured in a
fresh interpreter.

    python benchmarks/io_bench.py                 # Mixtral (43.7k instructions) and seed 001
    python benchmarks/io_bench.py -n 3 FILE ...   # other modules, best of 3
    python benchmarks/io_bench.py --profile parse # cProfile of our parse on the first file

Targets (issue 2): parse <= 5x XLA, print <= 5x XLA, peak memory <= 2 GB.
Exit code 1 when a target is missed (with --check).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hlopass import oracle
from hlopass.corpus import corpus_root, elide_like
from hlopass.exporter import print_hlo
from hlopass.importer import parse_hlo

DEFAULT_FILES = (
    "xla_tests/tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo",
    "seeds/001_c2c20f964a2c12a7.hlo",
)
PARSE_TARGET = 5.0
PRINT_TARGET = 5.0
MEMORY_TARGET_BYTES = 2 * 1024**3


def best_of(
    n: int, fn: Callable[..., Any], setup: Callable[[], Any] | None = None
) -> tuple[float, Any]:
    """Best wall time of `n` runs of `fn()`, or, with `setup`, of `fn(setup())` where the
    setup runs afresh (not timed) before each run. GC collected before each, disabled
    during."""
    best = float("inf")
    result: Any = None
    for _ in range(n):
        result = args = None
        gc.collect()
        args = () if setup is None else (setup(),)
        gc.disable()
        try:
            t0 = time.perf_counter()
            result = fn(*args)
            dt = time.perf_counter() - t0
        finally:
            gc.enable()
        best = min(best, dt)
    return best, result


def max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def peak_python_memory(text: str, name: str) -> tuple[int, int]:
    """(peak bytes traced by tracemalloc during parse+print, retained bytes of the module)."""
    gc.collect()
    tracemalloc.start()
    try:
        module = parse_hlo(text, name)
        retained, _ = tracemalloc.get_traced_memory()
        print_hlo(module)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, retained


def bench_file(path: Path, n: int) -> dict[str, float]:
    text = path.read_text()
    name = str(path)
    rss0 = max_rss_bytes()
    t_parse, module = best_of(n, lambda: parse_hlo(text, name))
    t_print, ours = best_of(n, lambda: print_hlo(module))
    # The first print of freshly parsed modules: what a parse-then-print tool sees, with
    # no text cached on the module yet.
    t_first, _ = best_of(n, print_hlo, lambda: parse_hlo(text, name))
    rss_delta = max_rss_bytes() - rss0
    row: dict[str, float] = {
        "instructions": text.count("\n"),
        "parse_s": t_parse,
        "print_s": t_print,
        "first_print_s": t_first,
        "rss_delta": rss_delta,
    }
    if oracle.available():
        x_parse, xmod = best_of(n, lambda: oracle.parse(text))
        x_print, theirs = best_of(n, lambda: oracle.to_string(xmod))
        x_first, _ = best_of(n, oracle.to_string, lambda: oracle.parse(text))
        row.update(
            xla_parse_s=x_parse,
            xla_print_s=x_print,
            parse_ratio=t_parse / x_parse,
            print_ratio=t_print / x_print,
            xla_first_print_s=x_first,
            first_print_ratio=t_first / x_first,
            identical=float(ours == elide_like(module, theirs)),
        )
    module = None  # free it before measuring memory
    peak, retained = peak_python_memory(text, name)
    row.update(tracemalloc_peak=peak, retained=retained)
    return row


def bench_in_fresh_process(path: Path, n: int) -> dict[str, float]:
    """`bench_file` in a new interpreter: the heap one module leaves behind (freed but
    fragmented) slows the next module's prints, on both sides, by up to 50%."""
    cmd = [sys.executable, __file__, "--row", str(path), "-n", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def report(path: Path, row: dict[str, float]) -> list[str]:
    mib = 1024**2
    print(f"== {path.name}  ({len(path.read_text().splitlines())} lines)")
    print(f"   parse  ours {row['parse_s'] * 1e3:9.1f} ms", end="")
    if "xla_parse_s" in row:
        print(f"   XLA {row['xla_parse_s'] * 1e3:8.1f} ms   ratio {row['parse_ratio']:6.2f}x")
    else:
        print("   (XLA oracle not installed)")
    print(f"   print  ours {row['print_s'] * 1e3:9.1f} ms", end="")
    if "xla_print_s" in row:
        print(f"   XLA {row['xla_print_s'] * 1e3:8.1f} ms   ratio {row['print_ratio']:6.2f}x")
        print(f"   our print identical to XLA's: {bool(row['identical'])}")
    else:
        print()
    print(f"   first print after parse ours {row['first_print_s'] * 1e3:7.1f} ms", end="")
    if "xla_first_print_s" in row:
        print(
            f"   XLA {row['xla_first_print_s'] * 1e3:8.1f} ms   ratio {row['first_print_ratio']:6.2f}x"
        )
    else:
        print()
    print(
        f"   memory: tracemalloc peak (parse+print) {row['tracemalloc_peak'] / mib:8.1f} MiB, "
        f"module retained {row['retained'] / mib:8.1f} MiB, max-RSS growth {row['rss_delta'] / mib:8.1f} MiB"
    )
    misses = []
    if row.get("parse_ratio", 0) > PARSE_TARGET:
        misses.append(f"{path.name}: parse {row['parse_ratio']:.2f}x > {PARSE_TARGET}x")
    if row.get("print_ratio", 0) > PRINT_TARGET:
        misses.append(f"{path.name}: print {row['print_ratio']:.2f}x > {PRINT_TARGET}x")
    if row.get("first_print_ratio", 0) > PRINT_TARGET:
        misses.append(f"{path.name}: first print {row['first_print_ratio']:.2f}x > {PRINT_TARGET}x")
    if max(row["tracemalloc_peak"], row["rss_delta"]) > MEMORY_TARGET_BYTES:
        misses.append(f"{path.name}: peak memory over 2 GB")
    return misses


def profile(path: Path, what: str, top: int) -> None:
    text = path.read_text()
    module = parse_hlo(text, str(path))
    prof = cProfile.Profile()
    if what == "parse":
        prof.runcall(parse_hlo, text, str(path))
    else:
        prof.runcall(print_hlo, module)
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path)
    p.add_argument("-n", type=int, default=10, help="runs per measurement (best of N)")
    p.add_argument("--profile", choices=("parse", "print"), help="cProfile instead of timing")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    p.add_argument("--row", type=Path, help=argparse.SUPPRESS)  # worker mode (one file)
    args = p.parse_args(argv)
    files = list(args.files)
    if not files:
        root = corpus_root()
        if root is None:
            print("no files given and the corpus is not present", file=sys.stderr)
            return 1
        files = [Path(root) / f for f in DEFAULT_FILES]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    if args.profile:
        profile(files[0], args.profile, args.top)
        return 0
    if args.row is not None:  # a worker: one file, its measurements as JSON
        print(json.dumps(bench_file(args.row, args.n)))
        return 0
    misses: list[str] = []
    for f in files:
        misses += report(f, bench_in_fresh_process(f, args.n))
    print("targets: parse <= 5x XLA, print <= 5x XLA, peak memory <= 2 GB:",
          "met" if not misses else "MISSED: " + "; ".join(misses))  # fmt: skip
    return 1 if misses and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
