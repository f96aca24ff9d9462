"""The newcomer's walk (issue 35): how often reading one path through the code leaves a file
and comes back to it.

Two walks, traced on a real module (a corpus JAX program) rather than read by hand:
- `device` through `hlopass.cost.estimate`: every library function that is called with the
  device object among its arguments, in call order;
- one fusion decision through `Rules.can_fuse`: every library function called while priority
  fusion decides on its first producer/consumer pair.
A reader reads each function once, where the path first reaches it: the walk is the list of
distinct functions in the order of their first call. A *stay* is a run of consecutive
functions in one file; a *return* is a stay in a file the walk had already left. What a reader
does not step into is left out: comprehensions (read in place) and accessors of three lines or
fewer (`op.opcode`, `op.shape`). Fewer returns: a reader follows the path without going back.

    python benchmarks/newcomer_walk.py [--program mlp_adam] [--show]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _library_file(path: str) -> str | None:
    p = Path(path).resolve()
    for top in ("hlopass", "dialects", "passes"):
        base = ROOT / top
        if p.is_relative_to(base):
            return str(p.relative_to(ROOT))
    return None


def _stepped_into(code: object) -> bool:
    name = getattr(code, "co_name", "<")
    lines = [line for _, _, line in code.co_lines() if line is not None]  # type: ignore[attr-defined]
    return not name.startswith("<") and max(lines, default=0) - code.co_firstlineno > 3  # type: ignore[attr-defined]


def stays(calls: list[tuple[str, object]]) -> tuple[list[str], int]:
    """Each function once, at its first call; consecutive functions in one file collapsed into
    stays; and how many stays return to a file the walk had left before."""
    first: dict[object, str] = {}
    for f, code in calls:
        if _stepped_into(code):
            first.setdefault(code, f)
    runs: list[str] = []
    for f in first.values():
        if not runs or runs[-1] != f:
            runs.append(f)
    seen: set[str] = set()
    returns = 0
    for f in runs:
        returns += f in seen
        seen.add(f)
    return runs, returns


def walk_device(module: object) -> list[tuple[str, object]]:
    """Files of the calls that receive the device object, in order."""
    import hlopass.cost as cost
    from hlopass.cost.devices import get_device

    device = get_device("h100_sxm")
    files: list[tuple[str, object]] = []

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202 (sys.setprofile's signature)
        if event != "call":
            return
        f = _library_file(frame.f_code.co_filename)
        if f and any(v is device for v in frame.f_locals.values()):
            files.append((f, frame.f_code))

    sys.setprofile(tracer)
    try:
        cost.estimate(module, device)
    finally:
        sys.setprofile(None)
    return files


def walk_fusion_decision(module: object) -> list[tuple[str, object]]:
    """Files of every library call made by the first `Rules.can_fuse` of priority fusion that
    allows a fusion (so every rule is asked)."""
    from hlopass.passes.fusion.rules import Rules
    from hlopass.pipeline import run_pipeline

    kept: list[tuple[str, object]] = []
    original = Rules.can_fuse

    def traced(self, producer, consumer):  # noqa: ANN001, ANN202
        if kept:
            return original(self, producer, consumer)
        files: list[tuple[str, object]] = []

        def tracer(frame, event, arg):  # noqa: ANN001, ANN202
            if event == "call":
                f = _library_file(frame.f_code.co_filename)
                if f:
                    files.append((f, frame.f_code))

        sys.setprofile(tracer)
        try:
            why = original(self, producer, consumer)
        finally:
            sys.setprofile(None)
        if why is None:
            kept.extend(files)
        return why

    Rules.can_fuse = traced  # type: ignore[method-assign]
    try:
        run_pipeline(module, "priority-fusion")
    finally:
        Rules.can_fuse = original  # type: ignore[method-assign]
    return kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="mlp_adam", help="corpus JAX program")
    ap.add_argument("--show", action="store_true", help="print each stay")
    args = ap.parse_args(argv)
    import hlopass

    text = (
        ROOT.parent / "shared/corpus/jax" / args.program / "before_optimizations.hlo"
    ).read_text()
    for name, walk in (("device through cost.estimate", walk_device),
                       ("one fusion decision through Rules.can_fuse", walk_fusion_decision)):  # fmt: skip
        runs, returns = stays(walk(hlopass.parse_hlo(text)))
        print(f"{name}: {len(runs)} stays in {len(set(runs))} files, {returns} returns")
        if args.show:
            for r in runs:
                print("   ", r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
