"""`hlopass cost FILE --device D [--json]` and `hlopass rank A.hlo B.hlo ... --device D`."""

from __future__ import annotations

import argparse
import json
import sys

from hlopass.cost.devices import DEVICES


def _estimate_file(path: str, device: str):
    """The estimate of one HLO file, or None after printing a one-line error."""
    from pathlib import Path

    import hlopass
    from hlopass.cost import estimate
    from hlopass.errors import HloError

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        return estimate(hlopass.parse_hlo(text, path), device)
    except HloError as e:
        print(str(e), file=sys.stderr)
    except OSError as e:
        print(f"{path}: error: {e.strerror}", file=sys.stderr)
    return None


def cost_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hlopass cost", description="Estimated GPU time per kernel.")
    ap.add_argument("file", help="HLO text file ('-' for stdin)")
    ap.add_argument("--device", default="h100_sxm", choices=sorted(DEVICES))
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    est = _estimate_file(args.file, args.device)
    if est is None:
        return 1
    if args.json:
        print(json.dumps(est.as_dict(), indent=1))
    else:
        print(est.table())
    return 0


def rank_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="hlopass rank", description="Rank HLO alternatives by estimated time."
    )
    ap.add_argument("files", nargs="+")
    ap.add_argument("--device", default="h100_sxm", choices=sorted(DEVICES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    results = []
    for f in args.files:
        est = _estimate_file(f, args.device)
        if est is None:
            return 1
        results.append((f, est.time_us))
    results.sort(key=lambda r: r[1])
    if args.json:
        print(json.dumps({"device": args.device,
                          "ranking": [{"file": f, "time_us": t} for f, t in results]}))  # fmt: skip
    else:
        best = results[0][1] or 1e-9
        for i, (f, t) in enumerate(results, 1):
            print(f"{i}. {f}  {t:.3f} us  ({t / best:.2f}x)")
    return 0
