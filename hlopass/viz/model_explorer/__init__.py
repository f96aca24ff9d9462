"""Model Explorer adapter for HLO text (the `viz` extra: `pip install 'hlopass[viz]'`).

    model-explorer model.hlo --extensions=hlopass.viz.model_explorer

Model Explorer imports an extension's `main` module (`hlopass.viz.model_explorer.main`,
where the adapter class lives); see there for the settings.
"""

from hlopass.viz.model_explorer.main import HloAdapter, me_graph

__all__ = ["HloAdapter", "me_graph"]
