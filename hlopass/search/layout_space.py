"""The layout space: a candidate layout plan per convolution/dot cluster, combined across
clusters (issue 36). `layout-assignment{policy=cost}` tries the same candidates
(`passes.layout.strategy`: XLA's rules, NCHW / NHWC, no copies, swapped or row-major dot
outputs) one cluster at a time, each fixed once chosen; here each cluster's candidate is a
decision, `layout:CLUSTER=CANDIDATE` (CLUSTER: its first convolution or dot), so a
strategy can combine them.

A plan runs the pipeline's passes before its `layout-assignment` (or, without one, before
`priority-fusion`) once, lays the module out by the plan's choices (the others keep XLA's
rules) where the pipeline's layout-assignment runs, then the rest of the pipeline; without
a layout-assignment in the pipeline, the empty plan lays nothing out (it is the pipeline as
given) and `=xla` is a decision too. Prices and checks are the pipeline space's.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.search.pipeline_space import PipelineSpace
from hlopass.search.space import Decisions


class LayoutSpace(PipelineSpace):
    """Per-cluster layout candidates (module docstring)."""

    name = "layout"

    def __init__(self, module: ModuleOp, device: str, cost_model: str = "default",
                 max_temp_bytes: int = -1, pipeline: str = "") -> None:  # fmt: skip
        from hlopass.passes.layout.strategy import (
            CONV_CANDIDATES,
            DOT_CANDIDATES,
            find_clusters,
        )
        from hlopass.pipeline import Runner, parse_pass_pipeline

        super().__init__(module, device, cost_model, max_temp_bytes, pipeline)
        passes = parse_pass_pipeline(pipeline)
        names = [p.name for p in passes]
        self.has_layout = "layout-assignment" in names
        at = names.index("layout-assignment" if self.has_layout else "priority-fusion")
        self.prefix = self.module.clone()
        Runner().run(passes[:at], self.prefix)
        self.suffix = passes[at + 1 :] if self.has_layout else passes[at:]
        self.layout = passes[at] if self.has_layout else None
        self.clusters: dict[str, list[str]] = {}
        self.decisions = []
        for c in find_clusters(self.prefix):
            head = c.ops[0].inst_name
            self.clusters[head] = [op.inst_name for op in c.ops]
            cands = CONV_CANDIDATES if c.has_conv else DOT_CANDIDATES
            self.decisions += [f"layout:{head}={cand}" for cand in cands
                               if cand != "xla" or not self.has_layout]  # fmt: skip

    def start(self) -> ModuleOp:
        return self.prefix.clone()

    def text(self, decisions: Decisions) -> str:
        return f"{self.pipeline} | {' '.join(sorted(decisions))}"

    def slot(self, decision: str) -> str:
        return decision.split("=", 1)[0]

    def apply(self, decisions: Decisions, module: ModuleOp) -> None:
        from hlopass.passes.layout.engine import Choices
        from hlopass.passes.layout.planned import assign_layouts
        from hlopass.passes.layout.strategy import per_op_choice
        from hlopass.pipeline import Runner

        own = self.layout
        if own is not None and not decisions:  # the empty plan: the pipeline as given
            Runner().run([own, *self.suffix], module)
            return
        if decisions:
            choices = Choices(self.device)
            unset: frozenset[str] = frozenset()
            if own is not None:  # the pipeline's layout-assignment's other options hold
                choices.pack_k = bool(getattr(own, "pack_dot_operands_along_k", False))
                unset = frozenset(u.strip() for u in str(getattr(own, "unset", "")).split(",")
                                  if u.strip())  # fmt: skip
            ops = {op.inst_name: op for op in _instructions(module)}
            for d in decisions:
                head, cand = d.removeprefix("layout:").split("=", 1)
                for name in self.clusters[head]:
                    choices.per_op[name] = per_op_choice(ops[name], cand)
            assign_layouts(module, choices, unset=unset)
        Runner().run(self.suffix, module)


def _instructions(module: ModuleOp) -> list[Any]:
    from hlopass.dialects.hlo import computations

    return [op for comp in computations(module) for op in comp.instructions]
