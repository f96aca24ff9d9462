"""The algebraic rewrites as data: each `Rule` is one egglog rewrite `lhs -> rhs` (guards
in `when`), with its reverse where it is valid (`back`: the reverse's guards, which bind
what the reverse must invent, such as the shape of a splat of 1). A reverse that would grow
every term (x -> x * 1) is `grows`: kept out of saturation unless asked, and still tested.

Terms (see `terms.py`): `Leaf` (an opaque instruction), `Const` (a scalar constant),
`Ew1`/`Ew2` (elementwise ops of one element type), `Bcast` (a scalar broadcast), `T2` (the
transpose of the last two dims), `Dot` (a matmul: batched, or a rank-2 right side under a left side of any rank >= 2;
the flags say whether the
contracting dim of each side is its second-last rather than XLA's usual one), `Reshape`,
`SliceC`/`SliceR` (a stride-1 slice of the last / second-last dim), `CatC`/`CatR`
(concatenates of two). Shapes are the e-class's `pre`, `rows` and `cols` (`shapes.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

COMMUTATIVE = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")

_SHAPE = "(= p (pre x)) (= r (rows x)) (= c (cols x))"


@dataclass(frozen=True)
class Rule:
    """`lhs -> rhs` when the facts of `when` hold; `back`: the facts under which
    `rhs -> lhs` holds too (None: one way only); `multi`: a raw egglog rule instead (a
    pattern over several terms, such as two dots sharing an operand)."""

    name: str
    lhs: str = ""
    rhs: str = ""
    when: str = ""
    back: str | None = None
    grows: bool = False
    """The reverse adds a node to every term it matches (kept out of saturation)."""
    exact: bool = True
    """Both sides give bit-identical values (float reassociation does not)."""
    multi: str = ""
    once: bool = False
    """Run one round, on the computation's own terms, before the others (dot merging:
    round after round it would merge the merged dots again)."""

    def commands(self, forward: bool = True) -> list[str]:
        if self.multi:
            return (
                [
                    self.multi.replace(
                        ":ruleset alg", ":ruleset merge" if self.once else ":ruleset alg"
                    )
                ]
                if forward
                else []
            )
        if forward:
            return [_rewrite(self.lhs, self.rhs, self.when)]
        return [] if self.back is None else [_rewrite(self.rhs, self.lhs, self.back)]


def _rewrite(lhs: str, rhs: str, when: str) -> str:
    guard = f" :when ({when})" if when else ""
    return f"(rewrite {lhs} {rhs}{guard} :ruleset alg)"


def _axis_rules() -> list[Rule]:
    """The slice and concatenate rules, once per axis (C: the last dim, R: the second-last)."""
    out = []
    for ax, n in (("C", "cols"), ("R", "rows")):
        s, cat = f"Slice{ax}", f"Cat{ax}"
        out += [
            Rule(f"slice-{ax}-ew1", f"({s} (Ew1 op x) lo hi)", f"(Ew1 op ({s} x lo hi))", back=""),
            Rule(
                f"slice-{ax}-ew2",
                f"({s} (Ew2 op x y) lo hi)",
                f"(Ew2 op ({s} x lo hi) ({s} y lo hi))",
                back="",
            ),
            Rule(
                f"concat-{ax}-ew1",
                f"({cat} (Ew1 op x) (Ew1 op y))",
                f"(Ew1 op ({cat} x y))",
                back="",
            ),
            Rule(
                f"concat-{ax}-ew2",
                f"({cat} (Ew2 op x y) (Ew2 op u v))",
                f"(Ew2 op ({cat} x u) ({cat} y v))",
                back=f"(= ({n} x) ({n} y)) (= ({n} u) ({n} v))",
            ),
            Rule(f"slice-{ax}-full", f"({s} x 0 hi)", "x", when=f"(= hi ({n} x))"),
            Rule(f"slice-{ax}-concat-left", f"({s} ({cat} x y) 0 hi)", "x", when=f"(= hi ({n} x))"),
            Rule(
                f"slice-{ax}-concat-right",
                f"({s} ({cat} x y) lo hi)",
                "y",
                when=f"(= lo ({n} x)) (= hi (+ lo ({n} y)))",
            ),
        ]
    out += [
        Rule(
            "slice-C-dot", "(SliceC (Dot a b 0 0) lo hi)", "(Dot a (SliceC b lo hi) 0 0)", back=""
        ),
        Rule(
            "slice-R-dot", "(SliceR (Dot a b 0 0) lo hi)", "(Dot (SliceR a lo hi) b 0 0)", back=""
        ),
        Rule("slice-C-transpose", "(SliceC (T2 x) lo hi)", "(T2 (SliceR x lo hi))", back=""),
        Rule("slice-R-transpose", "(SliceR (T2 x) lo hi)", "(T2 (SliceC x lo hi))", back=""),
    ]
    return out


def _dot_rules() -> list[Rule]:
    merge = (
        "(rule ((= d1 (Dot a b1 0 0)) (= d2 (Dot a b2 0 0)) (!= b1 b2) (= (pre b1) (pre b2))"
        " (= n1 (cols b1))"
        " (= n2 (cols b2)))"
        " ((union d1 (SliceC (Dot a (CatC b1 b2) 0 0) 0 n1))"
        " (union d2 (SliceC (Dot a (CatC b1 b2) 0 0) n1 (+ n1 n2)))) :ruleset alg)"
    )
    merge_rhs = (
        "(rule ((= d1 (Dot a1 b 0 0)) (= d2 (Dot a2 b 0 0)) (!= a1 a2) (= (pre a1) (pre a2))"
        " (= n1 (rows a1))"
        " (= n2 (rows a2)))"
        " ((union d1 (SliceR (Dot (CatR a1 a2) b 0 0) 0 n1))"
        " (union d2 (SliceR (Dot (CatR a1 a2) b 0 0) n1 (+ n1 n2)))) :ruleset alg)"
    )
    return [
        Rule(
            "dot-reassociate",
            "(Dot (Dot a b 0 0) c 0 0)",
            "(Dot a (Dot b c 0 0) 0 0)",
            back="",
            exact=False,
        ),
        Rule("dot-lhs-transpose", "(Dot a b 1 tb)", "(Dot (T2 a) b 0 tb)", back=""),
        Rule("dot-rhs-transpose", "(Dot a b ta 1)", "(Dot a (T2 b) ta 0)", back=""),
        Rule(
            "transpose-of-dot",
            "(T2 (Dot a b 0 0))",
            "(Dot b a 1 1)",
            when="(= (pre a) (pre b))",
            back="(= (pre a) (pre b))",
        ),
        # two dots summed are one dot over both contractions: [a c] . [b; d] = a.b + c.d
        # (TASO's split/merge of matmuls along the contracted dim; one GEMM's fixed cost)
        Rule(
            "dot-add-concat",
            '(Ew2 "add" (Dot a b 0 0) (Dot c d 0 0))',
            "(Dot (CatC a c) (CatR b d) 0 0)",
            when="(= (pre a) (pre c)) (= (rows a) (rows c)) (= (pre b) (pre d))"
            " (= (cols b) (cols d)) (!= a c)",
            exact=False,
        ),
        Rule("dot-merge-lhs", multi=merge, once=True),
        Rule("dot-merge-rhs", multi=merge_rhs, once=True),
    ]


RULES: list[Rule] = [
    # algsimp's identities, both ways (the way back grows every term it matches)
    Rule(
        "multiply-one",
        '(Ew2 "multiply" x (Bcast (Const "1" q) p r c))',
        "x",
        back=f"{_SHAPE} (= q (scalar-of p))",
        grows=True,
    ),
    Rule(
        "add-zero",
        '(Ew2 "add" x (Bcast (Const "0" q) p r c))',
        "x",
        back=f"{_SHAPE} (= q (scalar-of p))",
        grows=True,
    ),
    Rule("negate-negate", '(Ew1 "negate" (Ew1 "negate" x))', "x", back="(= p (pre x))", grows=True),
    Rule("transpose-transpose", "(T2 (T2 x))", "x", back="(= p (pre x)) (Mat p)", grows=True),
    Rule("reshape-reshape", "(Reshape (Reshape x p1 r1 c1) p r c)", "(Reshape x p r c)"),
    Rule(
        "reshape-same",
        "(Reshape x p r c)",
        "x",
        when="(= p (pre x)) (= r (rows x)) (= c (cols x))",
        back=_SHAPE,
        grows=True,
    ),
    Rule("commute", "(Ew2 op x y)", "(Ew2 op y x)", when="(Comm op)"),
    # a scalar broadcast moved through elementwise ops and transposes
    Rule(
        "broadcast-ew2",
        "(Ew2 op (Bcast s p r c) (Bcast t p r c))",
        "(Bcast (Ew2 op s t) p r c)",
        back="",
    ),
    Rule("broadcast-ew1", "(Ew1 op (Bcast s p r c))", "(Bcast (Ew1 op s) p r c)", back=""),
    Rule("broadcast-transpose", "(T2 (Bcast s p r c))", "(Bcast s p c r)", back="(Mat p)"),
    # transposes through elementwise ops
    Rule("transpose-ew1", "(T2 (Ew1 op x))", "(Ew1 op (T2 x))", back=""),
    Rule("transpose-ew2", "(T2 (Ew2 op x y))", "(Ew2 op (T2 x) (T2 y))", back=""),
    *_dot_rules(),
    *_axis_rules(),
]

BY_NAME = {r.name: r for r in RULES}
