"""Extraction with a cheap per-node cost, and K diverse candidates.

The cost of a node is a roofline guess in µs on an H100-like device (bytes written at
3.35 TB/s, a dot's flops at 400 TFLOP/s and a launch of 2 µs), made only to prune: the
candidates are ranked by the fusion-aware price after priority fusion (`space.py`). The
cost of a term is that of its tree (shared parts count once per use). Candidates beyond the
cheapest force one class at a time to its next-best node, the classes whose alternatives
are closest first, and under other weights of flops against bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlopass.ir.shape import byte_size
from hlopass.search.algebraic.egraph import Graph, Node
from hlopass.search.algebraic.rules import COMMUTATIVE
from hlopass.search.algebraic.shapes import element_type, elements

BYTES_PER_US = 3.35e6
FLOPS_PER_US = 4.0e8
DOT_LAUNCH_US = 2.0
EPSILON = 1e-6
"""Every built node costs something, so no cycle of free nodes is ever the cheapest."""

Choice = dict[str, Node]
"""The node picked for each class reachable from the roots."""


@dataclass(frozen=True)
class Weights:
    bytes: float = 1.0
    flops: float = 1.0


def node_cost(g: Graph, cls: str, n: Node, w: Weights) -> float:
    if n.op in ("Leaf", "Const"):
        return 0.0
    pre, rows, cols = g.shape[cls]
    out = elements(pre, rows, cols) * byte_size(element_type(pre))
    if n.op in ("Bcast", "Reshape"):
        return EPSILON + 0.1 * w.bytes * out / BYTES_PER_US
    if n.op != "Dot":
        return EPSILON + w.bytes * out / BYTES_PER_US
    a = g.shape[n.kids[0]]
    k = a[1] if n.args[2] == 1 else a[2]
    flops = 2.0 * elements(pre, rows, cols) * k
    return DOT_LAUNCH_US + w.bytes * out / BYTES_PER_US + w.flops * flops / FLOPS_PER_US


def _best(g: Graph, w: Weights, forced: dict[str, Node]) -> tuple[dict[str, float], Choice]:
    cost: dict[str, float] = {}
    pick: Choice = {}
    changed = True
    while changed:  # Bellman-Ford over the classes: terms only get cheaper
        changed = False
        for cls, nodes in g.classes.items():
            for n in [forced[cls]] if cls in forced else nodes:
                if cls not in g.shape or any(k not in cost for k in n.kids):
                    continue
                c = node_cost(g, cls, n, w) + sum(cost[k] for k in n.kids)
                if c < cost.get(cls, float("inf")) - 1e-12:
                    cost[cls], pick[cls] = c, n
                    changed = True
    return cost, pick


def reachable(g: Graph, roots: list[str], pick: Choice) -> Choice | None:
    """The picks the roots read (None: the picks make a cycle, or a root has none)."""
    out: Choice = {}
    state: dict[str, int] = {}

    def visit(c: str) -> bool:
        if state.get(c) == 1:
            return False
        if state.get(c) == 2:
            return True
        if c not in pick:
            return False
        state[c] = 1
        if not all(visit(k) for k in pick[c].kids):
            return False
        state[c] = 2
        out[c] = pick[c]
        return True

    return out if all(visit(r) for r in roots) else None


def node_key(cls: str, n: Node) -> tuple[object, ...]:
    """(class, constructor, *arguments), the operands of a commutative op in one order (a
    candidate that only swaps them is the same plan)."""
    args = list(n.args)
    if n.op == "Ew2" and args[0] in COMMUTATIVE:
        args[1:] = sorted(map(str, args[1:]))
    return (cls, n.op, *args)


def signature(choice: Choice) -> tuple[tuple[object, ...], ...]:
    return tuple(sorted((node_key(c, n) for c, n in choice.items()), key=repr))


def _alternatives(g: Graph, used: Choice, cost: dict[str, float]) -> list[dict[str, Node]]:
    """Forced picks to try: first the groups, largest first, each the slices of one class
    the candidate does not read yet with the slices of those slices (dots merged into one
    are slices of it, a third dot merged in makes slices of a slice: only picked together
    do they save a dot); then each other node of a used class alone, closest first."""
    alts = []
    for cls, nodes in g.classes.items():
        if cls in used and len(nodes) > 1:
            for n in nodes:
                if n is not used[cls] and all(kid in cost for kid in n.kids):
                    extra = node_cost(g, cls, n, Weights()) + sum(cost[x] for x in n.kids)
                    alts.append((extra - cost[cls], cls, n))
    alts.sort(key=lambda a: (a[0], a[1]))
    # slices of one class not read yet, and the slices of those, all picked together
    slices: dict[str, dict[str, Node]] = {}
    for cls, nodes in g.classes.items():
        for n in nodes:
            if n.op in ("SliceC", "SliceR") and n.kids[0] not in used:
                slices.setdefault(n.kids[0], {}).setdefault(cls, n)
    groups = []
    for kid in sorted(slices):
        group = dict(slices[kid])
        todo = list(group)
        while todo:
            for cls, n in slices.get(todo.pop(), {}).items():
                if cls not in group:
                    group[cls] = n
                    todo.append(cls)
        if sum(c in used for c in group) > 1:
            groups.append(group)
    groups.sort(key=len, reverse=True)
    return groups + [{cls: n} for _, cls, n in alts]


def candidates(g: Graph, roots: list[str], k: int) -> list[tuple[float, Choice]]:
    """Up to `k` distinct choices for `roots`, cheapest first by their cost counted once per
    class (the extraction itself counts a tree: forced picks make up for what it misses)."""
    base_cost, base = _best(g, Weights(), {})
    used = reachable(g, roots, base) or {}
    tries: list[tuple[Weights, dict[str, Node]]] = [(Weights(), {})]
    tries += [(Weights(1.0, f), {}) for f in (0.25, 4.0)]
    tries += [(Weights(), f) for f in _alternatives(g, used, base_cost)]
    seen: set[tuple[tuple[object, ...], ...]] = set()
    out: list[tuple[float, Choice]] = []
    for w, forced in tries[: TRIES_PER_CANDIDATE * k]:
        _, pick = _best(g, w, forced) if (w, forced) != (Weights(), {}) else (base_cost, base)
        choice = reachable(g, roots, pick)
        if choice is None or signature(choice) in seen:
            continue
        seen.add(signature(choice))
        out.append((sum(node_cost(g, c, n, Weights()) for c, n in choice.items()), choice))
    out.sort(key=lambda c: c[0])
    return out[:k]


TRIES_PER_CANDIDATE = 4
"""Extractions tried per candidate wanted (each a pass over the e-graph)."""


def cheapest(g: Graph) -> Choice:
    """The cheapest node of every class (reachable from anywhere)."""
    return _best(g, Weights(), {})[1]
