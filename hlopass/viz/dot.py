"""Graphviz DOT of a `Graph` (hlopass.viz.svg lays it out to SVG).

Nodes are coloured by family (elementwise, data movement, dot/convolution/FFT,
reduce/gather/scatter/sort, parameters, constants, collectives, control flow, custom calls),
fusions and called computations are clusters, edges carry the value's shape, and a kernel
(an entry-level instruction or a fusion) shows its estimated µs and what bounds it
(compute, memory or launch) when the graph was built with a device. Node ids are `n0, n1,
...`; each node's `id` attribute (kept by Graphviz in SVG) is the same, `tooltip` its HLO.
"""

from __future__ import annotations

from hlopass.viz.graph import Graph, Node

# family -> (fill colour, font colour)
COLOURS: dict[str, tuple[str, str]] = {
    "elementwise": ("#f2f2f2", "black"),
    "data": ("#c8e6c9", "black"),
    "dot": ("#1e63b5", "white"),
    "reduce": ("#b39ddb", "black"),
    "parameter": ("#ffcc80", "black"),
    "constant": ("#fff59d", "black"),
    "collective": ("#ef9a9a", "black"),
    "control": ("#bcaaa4", "black"),
    "custom": ("#80deea", "black"),
    "fusion": ("#90caf9", "black"),
}
GROUP_FILL = {"fusion": "#e3f2fd", "body": "#f5f5f5", "condition": "#fafafa"}
# one pale colour per fusion when the fusion explanation is drawn
FUSION_PALETTE = ("#e3f2fd", "#fce4ec", "#e8f5e9", "#fff3e0", "#ede7f6", "#e0f7fa",
                  "#f9fbe7", "#fbe9e7", "#e8eaf6", "#f1f8e9", "#fffde7", "#efebe9")  # fmt: skip
KEPT = "#d81b60"
ADDED, REMOVED, CHANGED = "#2e7d32", "#c62828", "#ef6c00"


def _q(text: str) -> str:
    """A DOT string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# Graphviz's scanner refuses a quoted string over 16384 bytes (a tuple-shaped ROOT of Llama
# 3.1 8B prints longer than that); tooltips are cut well below it, in bytes of UTF-8.
TOOLTIP_CHARS = 4000


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def cost_line(cost: dict | None) -> str:
    if not cost:
        return ""
    return f"{cost['time_us'] * cost.get('count', 1):.2f} µs {cost['bound']}"


def node_label(n: Node) -> str:
    lines = [
        _short(n.name),
        n.opcode + (f" ×{n.collapsed}" if n.collapsed else ""),
        _short(n.shape),
    ]
    c = cost_line(n.cost)
    if n.kept:
        lines.append("kept out of fusion")
    return "\n".join(lines + ([c] if c else []))


def to_dot(g: Graph, marks: dict[str, str] | None = None) -> str:
    """DOT text; `marks` (node id -> added/removed/changed) outlines nodes of a diff."""
    ids = {nid: f"n{i}" for i, nid in enumerate(g.nodes)}
    clusters = {gid: f"cluster_{i}" for i, gid in enumerate(g.groups)}
    out = [f"digraph {_q(g.name)} {{", "  rankdir=TB;", "  compound=true;",
           # bounded crossing minimisation: dot's default search is superlinear and took
           # over 10 minutes on 400 nodes of seed 001; these limits keep it to seconds
           "  mclimit=0.2; nslimit=2; nslimit1=2; searchsize=10;",
           '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
           '  edge [fontname="Helvetica", fontsize=8, color="#607d8b"];']  # fmt: skip
    label = g.name + (f"  ({g.device})" if g.device else "")
    if g.omitted:
        label += "\n" + "\n".join(g.omitted)
    out.append(f"  label={_q(label)}; labelloc=t; fontname=Helvetica;")
    children: dict[str, list[str]] = {}
    for gid, grp in g.groups.items():
        children.setdefault(grp.parent, []).append(gid)
    members: dict[str, list[str]] = {}
    for nid, n in g.nodes.items():
        members.setdefault(n.group, []).append(nid)

    fusion_index: dict[str, int] = {}

    def emit(group: str, indent: str) -> None:
        for nid in members.get(group, []):
            out.append(indent + _node(ids[nid], g.nodes[nid], (marks or {}).get(nid)))
        for gid in children.get(group, []):
            grp = g.groups[gid]
            out.append(f"{indent}subgraph {clusters[gid]} {{")
            glabel = grp.label + (f"\n{cost_line(grp.cost)}" if grp.cost else "")
            fill = GROUP_FILL.get(grp.kind, "#fafafa")
            if g.colour_fusions and grp.kind == "fusion":
                fill = FUSION_PALETTE[
                    fusion_index.setdefault(gid, len(fusion_index)) % len(FUSION_PALETTE)
                ]
            out.append(f'{indent}  label={_q(glabel)}; style="rounded,filled"; fillcolor="{fill}";'
                       f' color="#90a4ae"; fontsize=10; id={_q("g:" + grp.label.split(" ")[0])};')  # fmt: skip
            emit(gid, indent + "  ")
            out.append(indent + "}")

    emit("", "  ")
    for s, t, shape in g.edges:
        out.append(f"  {ids[s]} -> {ids[t]} [label={_q(_short(shape, 32))}];")
    for caller, gid, role in g.calls:
        first = next((ids[n] for n in members.get(gid, [])), None)
        if first is not None and caller in ids:
            out.append(f'  {ids[caller]} -> {first} [style=dashed, label={_q(role)}, '
                       f'lhead={clusters[gid]}, color="#8d6e63"];')  # fmt: skip
    out.append("}")
    return "\n".join(out) + "\n"


def tooltip(n: Node) -> str:
    """The node's HLO line, then what the fusion/layout passes said about it."""
    return "\n".join([n.text or n.name, *n.notes])


def _node(did: str, n: Node, mark: str | None) -> str:
    fill, font = COLOURS.get(n.family, COLOURS["elementwise"])
    attrs = [f"id={_q(did)}", f"label={_q(node_label(n))}", f'fillcolor="{fill}"',
             f'fontcolor="{font}"', f"tooltip={_q(_short(tooltip(n), TOOLTIP_CHARS))}"]  # fmt: skip
    if n.opcode == "parameter":
        attrs.append("shape=ellipse")
    if n.kept and not mark:
        attrs += [f'color="{KEPT}"', "penwidth=2", 'style="rounded,filled,dashed"']
    if mark:
        colour = {"added": ADDED, "removed": REMOVED, "changed": CHANGED}[mark]
        attrs += [f'color="{colour}"', "penwidth=3"]
        if mark == "removed":
            attrs.append('style="rounded,filled,dashed"')
    return f"{did} [{', '.join(attrs)}];"
