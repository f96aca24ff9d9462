"""The algebraic search space (issue 36): the entry computation as egglog terms, the
rewrite table (`rules.py`) saturated within a budget, candidates extracted by a cheap cost
and ranked by the fusion-aware price (`space.py`). See docs/SEARCH.md."""

from hlopass.search.algebraic.rules import RULES, Rule
from hlopass.search.algebraic.space import AlgebraicSpace

__all__ = ["RULES", "AlgebraicSpace", "Rule"]
