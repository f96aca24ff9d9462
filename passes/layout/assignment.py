"""`layout-assignment`: give every array a layout (XLA's GpuLayoutAssignment, restated).

Entry parameters and the root follow `entry_computation_layout` when the module sets it;
other computations keep their parameter and root layouts. Where the module does not set it
(hand-written HLO, whose ENTRY line carries no layout), the entry's parameter and result
layouts are free: the plan chooses them as for any other value (the layouts written on the
parameters bind nothing), and `--explain-layout` prints one line naming what it chose. Convolutions, dots, sort, fft,
triangular-solve, TopK and collectives get XLA's GPU constraints (`rules.py`), the rest
follow them (`engine.py`), and a `copy` goes wherever a user needs another layout than its
operand has. `policy=cost` prices the candidate plans of each convolution/dot cluster with
`hlopass.cost`, each after the pipeline that follows it (`price-after`, by default the
layout cleanups and fusion: `pricing.py`), and keeps the cheapest (`strategy.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.cost import estimate, get_device
from hlopass.ir.opcode_sets import EVERY_OPCODE
from hlopass.rewriting import HloModulePass, TraceHook

from .engine import Choices
from .planned import assign_layouts
from .pricing import DEFAULT, EndToEndPricer, after_passes
from .strategy import POLICIES, choose, explain_stream


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
    # every instruction gets a layout; its rewrites (layout/apply.py) run from
    # `planned.assign_layouts`, which its code does not name: the grammar page reads this
    OPCODES: ClassVar[tuple[str, ...]] = EVERY_OPCODE

    device: str = "h100_sxm"
    """GPU whose rules (compute capability) and cost model apply: h100_sxm, a100_sxm_80, v100, ..."""

    policy: str = "xla"
    """xla: XLA's rules; cost: per cluster the cheapest candidate plan; grappler: TF's rule."""

    explain: bool = False
    """Print each cluster's candidate plans, their estimated times and the winner, and the
    layouts chosen for an entry without entry_computation_layout (stderr)."""

    max_trials: int = 64
    """policy=cost: at most this many priced plans (each, unless it lays the module out as
    one priced before, one run of `price-after` on a copy and one estimate of it)."""

    price_after: tuple[str, ...] = (DEFAULT,)
    """policy=cost: the pipeline each candidate plan runs through (on a copy) before it is
    priced, so that a plan is priced as the module will run. `default`: what a user runs
    after layout assignment, layout-normalization,copy-elision,call-inliner,algsimp,
    constant-folding,dce,cse,tree-reduction-rewriter,priority-fusion,multi-output-fusion,
    horizontal-fusion. Its passes with a `device` option take this pass's `device` unless
    given one; quote it when a pass has options: `price-after="dce,priority-fusion{...}"`;
    `price-after=""` prices the plans as laid out, unfused."""

    target: str = "gpu"
    """gpu: XLA's GpuLayoutAssignment (the rules above); generic: XLA's base
    LayoutAssignment (`generic.py`): no backend constraints, the entry computation layout
    (or, without one, the entry's written parameter and ROOT layouts) as the constraint,
    layouts propagated from it, defaults elsewhere, copies where constraints conflict."""

    unset: str = ""
    """Entry layouts left free for the pass to choose (XLA's ShapeLayout::Clear on the
    entry's ComputationLayout), comma-separated: `p<N>`, `p<N>.<i>` (a tuple element),
    `result`, `result.<i>`. Quote it: `unset="p0,result"`. target=gpu takes whole
    parameters and `result` only."""

    reverse_computation_order: bool = False
    """target=generic: lay out callers before their callees, each callee taking its call
    site's layouts (XLA's LayoutAssignment reverse_computation_order)."""

    pack_dot_operands_along_k: bool = False
    """XLA's xla_gpu_experimental_pack_dot_operands_along_k_dimension: a dot operand of a
    sub-byte type (s4, ... through converts and elementwise ops) takes its contracting
    dims minor."""

    def __post_init__(self) -> None:
        if self.target not in ("gpu", "generic"):
            raise ValueError(f"target must be gpu or generic, got {self.target!r}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        try:
            get_device(self.device)
        except KeyError as e:
            raise ValueError(str(e).strip("'\"")) from None
        if self.policy == "cost":
            after_passes(self.price_after, self.device)  # a bad pipeline fails before any run

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if self.target == "generic":
            from .generic import assign_generic

            unset = frozenset(u.strip() for u in self.unset.split(",") if u.strip())
            return assign_generic(module, unset, trace, self.reverse_computation_order)
        device = get_device(self.device).name
        explain = explain_stream(self.explain)
        unset = frozenset(u.strip() for u in self.unset.split(",") if u.strip())
        pack_k = self.pack_dot_operands_along_k
        price = EndToEndPricer(module, device, self.price_after, pack_k, unset)
        choices = choose(module, device, self.policy, price, explain, self.max_trials)
        choices.pack_k = pack_k
        return assign_layouts(module, choices, trace, explain, unset)
