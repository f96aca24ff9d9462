"""The search spaces `hlopass search --space NAME` knows, by name (each built as
`Space(module, device, cost_model, max_temp_bytes)`)."""

from __future__ import annotations

from collections.abc import Callable

from hlopass.search.algebraic import AlgebraicSpace
from hlopass.search.algebraic.combined import AlgebraicThenFusion
from hlopass.search.fusion_space import FusionSpace
from hlopass.search.space import SearchSpace

SPACES: dict[str, Callable[..., SearchSpace]] = {
    "fusion": FusionSpace,
    "algebraic": AlgebraicSpace,
    "all": AlgebraicThenFusion,
}
