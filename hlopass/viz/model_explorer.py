"""Model Explorer adapter for HLO text (the `viz` extra: `pip install 'hlopass[viz]'`).

    model-explorer model.hlo --extensions=hlopass.viz.model_explorer

shows any HLO module: instructions with their HLO text, shape, metadata and estimated cost
(H100 by default; settings `device`) as attributes, fused and called computations as
collapsible namespaces. For the before/after comparison of a pipeline, write both graphs
with `hlopass viz FILE -p PIPELINE --diff -o both.json` and open `both.json`: Model
Explorer lists `before` and `after` and shows them side by side in its split view; the node
data of `--node-data` colours nodes by estimated time.
"""

from __future__ import annotations

from typing import Any

import dacite
from model_explorer import Adapter, AdapterMetadata, ModelExplorerGraphs, graph_builder

from hlopass.viz.graph import build_graph
from hlopass.viz.me_json import to_me_graph


def me_graph(data: dict[str, Any]) -> graph_builder.Graph:
    """Our graph dict as Model Explorer's own dataclass (strict: an unknown field fails)."""
    return dacite.from_dict(graph_builder.Graph, data, config=dacite.Config(strict=True))


class HloAdapter(Adapter):
    """Reads `.hlo` text files (and `.txt` dumps) into Model Explorer graphs."""

    metadata = AdapterMetadata(
        id="hlopass_hlo",
        name="HLO (hlopass)",
        description="XLA HLO text: fusions and called computations as namespaces, with "
        "the hlopass cost model's per-kernel estimates",
        fileExts=["hlo", "txt"],
    )

    def __init__(self) -> None:
        super().__init__()

    def convert(self, model_path: str, settings: dict) -> ModelExplorerGraphs:
        from hlopass.importer import parse_hlo

        with open(model_path, encoding="utf-8") as f:
            module = parse_hlo(f.read(), model_path)
        device = (settings or {}).get("device", "h100_sxm")
        g = build_graph(
            module, device=device, max_nodes=int((settings or {}).get("max_nodes", 20000))
        )
        return {"graphs": [me_graph(to_me_graph(g))]}
