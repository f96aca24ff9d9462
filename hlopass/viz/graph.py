"""A module as a graph to look at: instructions, operand edges, computations as groups.

`build_graph(module)` gives a `Graph`: one `Node` per instruction (shape with layout,
op_name/source metadata, its one-line HLO text), an edge per operand (labelled with the
operand's shape), and the computations an instruction calls as nested `Group`s: a fusion's
fused computation is the fusion itself drawn as a group (its parameters take the fusion's
operands, its root feeds the fusion's users), while bodies, conditions, branches and called
computations are groups attached to the instruction that calls them. Reducer-like
`to_apply` computations (a handful of scalar instructions) stay an attribute.

Costs: with `device=`, every kernel (entry-level instruction or fusion) carries its row of
`hlopass.cost.estimate` (estimated µs, bound, flops, bytes).

Big modules: `focus=NAME, radius=R` keeps what is within R edges of an instruction;
`max_nodes` (default 400) collapses fusions to one node each, then drops called bodies, then
keeps the nodes nearest the root, and says what it left out (`Graph.omitted`). Layouts on
Mixtral (43.7k instructions) take a few seconds that way instead of never.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

# Colour families, as XLA's graph dumper groups opcodes (the colours are ours).
FAMILIES: dict[str, tuple[str, ...]] = {
    "parameter": ("parameter",),
    "constant": ("constant", "iota"),
    "dot": (
        "dot",
        "convolution",
        "fft",
        "scaled-dot",
        "ragged-dot",
        "cholesky",
        "triangular-solve",
    ),  # fmt: skip
    "reduce": (
        "reduce",
        "reduce-window",
        "select-and-scatter",
        "gather",
        "scatter",
        "sort",
        "topk",
        "map",
        "reduce-precision",
    ),  # fmt: skip
    "data": (
        "broadcast",
        "reshape",
        "dynamic-reshape",
        "transpose",
        "bitcast",
        "copy",
        "reverse",
        "slice",
        "dynamic-slice",
        "dynamic-update-slice",
        "concatenate",
        "pad",
        "tuple",
        "get-tuple-element",
        "copy-start",
        "copy-done",
    ),  # fmt: skip
    "control": (
        "while",
        "conditional",
        "call",
        "async-start",
        "async-update",
        "async-done",
        "opt-barrier",
        "add-dependency",
        "after-all",
        "domain",
    ),  # fmt: skip
    "custom": ("custom-call",),
    "fusion": ("fusion",),
}
COLLECTIVE_PREFIXES = ("all-", "reduce-scatter", "collective-", "ragged-all-to-all", "send",
                       "recv", "partition-id", "replica-id", "infeed", "outfeed")  # fmt: skip
_FAMILY_OF = {op: fam for fam, ops in FAMILIES.items() for op in ops}
BODY_KINDS = {"while": ("condition", "body"), "conditional": ("branch_computations",
              "true_computation", "false_computation"), "call": ("to_apply",),
              "async-start": ("calls",)}  # fmt: skip


def family(opcode: str) -> str:
    """The colour family of an opcode: elementwise unless it moves data, reduces, ..."""
    fam = _FAMILY_OF.get(opcode)
    if fam is not None:
        return fam
    if opcode.startswith(COLLECTIVE_PREFIXES):
        return "collective"
    return "elementwise"


@dataclass
class Node:
    id: str
    name: str
    opcode: str
    shape: str
    group: str
    """Id of the innermost group ('' at top level)."""
    family: str
    text: str
    op_name: str = ""
    source: str = ""
    cost: dict[str, Any] | None = None
    collapsed: int = 0
    """For a fusion drawn as one node: how many fused instructions it stands for."""
    notes: list[str] = field(default_factory=list)
    """What the fusion and layout passes said about it (`hlopass.viz.explain`)."""
    kept: bool = False
    """A producer that a fusion pass considered and left out of every fusion."""


@dataclass
class Group:
    id: str
    label: str
    kind: str
    """fusion | while body | condition | branch | call | async."""
    parent: str = ""
    owner: str = ""
    """Node id of the instruction that calls it (for fusions: none, the group *is* it)."""
    cost: dict[str, Any] | None = None
    fusion_kind: str = ""


@dataclass
class Graph:
    name: str
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    """(source node id, target node id, label: the value's shape)."""
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    """(caller node id, group id, role): while -> body, conditional -> branch, ..."""
    groups: dict[str, Group] = field(default_factory=dict)
    omitted: list[str] = field(default_factory=list)
    """What the node budget or the focus left out, in words."""
    device: str = ""
    aliases: dict[str, str] = field(default_factory=dict)
    """Instruction names drawn as groups (expanded fusions) -> the node id of their root."""
    colour_fusions: bool = False
    """Give each fusion cluster a colour of its own (the fusion explanation overlay)."""

    def nx(self) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from((s, t) for s, t, _ in self.edges)
        return g


# --- building -------------------------------------------------------------------------------


def build_graph(
    module: Any,
    device: str | None = None,
    focus: str | None = None,
    radius: int = 3,
    max_nodes: int = 400,
    expand_fusions: bool = True,
    bodies: bool = True,
) -> Graph:
    """The graph of `module` (see the module doc); raises HloError on an unknown focus."""
    from hlopass.dialects.hlo import computations, entry_computation

    comps = {c.comp_name: c for c in computations(module)}
    entry = entry_computation(module)
    costs = _costs(module, device) if device else {}
    sym = module.attributes.get("sym_name") if hasattr(module, "attributes") else None
    name = getattr(sym, "data", "") or "module"
    total = sum(1 for c in comps.values() for _ in c.instructions)
    if focus is None and total > max_nodes and expand_fusions:
        # Over budget: fusions as single nodes first (the kernel view), then no bodies.
        g = build_graph(
            module, device, None, radius, max_nodes, expand_fusions=False, bodies=bodies
        )
        if len(g.nodes) > max_nodes and bodies:
            g = build_graph(
                module, device, None, radius, max_nodes, expand_fusions=False, bodies=False
            )
        g.omitted.insert(0, f"{total} instructions: fusions drawn collapsed"
                         + ("" if g.groups else ", called computations left out"))  # fmt: skip
        return _trim(g, max_nodes)
    g = Graph(name, device=device or "")
    b = _Builder(g, comps, costs, expand_fusions, bodies)
    b.texts = instruction_texts(module)
    b.computation(entry, group="", prefix="")
    if focus is not None:
        return _focus(g, focus, radius, max_nodes)
    return _trim(g, max_nodes)


class _Builder:
    def __init__(self, g: Graph, comps: dict[str, Any], costs: dict[str, dict[str, Any]],
                 expand_fusions: bool, bodies: bool):  # fmt: skip
        self.g, self.comps, self.costs = g, comps, costs
        self.expand_fusions, self.bodies = expand_fusions, bodies
        self.texts: dict[str, str] = {}
        self.depth = 0

    def computation(self, comp: Any, group: str, prefix: str,
                    params_from: list[str] | None = None) -> tuple[dict[Any, str], str]:  # fmt: skip
        """Add `comp`'s instructions; returns (value -> node id that produces it, root id)."""
        produced: dict[Any, str] = {}
        for op in comp.instructions:
            nid = f"{prefix}{comp.comp_name}/{op.inst_name}"
            if op.opcode == "fusion" and self.expand_fusions and op.callees():
                produced[op.result] = self.fusion(op, nid, group, produced)
                continue
            node = Node(nid, op.inst_name, op.opcode, str(op.shape), group, family(op.opcode),
                        self.texts.get(op.inst_name, ""), *_metadata(op))  # fmt: skip
            if not prefix or op.opcode == "fusion":
                node.cost = self.costs.get(op.inst_name)
            if op.opcode == "fusion" and op.callees():
                callee = self.comps.get(op.callees()[0])
                node.collapsed = sum(1 for _ in callee.instructions) if callee is not None else 0
            self.g.nodes[nid] = node
            if op.opcode == "parameter" and params_from is not None:
                number = op.attr("number")
                if number is not None and number < len(params_from) and params_from[number]:
                    self.g.edges.append((params_from[number], nid, str(op.shape)))
            for v in op.operands:
                src = produced.get(v)
                if src is not None:
                    self.g.edges.append((src, nid, _shape_of(v)))
            produced[op.result] = nid
            if self.bodies and op.opcode in BODY_KINDS and self.depth < 4:
                self.called(op, nid, group, prefix)
        root = comp.root
        return produced, produced.get(root.result, "") if root is not None else ""

    def fusion(self, op: Any, nid: str, group: str, produced: dict[Any, str]) -> str:
        callee = self.comps.get(op.callees()[0])
        gid = f"group:{nid}"
        kind = str(op.attr("kind") or "")
        self.g.groups[gid] = Group(gid, f"{op.inst_name} ({kind.removeprefix('k').lower()} fusion)",
                                   "fusion", group, cost=self.costs.get(op.inst_name),
                                   fusion_kind=kind)  # fmt: skip
        sources = [produced.get(v, "") for v in op.operands]
        self.depth += 1
        try:
            _, root = self.computation(callee, gid, f"{nid}::", sources)
        finally:
            self.depth -= 1
        self.g.aliases[op.inst_name] = root
        return root

    def called(self, op: Any, nid: str, group: str, prefix: str) -> None:
        for role in BODY_KINDS[op.opcode]:
            names = op.attr(role)
            for cname in (names if isinstance(names, tuple) else (names,)) if names else ():
                callee = self.comps.get(str(cname))
                if callee is None:
                    continue
                gid = f"group:{nid}:{role}:{cname}"
                self.g.groups[gid] = Group(gid, f"{cname} ({role.replace('_', ' ')})", role,
                                           group, owner=nid)  # fmt: skip
                self.g.calls.append((nid, gid, role.replace("_computations", "").replace("_", " ")))
                self.depth += 1
                try:
                    self.computation(callee, gid, f"{nid}::")
                finally:
                    self.depth -= 1


_LINE = re.compile(r"^\s*(?:ROOT )?%?([^\s=]+) = ")


def instruction_texts(module: Any) -> dict[str, str]:
    """Each instruction's line as XLA prints it, by name (names are unique in a module)."""
    from hlopass.text.exporter import print_hlo

    out: dict[str, str] = {}
    for line in print_hlo(module).splitlines():
        m = _LINE.match(line)
        if m is not None:
            out[m.group(1)] = line.strip()
    return out


def _metadata(op: Any) -> tuple[str, str]:
    md = op.attr("metadata")
    if md is None or not hasattr(md, "get"):
        return "", ""
    op_name = (md.get("op_name") or "").strip('"')
    source = (md.get("source_file") or "").strip('"')
    line = md.get("source_line")
    return op_name, f"{source}:{line}" if source and line else source


def _shape_of(value: Any) -> str:
    t = getattr(value, "type", None)
    return str(getattr(t, "data", "")) if t is not None else ""


def _costs(module: Any, device: str) -> dict[str, dict[str, Any]]:
    from hlopass.cost import estimate

    est = estimate(module, device)
    return {row["name"]: row for row in est.rows()}


# --- filtering ------------------------------------------------------------------------------


def _focus(g: Graph, name: str, radius: int, max_nodes: int) -> Graph:
    from hlopass.errors import HloError

    hits = [nid for nid, n in g.nodes.items() if n.name == name]
    if not hits and g.aliases.get(name) in g.nodes:
        hits = [g.aliases[name]]
    if not hits:
        hits = [nid for nid, n in g.nodes.items() if name in n.name]
    if not hits:
        raise HloError(f"error: no instruction named '{name}' to focus on")
    und = g.nx().to_undirected(as_view=True)
    keep = set(nx.single_source_shortest_path_length(und, hits[0], cutoff=radius))
    out = _subgraph(g, keep)
    out.omitted.append(f"focus on {name}: {len(keep)} of {len(g.nodes)} "
                       f"instructions within {radius} edges")  # fmt: skip
    return _trim(out, max_nodes, around=hits[0])


def _trim(g: Graph, max_nodes: int, around: str | None = None) -> Graph:
    """Keep at most `max_nodes` nodes: those nearest `around` (default: the entry root)."""
    if len(g.nodes) <= max_nodes:
        return g
    start = around or _entry_root(g)
    und = g.nx().to_undirected(as_view=True)
    order = [start] if start else []
    seen = set(order)
    queue = deque(order)
    while queue and len(order) < max_nodes:  # breadth first from the start
        for nb in und.neighbors(queue.popleft()):
            if nb not in seen:
                seen.add(nb)
                order.append(nb)
                queue.append(nb)
    for nid in g.nodes:  # disconnected parts, if budget is left
        if len(order) >= max_nodes:
            break
        if nid not in seen:
            seen.add(nid)
            order.append(nid)
    out = _subgraph(g, set(order[:max_nodes]))
    out.omitted.append(f"{len(g.nodes) - len(out.nodes)} more instructions not drawn "
                       f"(node budget {max_nodes}; use --focus NAME --radius N)")  # fmt: skip
    return out


def _entry_root(g: Graph) -> str:
    top = [nid for nid, n in g.nodes.items() if not n.group]
    sinks = [nid for nid in top if not any(s == nid for s, _, _ in g.edges)]
    return (sinks or top or list(g.nodes) or [""])[-1]


def _subgraph(g: Graph, keep: set[str]) -> Graph:
    out = Graph(g.name, device=g.device, omitted=list(g.omitted), aliases=dict(g.aliases))
    out.nodes = {k: v for k, v in g.nodes.items() if k in keep}
    out.edges = [e for e in g.edges if e[0] in keep and e[1] in keep]
    used = {n.group for n in out.nodes.values()}
    for gid in list(used):  # keep the chain of parents of every used group
        while gid and gid in g.groups:
            used.add(gid)
            gid = g.groups[gid].parent
    out.groups = {k: v for k, v in g.groups.items() if k in used}
    out.calls = [c for c in g.calls if c[0] in keep and c[1] in out.groups]
    return out
