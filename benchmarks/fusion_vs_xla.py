"""Our fusion plan against XLA's H100 plan, program by program.

For every `../shared/corpus/jax/<program>/`: run our pipeline (default
`call-inliner,algsimp,constant-folding,dce,cse,tree-reduction-rewriter,priority-fusion,
multi-output-fusion,horizontal-fusion`: XLA's GPU pipeline also inlines calls and splits
long reductions (TreeReductionRewriter) before fusion and runs HorizontalLoopFusion after it; the issue's acceptance pipeline is the middle part, see
`--pipeline`) on `before_optimizations.hlo` (or, where JAX lowers the program differently for
CUDA, as rng_bits' threefry, the CUDA lowering in `cuda_lowering/`: what XLA's H100 plan was
compiled from) through `hlopass-opt` in a fresh process, and compare the result with `xla_h100_optimized.hlo`:

* kernels launched per step: every non-fused computation reached from the entry (the entry,
  while bodies and conditions, call targets, conditional branches) counted once, whatever
  its trip count. A fusion is one kernel; so is a custom-call (XLA's cuBLAS gemms, cuDNN
  convolutions) and every other instruction (our unfused dots and convolutions, elementwise
  ops...), except those that launch nothing: parameter, constant, bitcast, tuple,
  get-tuple-element, control flow (while/call/conditional: their computations are counted
  instead), the no-op opcodes of the cost model (`hlopass.cost.model.NO_KERNEL`), reshapes
  and transposes that are bitcasts (what XLA turns them into; the cost model skips them too).
* estimated time of both plans: `hlopass.cost.estimate(module, "h100_sxm").time_us`, and
  the ratio ours / XLA. Like the kernel count, a while body is priced once: XLA's module
  carries `known_trip_count` (its trip-count annotator ran) and ours does not, so the
  annotation is dropped from XLA's loops before pricing to compare the same thing.
* peak live intermediate bytes of both plans (`hlopass.ir.memory.peak_live_bytes`).
* agreement: for each XLA fusion with at least two anchor instructions, whether our plan puts
  the same instructions together. The matching rule: `before_optimizations.hlo` carries no
  metadata (JAX's text drops `op_name`) and XLA renames instructions when it inlines calls,
  so instructions are matched by structure: an anchor is an instruction that computes (not
  parameter/constant/bitcast/reshape/broadcast/transpose/copy/convert/iota/tuple/
  get-tuple-element: layout assignment and precision normalisation add or remove those),
  identified by (opcode, result element count, operand element counts) -- invariant under
  the bitcasts and layout changes XLA applies. An XLA fusion is *contained* when the
  multiset of its anchors is a sub-multiset of one of our kernels' anchors (a fusion of
  ours, or a single unfused instruction), and *exact* when one of our kernels has exactly
  that multiset. Nested fusions (Triton nested gemm fusions) contribute their anchors to the
  fusion that calls them.

When a pass of the pipeline is unknown to this checkout (the fusion passes live on another
branch until merged), the longest prefix of the pipeline that runs is used and the output
says so. Targets (issue 32, with `--pipeline gpu`): kernels <= XLA's on >= 90% of programs,
XLA's fusions contained in one of ours >= 80% and reproduced exactly >= 60%; estimated time
<= 1.05x XLA's on >= 80% (the earlier fusion issue's).

Usage: python benchmarks/fusion_vs_xla.py [--pipeline P] [--programs a,b] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PIPELINE = (
    "call-inliner,algsimp,constant-folding,dce,cse,tree-reduction-rewriter,priority-fusion,"
    "multi-output-fusion,horizontal-fusion"
)
DEVICE = "h100_sxm"

_NOT_KERNELS = {"parameter", "constant", "bitcast", "tuple", "get-tuple-element", "while",
                "call", "conditional"}  # fmt: skip
_CALLS = {"while": ("condition", "body"), "call": ("to_apply",),
          "conditional": ("branch_computations", "true_computation", "false_computation")}  # fmt: skip
_NOT_ANCHORS = {"parameter", "constant", "bitcast", "reshape", "broadcast", "transpose", "copy",
                "convert", "iota", "tuple", "get-tuple-element", "fusion"}  # fmt: skip


# --- kernels ---------------------------------------------------------------------------------


def launches_kernel(op: Any) -> bool:
    from hlopass.cost.model import NO_KERNEL
    from hlopass.kernel_structure.shapes import transpose_is_bitcast

    opc = op.opcode
    if opc in _NOT_KERNELS or opc in NO_KERNEL or opc == "reshape":
        return False
    return not (opc == "transpose" and transpose_is_bitcast(op))


def kernel_computations(module: Any) -> list[Any]:
    """The non-fused computations reached from the entry, each once, entry first."""
    from hlopass.dialects.hlo import computations, entry_computation

    comps = {c.comp_name: c for c in computations(module)}
    order, seen = [], set()
    stack = [entry_computation(module)]
    while stack:
        comp = stack.pop()
        if comp.comp_name in seen:
            continue
        seen.add(comp.comp_name)
        order.append(comp)
        for op in comp.instructions:
            for key in _CALLS.get(op.opcode, ()):
                value = op.attr(key)
                names = value if isinstance(value, tuple) else (value,) if value else ()
                stack.extend(comps[n] for n in names if n in comps)
    return order


def kernels(module: Any) -> list[Any]:
    """The instructions that launch a kernel, computation by computation."""
    return [op for c in kernel_computations(module) for op in c.instructions if launches_kernel(op)]


def count_kernels(module: Any) -> int:
    return len(kernels(module))


# --- agreement -------------------------------------------------------------------------------


def _count(shape: Any) -> int:
    leaves = shape.leaves()
    return sum(leaf.num_elements for leaf in leaves)


def anchor_key(op: Any) -> tuple:
    return (op.opcode, _count(op.shape), tuple(sorted(_count(v.type.data) for v in op.operands)))


def anchors(op: Any, comps: dict[str, Any]) -> Counter:
    """Anchor multiset of a kernel: a fusion's computation (nested fusions included) or the
    instruction itself."""
    out: Counter = Counter()
    if op.opcode != "fusion":
        if op.opcode not in _NOT_ANCHORS:
            out[anchor_key(op)] += 1
        return out
    comp = comps.get(op.attr("calls"))
    if comp is None:
        return out
    for inner in comp.instructions:
        if inner.opcode == "fusion":
            out += anchors(inner, comps)
        elif inner.opcode not in _NOT_ANCHORS and inner.opcode != "return":
            out[anchor_key(inner)] += 1
    return out


@dataclass
class Agreement:
    fusions: int = 0  # XLA fusions with >= 2 anchors
    contained: int = 0
    exact: int = 0
    missed: list[str] = field(default_factory=list)  # XLA fusions we split

    @property
    def contained_pct(self) -> float:
        return 100.0 * self.contained / self.fusions if self.fusions else 100.0

    @property
    def exact_pct(self) -> float:
        return 100.0 * self.exact / self.fusions if self.fusions else 100.0


def agreement(xla_module: Any, our_module: Any) -> Agreement:
    from hlopass.dialects.hlo import computations

    xcomps = {c.comp_name: c for c in computations(xla_module)}
    ocomps = {c.comp_name: c for c in computations(our_module)}
    ours = [anchors(op, ocomps) for op in kernels(our_module)]
    ours = [a for a in ours if a]
    result = Agreement()
    for op in kernels(xla_module):
        if op.opcode != "fusion":
            continue
        want = anchors(op, xcomps)
        if sum(want.values()) < 2:
            continue
        result.fusions += 1
        if any(not (want - g) for g in ours):
            result.contained += 1
            if any(g == want for g in ours):
                result.exact += 1
        else:
            result.missed.append(op.inst_name)
    return result


# --- running our pipeline --------------------------------------------------------------------

_OPT = "import sys; from hlopass.commands.cli import opt_main; sys.exit(opt_main(sys.argv[1:]))"
_UNKNOWN = re.compile(r"unknown pass '([^']+)'")


def run_pipeline(src: Path, pipeline: str, out: Path) -> tuple[str, str, float]:
    """Run `pipeline` with hlopass-opt in a fresh process. On an unknown pass or a failure,
    fall back to the longest prefix that runs. Returns (pipeline run, note, seconds)."""
    passes = [p for p in pipeline.split(",") if p]
    note = ""
    while True:
        spec = ",".join(passes)
        cmd = [sys.executable, "-c", _OPT, str(src), "-o", str(out)]
        if spec:
            cmd[4:4] = ["-p", spec]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - t0
        if proc.returncode == 0:
            return spec, note, seconds
        err = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        m = _UNKNOWN.search(err)
        if not passes:
            raise RuntimeError(f"{src}: hlopass-opt failed without passes: {err}")
        if m and m.group(1) in passes:
            cut = passes.index(m.group(1))
            note = note or f"unknown pass '{m.group(1)}': ran the prefix"
        else:
            cut = len(passes) - 1
            note = note or f"'{passes[-1]}' failed ({err[:120]}): ran the prefix"
        passes = passes[:cut]


def drop_trip_counts(module: Any) -> None:
    """Remove `known_trip_count` from the backend_config of every while loop."""
    from hlopass.dialects.hlo import computations

    for comp in computations(module):
        for op in comp.instructions:
            raw = op.attr("backend_config") if op.opcode == "while" else None
            if not isinstance(raw, str) or "known_trip_count" not in raw:
                continue
            try:
                cfg = json.loads(raw)
            except ValueError:
                continue
            cfg.pop("known_trip_count", None)
            op.set_attr("backend_config", json.dumps(cfg, separators=(",", ":")))


# --- the table -------------------------------------------------------------------------------


@dataclass
class Row:
    program: str
    ran: str
    note: str
    seconds: float
    ours: int
    xla: int
    ours_us: float
    xla_us: float
    ours_peak: int
    xla_peak: int
    agree: Agreement


CUDA_LOWERING = Path(__file__).resolve().parent / "cuda_lowering"
"""JAX's CUDA lowering of the programs whose CPU lowering differs (see its make.py)."""


