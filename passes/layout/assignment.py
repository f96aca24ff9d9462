"""`layout-assignment`: give every array a layout (XLA's GpuLayoutAssignment, restated).

Entry parameters and the root follow `entry_computation_layout` when the module sets it;
other computations keep their parameter and root layouts. Convolutions, dots, sort, fft,
triangular-solve, TopK and collectives get XLA's GPU constraints (`rules.py`), the rest
follow them (`engine.py`), and a `copy` goes wherever a user needs another layout than its
operand has. `policy=cost` prices the candidate plans of each convolution/dot cluster with
`hlopass.cost` and keeps the cheapest (`strategy.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.cost import estimate, get_device
from hlopass.dialects.hlo import computations, entry_computation
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook, run_patterns
from hlopass.shape import Shape

from .apply import AssignPlannedLayout, CopyOperandIfLayoutsDiffer
from .engine import Choices, Planner
from .strategy import POLICIES, choose, explain_stream


def assign_layouts(module: ModuleOp, choices: Choices, trace: TraceHook | None = None) -> bool:
    """Plan and apply layouts in every computation of `module`."""
    rctx = RewriteContext.of(module, trace)
    entry = entry_computation(module)
    ecl = module.attributes.get("hlo.entry_computation_layout")
    changed = False
    for comp in computations(module):
        params: dict[int, Shape] | None
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
    return changed


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
    """Assign a layout to every array: XLA's GPU rules, or the plan the cost model prefers."""

    name: ClassVar[str] = "layout-assignment"

    device: str = "h100_sxm"
    """GPU whose rules (compute capability) and cost model apply: h100_sxm, a100_sxm_80, v100, ..."""

    policy: str = "xla"
    """xla: XLA's rules; cost: per cluster the cheapest candidate plan; grappler: TF's rule."""

    explain: bool = False
    """Print each cluster's candidate plans, their estimated times and the winner (stderr)."""

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
        choices = choose(module, device, self.policy, lambda c: plan_time(module, c),
                         explain_stream(self.explain), self.max_trials)  # fmt: skip
        return assign_layouts(module, choices, trace)
