"""`hlopass cost FILE --device D [--json]` and `hlopass rank A.hlo B.hlo ... --device D`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from hlopass.commands.clirun import OneLineArgumentParser, guard, whole_number
from hlopass.cost.devices import DEVICES, device_name

if TYPE_CHECKING:  # the command imports the cost model only once it runs
    from xdsl.dialects.builtin import ModuleOp

    from hlopass.cost.model import Estimate


def device_arg(name: str) -> str:
    """argparse type: a device by name, alias (`h100`) or unique prefix."""
    try:
        return device_name(name)
    except KeyError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("error: ")) from None


def _topology(text: str) -> str:
    """argparse type: `HxG` (hosts x GPUs per host)."""
    from hlopass.cost.topology import parse_topology
    from hlopass.errors import HloError

    try:
        if text != "auto":
            parse_topology(text)
    except HloError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("error: ")) from None
    return text


DEVICE_HELP = f"GPU to model: {', '.join(DEVICES)} (or an alias: h100, a100; default h100_sxm)"


def _estimate_file(path: str, device: str, topology: str = "auto") -> tuple[ModuleOp, Estimate]:
    """The module of one HLO file (HLO text or xDSL IR) and its estimate; an `HloError`
    naming the file when it cannot be read, parsed or priced."""
    import hlopass.cost
    from hlopass.commands.cli import parse_input, read_input
    from hlopass.commands.clirun import error_line
    from hlopass.errors import HloError

    name = "<stdin>" if path == "-" else path
    module = parse_input(read_input(path), name)
    try:
        est = hlopass.cost.estimate(module, device, topology)
        return module, est
    except HloError as e:
        raise HloError(error_line(e, name)) from None


def cost_main(argv: list[str] | None = None) -> int:
    ap = OneLineArgumentParser(prog="hlopass cost", description="Estimated GPU time per kernel.")
    ap.add_argument("file", help="HLO text file ('-' for stdin)")
    ap.add_argument("--device", default="h100_sxm", type=device_arg, help=DEVICE_HELP)
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--topology", type=_topology, default="auto", metavar="HxG",
                    help="hosts x GPUs per host the collectives run on (1x8, 2x8; default "
                         "1x8 for a module on more than one device)")  # fmt: skip
    ap.add_argument("--sort", choices=("time", "flops", "bytes", "compute", "memory", "name"),
                    help="order kernels by this (largest first; name: A-Z); default: program order")  # fmt: skip
    ap.add_argument(
        "--top",
        type=whole_number("a whole number >= 0"),
        metavar="N",
        help="show only the first N kernels",
    )
    args = ap.parse_args(argv)
    return guard(lambda: _cost(args), "<stdin>" if args.file == "-" else args.file)


def _cost(args: argparse.Namespace) -> int:
    from hlopass.cost import xla_cost

    module, est = _estimate_file(args.file, args.device, topology=args.topology)
    kernels = est.sorted(args.sort) if args.sort else list(est.kernels)
    if args.top is not None:
        kernels = kernels[: max(args.top, 0)]
    # Two byte figures, named apart: the model's DRAM traffic per kernel (`dram_bytes`) and
    # XLA's `bytes accessed` as its HloCostAnalysis counts it (operands + outputs per op).
    xla = xla_cost(module)
    if args.json:
        out = est.as_dict()
        out["kernels"] = [k.as_dict() for k in kernels]
        out["xla_cost_analysis"] = xla
        print(json.dumps(out, indent=1))
    else:
        print(est.table(kernels))
        print(f"XLA HloCostAnalysis (whole module): flops {xla['flops']:.4g}, transcendentals "
              f"{xla['transcendentals']:.4g}, bytes accessed {xla['bytes accessed']:.4g}")  # fmt: skip
    return 0


def rank_main(argv: list[str] | None = None) -> int:
    ap = OneLineArgumentParser(
        prog="hlopass rank", description="Rank HLO alternatives by estimated time."
    )
    ap.add_argument("files", nargs="+", help="HLO text files: the alternatives to rank")
    ap.add_argument("--device", default="h100_sxm", type=device_arg, help=DEVICE_HELP)
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("-p", "--passes", action="append", metavar="PIPELINE",
                    help="rank these pipelines applied to one module (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.passes:  # pipelines on one module: hlopass/sweep/rank.py
        from hlopass.sweep.rank import rank_pipelines_main

        return guard(lambda: rank_pipelines_main(args.files, args.passes, args.device,
                                                 args.json), "hlopass rank")  # fmt: skip
    return guard(lambda: _rank(args), "hlopass rank")


def _rank(args: argparse.Namespace) -> int:
    results = []
    for f in args.files:
        results.append((f, _estimate_file(f, args.device)[1].time_us))
    results.sort(key=lambda r: r[1])
    if args.json:
        print(json.dumps({"device": args.device,
                          "ranking": [{"file": f, "time_us": t} for f, t in results]}))  # fmt: skip
    else:
        best = results[0][1] or 1e-9
        for i, (f, t) in enumerate(results, 1):
            print(f"{i}. {f}  {t:.3f} us  ({t / best:.2f}x)")
    return 0
