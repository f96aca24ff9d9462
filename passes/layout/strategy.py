"""Which layout plan each convolution/dot cluster gets: XLA's rules, or the candidate the
cost model prices cheapest (copies and transposes included), or TensorFlow grappler's rule.

A cluster is a set of convolutions and dots connected through layout-following
(elementwise) instructions: they share layouts, so they are decided together.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.shape import ArrayShape

from . import rules
from .engine import Choices, is_follow, producer
from .layouts import value_shape

CONV_CANDIDATES = ("xla", "nchw", "nhwc", "no-copies")
DOT_CANDIDATES = ("xla", "no-copies", "swap-output", "row-major")
POLICIES = ("xla", "cost", "grappler")

_EXPLAIN: list[TextIO] = []


def explain_to(stream: TextIO | None) -> None:
    """Print every layout-assignment run's clusters and candidates to `stream` (CLI flag)."""
    _EXPLAIN.clear()
    if stream is not None:
        _EXPLAIN.append(stream)


def explain_stream(explain: bool) -> TextIO | None:
    if _EXPLAIN:
        return _EXPLAIN[0]
    return sys.stderr if explain else None


@dataclass
class Cluster:
    computation: str
    ops: list[HloOp]

    @property
    def has_conv(self) -> bool:
        return any(op.opcode == "convolution" for op in self.ops)

    def describe(self) -> str:
        parts = []
        for op in self.ops:
            et = value_shape(op.operands[0])
            t = et.element_type if isinstance(et, ArrayShape) else "?"
            parts.append(f"{op.opcode} {op.inst_name} ({t})")
        return ", ".join(parts)


def find_clusters(module: ModuleOp) -> list[Cluster]:
    """Convolutions/dots linked through chains of layout-following instructions."""
    out: list[Cluster] = []
    for comp in computations(module):
        ops = list(comp.instructions)
        parent: dict[HloOp, HloOp] = {op: op for op in ops}
        for op in ops:
            if not _linked(op):
                continue
            for v in op.operands:
                p = producer(v)
                # two heavy ops are not linked directly: only through follow chains
                if p is not None and p in parent and _linked(p) and not (_heavy(op) and _heavy(p)):
                    parent[_find(parent, p)] = _find(parent, op)
        groups: dict[HloOp, list[HloOp]] = {}
        for op in ops:
            if _heavy(op):
                groups.setdefault(_find(parent, op), []).append(op)
        out += [Cluster(comp.comp_name, g) for g in groups.values()]
    # the largest first: they get priced when the trial budget runs out
    return sorted(out, key=lambda c: -sum(_size(op) for op in c.ops))


def _size(op: HloOp) -> int:
    return sum(getattr(value_shape(v), "num_elements", 0) for v in (*op.operands[:2], op.result))


def _heavy(op: HloOp) -> bool:
    return op.opcode in ("convolution", "dot")


def _linked(op: HloOp) -> bool:
    return _heavy(op) or is_follow(op)


def _find(parent: dict[HloOp, HloOp], x: HloOp) -> HloOp:
    while parent[x] is not x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def per_op_choice(op: HloOp, candidate: str) -> str:
    if candidate == "no-copies":
        return "keep"
    if op.opcode == "dot":
        return "xla" if candidate in ("nchw", "nhwc") else candidate
    return "xla" if candidate in ("swap-output", "row-major") else candidate


Pricer = Callable[[Choices], float]


def choose(module: ModuleOp, device: str, policy: str, price: Pricer,
           explain: TextIO | None = None, max_trials: int = 64) -> Choices:  # fmt: skip
    """The plan per convolution/dot: `xla` keeps XLA's rules, `cost` takes, cluster by
    cluster (greedily, the others fixed), the candidate with the lowest estimated module
    time, `grappler` applies TensorFlow's rule (NCHW unless >= half the convolutions
    prefer NHWC) to every convolution. Each priced candidate is one trial of the whole
    module: past `max_trials`, the remaining (smaller) clusters keep XLA's rules.

    `price` says what a plan costs (`pricing.EndToEndPricer`: after the pipeline that
    follows layout assignment). XLA's own candidate is in every cluster's set, tried
    first, and wins ties, so under `cost` the chosen plan is never priced above
    policy=xla's (checked once more at the end)."""
    choices = Choices(device)
    clusters = find_clusters(module)
    if policy == "grappler":
        convs = [op for c in clusters for op in c.ops if op.opcode == "convolution"]
        fmt = grappler_format(convs, device)
        for op in convs:
            choices.per_op[op.inst_name] = fmt
        if explain is not None:
            print(
                f"layout: grappler rule: {fmt.upper()} for all {len(convs)} convolution(s)",
                file=explain,
            )
    if policy == "xla" and explain is None or policy == "grappler" and explain is None:
        return choices
    trials = 0
    for n, cluster in enumerate(clusters):
        cands = CONV_CANDIDATES if cluster.has_conv else DOT_CANDIDATES
        if trials + len(cands) > max_trials:
            if explain is not None:
                print(f"layout cluster {n} in {cluster.computation}: {cluster.describe()}: "
                      f"not priced (max-trials={max_trials}), xla", file=explain)  # fmt: skip
            continue
        trials += len(cands)
        times: dict[str, float] = {}
        for cand in cands:
            trial = Choices(device, dict(choices.per_op))
            for op in cluster.ops:
                trial.per_op[op.inst_name] = per_op_choice(op, cand)
            times[cand] = price(trial)
        cheapest = min(cands, key=lambda c: (round(times[c], 6), cands.index(c)))
        if policy == "cost":
            winner = cheapest
            for op in cluster.ops:
                choices.per_op[op.inst_name] = per_op_choice(op, winner)
        else:
            winner = "xla" if policy == "xla" else "grappler"
        if explain is not None:
            print(
                f"layout cluster {n} in {cluster.computation}: {cluster.describe()}", file=explain
            )
            for cand in cands:
                print(f"  {cand:<10} {times[cand]:10.3f} us", file=explain)
            line = f"  winner: {winner} (policy={policy}, device={device})"
            if policy != "cost":  # the rule's plan beside the priced one
                plan = "xla" if policy == "xla" else choices.of(cluster.ops[0])
                line += f" = {plan}, {times[plan]:.3f} us; cheapest: {cheapest}"
                line += f", {times[cheapest]:.3f} us"
            print(line, file=explain)
    if policy == "cost" and choices.per_op and price(choices) > price(Choices(device)):
        # greedy steps only ever lower the price, from XLA's plan: this holds unless a
        # pricer is not a function of the plan; then XLA's plan, never a slower one
        if explain is not None:
            print("layout: the priced plan is slower than policy=xla's: xla", file=explain)
        return Choices(device)
    return choices


def grappler_format(convs: list[HloOp], device: str) -> str:
    """TensorFlow's GenericLayoutOptimizer: NHWC when at least half of the convolutions are
    f16/bf16 on a GPU with tensor cores (Volta+), else NCHW."""
    if not convs:
        return "nchw"
    cc = rules.COMPUTE_CAPABILITY.get(device, rules.HOPPER)
    prefer = sum(
        1
        for op in convs
        if cc >= rules.VOLTA
        and getattr(value_shape(op.operands[0]), "element_type", "") in ("f16", "bf16")
    )
    return "nhwc" if 2 * prefer >= len(convs) else "nchw"
