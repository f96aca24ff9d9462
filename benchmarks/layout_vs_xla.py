"""Our layout plans against XLA's, for every dot and convolution of the corpus programs.

For each `../shared/corpus/jax/<program>`: run `layout-assignment` (policy=xla, then
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
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "jax"


def _dims_sig(shape, roles: dict[int, str]) -> str:
    """Role letters in physical order major to minor, size-1 dims skipped, runs merged."""
    out = ""
    for d in reversed(shape.minor_to_major):
        if shape.dims[d] == 1:
            continue
        r = roles[d]
        if not out or out[-1] != r:
            out += r
    return out


def _conv_roles_sig(shape, n: int, c: int, sp) -> str:
    return _dims_sig(shape, {n: "N", c: "C", **{d: "S" for d in sp}})


CUDNN_KIND = {
    "__cudnn$convForward": "forward",
    "__cudnn$convBiasActivationForward": "forward",
    "__cudnn$convBackwardInput": "backward_input",
    "__cudnn$convBackwardFilter": "backward_filter",
}


def ours_conv(op):
    """(kind, {tensor: (shape, sig)}) with tensors named input/filter/output as cuDNN."""
    from hlopass.cost.layouts import conv_roles

    kind, roles = conv_roles(op)
    shapes = (op.operands[0].type.data, op.operands[1].type.data, op.shape)
    names = {"forward": ("input", "filter", "output"),
             "backward_filter": ("input", "output", "filter"),
             "backward_input": ("output", "filter", "input")}[kind]  # fmt: skip
    return kind, {
        name: (s, _conv_roles_sig(s, *r)) for name, s, r in zip(names, shapes, roles, strict=True)
    }


def xla_conv(op):
    kind = CUDNN_KIND[op.attr("custom_call_target")]
    labels = op.attr("dim_labels")
    b, f, sp = labels.input
    ki, ko, ksp = labels.kernel
    ob, of, osp = labels.output
    res = op.shape.elements[0]
    lhs, rhs = op.operands[0].type.data, op.operands[1].type.data
    tensors = {"forward": (("input", lhs), ("filter", rhs), ("output", res)),
               "backward_input": (("output", lhs), ("filter", rhs), ("input", res)),
               "backward_filter": (("input", lhs), ("output", rhs), ("filter", res))}[kind]  # fmt: skip
    roles = {"input": (b, f, sp), "filter": (ko, ki, ksp), "output": (ob, of, osp)}
    return kind, {name: (s, _conv_roles_sig(s, *roles[name])) for name, s in tensors}


def dot_info(op):
    """(lhs free size, rhs free size, lhs K minor, rhs K minor, result minor side)."""
    sizes, kminor = [], []
    for i, p in enumerate(("lhs", "rhs")):
        s = op.operands[i].type.data
        batch = set(op.attr(f"{p}_batch_dims") or ())
        contracting = set(op.attr(f"{p}_contracting_dims") or ())
        free = [d for d in range(s.rank) if d not in batch | contracting]
        sizes.append(math.prod(s.dims[d] for d in free))
        nd = [d for d in s.minor_to_major if s.dims[d] != 1]
        kminor.append(bool(nd) and nd[0] in contracting)
    out = op.shape
    nb = len(op.attr("lhs_batch_dims") or ())
    lhs_rank = op.operands[0].type.data.rank
    nl = lhs_rank - nb - len(op.attr("lhs_contracting_dims") or ())
    nd = [d for d in out.minor_to_major if out.dims[d] != 1]
    side = "B" if nd and nd[0] < nb else ("L" if nd and nd[0] < nb + nl else "R")
    return sizes[0], sizes[1], kminor[0], kminor[1], side


def heavy_ops(module, xla: bool):
    from hlopass.dialects.hlo import computations

    out = []
    for c in computations(module):
        for op in c.instructions:
            if (
                op.opcode == "dot"
                or (not xla and op.opcode == "convolution")
                or xla
                and op.opcode == "custom-call"
                and op.attr("custom_call_target") in CUDNN_KIND
            ):
                out.append(op)
    return out


def _merge_side(op):
    """The operand index `op` shares with a dot of the same shapes (XLA merges such dots
    into one, concatenating the other operands), else None."""
    for i, v in enumerate(op.operands[:2]):
        other = op.operands[1 - i]
        for u in v.uses:
            o = u.operation
            if o is op or getattr(o, "opcode", "") != "dot" or u.index != i:
                continue
            if o.operands[1 - i].type == other.type and o.result.type == op.result.type:
                return i
    return None


def match_dot(ours, theirs, used):
    """(index, swapped) of the XLA dot computing `ours`: free sizes equal in some operand
    order, or, for dots XLA merges (`_merge_side`), equal on the shared side and a multiple
    on the other; then one not matched yet."""
    lf, rf = dot_info(ours)[:2]
    side = _merge_side(ours)
    best = None
    for j, t in enumerate(theirs):
        if t.opcode != "dot":
            continue
        tl, tr = dot_info(t)[:2]
        for swapped, (a, b) in ((False, (tl, tr)), (True, (tr, tl))):
            exact = a == lf and b == rf
            merged = (side == 0 and a == lf and b % rf == 0 and b > rf) or (
                side == 1 and b == rf and a % lf == 0 and a > lf
            )
            score = (exact or merged, merged if side is not None else exact, j not in used)
            if score[0] and (best is None or score > best[0]):
                best = (score, j, swapped)
    return None if best is None else (best[1], best[2])


def compare_dot(ours, theirs, swapped):
    o = dot_info(ours)
    t = dot_info(theirs)
    t_l, t_r = (t[3], t[2]) if swapped else (t[2], t[3])
    t_side = {"L": "R", "R": "L", "B": "B"}[t[4]] if swapped else t[4]
    return [o[2] == t_l, o[3] == t_r, o[4] == t_side], (t_l, t_r, t_side)


def match_conv(ours, theirs, used):
    kind, tensors = ours_conv(ours)
    best = None
    for j, t in enumerate(theirs):
        if t.opcode != "custom-call":
            continue
        tk, tt = xla_conv(t)
        if tk != kind:
            continue
        same = sum(sorted(tensors[n][0].dims) == sorted(tt[n][0].dims) for n in tensors)
        score = (same, j not in used)
        if best is None or score > best[0]:
            best = (score, j)
    return None if best is None else best[1]


def forced_conv(op, xla_sigs):
    """Our (lhs, rhs, out) layouts that give XLA's role orders."""
    from hlopass.cost.layouts import conv_roles

    kind, roles = conv_roles(op)
    names = {"forward": ("input", "filter", "output"),
             "backward_filter": ("input", "output", "filter"),
             "backward_input": ("output", "filter", "input")}[kind]  # fmt: skip
    out = []
    for name, (n, c, sp), v in zip(names, roles, (*op.operands[:2], op.result), strict=True):
        shape = v.type.data
        order = []
        for letter in xla_sigs[name]:
            order += {"N": [n], "C": [c], "S": list(sp)}[letter]
        order = [d for d in range(shape.rank) if d not in order] + order
        out.append(tuple(reversed(order)))
    return tuple(out)


def forced_dot(op, lhs_kminor, rhs_kminor, side):
    from hlopass.passes.layout.rules import dot_output_groups, dot_sides

    sides = dot_sides(op)
    res = []
    for s, kminor in zip(sides, (lhs_kminor, rhs_kminor), strict=True):
        order = (
            [*s.batch, *s.free, *s.contracting] if kminor else [*s.batch, *s.contracting, *s.free]
        )
        res.append(tuple(reversed(order)))
    b, lf, rf = dot_output_groups(op)
    order = [*b, *rf, *lf] if side == "L" else [*b, *lf, *rf]
    res.append(tuple(reversed(order)))
    return tuple(res)


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
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS}", file=sys.stderr)
        return 1
    print(f"{'program':<20} {'agree':>9} {'unmatched':>9} {'ours(xla) us':>13} "
          f"{'XLA plan us':>12} {'ours(cost) us':>14} {'cost/XLA':>9}")  # fmt: skip
    agree = total = 0
    worse = []
    for d in sorted(CORPUS.iterdir()):
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
