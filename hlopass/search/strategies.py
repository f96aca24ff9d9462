"""Search strategies over a `SearchSpace`: `greedy` (hill climbing, one decision at a time,
the best priced child only) and `beam` (the `width` best plans of each depth, each expanded
by its `branch` first choices). Both start from the greedy plan, never price a plan twice,
and stop when the budget is spent or nothing is left to try; they return every plan they
priced, so the caller ranks them.
"""

from __future__ import annotations

from collections.abc import Callable

from hlopass.search.space import Budget, Decisions, Priced, SearchSpace


class _Seen:
    """Plans priced so far, by their decisions."""

    def __init__(self, space: SearchSpace, budget: Budget):
        self.space = space
        self.budget = budget
        self.plans: dict[Decisions, Priced] = {}

    def price(self, decisions: Decisions) -> Priced | None:
        """The plan priced (None: already priced, or the budget is spent)."""
        if decisions in self.plans or not self.budget.take():
            return None
        p = self.space.price(decisions)
        self.plans[decisions] = p
        return p

    def children(self, parent: Priced, branch: int) -> list[Priced]:
        out = []
        for c in parent.choices[:branch]:
            p = self.price(parent.decisions | {c.decision})
            if p is not None:
                out.append(p)
        return out


def greedy(space: SearchSpace, budget: Budget, branch: int = 8, width: int = 1) -> list[Priced]:
    """Hill climbing: move to the fastest child while it beats the current plan."""
    seen = _Seen(space, budget)
    current = seen.price(frozenset())
    while current is not None:
        kids = seen.children(current, branch)
        best = min(kids, key=lambda p: p.time_us, default=None)
        current = best if best is not None and best.time_us < current.time_us else None
    return list(seen.plans.values())


def beam(space: SearchSpace, budget: Budget, branch: int = 8, width: int = 4) -> list[Priced]:
    """Beam search: each depth keeps the `width` fastest plans of the children of the last."""
    seen = _Seen(space, budget)
    root = seen.price(frozenset())
    frontier = [root] if root is not None else []
    while frontier:
        kids: list[Priced] = []
        for p in frontier:
            kids += seen.children(p, branch)
        kids.sort(key=lambda p: (p.time_us, sorted(p.decisions)))
        frontier = kids[:width]
    return list(seen.plans.values())


Strategy = Callable[..., list[Priced]]
STRATEGIES: dict[str, Strategy] = {"greedy": greedy, "beam": beam}
