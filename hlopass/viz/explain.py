"""Fusion and layout explanations as overlays of the pictures.

`collect(run)` runs `run()` (a pipeline) with the fusion passes' records and the layout
assignment's explanation switched on, and returns what they said per instruction name:

- fusion (`priority-fusion`, `multi-output-fusion`, horizontal fusion): for each producer a
  pass considered, `fused into KERNEL` or `kept: REASON` (XLA's refusal text, or the two
  estimated times when fusing would have been slower);
- layout (`layout-assignment`): for each dot/convolution, its cluster's winner and the
  estimated time of each candidate.

`apply(graph, notes)` attaches them to the drawn nodes (`Node.notes`, shown in tooltips,
the HTML side panel and Model Explorer attributes) and marks producers that stayed out of a
fusion (`Node.kept`); with fusion records, each fusion cluster gets its own colour.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_CLUSTER = re.compile(r"^layout cluster \d+ in (\S+): (.*?)(?:: not priced \((.*)\), xla)?$")
_MEMBER = re.compile(r"(?:dot|convolution) (\S+) \(")
_CANDIDATE = re.compile(r"^\s+(\S+)\s+([\d.]+) us$")
_WINNER = re.compile(r"^\s+winner: (.*)$")


@dataclass
class Notes:
    by_name: dict[str, list[str]] = field(default_factory=dict)
    kept: set[str] = field(default_factory=set)
    """Producers that a fusion pass considered and left out of every fusion."""
    fusion: bool = False

    def add(self, name: str, note: str) -> None:
        self.by_name.setdefault(name, []).append(note)


def collect(run: Callable[[], Any], fusion: bool = True, layout: bool = True) -> Notes:
    """Run `run()` with the explanations on; what they said, per instruction name."""
    from hlopass.passes.fusion.explain import explain_sink
    from hlopass.passes.layout.strategy import explain_to

    fusion_out, layout_out = io.StringIO(), io.StringIO()
    if fusion:
        explain_sink.enable(fusion_out, "json")
    if layout:
        explain_to(layout_out)
    try:
        run()
    finally:
        explain_sink.disable()
        explain_to(None)
    notes = Notes(fusion=fusion)
    fused: set[str] = set()
    for line in fusion_out.getvalue().splitlines():
        r = json.loads(line)
        if r["decision"] == "fused":
            fused.add(r["producer"])
            into = ", ".join(r.get("kernels") or r.get("consumers") or [])
            note = f"{r['pass_name']}: fused" + (f" into {into}" if into else "")
            if r.get("unfused_us") is not None and r.get("fused_us") is not None:
                note += f" (fused {r['fused_us']:.3f} µs vs unfused {r['unfused_us']:.3f} µs)"
            notes.add(r["producer"], note)
        else:
            why = r.get("reason")
            if not why and r.get("unfused_us") is not None and r.get("fused_us") is not None:
                why = f"fused {r['fused_us']:.3f} µs vs unfused {r['unfused_us']:.3f} µs"
            consumers = ", ".join(r.get("consumers") or [])
            notes.add(r["producer"], f"{r['pass_name']}: kept out of {consumers or 'fusion'}"
                      + (f": {why}" if why else ""))  # fmt: skip
            notes.kept.add(r["producer"])
    notes.kept -= fused  # kept out by one consumer, fused into another: fused
    _layout(layout_out.getvalue(), notes)
    return notes


def _layout(text: str, notes: Notes) -> None:
    members: list[str] = []
    cands: list[str] = []
    for line in text.splitlines():
        m = _CLUSTER.match(line)
        if m is not None:
            members = _MEMBER.findall(m.group(2))
            cands = []
            if m.group(3):
                for name in members:
                    notes.add(name, f"layout: not priced ({m.group(3)}), XLA's rules")
            continue
        m = _CANDIDATE.match(line)
        if m is not None:
            cands.append(f"{m.group(1)} {float(m.group(2)):.3f} µs")
            continue
        m = _WINNER.match(line)
        if m is not None:
            for name in members:
                notes.add(name, f"layout: {m.group(1)}; " + ", ".join(cands))
        elif line.startswith("layout: "):  # grappler's one rule for every convolution
            notes.add("*", line)


def apply(graph: Any, notes: Notes) -> None:
    """Attach `notes` to the nodes of `graph` (matched by instruction name)."""
    everywhere = notes.by_name.get("*", [])
    for node in graph.nodes.values():
        said = notes.by_name.get(node.name, [])
        if node.opcode == "convolution":
            said = said + everywhere
        if said:
            node.notes = list(said)
        group = graph.groups.get(node.group)
        if node.name in notes.kept and (group is None or group.kind != "fusion"):
            node.kept = True
    if notes.fusion:
        graph.colour_fusions = True
