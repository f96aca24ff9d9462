"""The pipeline space: what a compiler could have run around the given pipeline.

A decision adds an optional pass XLA's GPU pipeline has (`+while-loop-unroller` first,
`+dot-merger` / `+tree-reduction-rewriter` / `+layout-assignment{policy=cost}` and the
Triton and sort fusions (`+dot-decomposer`, `+gemm-fusion`, `+softmax-rewriter-triton`,
`+sort-iota-fusion`) before priority fusion, in XLA's order among themselves,
`+multi-output-fusion` after it, `+horizontal-fusion` last), removes one the
pipeline holds (`-multi-output-fusion`), or sets one of its options
(`priority-fusion{cost-model=roofline}`, `layout-assignment{policy=xla}`,
`algsimp{use-associative-reordering=true}`, `constant-folding{level=aggressive}`). A plan is the
pipeline text its decisions give; pricing it runs that pipeline on a copy of the module
(nothing cheaper can say what a pass does), so prices and built modules are cached by
pipeline text, and two plans whose modules print the same share a `plan_key`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline

from hlopass.errors import HloError
from hlopass.search.space import Choice, Decisions, Priced, SearchSpace


@dataclass(frozen=True)
class Insertable:
    """A pass the pipeline may gain: where it goes, and an opcode without which it has
    nothing to do (the decision is not offered on such a module)."""

    text: str
    where: str
    """`first`, `before` / `after` priority-fusion, or `last`."""
    needs: str = ""


OPTIONAL = (
    Insertable("while-loop-unroller", "first", "while"),
    Insertable("tree-reduction-rewriter", "before", "reduce"),
    Insertable("dot-merger", "before", "dot"),
    Insertable("multi-output-fusion", "after"),
    Insertable("horizontal-fusion", "last"),
    Insertable("layout-assignment{policy=cost}", "before"),
    Insertable("gemm-fusion", "before", "dot"),
    Insertable("dot-decomposer", "before", "dot"),
    Insertable("softmax-rewriter-triton{only-fuse-if-profitable=true}", "before", "reduce"),
    Insertable("sort-iota-fusion", "before", "sort"),
)
"""Insertable passes, most promising first (the order the strategies try them)."""

INSERT_ORDER = ("while-loop-unroller", "dot-merger", "dot-decomposer", "layout-assignment",
                "gemm-fusion", "softmax-rewriter-triton", "tree-reduction-rewriter",
                "sort-iota-fusion", "multi-output-fusion", "horizontal-fusion")  # fmt: skip
"""The order inserted passes take among themselves: XLA's GPU pipeline's (a dot is
decomposed before GEMM fusion reads it, layouts are assigned before the Triton fusions)."""

REMOVABLE = ("multi-output-fusion", "horizontal-fusion", "tree-reduction-rewriter",
             "dot-merger", "while-loop-unroller", "layout-assignment", "gemm-fusion",
             "dot-decomposer", "softmax-rewriter-triton", "sort-iota-fusion")  # fmt: skip
OPTIONS = {
    "priority-fusion": [("cost-model", "default", ("roofline", "default"))],
    "layout-assignment": [("policy", "xla", ("cost", "xla"))],
    # XLA's aggressive level also folds what is computed from iotas and broadcasts alone
    "constant-folding": [("level", "default", ("aggressive",))],
    # algsimp options XLA offers that the pipeline leaves off
    "algsimp": [("use-associative-reordering", "false", ("true",)),
                ("unconditionally-simplify-reduce-of-transpose-or-reshape", "false", ("true",))],
}  # fmt: skip
"""Per pass: options, each with its default and the values a plan may run it with instead."""


def pass_name(text: str) -> str:
    """The pass a pipeline element names (`algsimp{...}` -> `algsimp`)."""
    return text.split("{", 1)[0]


def _value(v: Any) -> str:
    """An option value as the pipeline syntax reads it back."""
    if isinstance(v, bool):
        return "true" if v else "false"
    text = str(v)
    return json.dumps(text) if isinstance(v, str) and any(c in text for c in ' ,{}="') else text


def spec_text(spec: ArgSpec) -> str:
    if not spec.parameters:
        return spec.name
    opts = " ".join(f"{k}={','.join(map(_value, v))}" for k, v in spec.parameters.items())
    return f"{spec.name}{{{opts}}}"


def set_option(text: str, key: str, value: Any) -> str:
    (spec,) = parse_pipeline(text)
    params = dict(spec.parameters)
    params[key] = (value,)
    return spec_text(ArgSpec(spec.name, params))


def _insert(passes: list[str], opt: Insertable) -> list[str]:
    names = [pass_name(p) for p in passes]
    at = names.index("priority-fusion") if "priority-fusion" in names else len(passes)
    where = {"first": 0, "before": at, "after": at + 1, "last": len(passes)}[opt.where]
    return passes[:where] + [opt.text] + passes[where:]


def pipeline_text(pipeline: str, decisions: Decisions) -> str:
    """The pipeline a plan runs: `pipeline` with `decisions` applied (removals, then option
    settings, then insertions in `OPTIONAL`'s order)."""
    passes = [spec_text(s) for s in parse_pipeline(pipeline)]
    for d in sorted(decisions):
        if d.startswith("-"):
            passes = [p for p in passes if pass_name(p) != d[1:]]
    for d in sorted(decisions):
        if not d.startswith(("+", "-")):
            (spec,) = parse_pipeline(d)
            ((key, value),) = spec.parameters.items()
            passes = [set_option(p, key, value[0]) if pass_name(p) == spec.name else p
                      for p in passes]  # fmt: skip
    for opt in sorted(OPTIONAL, key=lambda o: INSERT_ORDER.index(pass_name(o.text))):
        if f"+{opt.text}" in decisions:
            passes = _insert(passes, opt)
    return ",".join(passes)


def pipeline_decisions(pipeline: str, opcodes: set[str]) -> list[str]:
    """Every decision open on `pipeline` for a module with `opcodes`, most promising first."""
    specs = list(parse_pipeline(pipeline))
    names = {s.name for s in specs}
    out = [f"+{o.text}" for o in OPTIONAL
           if pass_name(o.text) not in names and (not o.needs or o.needs in opcodes)]  # fmt: skip
    out += [f"-{n}" for n in REMOVABLE if n in names]
    for s in specs:
        for key, default, values in OPTIONS.get(s.name, []):
            own = str(s.parameters[key][0]).lower() if key in s.parameters else default
            out += [f"{s.name}{{{key}={v}}}" for v in values if v != own]
    return list(dict.fromkeys(out))


def _slot(decision: str) -> str:
    """Decisions adding or removing one pass exclude each other, and so do values of one
    option of a pass (`algsimp{KEY=...}`)."""
    if decision.startswith(("+", "-")):
        return pass_name(decision[1:])
    return decision.split("=", 1)[0]


def module_opcodes(module: ModuleOp) -> set[str]:
    """Every opcode the module holds (a decision needing another is not offered)."""
    from hlopass.dialects.hlo import HloOp

    return {op.opcode for op in module.walk() if isinstance(op, HloOp)}


class PipelineSpace(SearchSpace):
    """Pipelines around the given one; each plan priced by running it (see the module
    docstring). `whole_pipeline` tells `search` to hand this space the whole pipeline and
    the module before any pass, and to run nothing around its builds."""

    name = "pipeline"
    whole_pipeline = True
    distinct_plans = True
    """Plans that build the same module are reported once (redundant decisions left out)."""

    def __init__(self, module: ModuleOp, device: str, cost_model: str = "default",
                 max_temp_bytes: int = -1, pipeline: str = "") -> None:  # fmt: skip
        self.module = module.clone()
        self.device = device
        self.pipeline = pipeline
        self.decisions = pipeline_decisions(pipeline, module_opcodes(module))
        self.built: dict[str, tuple[ModuleOp | None, Priced | None, str]] = {}

    def text(self, decisions: Decisions) -> str:
        """The plan's pipeline: also the key its module and price are cached by."""
        return pipeline_text(self.pipeline, decisions)

    def slot(self, decision: str) -> str:
        """Decisions with the same slot exclude each other (here: those on one pass)."""
        return _slot(decision)

    def start(self) -> ModuleOp:
        """A fresh copy of what every plan starts from (here: the module before any pass)."""
        return self.module.clone()

    def apply(self, decisions: Decisions, module: ModuleOp) -> None:
        """Run the plan on `module` (a `start()` copy), in place."""
        from hlopass.pipeline import Runner, parse_pass_pipeline

        Runner().run(parse_pass_pipeline(self.text(decisions)), module)

    def _run(self, decisions: Decisions) -> tuple[ModuleOp | None, Priced | None, str]:
        import hlopass
        import hlopass.cost
        from hlopass.cost.roofline_fusion_model import roofline_row_us

        text = self.text(decisions)
        if text not in self.built:
            m = self.start()
            try:
                self.apply(decisions, m)
                est = hlopass.cost.estimate(m, self.device)
            except Exception:  # a variant a pass refuses or fails on: dropped, never built
                self.built[text] = (None, None, text)
                return self.built[text]
            # the second model, as the roofline fusion model prices a kernel: its launch
            # plus its DRAM bytes, and a GEMM's fixed cost
            roof = sum(roofline_row_us(k) for k in est.kernels)
            by_model = {"default": est.time_us, "roofline": roof}
            priced = Priced(frozenset(), est.time_us, by_model, [], len(est.kernels))
            self.built[text] = (m, priced, hlopass.print_hlo(m))
        return self.built[text]

    def price(self, decisions: Decisions) -> Priced:
        _, priced, _ = self._run(decisions)
        taken = {self.slot(d) for d in decisions}
        choices = [Choice(d, i) for i, d in enumerate(self.decisions) if self.slot(d) not in taken]
        if priced is None:
            return Priced(decisions, math.inf, {"default": math.inf, "roofline": math.inf})
        return Priced(decisions, priced.time_us, dict(priced.by_model), choices, priced.kernels)

    def build(self, decisions: Decisions) -> Any:
        m, _, _ = self._run(decisions)
        if m is None:
            raise HloError(f"error: the plan '{self.text(decisions)}' fails on the module")
        return m.clone()

    def plan_key(self, decisions: Decisions) -> Hashable:
        """Plans whose built modules print the same are one plan."""
        return self._run(decisions)[2]
