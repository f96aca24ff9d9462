"""The fusion cost models by name (`default`, `roofline`), as fusion passes pick them."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.cost.default_fusion_model import DefaultFusionCostModel
from hlopass.cost.devices import DeviceSpec, get_device
from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.cost.roofline_fusion_model import RooflineFusionCostModel

COST_MODELS: dict[str, Callable[[str | DeviceSpec], FusionCostModel]] = {
    "default": DefaultFusionCostModel,
    "roofline": RooflineFusionCostModel,
}


def check_pricing_options(device: str, cost_model: str) -> None:
    """A fusion pass's `device` and `cost-model` options, refused as one `ValueError` line."""
    try:
        get_device(device)
    except KeyError as e:
        raise ValueError(str(e.args[0]).removeprefix("error: ")) from None
    if cost_model not in COST_MODELS:
        raise ValueError(
            f"unknown cost model '{cost_model}' (known: {', '.join(sorted(COST_MODELS))})"
        )


def fusion_cost_model(name: str = "default", device: str | DeviceSpec = "h100_sxm") -> FusionCostModel:  # fmt: skip
    """A fusion cost model by name (`default` or `roofline`) for `device`."""
    try:
        return COST_MODELS[name](device)
    except KeyError:
        raise ValueError(
            f"unknown cost model '{name}' (known: {', '.join(sorted(COST_MODELS))})"
        ) from None
