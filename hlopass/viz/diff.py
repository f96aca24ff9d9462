"""Before/after marks for two graphs of a module: added, removed, changed instructions.

Instructions are matched by name first (passes keep names where they can), then, for the
rest, by structure: same opcode, shape and HLO text once instruction names are blanked out,
when exactly one candidate is left on each side (a renamed instruction). A matched pair
whose text differs is `changed`; what is left unmatched is `added` (after) or `removed`.
"""

from __future__ import annotations

import re
from collections import defaultdict

from hlopass.viz.graph import Graph, Node

_NAMES = re.compile(r"%?[A-Za-z_][\w.\-]*(?=[,)}\s]|$)")


def _body(n: Node) -> str:
    """The text after `name = `, names of operands kept (they are matched separately)."""
    return n.text.split(" = ", 1)[-1]


def _skeleton(n: Node) -> tuple[str, str, str]:
    return n.opcode, n.shape, _NAMES.sub("_", _body(n))


def diff_marks(before: Graph, after: Graph) -> tuple[dict[str, str], list[str]]:
    """(after node id -> added/changed, names of removed instructions)."""
    by_name_before = {n.name: n for n in before.nodes.values()}
    marks: dict[str, str] = {}
    unmatched_after: list[Node] = []
    matched_before: set[str] = set()
    for nid, n in after.nodes.items():
        old = by_name_before.get(n.name)
        if old is None:
            unmatched_after.append(n)
            continue
        matched_before.add(old.name)
        if _body(old) != _body(n):
            marks[nid] = "changed"
    left: dict[tuple[str, str, str], list[Node]] = defaultdict(list)
    for n in before.nodes.values():
        if n.name not in matched_before:
            left[_skeleton(n)].append(n)
    renamed: set[str] = set()
    for n in unmatched_after:
        cands = left.get(_skeleton(n), [])
        if len(cands) == 1 and cands[0].name not in renamed:
            renamed.add(cands[0].name)
            marks[n.id] = "changed"
        else:
            marks[n.id] = "added"
    removed = [n.name for k in left.values() for n in k if n.name not in renamed]
    return marks, removed
