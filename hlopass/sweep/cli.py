"""`hlopass sweep DIR_OR_GLOB... (-p PIPELINE | --search SPEC) [--jobs N] [--engine E] ...`

Exit status: 0 when every module ran, 1 when some module failed (each failure is its row's
one-line error), 2 for bad usage. `--search SPEC` runs a search per module
(`hlopass.search.sweep_job`): "after" is the best plan found.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

from hlopass.commands.clirun import EXIT_USAGE, OneLineArgumentParser, guard, whole_number


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got '{text}'")
    return value


def build_parser() -> argparse.ArgumentParser:
    from hlopass.cost.cli import DEVICE_HELP, device_arg

    ap = OneLineArgumentParser(
        prog="hlopass sweep",
        description="Run a pass pipeline over every HLO module of folders or globs, in "
        "parallel, and tabulate instructions, kernels and estimated time before and after.",
    )
    ap.add_argument("paths", nargs="+", metavar="DIR_OR_GLOB",
                    help="folders (their *.hlo files, recursively), files or globs ('**' recurses)")  # fmt: skip
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("-p", "--passes", metavar="PIPELINE", help="pass pipeline, as hlopass-opt -p")
    what.add_argument("--search", metavar="SPEC", nargs="?", const="",
                      help="a search per module, SPEC '[SPACE][:PIPELINE]' (spaces: "
                      "those of hlopass search --space; default pipeline around call-inliner,algsimp,"
                      "constant-folding,dce,cse,priority-fusion,multi-output-fusion)")  # fmt: skip
    ap.add_argument("--budget", type=whole_number("a whole number >= 1"), default=100,
                    help="--search: plans priced per module at most (default 100)")  # fmt: skip
    ap.add_argument("--jobs", "-j", type=whole_number("a whole number >= 1"), default=None,
                    help="parallel workers (default: the CPU count; Ray: one per cluster CPU)")  # fmt: skip
    ap.add_argument("--engine", choices=("local", "ray"), default="local",
                    help="local: a process pool; ray: a Ray cluster (--address, else a local one)")  # fmt: skip
    ap.add_argument("--address", help="Ray cluster address (ray.init(address=...))")
    ap.add_argument("--results", metavar="FILE.jsonl",
                    help="append one JSON line per module as it finishes; modules already "
                    "recorded there are not run again")  # fmt: skip
    ap.add_argument("--timeout", type=_seconds, default=300.0, metavar="S",
                    help="seconds one module may take (0: no limit; default 300)")  # fmt: skip
    ap.add_argument("--device", default="h100_sxm", type=device_arg, help=DEVICE_HELP)
    ap.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py|MODULE",
                    help="a pass plug-in every worker imports first; repeatable")  # fmt: skip
    ap.add_argument("--no-verify", action="store_true",
                    help="read what XLA's parser reads: no shape verification while parsing")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print the records as JSON lines, no table")
    return ap


def sweep_main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with _stop_on_sigterm():
        return guard(lambda: _sweep(args), "hlopass sweep")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    """A `kill` stops the sweep as Ctrl-C does: its workers are stopped too, and every
    finished module is in the results file already. The caller's handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _sweep(args: argparse.Namespace) -> int:
    import json
    import time

    from hlopass.sweep import driver as sweeping

    job = sweeping.run_pipeline_job
    pipeline = args.passes or ""
    if args.search is not None:
        found = sweeping.search_job(args.search, args.budget)
        if found is None:
            print("hlopass sweep: error: search is not available (use -p PIPELINE)",
                  file=sys.stderr)  # fmt: skip
            return EXIT_USAGE
        job = found
        pipeline = getattr(found, "label", f"search {args.search}")
    if args.passes is not None:
        from hlopass.pipeline import parse_pass_pipeline

        for plugin in args.load_pass_plugin:  # here too: a bad pipeline fails before any work
            from hlopass.plugins import load_pass_plugin

            load_pass_plugin(plugin)
        parse_pass_pipeline(args.passes)
    t0 = time.perf_counter()
    records = sweeping.sweep(args.paths, pipeline=pipeline, jobs=args.jobs,
                             engine=args.engine, results=args.results, timeout=args.timeout,
                             device=args.device, address=args.address,
                             plugins=args.load_pass_plugin, job=job,
                             verify=not args.no_verify)  # fmt: skip
    if args.json:
        for r in records:
            print(json.dumps(r, sort_keys=True))
    else:
        sys.stdout.write(sweeping.summary_table(records))
        print(f"wall time {time.perf_counter() - t0:.1f} s ({args.engine} engine)")
    return 0 if all(r.get("ok") for r in records) else 1
