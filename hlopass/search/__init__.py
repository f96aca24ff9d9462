"""Search over plans beyond a pass's greedy choices (`hlopass search`).

    >>> from hlopass.search import search
    >>> result = search(module, "algsimp,dce,cse,priority-fusion", budget=200, top=3)
    >>> result.best.time_us, result.best.decisions, result.greedy.time_us

A `SearchSpace` (`space.py`) prices plans and lists the decisions open from each;
strategies (`strategies.py`: `greedy`, `beam`) walk it within a `Budget`. The fusion space
(`fusion_space.py`) flips priority-fusion's producer decisions; the algebraic space
(`algebraic/`) rewrites the entry computation on e-graphs; the pipeline, layout and
multi-output spaces (`pipeline_space.py`, `layout_space.py`, `mof_space.py`) and the
searches by name (`combined.SPACES`) load on first use. See docs/SEARCH.md.
"""

from hlopass.search.driver import Plan, SearchError, SearchResult, search
from hlopass.search.fusion_space import FusionSpace, PlanDriver
from hlopass.search.space import Budget, Choice, Priced, SearchSpace
from hlopass.search.strategies import STRATEGIES, beam, greedy

__all__ = [
    "STRATEGIES", "Budget", "Choice", "FusionSpace", "Plan", "PlanDriver", "Priced",
    "SearchError", "SearchResult", "SearchSpace", "beam", "greedy", "search",
]  # fmt: skip
