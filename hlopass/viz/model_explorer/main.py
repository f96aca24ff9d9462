"""Model Explorer adapter for HLO text (the `viz` extra: `pip install 'hlopass[viz]'`).

    model-explorer model.hlo --extensions=hlopass.viz.model_explorer

(Model Explorer imports an extension's `main` module, this one) shows any HLO module:
instructions with their HLO text, shape, metadata and estimated cost as attributes, fused
and called computations as collapsible namespaces. Settings (the adapter's `settings`, or
the environment when started from the command line): `device` / `HLOPASS_VIZ_DEVICE`
(default h100_sxm; `none` for no costs), `focus` / `HLOPASS_VIZ_FOCUS` with `radius` /
`HLOPASS_VIZ_RADIUS` (draw only what is near one instruction), `max_nodes` /
`HLOPASS_VIZ_MAX_NODES` (node budget, default 20000).

For the before/after comparison of a pipeline, write both graphs with
`hlopass viz FILE -p PIPELINE --diff -o both.json` and open `both.json` (Model Explorer's
own JSON loader): it lists `before` and `after` and shows them side by side in its split
view; the node data of `--node-data` colours nodes by estimated time.
"""

from __future__ import annotations

import os
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
        from hlopass.text.importer import parse_hlo

        with open(model_path, encoding="utf-8") as f:
            module = parse_hlo(f.read(), model_path)

        def setting(key: str, default: Any) -> Any:
            return (settings or {}).get(key, os.environ.get(f"HLOPASS_VIZ_{key.upper()}", default))

        device = str(setting("device", "h100_sxm"))
        if device.lower() == "none":
            device = None
        else:
            from hlopass.cost.devices import device_name

            device = device_name(device)
        g = build_graph(module, device=device, focus=setting("focus", None) or None,
                        radius=int(setting("radius", 3)),
                        max_nodes=int(setting("max_nodes", 20000)))  # fmt: skip
        return {"graphs": [me_graph(to_me_graph(g))]}
