"""The multi-output fusion space: the merges `multi-output-fusion` makes, each one a decision
to skip, and those it refused as slower, each one a decision to force (issue 36).
`mof-skip:A+B` leaves kernels A and B (a sibling pair reading one value, or a producer and
its reader, by their names when the pass considered them) unmerged; `mof-force:A+B` merges
a pair the pass priced slower merged (only that refusal is overridden: XLA's legality
rules, loop shapes, cycles and budgets still hold). The rest of the pass runs as it would,
so a skipped or forced merge can open or close others, whose skips and forcings are the
choices open from that plan (closest calls first: the merges whose priced gain or loss was
smallest).

The passes before the pipeline's `multi-output-fusion` run once; each plan runs the pass
with its skips (`MultiOutputDriver`, `consider` refusing the skipped pairs), then the rest
of the pipeline. Prices and checks are the pipeline space's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.passes.fusion.multi_output import MultiOutputDriver
from hlopass.passes.fusion.multi_output_rewrites import SLOWER
from hlopass.search.pipeline_space import PipelineSpace
from hlopass.search.space import Choice, Decisions, Priced

SKIPPED = "skipped by the search plan"


@dataclass
class SkippingDriver(MultiOutputDriver):
    """XLA's multi-output fusion with some merges skipped and some forced."""

    skip: frozenset[str] = frozenset()
    """`A+B` pairs left unmerged."""
    force: frozenset[str] = frozenset()
    """`A+B` pairs merged even where the merged kernel prices slower."""

    def consider(self, a: Any, b: Any, reach: Any, sibling: bool, common: Any = None) -> bool:
        if f"{a.inst_name}+{b.inst_name}" in self.skip:
            return False
        return super().consider(a, b, reach, sibling, common)

    def _forced(self, a: Any, b: Any, fused: float) -> float:
        """A forced pair's merged price, held to the unfused one so the pass merges it."""
        if f"{a.inst_name}+{b.inst_name}" in self.force:
            return min(fused, self.time_of(a) + self.time_of(b))
        return fused

    def price_siblings(self, a: Any, b: Any) -> Any:
        fused, *rest = super().price_siblings(a, b)
        return (self._forced(a, b, fused), *rest)

    def price_producer(self, a: Any, b: Any) -> Any:
        fused, plan = super().price_producer(a, b)
        return self._forced(a, b, fused), plan


def _score(record: Any) -> float:
    """How sure the pass was of a merge: its priced gain over the unfused time."""
    unfused, fused = getattr(record, "unfused_us", None), getattr(record, "fused_us", None)
    if not unfused or fused is None:
        return 1.0
    return abs(unfused - fused) / unfused


class MofSpace(PipelineSpace):
    """Multi-output merges skipped (module docstring)."""

    name = "multi-output"

    def __init__(self, module: ModuleOp, device: str, cost_model: str = "default",
                 max_temp_bytes: int = -1, pipeline: str = "") -> None:  # fmt: skip
        from hlopass.pipeline import Runner, parse_pass_pipeline

        super().__init__(module, device, cost_model, max_temp_bytes, pipeline)
        passes = parse_pass_pipeline(pipeline)
        names = [p.name for p in passes]
        at = names.index("multi-output-fusion") if "multi-output-fusion" in names else None
        self.prefix = self.module.clone()
        Runner().run(passes if at is None else passes[:at], self.prefix)
        self.mof = None if at is None else passes[at]
        self.suffix = [] if at is None else passes[at + 1 :]
        self.merges: dict[str, list[Choice]] = {}
        self.decisions = []

    def start(self) -> ModuleOp:
        return self.prefix.clone()

    def text(self, decisions: Decisions) -> str:
        return f"{self.pipeline} | {' '.join(sorted(decisions))}"

    def slot(self, decision: str) -> str:
        return decision

    def apply(self, decisions: Decisions, module: ModuleOp) -> None:
        from hlopass.passes.fusion.priority import fusible_computations
        from hlopass.passes.fusion.rewrites import run_merge_drivers
        from hlopass.pipeline import Runner

        if self.mof is None:
            return
        skip = frozenset(
            d.removeprefix("mof-skip:") for d in decisions if d.startswith("mof-skip:")
        )
        force = frozenset(d.removeprefix("mof-force:") for d in decisions
                          if d.startswith("mof-force:"))  # fmt: skip
        device = str(getattr(self.mof, "device", self.device))
        model = str(getattr(self.mof, "cost_model", "default"))
        make = functools.partial(SkippingDriver, skip=skip, force=force)
        _, records = run_merge_drivers(module, fusible_computations(module), make,
                                       device, model, None)  # fmt: skip
        made = [r for r in records if r.decision == "fused"]
        slower = [r for r in records if r.decision == "kept" and r.reason == SLOWER]
        self.merges[self.text(decisions)] = sorted(
            [Choice(f"mof-skip:{r.producer}+{r.consumers[0]}", _score(r)) for r in made]
            + [Choice(f"mof-force:{r.producer}+{r.consumers[0]}", _score(r)) for r in slower],
            key=lambda c: (c.score, c.decision),
        )
        Runner().run(self.suffix, module)

    def price(self, decisions: Decisions) -> Priced:
        p = super().price(decisions)
        p.choices = [c for c in self.merges.get(self.text(decisions), [])
                     if c.decision not in decisions]  # fmt: skip
        return p
