"""`--space all`: an algebraic candidate, then the fusion decisions on it. A plan is at most
one `alg:N` decision (none: the computation as it is) and any fusion flips (`keep:`,
`fuse:`) of that candidate's own fusion space; the root's choices are both the candidates
and the flips, a candidate's are its flips, so a beam can take the best candidate and then
refine its fusion."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.errors import HloError
from hlopass.search.algebraic.space import PREFIX, AlgebraicSpace
from hlopass.search.space import Decisions, Priced, SearchSpace

INF = float("inf")


@dataclass
class AlgebraicThenFusion(SearchSpace):
    """Algebraic candidates of `module`, each searched on in its fusion space."""

    module: ModuleOp
    device: str = "h100_sxm"
    cost_model: str = "default"
    max_temp_bytes: int = -1
    name = "all"
    algebraic: AlgebraicSpace = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.algebraic = AlgebraicSpace(
            self.module, self.device, self.cost_model, self.max_temp_bytes
        )

    @staticmethod
    def _flips(decisions: Decisions) -> Decisions:
        return frozenset(d for d in decisions if not d.startswith(PREFIX))

    def price(self, decisions: Decisions) -> Priced:
        n = self.algebraic.index(decisions)
        space = self.algebraic.fusion(n)
        if space is None:
            return Priced(decisions, INF, {"default": INF, "roofline": INF})
        p = space.price(self._flips(decisions))
        choices = list(p.choices)
        if not decisions:  # candidates and flips in turn: a beam's branch sees both
            cands = self.algebraic.price(decisions).choices
            both = [c for pair in zip_longest(cands, choices) for c in pair if c is not None]
            choices = both
        return Priced(decisions, p.time_us, p.by_model, choices, p.kernels)

    def plan_key(self, decisions: Decisions) -> Any:
        n = self.algebraic.index(decisions)
        space = self.algebraic.fusion(n)
        inner = None if space is None else space.plan_key(self._flips(decisions))
        return (self.algebraic.plan_key(decisions), inner)

    def build(self, decisions: Decisions) -> ModuleOp:
        space = self.algebraic.fusion(self.algebraic.index(decisions))
        if space is None:
            raise HloError(f"error: candidate {sorted(decisions)} cannot be built")
        return space.build(self._flips(decisions))
