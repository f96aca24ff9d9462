"""The algebraic search space: equality saturation over the rule table on the entry
computation, K candidates pulled out of the e-graph by a cheap cost, each a decision
`alg:N` (N: the candidate, cheapest by the cheap cost first). A candidate is priced after
priority fusion's greedy plan on it, by both fusion cost models (`FusionSpace`): the price
that ranks the finalists. `build` gives the candidate fused the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import entry_computation
from hlopass.errors import HloError
from hlopass.search.algebraic.egraph import Graph, Node, saturate
from hlopass.search.algebraic.extract import Choice, candidates, node_key, signature
from hlopass.search.algebraic.rebuild import rebuild
from hlopass.search.algebraic.terms import encode_computation
from hlopass.search.fusion_space import FusionSpace
from hlopass.search.space import Choice as Next
from hlopass.search.space import Decisions, Priced, SearchSpace

PREFIX = "alg:"


@dataclass
class AlgebraicSpace(SearchSpace):
    """Algebraic rewrites of one computation of `module` (left untouched): the one
    `searched_computation` picks."""

    module: ModuleOp
    device: str = "h100_sxm"
    cost_model: str = "default"
    max_temp_bytes: int = -1
    candidates: int = 16
    """Candidates extracted from the e-graph (the decisions `alg:0` ...)."""
    iterations: int = 8
    """Rounds of rewrites at most."""
    max_nodes: int = 20000
    """E-nodes at most: saturation stops after the round that passes it."""
    name = "algebraic"
    graph: Graph = field(init=False, repr=False)
    cheap: list[tuple[float, Choice]] = field(default_factory=list, init=False, repr=False)
    _built: dict[int, ModuleOp | None] = field(default_factory=dict, init=False, repr=False)
    _fused: dict[int, FusionSpace] = field(default_factory=dict, init=False, repr=False)
    failed: int = field(default=0, init=False)
    """Candidates that could not be built (a cycle, a shape mismatch)."""

    def __post_init__(self) -> None:
        self.enc = encode_computation(searched_computation(self.module))
        self.graph = saturate(self.enc, iterations=self.iterations, max_nodes=self.max_nodes)
        roots = [self.graph.root[i] for i in self.enc.roots]
        self.old = _original_nodes(self.enc, self.graph)
        # the computation itself is the greedy plan: not a candidate of its own
        self.cheap = [
            c
            for c in candidates(self.graph, roots, self.candidates + 1)
            if _nodes(c[1]) != self.old
        ][: self.candidates]

    def index(self, decisions: Decisions) -> int | None:
        """The candidate a plan picks (None: the module as it is)."""
        picked = [d for d in decisions if d.startswith(PREFIX)]
        if not picked:
            return None
        return int(picked[0].removeprefix(PREFIX).split(" ")[0])

    def candidate(self, n: int | None) -> ModuleOp | None:
        """Candidate `n` built (None: it could not be)."""
        if n is None:
            return self.module
        if n not in self._built:
            try:
                self._built[n] = rebuild(self.module, self.enc, self.graph, self.cheap[n][1])
            except (HloError, ValueError, KeyError, IndexError):  # dropped and counted
                self._built[n] = None
                self.failed += 1
        return self._built[n]

    def fusion(self, n: int | None) -> FusionSpace | None:
        """The fusion space of candidate `n` (None: the computation itself), or None when
        the candidate cannot be built."""
        key = -1 if n is None else n
        if key not in self._fused:
            m = self.candidate(n)
            if m is None:
                return None
            self._fused[key] = FusionSpace(m, self.device, self.cost_model, self.max_temp_bytes)
        return self._fused[key]

    def price(self, decisions: Decisions) -> Priced:
        n = self.index(decisions)
        space = self.fusion(n)
        if space is None:  # priced out of the race: never a finalist
            return Priced(
                decisions, float("inf"), {m: float("inf") for m in ("default", "roofline")}
            )
        p = space.price(frozenset())
        nxt = (
            [] if decisions else [Next(self.decision(i), c) for i, (c, _) in enumerate(self.cheap)]
        )
        return Priced(decisions, p.time_us, p.by_model, nxt, p.kernels)

    def decision(self, n: int) -> str:
        """`alg:N`, the nodes candidate N has that the computation had not (+) and those it
        no longer has (-), each as its constructor and shape."""
        mine = _nodes(self.cheap[n][1])
        shape = self.graph.shape

        def show(keys: set[tuple[object, ...]], sign: str) -> list[str]:
            return sorted(f"{sign}{k[1]}{_dims(shape[str(k[0])])}" for k in keys if k[1] != "Leaf")

        return f"{PREFIX}{n} " + " ".join(show(mine - self.old, "+") + show(self.old - mine, "-"))

    def plan_key(self, decisions: Decisions) -> Any:
        n = self.index(decisions)
        return None if n is None else signature(self.cheap[n][1])

    def build(self, decisions: Decisions) -> ModuleOp:
        space = self.fusion(self.index(decisions))
        if space is None:
            raise HloError(f"error: candidate {sorted(decisions)} cannot be built")
        return space.build(frozenset())


def searched_computation(module: ModuleOp) -> Any:
    """The computation the space rewrites: of those whose instructions run as kernels (the
    entry, while bodies, called computations), the one holding the most dots, the entry
    first among equals (a loop's body is where a recurrent program's GEMMs are)."""
    from hlopass.passes.fusion.priority import fusible_computations

    comps = fusible_computations(module)
    dots = [sum(op.opcode == "dot" for op in c.instructions) for c in comps]
    best = max(dots, default=0)
    return comps[dots.index(best)] if best else entry_computation(module)


def _dims(shape: tuple[str, int, int]) -> str:
    from hlopass.search.algebraic.shapes import decode

    return "[" + ",".join(map(str, decode(*shape).dims)) + "]"


def _nodes(choice: Choice) -> set[tuple[object, ...]]:
    return {node_key(c, n) for c, n in choice.items()}


def _original_nodes(enc: Any, g: Graph) -> set[tuple[object, ...]]:
    """The nodes of the instructions the roots read through known instructions."""
    out: set[tuple[object, ...]] = set()
    todo = list(enc.roots)
    seen: set[int] = set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        out |= {_commuted(k) for k in g.original[i]}
        if not enc.opaque(i):
            todo += _reads(enc.term[i])
    return out


def _reads(t: tuple[Any, ...]) -> list[int]:
    from hlopass.search.algebraic.terms import Var

    out = []
    for a in t[1:]:
        if isinstance(a, Var):
            out.append(int(a.removeprefix("$inst")))
        elif isinstance(a, tuple):
            out += _reads(a)
    return out


def _commuted(key: tuple[object, ...]) -> tuple[object, ...]:
    """An original node's key as `node_key` writes it."""
    cls, op, *args = key
    return node_key(str(cls), Node(str(op), list(args), []))  # type: ignore[arg-type]
