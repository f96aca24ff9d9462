"""Laying a module out by a plan: every computation planned (`engine.Planner`) and the
plan applied by the rewrites of `apply.py` (`layout-assignment` and the pricing of its
candidate plans both do it)."""

from __future__ import annotations

from typing import TextIO

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ATTR_CLASSES, ComputationOp, computations, entry_computation
from hlopass.ir.shape import Shape
from hlopass.rewriting import RewriteContext, TraceHook, run_patterns

from .apply import AssignPlannedLayout, CopyOperandIfLayoutsDiffer
from .engine import Choices, Planner


def assign_layouts(
    module: ModuleOp,
    choices: Choices,
    trace: TraceHook | None = None,
    explain: TextIO | None = None,
    unset: frozenset[str] = frozenset(),
) -> bool:
    """Plan and apply layouts in every computation of `module`; to `explain`, when given,
    one line on the entry's layouts where the module left them free. `unset`: entry
    parameters (`p<N>`) and `result` whose entry_computation_layout is left free."""
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
            if params is not None:  # XLA's cleared ShapeLayouts: free, as without a layout
                params = {n: s for n, s in params.items() if f"p{n}" not in unset}
            root = None if "result" in unset else root
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
        if comp is entry and ecl is not None and unset:
            record_unset_layouts(module, comp, unset)
    return changed


def record_unset_layouts(module: ModuleOp, entry: ComputationOp, unset: frozenset[str]) -> None:
    """Write the layouts chosen for the `unset` entries into entry_computation_layout."""
    stored = list(module.attributes["hlo.entry_computation_layout"].data)  # type: ignore[attr-defined]
    for p in entry.parameters():
        if f"p{p.attr('number')}" in unset:
            stored[p.attr("number")] = p.shape
    if "result" in unset:
        stored[-1] = entry.root.shape
    module.attributes["hlo.entry_computation_layout"] = ATTR_CLASSES["shapes"].new(tuple(stored))  # type: ignore[attr-defined]


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
