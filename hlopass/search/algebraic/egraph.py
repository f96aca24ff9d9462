"""Equality saturation with egglog: the sorts and the shape rules, the computation's terms,
the rule table (`rules.py`), run within a budget (iterations and e-nodes), then the e-graph
read back as classes of nodes with their shapes (`Graph`) for our own extraction.

Why egglog and not xDSL's `eqsat` dialect: the xDSL this project pins (0.75) has no
`xdsl.dialects.eqsat`, and egglog's rules with guards over the shape functions are what
keeps every rewrite to shapes XLA accepts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hlopass.errors import HloError
from hlopass.search.algebraic.rules import COMMUTATIVE, RULES, Rule
from hlopass.search.algebraic.shapes import scalar_pre
from hlopass.search.algebraic.terms import Encoded, Term, Var, matrix_pres, sexp

SORTS = """
(datatype T (Leaf i64) (Const String String) (Ew1 String T) (Ew2 String T T)
  (Bcast T String i64 i64) (T2 T) (Dot T T i64 i64) (Reshape T String i64 i64)
  (SliceC T i64 i64) (SliceR T i64 i64) (CatC T T) (CatR T T))
(function pre (T) String :no-merge)
(function rows (T) i64 :no-merge)
(function cols (T) i64 :no-merge)
(function scalar-of (String) String :no-merge)
(relation Mat (String))
(relation Comm (String))
(ruleset shape)
(ruleset alg)
(ruleset merge)
"""

# Every constructed term's shape, from its operands' (Leaf and Const shapes are facts).
SHAPE_RULES = """
(rule ((= e (Ew1 op x)) (= p (pre x)) (= r (rows x)) (= c (cols x)))
      ((set (pre e) p) (set (rows e) r) (set (cols e) c)) :ruleset shape)
(rule ((= e (Ew2 op x y)) (= p (pre x)) (= r (rows x)) (= c (cols x)))
      ((set (pre e) p) (set (rows e) r) (set (cols e) c)) :ruleset shape)
(rule ((= e (Const v p))) ((set (pre e) p) (set (rows e) 1) (set (cols e) 1)) :ruleset shape)
(rule ((= e (Bcast s p r c))) ((set (pre e) p) (set (rows e) r) (set (cols e) c)) :ruleset shape)
(rule ((= e (Reshape x p r c))) ((set (pre e) p) (set (rows e) r) (set (cols e) c)) :ruleset shape)
(rule ((= e (T2 x)) (= p (pre x)) (= r (rows x)) (= c (cols x)))
      ((set (pre e) p) (set (rows e) c) (set (cols e) r)) :ruleset shape)
(rule ((= e (Dot a b 0 tb)) (= p (pre a)) (= r (rows a))) ((set (pre e) p) (set (rows e) r)) :ruleset shape)
(rule ((= e (Dot a b 1 tb)) (= p (pre a)) (= r (cols a))) ((set (pre e) p) (set (rows e) r)) :ruleset shape)
(rule ((= e (Dot a b ta 0)) (= c (cols b))) ((set (cols e) c)) :ruleset shape)
(rule ((= e (Dot a b ta 1)) (= c (rows b))) ((set (cols e) c)) :ruleset shape)
(rule ((= e (SliceC x lo hi)) (= p (pre x)) (= r (rows x)))
      ((set (pre e) p) (set (rows e) r) (set (cols e) (- hi lo))) :ruleset shape)
(rule ((= e (SliceR x lo hi)) (= p (pre x)) (= c (cols x)))
      ((set (pre e) p) (set (rows e) (- hi lo)) (set (cols e) c)) :ruleset shape)
(rule ((= e (CatC x y)) (= p (pre x)) (= r (rows x)) (= c (cols x)) (= d (cols y)))
      ((set (pre e) p) (set (rows e) r) (set (cols e) (+ c d))) :ruleset shape)
(rule ((= e (CatR x y)) (= p (pre x)) (= r (rows x)) (= s (rows y)) (= c (cols x)))
      ((set (pre e) p) (set (rows e) (+ r s)) (set (cols e) c)) :ruleset shape)
"""


@dataclass
class Node:
    op: str
    args: list[str | int]
    """Child class ids (str, as `Graph.classes` keys) and data (str or int)."""
    kids: list[str]


@dataclass
class Graph:
    """The saturated e-graph: each class's nodes and shape; `root[i]` the class of
    instruction i's term."""

    classes: dict[str, list[Node]] = field(default_factory=dict)
    shape: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    root: dict[int, str] = field(default_factory=dict)
    original: dict[int, set[tuple[object, ...]]] = field(default_factory=dict)
    """(class, constructor, *arguments) of each instruction's own nodes (a concatenate of
    n operands is n - 1 nodes)."""
    iterations: int = 0
    nodes: int = 0


def program(enc: Encoded) -> str:
    """Sorts, shape rules and facts, and one global `$vI` per instruction term."""
    lines = [SORTS, SHAPE_RULES]
    lines += [f"(Comm {sexp(c)})" for c in COMMUTATIVE]
    pres = matrix_pres(enc)
    lines += [f"(Mat {sexp(p)})" for p in sorted(pres)]
    every = pres | {p for p, _, _ in enc.shapes.values()}
    lines += [f"(set (scalar-of {sexp(p)}) {sexp(scalar_pre(p))})" for p in sorted(every)]
    for i, t in enumerate(enc.term):
        lines.append(f"(let $inst{i} {sexp(t)})")
    for t, (p, r, c) in enc.shapes.items():
        e = sexp(t)
        lines.append(f"(set (pre {e}) {sexp(p)}) (set (rows {e}) {r}) (set (cols {e}) {c})")
    return "\n".join(lines)


