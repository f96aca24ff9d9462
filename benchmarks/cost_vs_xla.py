"""Compare hlopass.cost's H100 kernel estimates with XLA's own, fusion by fusion.

Every fusion in `../shared/corpus/jax/*/xla_h100_optimized.hlo` carries XLA's estimates in
`backend_config.reification_cost` (`--xla_gpu_collect_cost_model_stats`): the default GPU
performance model (name ""), the indexing model, the speed-of-light model ("sol") and, for
gemms, the experimental gemm model. XLA's `exec_time_us` leaves out the kernel launch
overhead, so we compare our time without launch (`KernelRow.exec_us`).

Prints, per XLA model: number of fusions, Spearman rank correlation, median of our/XLA and
the 10th-90th percentile spread. Usage: python benchmarks/cost_vs_xla.py [--device h100_sxm] [-v]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0 + 1
        i = j + 1
    return r


def pearson(a: list[float], b: list[float]) -> float:
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    sa = sum((x - ma) ** 2 for x in a) ** 0.5
    sb = sum((y - mb) ** 2 for y in b) ** 0.5
    if not sa or not sb:
        return float("nan")
    return sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True)) / (sa * sb)


def spearman(a: list[float], b: list[float]) -> float:
    return pearson(ranks(a), ranks(b))


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def collect(device: str) -> list[dict]:
    import hlopass
    from hlopass.checking.corpus import corpus_root
    from hlopass.cost import estimate
    from hlopass.dialects import hlo

    root = corpus_root()
    if root is None:
        print("no corpus found (set HLOPASS_CORPUS)")
        return []
    rows = []
    for path in sorted(root.glob("jax/*/xla_h100_optimized.hlo")):
        try:
            module = hlopass.parse_hlo(path.read_text(), str(path))
        except Exception as e:  # importer gaps: report and go on
            print(f"skip {path.parent.name}: {str(e).splitlines()[0][:120]}")
            continue
        est = estimate(module, device)
        ours = {k.name: k for k in est.kernels}
        for comp in hlo.computations(module):
            for op in comp.instructions:
                if op.opcode != "fusion" or op.inst_name not in ours:
                    continue
                try:
                    cfg = json.loads(op.attr("backend_config") or "{}")
                except ValueError:
                    continue
                costs = {c.get("name", ""): c for c in cfg.get("reification_cost", [])}
                if not costs:
                    continue
                rows.append({"program": path.parent.name, "fusion": op.inst_name,
                             "ours": ours[op.inst_name].exec_us,
                             "kind": ours[op.inst_name].kind,
                             "xla": {k: v.get("exec_time_us", 0.0) for k, v in costs.items()}})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="h100_sxm")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    rows = collect(args.device)
    if not rows:
        return 0
    names = {"": "default", "indexing-cost-model": "indexing", "sol": "sol",
             "experimental-gemm-cost-model": "gemm"}  # fmt: skip
    print(
        f"{len(rows)} fusions from {len({r['program'] for r in rows})} programs, device {args.device}"
    )
    print(
        f"{'XLA model':<10} {'n':>4} {'spearman':>9} {'median ours/xla':>16} {'p10':>7} {'p90':>7}"
    )
    summary = {}
    for key, label in names.items():
        pairs = [(r["ours"], r["xla"][key]) for r in rows if r["xla"].get(key, 0) > 0]
        if len(pairs) < 3:
            continue
        ours, xla = [p[0] for p in pairs], [p[1] for p in pairs]
        ratios = [o / x for o, x in pairs]
        rho = spearman(ours, xla)
        med = statistics.median(ratios)
        summary[label] = (rho, med)
        print(f"{label:<10} {len(pairs):>4} {rho:>9.3f} {med:>16.3f} {quantile(ratios, .1):>7.3f} "
              f"{quantile(ratios, .9):>7.3f}")  # fmt: skip
    if args.verbose:
        for r in rows:
            x = r["xla"]
            print(f"{r['program']:<20} {r['fusion']:<34} {r['kind']:<12} ours {r['ours']:9.4f}  "
                  f"default {x.get('', 0):9.4f}  indexing {x.get('indexing-cost-model', 0):9.4f}  "
                  f"sol {x.get('sol', 0):9.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
