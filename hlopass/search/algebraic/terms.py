"""The entry computation as e-graph terms. An instruction the rules know (elementwise ops
of one element type, scalar constants and broadcasts, transposes of the last two dims,
batched matmul dots, reshapes, stride-1 slices and concatenates of one of the last two
dims) becomes a term of its operands' terms; any other instruction (parameters, while,
custom-call, fusions, ...) is an opaque `Leaf` whose operands are roots of their own. The
roots are the values the opaque instructions and the computation's ROOT read: extraction
picks a term for each, the rest is rebuilt from those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape, default_layout, is_float, is_integral
from hlopass.search.algebraic.shapes import encode, is_matrix, scalar_pre, value_text

Term = tuple[Any, ...]
"""(constructor, *arguments): a child is a Term, data is a str or an int."""

UNARY = frozenset(
    [
        "negate",
        "abs",
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "sqrt",
        "rsqrt",
        "cbrt",
        "tanh",
        "logistic",
        "sine",
        "cosine",
        "floor",
        "ceil",
        "sign",
        "not",
        "round-nearest-even",
    ]
)
BINARY = frozenset(
    [
        "add",
        "subtract",
        "multiply",
        "divide",
        "maximum",
        "minimum",
        "power",
        "and",
        "or",
        "xor",
        "remainder",
        "atan2",
    ]
)


class Var(str):
    """An egglog global naming another instruction's term (`$inst3`: instruction 3)."""


def sexp(t: Term | str | int) -> str:
    """The egglog text of a term (strings quoted, `Var`s as they are)."""
    if isinstance(t, Var):
        return str(t)
    if isinstance(t, str):
        return json.dumps(t)
    if isinstance(t, int):
        return str(t)
    return "(" + " ".join([t[0], *map(sexp, t[1:])]) + ")"


@dataclass
class Encoded:
    """One computation as terms: `ops` its instructions in order, `term[i]` the term of
    `ops[i]` (a `Leaf` for an opaque one), `roots` the indices whose values must be kept."""

    comp: ComputationOp
    ops: list[HloOp]
    term: list[Term] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)
    shapes: dict[Term, tuple[str, int, int]] = field(default_factory=dict)
    """The shape of each Leaf and Const term (the rules derive the rest)."""

    def opaque(self, i: int) -> bool:
        return self.term[i][0] == "Leaf"


def _plain(shape: object) -> ArrayShape | None:
    """An array shape in the default layout without dynamic dims, else None."""
    if (
        not isinstance(shape, ArrayShape)
        or shape.dynamic
        or shape.element_type in ("token", "opaque")
    ):
        return None
    if shape.layout is not None and shape.layout != default_layout(len(shape.dims)):
        return None
    return shape


def _real(et: str) -> bool:
    return et == "pred" or is_float(et) or is_integral(et)


def _attrs(op: HloOp) -> dict[str, Any]:
    return {s.name: v for s, v in op.hlo_attrs() if s.name != "metadata"}


def _dot(op: HloOp, a: ArrayShape, b: ArrayShape) -> tuple[int, int] | None:
    """A dot's (ta, tb) flags when it is a matmul: the same leading batch dims on both
    sides, or a rank-2 right side and no batch dims (the left side's leading dims are free);
    one contracting dim among the last two of each side."""
    at = _attrs(op)
    if set(at) - {
        "lhs_contracting_dims",
        "rhs_contracting_dims",
        "lhs_batch_dims",
        "rhs_batch_dims",
    }:
        return None
    r, rb = len(a.dims), len(b.dims)
    if r < 2 or rb not in (2, r) or a.element_type != b.element_type:
        return None
    batch = tuple(range(r - 2)) if rb == r else ()
    if tuple(at.get("lhs_batch_dims", ())) != batch or tuple(at.get("rhs_batch_dims", ())) != batch:
        return None
    lc, rc = tuple(at.get("lhs_contracting_dims", ())), tuple(at.get("rhs_contracting_dims", ()))
    if len(lc) != 1 or len(rc) != 1 or lc[0] < r - 2 or rc[0] < rb - 2:
        return None
    return int(lc[0] == r - 2), int(rc[0] == rb - 1)


