"""Our collective pipeline against XLA's 8xH100 compilation, on the data-parallel programs
of `collective_programs/` (make.py there writes them; XLA's column is its GPU compilation
for 8 H100 SXM, compiled without a GPU).

Per program: the number of collectives before, after our pipeline (`PIPELINE` in
collective_programs/load.py), after the same with `gradient-packing{spec=auto}` in place of
the all-reduce combiner where that pass is registered, and in XLA's compilation; the bytes of each collective (kind x group size:
sizes), and the estimated step time of each plan under our cost model (H100 SXM,
`--topology 1x8`): the collectives alone and the whole step. Our step is priced after
`FUSION` too, since XLA's plan is fused. The step is the cost model's critical path
(`Estimate.step_us`): an async collective overlaps the independent compute scheduled between
its start and done; a synchronous one adds to the kernels' time.

Targets: our count <= XLA's on every program; `spec=auto`'s step never longer than with
XLA's fixed threshold (the all-reduce combiner of `PIPELINE`) and shorter on at least one
program, with the reason (collectives, kernels after fusion, auto's own explain line).

    python benchmarks/collectives_vs_xla.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from collective_programs.load import NAMES, PIPELINE, collective_count, load  # noqa: E402

import hlopass  # noqa: E402
import hlopass.cost  # noqa: E402
from hlopass.pipeline import find_pass  # noqa: E402

# the scheduler again after fusion: the step is priced on the fused module as it would run
FUSION = "algsimp,cse,dce,priority-fusion,latency-hiding-scheduler"
# the packing column: our pipeline with the seed's spec in place of the all-reduce combiner
PACKING = PIPELINE.replace("all-reduce-combiner{gpu=true}", "gradient-packing{spec=auto}")
DEVICE, TOPOLOGY = "h100_sxm", "1x8"

_KIND = re.compile(r" (all-reduce|all-gather|reduce-scatter|collective-permute|all-to-all)"
                   r"(?:-start)?\(")  # fmt: skip
_GROUPS = re.compile(r"replica_groups=(\{[\d,{}]*\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)")
_SIZES = {"f32": 4, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f64": 8, "s8": 1, "pred": 1}
_SHAPE = re.compile(r"([a-z]+\d*)\[([\d,]*)\]")


def _bytes(lhs: str) -> int:
    """Bytes of the result shapes on the left of `=` (a tuple's elements summed)."""
    total = 0
    for dtype, dims in _SHAPE.findall(lhs):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _SIZES.get(dtype, 4)
    return total


def _group_size(line: str) -> int:
    m = _GROUPS.search(line)
    if m is None:
        return 8  # no replica_groups: one group of all 8 devices
    text = m.group(1)
    if text.startswith("["):
        return int(text[1:].split(",")[1].split("]")[0])
    first = re.search(r"\{([\d,]+)\}", text[1:])
    return len(first.group(1).split(",")) if first else 8


def collectives(text: str) -> list[str]:
    """`KIND/n:bytes` per collective: n the group size (none for a collective-permute),
    bytes of its results (an async pair counted at its start)."""
    out = []
    for line in text.splitlines():
        m = _KIND.search(line)
        if m is None or "=" not in line:
            continue
        lhs = line.split("=", 1)[1].split(m.group(0))[0]
        if "-start(" in line and m.group(1) != "all-reduce":
            # an async start's shape is (operands, results[, u32[] contexts]), but an
            # all-reduce-start's is its result's: the results' half
            shapes = [s for s in _SHAPE.findall(lhs) if s != ("u32", "")]
            lhs = " ".join(f"{t}[{d}]" for t, d in shapes[len(shapes) // 2 :])
        short = {"all-reduce": "AR", "all-gather": "AG", "reduce-scatter": "RS",
                 "collective-permute": "CP", "all-to-all": "A2A"}[m.group(1)]  # fmt: skip
        group = "" if short == "CP" else f"/{_group_size(line)}"
        out.append(f"{short}{group}:{_human(_bytes(lhs))}")
    return out


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}MiB"


def times(module: Any) -> tuple[float, float]:
    """(collectives, whole step with async collectives overlapped) in µs under our cost
    model."""
    est = hlopass.cost.estimate(module, DEVICE, TOPOLOGY)
    coll = sum(k.time_us * k.count for k in est.kernels if k.kind == "collective")
    return coll, est.step_us


def _ours(text: str, spec: str) -> tuple[str, tuple[float, float]]:
    after, (coll, step), _ = _ours_with_kernels(text, spec)
    return after, (coll, step)


def _ours_with_kernels(text: str, spec: str) -> tuple[str, tuple[float, float], tuple[int, float]]:
    """As `_ours`, with the fused module's kernel count and compute µs (not collectives)."""
    module = hlopass.parse_hlo(text)
    hlopass.run_pipeline(module, spec)
    after = hlopass.print_hlo(module)
    coll, _ = times(module)
    hlopass.run_pipeline(module, FUSION)
    _, step = times(module)
    est = hlopass.cost.estimate(module, DEVICE, TOPOLOGY)
    compute = [k for k in est.kernels if k.kind != "collective"]
    return after, (coll, step), (len(compute), sum(k.time_us * k.count for k in compute))


def measure(name: str, packing: bool) -> dict[str, Any]:
    prog = load(name)
    if prog.xla_h100 is None:
        raise SystemExit(f"{name}: no xla_h100_optimized.hlo; run collective_programs/make.py")
    after, (coll, step), (kernels, compute) = _ours_with_kernels(prog.per_device, PIPELINE)
    xla = hlopass.parse_hlo(prog.xla_h100)
    xcoll, xstep = times(xla)
    row = {"program": name, "before": collective_count(prog.per_device),
           "ours": collective_count(after), "xla": collective_count(prog.xla_h100),
           "ours_groups": collectives(after), "xla_groups": collectives(prog.xla_h100),
           "ours_coll_us": coll, "xla_coll_us": xcoll, "ours_step_us": step,
           "xla_step_us": xstep, "ours_kernels": kernels, "ours_compute_us": compute}  # fmt: skip
    if packing:
        packed, (pcoll, pstep), (pk, pc), why = _packed(prog.per_device)
        row |= {"packing": collective_count(packed), "packing_coll_us": pcoll,
                "packing_step_us": pstep, "packing_reason": why, "packing_kernels": pk,
                "packing_compute_us": pc}  # fmt: skip
    return row


def _packed(text: str) -> tuple[str, tuple[float, float], tuple[int, float], str]:
    """The packing column, and `spec=auto`'s reason for its choice (its explain lines)."""
    import io

    from hlopass.passes.collectives.gradient_packing import explain_to

    lines = io.StringIO()
    explain_to(lines)
    try:
        after, times_, kernels = _ours_with_kernels(text, PACKING)
    finally:
        explain_to(None)
    reasons = [ln.strip() for ln in lines.getvalue().splitlines() if "reason:" in ln]
    return after, times_, kernels, "; ".join(reasons)


def auto_target(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 31's target: `spec=auto`'s step never longer than with XLA's fixed threshold
    (our pipeline's all-reduce combiner), and shorter on at least one program; the reason
    for each program where it is shorter (0.1%: the scheduler's tie margin)."""
    never = [r for r in rows if r["packing_step_us"] <= r["ours_step_us"] * (1 + 1e-3)]
    faster = [r for r in rows if r["packing_step_us"] < r["ours_step_us"] * (1 - 1e-3)]
    out = [f"spec=auto never slower than XLA's fixed threshold: {len(never)}/{len(rows)}; "
           f"faster on {len(faster)} programs"]  # fmt: skip
    for r in faster:
        out.append(f"  {r['program']}: step {r['packing_step_us']:.0f} us against "
                   f"{r['ours_step_us']:.0f} us: collectives {r['packing']} of "
                   f"{r['packing_coll_us']:.1f} us against {r['ours']} of {r['ours_coll_us']:.1f}"
                   f" us; compute {r['packing_compute_us']:.1f} us in {r['packing_kernels']} "
                   f"kernels against {r['ours_compute_us']:.1f} us in {r['ours_kernels']} "
                   f"(after fusion); auto's {r['packing_reason'] or 'no reason printed'}")  # fmt: skip
    for r in rows:
        if r not in never:
            out.append(f"  SLOWER {r['program']}: step {r['packing_step_us']:.0f} us against "
                       f"{r['ours_step_us']:.0f} us")  # fmt: skip
    return out


def table(rows: list[dict[str, Any]], packing: bool) -> str:
    head = f"{'program':18} {'before':>6} {'ours':>5} "
    head += f"{'pack':>5} " if packing else ""
    head += f"{'XLA':>4} {'coll us ours/XLA':>17} {'step us ours/XLA':>17}  ok"
    head += f" {'pack coll/step us':>18}" if packing else ""
    lines = [head]
    for r in rows:
        line = f"{r['program']:18} {r['before']:6d} {r['ours']:5d} "
        line += f"{r['packing']:5d} " if packing else ""
        coll = f"{r['ours_coll_us']:.1f}/{r['xla_coll_us']:.1f}"
        step = f"{r['ours_step_us']:.0f}/{r['xla_step_us']:.0f}"
        ok = "yes" if r["ours"] <= r["xla"] else "NO"
        line += f"{r['xla']:4d} {coll:>17} {step:>17}  {ok:3}"
        if packing:
            line += f" {r['packing_coll_us']:.1f}/{r['packing_step_us']:.0f}".rjust(19)
        lines.append(line)
    lines.append("")
    for r in rows:
        lines.append(f"{r['program']}: ours {' '.join(r['ours_groups'])}")
        lines.append(f"{'':{len(r['program'])}}  XLA  {' '.join(r['xla_groups'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    packing = find_pass("gradient-packing") is not None
    rows = [measure(n, packing) for n in NAMES]
    print(f"collectives after our pipeline vs XLA's 8xH100 compilation ({DEVICE}, "
          f"topology {TOPOLOGY}; step: ours after {FUSION})")  # fmt: skip
    if not packing:
        print("(gradient-packing is not registered: no packing column)")
    print(table(rows, packing))
    met = sum(r["ours"] <= r["xla"] for r in rows)
    print(f"\ntarget: our count <= XLA's on every program: {met}/{len(rows)}"
          f" {'met' if met == len(rows) else 'NOT met'}")  # fmt: skip
    if packing:
        print("\n".join(auto_target(rows)))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if met == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
