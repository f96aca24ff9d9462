"""The search-space interface: a plan is the set of decisions it changes from the greedy
pass (the empty set is the greedy plan itself); a space says which decisions a plan may add
next, and prices a plan without building it. Strategies (`strategies.py`) know nothing else
of a space, so a researcher can swap either side.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

Decisions = frozenset[str]
"""What a plan changes from the greedy one, each decision a short readable string."""


@dataclass(frozen=True)
class Choice:
    """A decision a plan may take next; `score` orders a plan's choices (lower first: the
    decisions the greedy pass was least sure of)."""

    decision: str
    score: float


@dataclass
class Priced:
    """A plan as a space priced it: its decisions, its estimated time under the space's
    own model (`time_us`) and under each model it knows (`by_model`), and the choices
    open from it, best first."""

    decisions: Decisions
    time_us: float
    by_model: dict[str, float] = field(default_factory=dict)
    choices: list[Choice] = field(default_factory=list)
    kernels: int = 0


class SearchSpace(ABC):
    """Alternatives to one greedy pass on one module."""

    name: str = ""

    @abstractmethod
    def price(self, decisions: Decisions) -> Priced:
        """The plan with `decisions`, priced and with its next choices; nothing is built."""

    @abstractmethod
    def build(self, decisions: Decisions) -> Any:
        """The plan with `decisions` applied to a fresh copy of the module (a ModuleOp)."""

    def plan_key(self, decisions: Decisions) -> Hashable:
        """Equal for two priced plans that build the same module (the search builds,
        checks and estimates such plans once); by default every plan is its own."""
        return decisions


@dataclass
class Budget:
    """At most `plans` plans priced (the greedy plan included)."""

    plans: int
    spent: int = 0

    def take(self) -> bool:
        if self.spent >= self.plans:
            return False
        self.spent += 1
        return True
