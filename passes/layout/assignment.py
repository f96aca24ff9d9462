"""`layout-assignment`: give every array a layout (XLA's GpuLayoutAssignment, restated).

Entry parameters and the root follow `entry_computation_layout` when the module sets it;
other computations keep their parameter and root layouts. Where the module does not set it
(hand-written HLO, whose ENTRY line carries no layout), the entry's parameter and result
layouts are free: the plan chooses them as for any other value (the layouts written on the
parameters bind nothing), and `--explain-layout` prints one line naming what it chose. Convolutions, dots, sort, fft,
triangular-solve, TopK and collectives get XLA's GPU constraints (`rules.py`), the rest
follow them (`engine.py`), and a `copy` goes wherever a user needs another layout than its
operand has. `policy=cost` prices the candidate plans of each convolution/dot cluster with
`hlopass.cost` and keeps the cheapest (`strategy.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, TextIO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.cost import estimate, get_device
from hlopass.dialects.hlo import ComputationOp, computations, entry_computation
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook, run_patterns
from hlopass.shape import Shape

from .apply import AssignPlannedLayout, CopyOperandIfLayoutsDiffer
from .engine import Choices, Planner
from .strategy import POLICIES, choose, explain_stream


def assign_layouts(
    module: ModuleOp,
    choices: Choices,
    trace: TraceHook | None = None,
    explain: TextIO | None = None,
) -> bool:
    """Plan and apply layouts in every computation of `module`; to `explain`, when given,
    one line on the entry's layouts where the module left them free."""
    rctx = RewriteContext.of(module, trace)
    entry = entry_computation(module)
    ecl = module.attributes.get("hlo.entry_computation_layout")
    changed = False
    for comp in computations(module):
        params: dict[int, Shape] | None
        free = comp is entry and ecl is None and explain is not None
        written = ([p.shape for p in comp.parameters()], comp.root.shape) if free else None
        if comp is entry:
            stored = ecl.data if ecl is not None else None  # type: ignore[attr-defined]
            params = dict(enumerate(stored[:-1])) if stored is not None else None
            root = stored[-1] if stored is not None else None
        else:
            params = {p.attr("number"): p.shape for p in comp.parameters()}
            root = comp.root.shape
        plan = Planner(comp, choices, params, root).run()
        relayout, copies = AssignPlannedLayout(rctx, plan), CopyOperandIfLayoutsDiffer(rctx, plan)
        run_patterns(module, [relayout], [comp])
        run_patterns(module, [copies], [comp])
        # the patterns edit types and operands in place: count what they did
        changed |= bool(relayout.done or copies.done)
        if written is not None:
            print(free_entry_note(comp, *written), file=explain)
    return changed


def free_entry_note(entry: ComputationOp, params: list[Shape], root: Shape) -> str:
    """`--explain-layout`'s line for an entry without `entry_computation_layout`: its
    parameter and result layouts were chosen, not given; each shown as chosen, with the
    layout it had before (written, or the parser's default) where the plan moved it."""

    def one(name: str, chosen: Shape, before: Shape) -> str:
        if chosen.text() == before.text():
            return f"{name} {chosen.text()}"
        bare = before.text(False)
        was = before.text()
        was = was[len(bare) :] if was.startswith(bare) and was != bare else was
        return f"{name} {chosen.text()} (was {was})"

    shown = [one(p.inst_name, p.shape, w) for p, w in zip(entry.parameters(), params, strict=True)]
    return (
        f"layout entry {entry.comp_name}: the module has no entry_computation_layout, so the "
        "parameter and result layouts were free; chosen: "
        f"({', '.join(shown)}) -> {one(entry.root.inst_name, entry.root.shape, root)}"
    )


def plan_time(module: ModuleOp, choices: Choices) -> float:
    """Estimated module time (µs) of the plan `choices`, after the cleanups that follow it."""
    from .copy_elision import CopyElisionPass
    from .normalization import LayoutNormalizationPass

    trial = module.clone()
    assign_layouts(trial, choices)
    ctx = Context()
    # elementwise ops on physical shapes cost the same: only copies and reshapes matter here
    LayoutNormalizationPass(elementwise=False).run(ctx, trial)
    CopyElisionPass().run(ctx, trial)
    return estimate(trial, choices.device).time_us


@dataclass(frozen=True)
class LayoutAssignmentPass(HloModulePass):
    """Assign a layout to every array: XLA's GPU rules, or the plan the cost model prefers;
    an entry without `entry_computation_layout` gets its parameter and result layouts
    chosen too.

    Where the module sets `entry_computation_layout`, the entry's parameters and root keep
    it. Where it does not (hand-written HLO), those layouts are free: the plan picks them
    as for any other value, and `explain` (`--explain-layout`) names what it picked."""

    name: ClassVar[str] = "layout-assignment"

    device: str = "h100_sxm"
    """GPU whose rules (compute capability) and cost model apply: h100_sxm, a100_sxm_80, v100, ..."""

    policy: str = "xla"
    """xla: XLA's rules; cost: per cluster the cheapest candidate plan; grappler: TF's rule."""

    explain: bool = False
    """Print each cluster's candidate plans, their estimated times and the winner, and the
    layouts chosen for an entry without entry_computation_layout (stderr)."""

    max_trials: int = 64
    """policy=cost: at most this many priced plans (each one estimate of the whole module)."""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        try:
            get_device(self.device)
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        device = get_device(self.device).name
        explain = explain_stream(self.explain)
        choices = choose(module, device, self.policy, lambda c: plan_time(module, c),
                         explain, self.max_trials)  # fmt: skip
        return assign_layouts(module, choices, trace, explain)