def program_input(folder: Path) -> Path:
    """The HLO XLA's H100 plan was compiled from: JAX's CUDA lowering where it differs from
    the CPU lowering in `before_optimizations.hlo` (rng_bits' threefry loops), else that."""
    cuda = CUDA_LOWERING / f"{folder.name}.hlo"
    return cuda if cuda.is_file() else folder / "before_optimizations.hlo"


def measure(folder: Path, pipeline: str, tmp: Path) -> Row:
    import hlopass
    from hlopass.cost import estimate
    from hlopass.ir.memory import peak_live_bytes

    out = tmp / f"{folder.name}.hlo"
    ran, note, seconds = run_pipeline(program_input(folder), pipeline, out)
    ours = hlopass.parse_hlo(out.read_text(), str(out))
    xla_path = folder / "xla_h100_optimized.hlo"
    xla = hlopass.parse_hlo(xla_path.read_text(), str(xla_path))
    drop_trip_counts(xla)
    return Row(folder.name, ran, note, seconds, count_kernels(ours), count_kernels(xla),
               estimate(ours, DEVICE).time_us, estimate(xla, DEVICE).time_us,
               peak_live_bytes(ours).peak_bytes, peak_live_bytes(xla).peak_bytes,
               agreement(xla, ours))  # fmt: skip


