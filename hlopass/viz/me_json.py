"""Model Explorer's graph JSON (and node-data JSON) of a `Graph`, without Model Explorer.

Model Explorer (`pip install ai-edge-model-explorer`, or hlopass's `viz` extra) loads these
files directly (`model-explorer graphs.json`, its JSON loader; `--node_data_paths=nd.json`
for the cost overlay), or HLO through the adapter in `hlopass.viz.model_explorer`. Mapping:

- each instruction is a node (`label` its opcode, `attrs` its name, shape, HLO text,
  metadata and estimated cost, `outputsMetadata` its shape);
- fused computations and called computations are namespaces (`fusion.18/...`,
  `while.3/body/...`), which Model Explorer draws as collapsible groups;
- operand edges are `incomingEdges`;
- estimated µs and bytes per kernel are node data (`node_data(...)`), an overlay that
  colours nodes by cost in Model Explorer's side panel.
"""

from __future__ import annotations

import json
from typing import Any

from hlopass.viz.graph import Graph


def _namespaces(g: Graph) -> dict[str, str]:
    """Group id -> slash-separated namespace path."""
    out: dict[str, str] = {}

    def path(gid: str) -> str:
        if not gid or gid not in g.groups:
            return ""
        if gid not in out:
            grp = g.groups[gid]
            seg = grp.label.split(" (")[0] if grp.kind == "fusion" else grp.kind.replace("_", " ")
            if grp.kind != "fusion" and grp.owner in g.nodes:
                seg = f"{g.nodes[grp.owner].name}/{seg}"
            parent = path(grp.parent)
            out[gid] = f"{parent}/{seg}" if parent else seg
        return out[gid]

    for gid in g.groups:
        path(gid)
    return out


def to_me_graph(
    g: Graph, graph_id: str | None = None, marks: dict[str, str] | None = None
) -> dict[str, Any]:
    """One Model Explorer `Graph` as a dict (graph_builder.Graph's fields); `marks` (node id
    -> added/changed, from a diff) become a `diff` attribute."""
    ns = _namespaces(g)
    incoming: dict[str, list[dict[str, str]]] = {}
    for s, t, _ in g.edges:
        slots = incoming.setdefault(t, [])
        slots.append(
            {"sourceNodeId": s, "sourceNodeOutputId": "0", "targetNodeInputId": str(len(slots))}
        )
    nodes = []
    for nid, n in g.nodes.items():
        attrs = [{"key": "name", "value": n.name}, {"key": "shape", "value": n.shape},
                 {"key": "hlo", "value": n.text}]  # fmt: skip
        if n.op_name:
            attrs.append({"key": "op_name", "value": n.op_name})
        if n.source:
            attrs.append({"key": "source", "value": n.source})
        if marks and nid in marks:
            attrs.append({"key": "diff", "value": marks[nid]})
        if n.notes:
            attrs.append({"key": "explain", "value": "\n".join(n.notes)})
        if n.kept:
            attrs.append({"key": "fusion", "value": "kept out"})
        if n.cost:
            attrs += [{"key": "estimated_us", "value": f"{n.cost['time_us'] * n.cost.get('count', 1):.3f}"},
                      {"key": "bound", "value": str(n.cost["bound"])},
                      {"key": "dram_bytes", "value": f"{n.cost['bytes_accessed']:.0f}"}]  # fmt: skip
        nodes.append({
            "id": nid,
            "label": n.opcode,
            "namespace": ns.get(n.group, ""),
            "subgraphIds": [],
            "attrs": attrs,
            "incomingEdges": incoming.get(nid, []),
            "outputsMetadata": [{"id": "0", "attrs": [{"key": "tensor_shape", "value": n.shape}]}],
            "inputsMetadata": [],
        })  # fmt: skip
    return {"id": graph_id or g.name, "nodes": nodes}


def to_me_json(
    graphs: list[tuple[str, Graph]],
    label: str | None = None,
    marks: dict[str, str] | None = None,
) -> str:
    """A Model Explorer graph collection, `{"label": ..., "graphs": [...]}`, of one or more
    labelled graphs (e.g. before and after a pipeline): the form Model Explorer's JSON
    loader reads (it refuses a bare `{"graphs": [...]}`), and `graph_builder.GraphCollection`'s
    fields."""
    label = label or (graphs[0][1].name if graphs else "hlo")
    last = len(graphs) - 1
    out = [to_me_graph(g, name, marks if i == last else None) for i, (name, g) in enumerate(graphs)]
    return json.dumps({"label": label, "graphs": out})


def node_data(graphs: list[tuple[str, Graph]], what: str = "time_us") -> str:
    """Model Explorer node data: per node, the estimated `time_us` (or `bytes_accessed`)
    of the kernel it belongs to, with a gradient from cheap (green) to dear (red)."""
    data: dict[str, Any] = {}
    for label, g in graphs:
        results = {}
        for nid, n in g.nodes.items():
            cost = n.cost or (g.groups[n.group].cost if n.group in g.groups else None)
            if cost:
                results[nid] = {"value": float(cost[what]) * cost.get("count", 1)}
        data[label] = {
            "results": results,
            "gradient": [
                {"stop": 0, "bgColor": "#c8e6c9"},
                {"stop": 0.5, "bgColor": "#fff59d"},
                {"stop": 1, "bgColor": "#ef9a9a"},
            ],  # fmt: skip
        }
    return json.dumps(data)
