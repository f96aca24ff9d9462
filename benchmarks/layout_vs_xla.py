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

Where we differ from XLA, both plans are priced on our module with hlopass.cost (copies,
transposes and cuDNN's own transposes included): XLA's plan is forced onto our module
(`Choices.forced`). Targets: agreement >= 90% with policy=xla; policy=cost's estimate
<= XLA's plan on every program.

Usage: python benchmarks/layout_vs_xla.py [--device h100_sxm] [-v]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlopass.corpus import corpus_root  # noqa: E402
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


def program(d: Path, device: str, verbose: bool):
    import hlopass
    from hlopass.passes.layout.assignment import assign_layouts, plan_time
    from hlopass.passes.layout.engine import Choices
    from hlopass.passes.layout.strategy import choose

    base = hlopass.parse_hlo((d / "before_optimizations.hlo").read_text(), str(d))
    xla_mod = hlopass.parse_hlo((d / "xla_h100_optimized.hlo").read_text(), str(d))
    theirs = heavy_ops(xla_mod, xla=True)
    if not heavy_ops(base, xla=False):
        return None
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
    t_xla_rules = plan_time(base, Choices(device))
    t_xla_plan = plan_time(base, forced)
    cost_choices = choose(base, device, "cost", lambda c: plan_time(base, c))
    t_cost = plan_time(base, cost_choices)
    return agree, total, unmatched, t_xla_rules, t_xla_plan, t_cost


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="h100_sxm")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    root = corpus_root()
    if root is None or not (root / "jax").is_dir():
        print("corpus not found (../shared/corpus or $HLOPASS_CORPUS)", file=sys.stderr)
        return 1
    print(f"{'program':<20} {'agree':>9} {'unmatched':>9} {'ours(xla) us':>13} "
          f"{'XLA plan us':>12} {'ours(cost) us':>14} {'cost/XLA':>9}")  # fmt: skip
    agree = total = 0
    worse = []
    for d in sorted((root / "jax").iterdir()):
        if args.verbose:
            print(f"  {d.name}")
        r = program(d, args.device, args.verbose)
        if r is None:
            continue
        a, t, un, t_rules, t_plan, t_cost = r
        agree += a
        total += t
        if t_cost > t_plan * (1 + 1e-9):
            worse.append(d.name)
        print(f"{d.name:<20} {a:>4}/{t:<4} {un:>9} {t_rules:>13.3f} {t_plan:>12.3f} "
              f"{t_cost:>14.3f} {t_cost / t_plan:>9.4f}")  # fmt: skip
    pct = 100.0 * agree / total if total else 0.0
    print(f"agreement with XLA (policy=xla): {agree}/{total} tensors = {pct:.1f}% (target >= 90%)")
    print(f"policy=cost estimate <= XLA's plan on every program: {not worse}"
          + (f" (worse on: {', '.join(worse)})" if worse else ""))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
