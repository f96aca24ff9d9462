"""What `layout-assignment{policy=cost}` pays for a candidate plan: the estimated time of
the module as it will run, i.e. after the passes that follow layout assignment (by default
the layout cleanups and the fusion pipeline a user runs after it, README's `-p`).

A plan priced on the unfused module can lose once fused: a copy that looks cheap beside
unfused elementwise kernels becomes a kernel of its own when everything around it fuses,
and a transpose that fuses into its consumer costs nothing. So each candidate is laid out
on a copy of the module, the whole pipeline runs on that copy, and `hlopass.cost` prices
what comes out. Plans that lay the module out identically (several candidates often do)
are priced once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.arg_spec import parse_pipeline

from hlopass.cost import estimate
from hlopass.dialects.hlo import HloOp, computations
from hlopass.rewriting import HloModulePass

from .engine import Choices
from .planned import assign_layouts

LAYOUT_CLEANUPS = ("layout-normalization", "copy-elision")
"""What follows `layout-assignment` in README's layout pipeline."""

FUSION_PIPELINE = (
    "call-inliner", "algsimp", "constant-folding", "dce", "cse", "tree-reduction-rewriter",
    "priority-fusion", "multi-output-fusion", "horizontal-fusion",
)  # fmt: skip
"""README's fusion pipeline (`hlopass-opt m.hlo -p '...' --explain-fusion`)."""

AFTER_LAYOUT = LAYOUT_CLEANUPS + FUSION_PIPELINE
"""The pipeline a user runs after layout assignment: the layout cleanups, then the fusion
pipeline; `default` in `layout-assignment{price-after=...}` (its default) stands for it."""

DEFAULT = "default"


def after_passes(spec: Iterable[str], device: str) -> list[HloModulePass]:
    """The passes of the pipeline `spec` (its comma-separated parts, `default` standing for
    `AFTER_LAYOUT`); each pass with a `device` option that `spec` leaves unset gets
    `device` (the layout pass's GPU). ValueError (one line, naming `price-after`) on a
    bad pipeline."""
    from hlopass.pipeline import PipelineError, parse_pass_pipeline

    parts = [q for p in spec for q in (AFTER_LAYOUT if p.strip() == DEFAULT else (p,))]
    text = ",".join(p for p in parts if p.strip())
    if not text:
        return []
    try:
        passes = parse_pass_pipeline(text)
    except PipelineError as e:
        raise ValueError(f"price-after: {str(e).removeprefix('error: ')}") from None
    if any(p.name == "layout-assignment" for p in passes):
        # each of its trials would lay the module out again, pricing trials of its own
        raise ValueError("price-after: layout-assignment cannot price itself")
    named = [s.parameters for s in parse_pipeline(text)]
    out = []
    for p, given in zip(passes, named, strict=True):
        fields = {f.name for f in dataclasses.fields(p)} if dataclasses.is_dataclass(p) else set()
        if "device" in fields and "device" not in given:
            p = dataclasses.replace(p, device=device)  # type: ignore[type-var]
        out.append(p)
    return out


class EndToEndPricer:
    """Prices a plan (`Choices`) of `module` as it will run: laid out by the plan on a copy,
    then the pipeline `spec` (as `after_passes` reads it) run on it, then estimated on
    `device` (µs). `pack_k` and `unset` lay the copy out as `layout-assignment`'s options of
    those names will lay out the module. One estimate per distinct laid-out module: `calls`
    counts plans asked for, `runs` pipelines run."""

    def __init__(self, module: ModuleOp, device: str, spec: Iterable[str] = (DEFAULT,),
                 pack_k: bool = False, unset: frozenset[str] = frozenset()):  # fmt: skip
        self.module = module
        self.device = device
        self.spec = tuple(spec)
        self.pack_k = pack_k
        self.unset = unset
        self.memo: dict[tuple[object, ...], float] = {}
        self.calls = 0
        self.runs = 0

    @functools.cached_property
    def passes(self) -> list[HloModulePass]:
        # read on the first plan priced: policy=xla without explain prices none, and
        # should not import the fusion passes
        return after_passes(self.spec, self.device)

    def __call__(self, choices: Choices) -> float:
        from hlopass.pipeline import Runner

        self.calls += 1
        trial = self.module.clone()
        plan = dataclasses.replace(choices, pack_k=choices.pack_k or self.pack_k)
        assign_layouts(trial, plan, unset=self.unset)
        key = layout_key(trial)
        if key not in self.memo:
            self.runs += 1
            Runner().run(self.passes, trial)
            self.memo[key] = estimate(trial, self.device).time_us
        return self.memo[key]


def layout_key(module: ModuleOp) -> tuple[object, ...]:
    """What a laid-out module is, for telling plans apart: every instruction's name, opcode,
    shape with layout, and operands (so also where copies went)."""
    return tuple(
        (comp.root.inst_name, *(
            (op.inst_name, op.opcode, op.shape.text(),
             tuple(v.owner.inst_name if isinstance(v.owner, HloOp) else "" for v in op.operands))
            for op in comp.instructions
        ))
        for comp in computations(module)
    )  # fmt: skip
