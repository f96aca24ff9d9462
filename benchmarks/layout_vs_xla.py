"""Our layout plans against XLA's, for every dot and convolution of the corpus programs.

For each `../shared/corpus/jax/<program>` (or `$HLOPASS_CORPUS/jax`): run `layout-assignment` (policy=xla, then
policy=cost) on `before_optimizations.hlo` and read the layouts XLA chose in
`xla_h100_optimized.hlo` (its dots, also inside gemm fusions, and its cuDNN convolution
calls). The corpus's unoptimized modules carry no op_name metadata, so instructions are
matched by what they compute: convolutions by cuDNN call kind and tensor dims, dots by the
sizes of their free (non-contracting) dims, in either operand order (XLA may swap operands,
merge dots into one or split K into a batch dim).

Layouts are compared in roles, per tensor: for a convolution the physical order of
(N, C, spatial) of cuDNN's input, filter and output (NHWC vs NCHW); for a dot whether each
operand has its contracting dims minor and which operand's free dims are minor in the
result. Agreement = equal tensors / compared tensors (3 per instruction).

Every plan is priced end to end, as the module will run: laid out on a copy, then the
pipeline a user runs after layout assignment (`--pipeline`, by default
`layout-normalization,copy-elision` and README's fusion pipeline, the default of
`layout-assignment{price-after=...}`), then hlopass.cost (copies, transposes and cuDNN's
own transposes included). Printed per program: policy=xla+pipeline, policy=cost+pipeline,
XLA's own plan forced onto our module (`Choices.forced`) + pipeline, and the CPU time of
policy=cost's choice. Targets: agreement >= 90% with policy=xla; on every program
policy=cost+pipeline <= policy=xla+pipeline, and <= XLA's plan+pipeline.

Usage: python benchmarks/layout_vs_xla.py [--device h100_sxm] [--pipeline P] [-v]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlopass.checking.corpus import corpus_root  # noqa: E402
from hlopass.passes.layout.compare import (  # noqa: E402
    compare_dot,
    forced_conv,
    forced_dot,
    heavy_ops,
    match_conv,
    match_dot,
    ours_conv,
    xla_conv,
)


class Row(NamedTuple):
    """One program: tensors agreeing with XLA's plan (policy=xla), compared, ours not
    matched; the end-to-end estimates (µs) of policy=xla, policy=cost and XLA's plan (None
    where nothing was matched), each + the pipeline; CPU seconds policy=cost took to choose."""

    agree: int
    total: int
    unmatched: int
    t_xla: float
    t_cost: float
    t_plan: float | None
    seconds: float


def program(d: Path, device: str, verbose: bool, pipeline: str | None = None):
    """`tests/test_layout.py`'s view: None for a program without dots or convolutions, else
    (agree, compared, unmatched, policy=xla µs, XLA's plan µs, policy=cost µs), each plan
    priced after `pipeline` (default: the layout pass's `price-after`)."""
    from hlopass.passes.layout.pricing import AFTER_LAYOUT

    r = measure(d, device, pipeline or ",".join(AFTER_LAYOUT), verbose)
    if r.total + r.unmatched == 0:
        return None
    plan = r.t_plan if r.t_plan is not None else r.t_xla
    return r.agree, r.total, r.unmatched, r.t_xla, plan, r.t_cost


def measure(d: Path, device: str, pipeline: str, verbose: bool) -> Row:
    """Our plans against XLA's for program `d`, priced end to end (see the module docstring)."""
    import hlopass
    from hlopass.passes.layout.assignment import assign_layouts
    from hlopass.passes.layout.engine import Choices
    from hlopass.passes.layout.pricing import EndToEndPricer
    from hlopass.passes.layout.strategy import choose

    base = hlopass.parse_hlo((d / "before_optimizations.hlo").read_text(), str(d))
    xla_mod = hlopass.parse_hlo((d / "xla_h100_optimized.hlo").read_text(), str(d))
    theirs = heavy_ops(xla_mod, xla=True)
    price = EndToEndPricer(base, device, pipeline.split(","))
    mod = base.clone()
    assign_layouts(mod, Choices(device))
    ours = heavy_ops(mod, xla=False)
    used: set[int] = set()
    agree = total = unmatched = 0
    forced = Choices(device)
    for op in ours:
        if op.opcode == "dot":
            m = match_dot(op, theirs, used)
            if m is None:
                unmatched += 1
                continue
            j, swapped = m
            flags, (tl, tr, side) = compare_dot(op, theirs[j], swapped)
            forced.forced[op.inst_name] = forced_dot(op, tl, tr, side)
            detail = f"lhsKminor/rhsKminor/outminor xla={tl}/{tr}/{side}"
        else:
            j = match_conv(op, theirs, used)
            if j is None:
                unmatched += 1
                continue
            _, ot = ours_conv(op)
            _, tt = xla_conv(theirs[j])
            flags = [ot[n][1] == tt[n][1] for n in ("input", "filter", "output")]
            forced.forced[op.inst_name] = forced_conv(op, {n: tt[n][1] for n in tt})
            detail = "xla " + " ".join(f"{n}={tt[n][1]}" for n in ("input", "filter", "output"))
            detail += " ours " + " ".join(f"{n}={ot[n][1]}" for n in ("input", "filter", "output"))
        used.add(j)
        agree += sum(flags)
        total += len(flags)
        if verbose:
            print(
                f"    {op.opcode} {op.inst_name} ~ {theirs[j].inst_name}: {sum(flags)}/3  {detail}"
            )
    t_xla = price(Choices(device))
    t_plan = price(forced) if forced.forced else None
    start = time.process_time()  # CPU time: the machine may be shared
    # what layout-assignment{policy=cost} does, with a pricer of its own (no shared memo)
    cost_choices = choose(base, device, "cost", EndToEndPricer(base, device, price.spec))
    seconds = time.process_time() - start
    t_cost = price(cost_choices)
    return Row(agree, total, unmatched, t_xla, t_cost, t_plan, seconds)


def main(argv: list[str] | None = None) -> int:
    from hlopass.passes.layout.pricing import AFTER_LAYOUT

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--device", default="h100_sxm")
    ap.add_argument("--pipeline", default=",".join(AFTER_LAYOUT),
                    help="what runs after layout assignment before pricing (default: %(default)s)")  # fmt: skip
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    root = corpus_root()
    if root is None or not (root / "jax").is_dir():
        print("corpus not found (../shared/corpus or $HLOPASS_CORPUS)", file=sys.stderr)
        return 1
    print(f"priced after: {args.pipeline}")
    print(f"{'program':<20} {'agree':>9} {'unmatched':>9} {'xla+pipe us':>12} "
          f"{'cost+pipe us':>13} {'cost/xla':>9} {'XLA plan us':>12} {'cost cpu s':>10}")  # fmt: skip
    agree = total = 0
    worse: list[str] = []
    worse_plan: list[str] = []
    seconds = 0.0
    for d in sorted((root / "jax").iterdir()):
        if args.verbose:
            print(f"  {d.name}")
        r = measure(d, args.device, args.pipeline, args.verbose)
        a, t, un, t_xla, t_cost, t_plan, s = r
        agree += a
        total += t
        seconds += s
        if t_cost > t_xla * (1 + 1e-9):
            worse.append(d.name)
        if t_plan is not None and t_cost > t_plan * (1 + 1e-9):
            worse_plan.append(d.name)
        shown = f"{a:>4}/{t:<4}" if t else f"{'-':>9}"
        plan = f"{t_plan:>12.3f}" if t_plan is not None else f"{'-':>12}"
        print(f"{d.name:<20} {shown} {un:>9} {t_xla:>12.3f} {t_cost:>13.3f} "
              f"{t_cost / t_xla:>9.4f} {plan} {s:>10.2f}")  # fmt: skip
    pct = 100.0 * agree / total if total else 0.0
    print(f"agreement with XLA (policy=xla): {agree}/{total} tensors = {pct:.1f}% (target >= 90%)")
    print(f"policy=cost+pipeline <= policy=xla+pipeline on every program: {not worse}"
          + (f" (worse on: {', '.join(worse)})" if worse else ""))  # fmt: skip
    print(f"policy=cost+pipeline <= XLA's plan+pipeline on every program: {not worse_plan}"
          + (f" (worse on: {', '.join(worse_plan)})" if worse_plan else ""))  # fmt: skip
    print(f"policy=cost's choice: {seconds:.2f} CPU s over the corpus")
    return 0


if __name__ == "__main__":
    sys.exit(main())