def render(rows: list[Row], pipeline: str) -> str:
    head = (f"{'program':<20} {'kern':>5} {'xla':>5} {'ratio':>6}  {'est_us':>9} {'xla_us':>9} "
            f"{'ratio':>6}  {'peak_kB':>8} {'xla_kB':>8}  {'fus':>4} {'cont%':>6} {'exact%':>6}"
            f"  {'opt_s':>6}")  # fmt: skip
    lines = [f"pipeline: {pipeline}  (device {DEVICE})", head, "-" * len(head)]
    notes = []
    for r in rows:
        lines.append(
            f"{r.program:<20} {r.ours:>5} {r.xla:>5} {r.ours / max(r.xla, 1):>6.2f}  "
            f"{r.ours_us:>9.2f} {r.xla_us:>9.2f} {r.ours_us / max(r.xla_us, 1e-9):>6.2f}  "
            f"{r.ours_peak / 1e3:>8.1f} {r.xla_peak / 1e3:>8.1f}  {r.agree.fusions:>4} "
            f"{r.agree.contained_pct:>6.1f} {r.agree.exact_pct:>6.1f}  {r.seconds:>6.2f}"
        )
        if r.note:
            notes.append(f"  {r.program}: {r.note} '{r.ran}'")
    n = len(rows)
    k_ok = sum(r.ours <= r.xla for r in rows)
    t_ok = sum(r.ours_us <= 1.05 * r.xla_us for r in rows)
    fus = sum(r.agree.fusions for r in rows)
    cont = sum(r.agree.contained for r in rows)
    exact = sum(r.agree.exact for r in rows)
    lines.append("-" * len(head))
    if notes:
        lines.append("NOTE: the full pipeline did not run everywhere:")
        lines += notes
    lines.append(f"target kernels <= XLA on >= 90% of programs: {k_ok}/{n} = "
                 f"{100 * k_ok / max(n, 1):.0f}% -> {_met(k_ok >= 0.9 * n)}")  # fmt: skip
    lines.append(f"target est. time <= 1.05x XLA on >= 80%: {t_ok}/{n} = "
                 f"{100 * t_ok / max(n, 1):.0f}% -> {_met(t_ok >= 0.8 * n)}")  # fmt: skip
    lines.append(f"agreement over {fus} XLA fusions (>= 2 anchors): contained "
                 f"{100 * cont / max(fus, 1):.1f}%, exact {100 * exact / max(fus, 1):.1f}%")  # fmt: skip
    lines.append(f"target contained >= 80%: {_met(cont >= 0.8 * fus)}; "
                 f"target exact >= 60%: {_met(exact >= 0.6 * fus)}")  # fmt: skip
    return "\n".join(lines)


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--pipeline", default=PIPELINE, help=f"our pipeline (default {PIPELINE})")
    ap.add_argument("--programs", default="", help="comma-separated subset of jax programs")
    ap.add_argument("--corpus", default=None, help="corpus folder (default ../shared/corpus)")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    ap.add_argument("--unseen", action="store_true",
                    help="the programs of benchmarks/fusion_programs (written after the "
                    "pipeline, see its make.py) instead of the corpus's")  # fmt: skip
    ap.add_argument("-v", "--verbose", action="store_true", help="list the XLA fusions we split")
    args = ap.parse_args(argv)
    from hlopass.checking.corpus import corpus_root

    root = Path(args.corpus) if args.corpus else corpus_root()
    if root is None or not (root / "jax").is_dir():
        print("error: corpus not found (../shared/corpus)", file=sys.stderr)
        return 1
    wanted = {p for p in args.programs.split(",") if p}
    base = Path(__file__).resolve().parent / "fusion_programs" if args.unseen else root / "jax"
    folders = sorted(p for p in base.iterdir() if (p / "before_optimizations.hlo").is_file())
    folders = [p for p in folders if not wanted or p.name in wanted]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            rows.append(measure(folder, args.pipeline, Path(tmp)))
            if args.verbose and rows[-1].agree.missed:
                print(f"{folder.name}: split XLA fusions: {', '.join(rows[-1].agree.missed)}")
    print(render(rows, args.pipeline))
    if args.json:
        data = [{**{k: v for k, v in r.__dict__.items() if k != "agree"},
                 "fusions": r.agree.fusions, "contained": r.agree.contained,
                 "exact": r.agree.exact} for r in rows]  # fmt: skip
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