def _slice(op: HloOp, a: ArrayShape) -> tuple[str, int, int] | None:
    dims = op.attr("slice")
    r = len(a.dims)
    if r == 0 or any(s.stride != 1 for s in dims):
        return None
    cut = [i for i, s in enumerate(dims) if (s.start, s.limit) != (0, a.dims[i])]
    axis = cut[0] if len(cut) == 1 else r - 1 if not cut else -1
    if axis not in (r - 1, r - 2):
        return None
    return ("SliceC" if axis == r - 1 else "SliceR"), dims[axis].start, dims[axis].limit


def _term(op: HloOp, kids: list[Any], shapes: list[ArrayShape | None]) -> Term | None:
    """The term of a known instruction (None: opaque)."""
    out = _plain(op.shape)
    if out is None or any(s is None for s in shapes):
        return None
    code, at = op.opcode, _attrs(op)
    same = all(s == out for s in shapes)
    if code in UNARY and not at and same and len(kids) == 1:
        return ("Ew1", code, kids[0])
    if code in BINARY and not at and same and len(kids) == 2:
        return ("Ew2", code, kids[0], kids[1])
    if code == "constant" and not out.dims and _real(out.element_type):
        return ("Const", value_text(op.attr("value").literal.array), scalar_pre(encode(out)[0]))
    a = shapes[0] if shapes else None
    assert a is None or isinstance(a, ArrayShape)
    if code == "broadcast" and a is not None and not a.dims and a.element_type == out.element_type:
        return ("Bcast", kids[0], *encode(out))
    if code == "reshape" and a is not None and a.element_type == out.element_type:
        return ("Reshape", kids[0], *encode(out))
    r = len(out.dims)
    if code == "transpose" and r >= 2 and tuple(at["dimensions"]) == (*range(r - 2), r - 1, r - 2):
        return ("T2", kids[0])
    if code == "dot" and a is not None and isinstance(shapes[1], ArrayShape):
        flags = _dot(op, a, shapes[1])
        if flags is not None and out.element_type == a.element_type:
            return ("Dot", kids[0], kids[1], *flags)
    if code == "slice" and a is not None:
        s = _slice(op, a)
        return None if s is None else (s[0], kids[0], s[1], s[2])
    axis = tuple(at.get("dimensions", (-9,)))[0] if code == "concatenate" else -9
    if (
        r >= 1
        and axis in (r - 1, r - 2)
        and all(s and s.element_type == out.element_type for s in shapes)
    ):
        cat = "CatC" if axis == r - 1 else "CatR"
        t = kids[0]
        for k in kids[1:]:
            t = (cat, t, k)
        return t
    return None


def encode_computation(comp: ComputationOp) -> Encoded:
    """`comp` as terms (see the module docstring)."""
    ops = list(comp.instructions)
    enc = Encoded(comp, ops)
    index = {op.result: i for i, op in enumerate(ops) if op.results}
    used_opaque: set[int] = set()
    for i, op in enumerate(ops):
        srcs = [index.get(v) for v in op.operands]
        t = None
        if all(s is not None for s in srcs):
            kids: list[Any] = [Var(f"$inst{s}") for s in srcs if s is not None]
            t = _term(op, kids, [_plain(v.type.data) for v in op.operands])  # type: ignore[attr-defined]
        if t is None:
            t = ("Leaf", i)
            used_opaque.update(s for s in srcs if s is not None)
            shape = _plain(op.shape)
            if shape is not None:
                enc.shapes[t] = encode(shape)
        elif t[0] == "Const":
            enc.shapes[t] = (t[2], 1, 1)
        enc.term.append(t)
    root = comp.root
    roots = used_opaque | {ops.index(root)}
    enc.roots = sorted(i for i in roots if not enc.opaque(i))
    return enc


def matrix_pres(enc: Encoded) -> set[str]:
    """The `pre` strings of rank >= 2 among the computation's shapes."""
    out: set[str] = set()

    def visit(t: Term) -> None:
        for x in t[1:]:
            if isinstance(x, tuple):
                visit(x)
            elif isinstance(x, str) and not isinstance(x, Var) and "|" in x and is_matrix(x):
                out.add(x)

    for t in enc.term:
        visit(t)
    out.update(p for p, _, _ in enc.shapes.values() if is_matrix(p))
    return out
