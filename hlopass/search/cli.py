"""`hlopass search MODULE -p PIPELINE [--budget N] [--top K] [--device D] [--strategy S]
[--space fusion|algebraic|algebraic+fusion|pipeline|layout|multi-output|all] [-o DIR] [--json]`: the K best plans found around the pipeline's priority-fusion, ranked
by estimated time, each with the decisions that differ from the greedy plan and its kernels.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from hlopass.commands.clirun import OneLineArgumentParser, guard, whole_number
from hlopass.search.combined import SPACES
from hlopass.search.driver import Plan, SearchResult
from hlopass.search.strategies import STRATEGIES


def build_parser() -> argparse.ArgumentParser:
    from hlopass.cost.cli import DEVICE_HELP, device_arg

    ap = OneLineArgumentParser(prog="hlopass search", description="Search fusion plans "
                               "around a pipeline's priority-fusion, ranked by estimated time.")  # fmt: skip
    ap.add_argument("file", help="HLO text file ('-' for stdin)")
    ap.add_argument("-p", "--passes", required=True, metavar="PIPELINE",
                    help="pass pipeline holding priority-fusion once, as hlopass-opt -p")  # fmt: skip
    count = whole_number("a whole number >= 1")
    ap.add_argument("--budget", type=count, default=500, help="plans priced at most (default 500)")
    ap.add_argument("--top", type=whole_number("a whole number >= 0"), default=3,
                    help="alternatives built, checked and reported besides greedy (default 3)")  # fmt: skip
    ap.add_argument("--device", type=device_arg, default=None,
                    help=DEVICE_HELP.replace("default h100_sxm", "default: priority-fusion's"))  # fmt: skip
    ap.add_argument("--strategy", choices=sorted(STRATEGIES), default="beam",
                    help="how the plans are explored (default beam)")  # fmt: skip
    ap.add_argument("--space", choices=sorted(SPACES), default="fusion",
                    help="fusion: priority-fusion's decisions; algebraic: rewrites on "
                    "e-graphs; algebraic+fusion: an algebraic candidate, then fusion "
                    "decisions on it; pipeline: passes and options around the pipeline; "
                    "layout: a layout candidate per dot/convolution cluster; multi-output: "
                    "multi-output merges skipped; all: pipelines, then layout, algebraic "
                    "and fusion searches on the best (default fusion)")  # fmt: skip
    ap.add_argument("--finalists", type=whole_number("a whole number >= 0"), default=8,
                    help="plans built and priced whole besides greedy, best plan price first "
                    "(default 8; at least --top)")  # fmt: skip
    ap.add_argument("--width", type=count, default=4, help="beam width (default 4)")
    ap.add_argument("--branch", type=count, default=8,
                    help="choices tried from each plan, closest calls first (default 8)")  # fmt: skip
    ap.add_argument("--seed", type=whole_number("a whole number >= 0"), default=0,
                    help="seed of the random inputs of the equivalence check")  # fmt: skip
    ap.add_argument("-o", "--output-dir", metavar="DIR", help="write plan_N.hlo of each plan")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    return ap


def search_main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return guard(lambda: _search(args), "<stdin>" if args.file == "-" else args.file)


def _search(args: argparse.Namespace) -> int:
    from hlopass.commands.cli import parse_input, read_input

    name = "<stdin>" if args.file == "-" else args.file
    module = parse_input(read_input(args.file), name)
    if args.budget < 1 or args.width < 1 or args.branch < 1:
        from hlopass.search.driver import SearchError

        raise SearchError("error: --budget, --width and --branch must be at least 1")
    result = SPACES[args.space](module, args.passes, budget=args.budget, top=args.top,
                                device=args.device, strategy=args.strategy, width=args.width,
                                branch=args.branch, finalists=args.finalists,
                                seed=args.seed)  # fmt: skip
    if args.output_dir:
        _write_plans(result, args.output_dir)
    print(json.dumps(as_json(result), indent=1) if args.json else as_text(result))
    return 0


def _write_plans(result: SearchResult, folder: str) -> None:
    import hlopass
    from hlopass.commands.output import write_output

    os.makedirs(folder, exist_ok=True)
    for i, p in enumerate(result.plans, 1):
        write_output(os.path.join(folder, f"plan_{i}.hlo"), hlopass.print_hlo(p.module))


def _plan_json(p: Plan, greedy: Plan) -> dict[str, Any]:
    return {"time_us": p.time_us, "vs_greedy": p.time_us / (greedy.time_us or 1e-9),
            "greedy": p is greedy, "decisions": p.decisions, "plan_us": p.plan_us,
            "kernels": p.kernels}  # fmt: skip


def as_json(result: SearchResult) -> dict[str, Any]:
    return {"explored": result.explored, "dropped": result.dropped, "seconds": result.seconds,
            "unchecked": result.unchecked,
            "greedy_us": result.greedy.time_us, "disagreements": result.disagreements(),
            "plans": [_plan_json(p, result.greedy) for p in result.plans]}  # fmt: skip


def as_text(result: SearchResult) -> str:
    g = result.greedy
    lines = [f"{result.explored} plans explored, {result.dropped} dropped by the equivalence "
             f"check, {result.seconds:.1f} s; greedy {g.time_us:.3f} us"]  # fmt: skip
    if result.unchecked:
        lines.append(f"values not checked: {result.unchecked}")
    for i, p in enumerate(result.plans, 1):
        what = "the greedy plan" if p is g else "; ".join(p.decisions)
        models = ", ".join(f"{m} {t:.3f}" for m, t in p.plan_us.items())
        lines.append(f"{i}. {p.time_us:.3f} us ({p.time_us / (g.time_us or 1e-9):.3f}x greedy, "
                     f"{len(p.kernels)} kernels; plan price {models}): {what}")  # fmt: skip
        for k in p.kernels:
            lines.append(f"     {k['name']:40} {k['time_us']:9.3f} us")
    lines += [f"models disagree: {d}" for d in result.disagreements()]
    return "\n".join(lines)