def saturate(
    enc: Encoded,
    rules: list[tuple[Rule, bool]] | None = None,
    iterations: int = 8,
    max_nodes: int = 20000,
) -> Graph:
    """Run `rules` ((rule, forward) pairs; default: every rule forward, and back unless it
    grows) until nothing changes, `iterations` rounds, or `max_nodes` e-nodes."""
    try:
        from egglog import bindings
    except ImportError:
        raise HloError(
            "error: the algebraic space needs egglog (pip install 'hlopass[search]')"
        ) from None
    if rules is None:
        rules = [(r, True) for r in RULES] + [(r, False) for r in RULES if not r.grows]
    try:
        eg, done = _run(bindings, enc, rules, iterations, max_nodes)
    except bindings.EggSmolError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise HloError(f"error: egglog refused the e-graph: {first}") from None
    g = read(eg, enc)
    g.iterations = done
    return g


def _run(
    bindings: Any, enc: Encoded, rules: list[tuple[Rule, bool]], iterations: int, max_nodes: int
) -> tuple[Any, int]:
    """The saturation itself: the egglog e-graph and the rounds run."""
    eg = bindings.EGraph()
    text = program(enc) + "\n" + "\n".join(c for r, fwd in rules for c in r.commands(fwd))
    eg.run_program(*eg.parse_program(text))
    shape = eg.parse_program(f"(run shape {SHAPE_ROUNDS})")
    step = eg.parse_program("(run alg 1)")
    eg.run_program(*shape)
    done = 0
    merged = False
    while done < iterations:
        done += 1
        changed = any(_changed(o) for o in eg.run_program(*step))
        eg.run_program(*shape)
        if not changed or _size(eg) > max_nodes or done == iterations - 1:
            if merged:
                break
            # the merging rules once, on every form the rewrites found (a dot whose
            # transposes were folded may share an operand with another only then), and one
            # more round on what they made
            merged = True
            for _ in range(MERGE_ROUNDS):
                if _size(eg) > max_nodes // 4:
                    break
                eg.run_program(*eg.parse_program("(run merge 1)"))
                eg.run_program(*shape)
    return eg, done


MERGE_ROUNDS = 2
"""Rounds of the merging rules (two: a third dot sharing the operand joins a merged pair),
each while the e-graph is under a quarter of its node budget (a round squares the dots
sharing an operand)."""

SHAPE_ROUNDS = 64
"""Rounds of the shape rules after each rewrite round (a term's shape needs as many rounds
as its depth of new nodes; one rewrite round adds a few levels at most)."""


def _changed(out: object) -> bool:
    report = getattr(out, "report", None)
    return bool(getattr(report, "updated", True))


def _size(eg: object) -> int:
    data = json.loads(eg.serialize([]).to_json())  # type: ignore[attr-defined]
    return len(data["nodes"])


def read(eg: object, enc: Encoded) -> Graph:
    """The e-graph's T classes, nodes and shapes, and the class of each instruction."""
    data = json.loads(eg.serialize([]).to_json())  # type: ignore[attr-defined]
    nodes = data["nodes"]
    g = Graph(nodes=len(nodes))
    value: dict[str, str | int] = {}
    of_class: dict[str, str | int] = {}
    for nid, n in nodes.items():
        if not n["children"] and nid.startswith("primitive"):
            value[nid] = of_class[n["eclass"]] = _literal(n["op"])
    facts: dict[str, dict[str, object]] = {}
    for n in nodes.values():
        op = n["op"]
        if op in ("pre", "rows", "cols") and n["children"]:
            cls = nodes[n["children"][0]]["eclass"]
            facts.setdefault(cls, {})[op] = of_class[n["eclass"]]
        elif data["class_data"].get(n["eclass"], {}).get("type") == "T":
            args: list[str | int] = []
            kids = []
            for c in n["children"]:
                if c in value:
                    args.append(value[c])
                else:
                    args.append(nodes[c]["eclass"])
                    kids.append(nodes[c]["eclass"])
            g.classes.setdefault(n["eclass"], []).append(Node(op, args, kids))
    for cls, f in facts.items():
        if len(f) == 3:
            g.shape[cls] = (str(f["pre"]), int(f["rows"]), int(f["cols"]))  # type: ignore[arg-type]
    index: dict[tuple[object, ...], str] = {
        (n.op, *n.args): cls for cls, ns in g.classes.items() for n in ns
    }
    for i, t in enumerate(enc.term):
        g.original[i] = set()
        g.root[i] = _class_of(t, index, g.root, g.original[i])
    return g


def _literal(text: str) -> str | int:
    return json.loads(text) if text.startswith('"') else int(text)


def _class_of(
    t: Term,
    index: dict[tuple[object, ...], str],
    done: dict[int, str],
    seen: set[tuple[object, ...]],
) -> str:
    """The class of an instruction's term: its node, children read as their classes."""
    args: list[object] = []
    for a in t[1:]:
        if isinstance(a, Var):
            args.append(done[int(a.removeprefix("$inst"))])
        elif isinstance(a, tuple):
            args.append(_class_of(a, index, done, seen))
        else:
            args.append(a)
    cls = index[(t[0], *args)]
    seen.add((cls, t[0], *args))
    return cls
