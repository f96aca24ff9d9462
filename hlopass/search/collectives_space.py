"""The collectives space: combiner thresholds and the all-reduce algorithm per size band
(issue 36). Decisions:

- `combine:PASS=BYTES`: the combiner `PASS` (`all-reduce-combiner`, `all-gather-combiner`,
  `reduce-scatter-combiner`; offered where the module holds its collective) run with
  `combine-threshold-in-bytes=BYTES`, one of `THRESHOLDS` (0 turns combining off; XLA's
  default is 30 MiB): set where the pipeline holds the pass, else the pass is added before
  priority fusion;
- `all-reduce:one-shot<=N`: the all-reduces of at most N elements (`BANDS`) done one-shot,
  as an all-gather of every participant's value and a local reduce
  (`all-reduce-decomposer{max-elements=N}`, before the combiners: XLA:GPU's order), the
  rest by the ring or tree algorithms `hlopass.cost.collectives` prices.

One decision per combiner and one band at most. A plan is the pipeline text they give,
priced and checked as the pipeline space's plans are (`PipelineSpace`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.arg_spec import parse_pipeline

from hlopass.search.pipeline_space import (
    PipelineSpace,
    module_opcodes,
    pass_name,
    set_option,
    spec_text,
)
from hlopass.search.space import Decisions

COMBINERS = {
    "all-reduce-combiner": "all-reduce",
    "all-gather-combiner": "all-gather",
    "reduce-scatter-combiner": "reduce-scatter",
}
"""Each combiner and the opcode it combines."""

THRESHOLDS = (0, 256 * 1024, 4 * 1024 * 1024, 30 * 1024 * 1024 + 7, 256 * 1024 * 1024)
"""Combiner byte thresholds tried: off, 256 KiB, 4 MiB, XLA's default, 256 MiB."""

BANDS = (16 * 1024, 256 * 1024, 4 * 1024 * 1024)
"""All-reduce sizes (elements) up to which a plan may do them one-shot (XLA:GPU: 256Ki)."""

ONE_SHOT = "all-reduce:one-shot<="


def collective_decisions(pipeline: str, opcodes: set[str]) -> list[str]:
    """Every decision open on `pipeline` for a module with `opcodes` (module docstring)."""
    own = {s.name: s for s in parse_pipeline(pipeline)}
    out: list[str] = []
    for combiner, opcode in COMBINERS.items():
        if opcode not in opcodes:
            continue
        spec = own.get(combiner)
        current = spec.parameters.get("combine-threshold-in-bytes") if spec else None
        now = int(current[0]) if current else THRESHOLDS[3]
        out += [f"combine:{combiner}={t}" for t in THRESHOLDS
                if t != now or (spec is None and t == THRESHOLDS[3])]  # fmt: skip
    if "all-reduce" in opcodes and "all-reduce-decomposer" not in own:
        out += [f"{ONE_SHOT}{n}" for n in BANDS]
    return out


def collectives_text(pipeline: str, decisions: Decisions) -> str:
    """The pipeline a plan runs: thresholds set or combiners added, the decomposer added."""
    passes = [spec_text(s) for s in parse_pipeline(pipeline)]
    names = [pass_name(p) for p in passes]
    at = names.index("priority-fusion") if "priority-fusion" in names else len(passes)
    added: list[str] = []
    for d in sorted(decisions):
        if d.startswith(ONE_SHOT):
            added.insert(0, f"all-reduce-decomposer{{max-elements={d.removeprefix(ONE_SHOT)}}}")
        elif d.startswith("combine:"):
            combiner, value = d.removeprefix("combine:").split("=", 1)
            if combiner in names:
                passes = [set_option(p, "combine-threshold-in-bytes", int(value))
                          if pass_name(p) == combiner else p for p in passes]  # fmt: skip
            else:
                added.append(f"{combiner}{{combine-threshold-in-bytes={value}}}")
    return ",".join(passes[:at] + added + passes[at:])


class CollectivesSpace(PipelineSpace):
    """Combiner thresholds and all-reduce algorithm bands (module docstring)."""

    name = "collectives"

    def __init__(self, module: ModuleOp, device: str, cost_model: str = "default",
                 max_temp_bytes: int = -1, pipeline: str = "") -> None:  # fmt: skip
        super().__init__(module, device, cost_model, max_temp_bytes, pipeline)
        self.decisions = collective_decisions(pipeline, module_opcodes(module))

    def text(self, decisions: Decisions) -> str:
        return collectives_text(self.pipeline, decisions)

    def slot(self, decision: str) -> str:
        """One threshold per combiner, one one-shot band."""
        if decision.startswith(ONE_SHOT):
            return ONE_SHOT
        return decision.split("=", 1)[0]
