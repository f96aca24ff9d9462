"""Hand-written computations for the algebraic rules (tests/test_search_algebraic.py):
`CASES[(rule, forward)]` is an entry computation whose ROOT holds the rule's left side in
that direction (the right side for the way back); `HELPERS[rule]` are rules run with it
to make the term it matches. Dots are on s32, where reassociation and
merging are exact (wrapping integer arithmetic is a ring); the rest on f32."""

from __future__ import annotations


def module(params: str, body: str) -> str:
    """`HloModule` text: `params` as 'name=shape, ...', `body` its instructions, last ROOT."""
    lines = [
        f"  {n} = {s} parameter({i})"
        for i, (n, s) in enumerate(p.split("=") for p in params.split(", "))
    ]
    rest = body.strip().splitlines()
    lines += [f"  {x.strip()}" for x in rest[:-1]] + [f"  ROOT {rest[-1].strip()}"]
    return "HloModule m\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


M = "f32[4,6]"
P = f"p={M}, q={M}"
S = "s=f32[], t=f32[]"
DOT = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"


def _axis_cases(ax: str) -> dict[tuple[str, bool], str]:
    """The slice and concatenate cases of one axis (C: dim 1, R: dim 0 of a [4,6])."""
    d = 1 if ax == "C" else 0
    cut = "slice={[0:4], [1:4]}" if ax == "C" else "slice={[1:3], [0:6]}"
    sh = "f32[4,3]" if ax == "C" else "f32[2,6]"
    cat = "f32[4,12]" if ax == "C" else "f32[8,6]"
    full = "slice={[0:4], [0:6]}"
    left = "slice={[0:4], [0:6]}" if ax == "C" else "slice={[0:4], [0:6]}"
    right = "slice={[0:4], [6:12]}" if ax == "C" else "slice={[4:8], [0:6]}"
    return {
        (f"slice-{ax}-ew1", True): module(P, f"n = {M} negate(p)\n s = {sh} slice(n), {cut}"),
        (f"slice-{ax}-ew1", False): module(P, f"s = {sh} slice(p), {cut}\n n = {sh} negate(s)"),
        (f"slice-{ax}-ew2", True): module(P, f"a = {M} add(p, q)\n s = {sh} slice(a), {cut}"),
        (f"slice-{ax}-ew2", False): module(
            P, f"s = {sh} slice(p), {cut}\n u = {sh} slice(q), {cut}\n a = {sh} add(s, u)"
        ),
        (f"concat-{ax}-ew1", True): module(
            P,
            f"n = {M} negate(p)\n m = {M} negate(q)\n"
            f" c = {cat} concatenate(n, m), dimensions={{{d}}}",
        ),
        (f"concat-{ax}-ew1", False): module(
            P, f"c = {cat} concatenate(p, q), dimensions={{{d}}}\n n = {cat} negate(c)"
        ),
        (f"concat-{ax}-ew2", True): module(
            f"{P}, r={M}, w={M}",
            f"a = {M} add(p, q)\n b = {M} add(r, w)\n"
            f" c = {cat} concatenate(a, b), dimensions={{{d}}}",
        ),
        (f"concat-{ax}-ew2", False): module(
            f"{P}, r={M}, w={M}",
            f"c = {cat} concatenate(p, q), dimensions={{{d}}}\n"
            f" e = {cat} concatenate(r, w), dimensions={{{d}}}\n"
            f" a = {cat} add(c, e)",
        ),
        (f"slice-{ax}-full", True): module(P, f"n = {M} negate(p)\n s = {M} slice(n), {full}")
        if ax == "C"  # a full slice of [4,6] is read as one of its last dim: R's comes from C's
        else module(
            P,
            "t = f32[6,4] transpose(p), dimensions={1,0}\n s = f32[6,4] slice(t), "
            "slice={[0:6], [0:4]}",
        ),
        (f"slice-{ax}-concat-left", True): module(
            P, f"c = {cat} concatenate(p, q), dimensions={{{d}}}\n s = {M} slice(c), {left}"
        ),
        (f"slice-{ax}-concat-right", True): module(
            P, f"c = {cat} concatenate(p, q), dimensions={{{d}}}\n s = {M} slice(c), {right}"
        ),
        (f"slice-{ax}-transpose", True): module(
            P,
            f"t = f32[6,4] transpose(p), dimensions={{1,0}}\n"
            f" s = {'f32[6,2]' if ax == 'C' else 'f32[3,4]'} slice(t), "
            f"{'slice={[0:6], [1:3]}' if ax == 'C' else 'slice={[1:4], [0:4]}'}",
        ),
        (f"slice-{ax}-transpose", False): module(
            P,
            f"s = {'f32[2,6]' if ax == 'C' else 'f32[4,3]'} slice(p), "
            f"{'slice={[1:3], [0:6]}' if ax == 'C' else 'slice={[0:4], [1:4]}'}\n"
            f" t = {'f32[6,2]' if ax == 'C' else 'f32[3,4]'} transpose(s), dimensions={{1,0}}",
        ),
    }


CASES: dict[tuple[str, bool], str] = {
    ("multiply-one", True): module(
        P, f"c = f32[] constant(1)\n b = {M} broadcast(c), dimensions={{}}\n m = {M} multiply(p, b)"
    ),
    ("multiply-one", False): module(P, f"n = {M} negate(p)"),
    ("add-zero", True): module(
        P, f"c = f32[] constant(0)\n b = {M} broadcast(c), dimensions={{}}\n m = {M} add(p, b)"
    ),
    ("add-zero", False): module(P, f"n = {M} negate(p)"),
    ("negate-negate", True): module(P, f"n = {M} negate(p)\n m = {M} negate(n)"),
    ("negate-negate", False): module(P, f"n = {M} abs(p)"),
    ("transpose-transpose", True): module(
        P,
        f"t = f32[6,4] transpose(p), dimensions={{1,0}}\n u = {M} transpose(t), dimensions={{1,0}}",
    ),
    ("transpose-transpose", False): module(P, f"n = {M} abs(p)"),
    ("reshape-reshape", True): module(P, "r = f32[24] reshape(p)\n s = f32[2,12] reshape(r)"),
    ("reshape-same", True): module(P, f"n = {M} abs(p)\n r = {M} reshape(n)"),
    ("reshape-same", False): module(P, f"n = {M} abs(p)"),
    ("commute", True): module(P, f"a = {M} multiply(p, q)"),
    ("broadcast-ew2", True): module(
        S,
        f"b = {M} broadcast(s), dimensions={{}}\n"
        f" c = {M} broadcast(t), dimensions={{}}\n m = {M} maximum(b, c)",
    ),
    ("broadcast-ew2", False): module(
        S, f"m = f32[] maximum(s, t)\n b = {M} broadcast(m), dimensions={{}}"
    ),
    ("broadcast-ew1", True): module(
        S, f"b = {M} broadcast(s), dimensions={{}}\n n = {M} exponential(b)"
    ),
    ("broadcast-ew1", False): module(
        S, f"n = f32[] exponential(s)\n b = {M} broadcast(n), dimensions={{}}"
    ),
    ("broadcast-transpose", True): module(
        S, f"b = {M} broadcast(s), dimensions={{}}\n x = f32[6,4] transpose(b), dimensions={{1,0}}"
    ),
    ("broadcast-transpose", False): module(S, f"b = {M} broadcast(s), dimensions={{}}"),
    ("transpose-ew1", True): module(
        P, f"n = {M} tanh(p)\n t = f32[6,4] transpose(n), dimensions={{1,0}}"
    ),
    ("transpose-ew1", False): module(
        P, "t = f32[6,4] transpose(p), dimensions={1,0}\n n = f32[6,4] tanh(t)"
    ),
    ("transpose-ew2", True): module(
        P, f"a = {M} subtract(p, q)\n t = f32[6,4] transpose(a), dimensions={{1,0}}"
    ),
    ("transpose-ew2", False): module(
        P,
        "t = f32[6,4] transpose(p), dimensions={1,0}\n"
        " u = f32[6,4] transpose(q), dimensions={1,0}\n a = f32[6,4] subtract(t, u)",
    ),
    ("dot-reassociate", True): module(
        "a=s32[5,3], b=s32[3,4], c=s32[4,2]",
        f"d = s32[5,4] dot(a, b), {DOT}\n e = s32[5,2] dot(d, c), {DOT}",
    ),
    ("dot-reassociate", False): module(
        "a=s32[5,3], b=s32[3,4], c=s32[4,2]",
        f"d = s32[3,2] dot(b, c), {DOT}\n e = s32[5,2] dot(a, d), {DOT}",
    ),
    ("dot-lhs-transpose", True): module(
        "a=s32[3,5], b=s32[3,4]",
        "d = s32[5,4] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
    ),
    ("dot-lhs-transpose", False): module(
        "a=s32[3,5], b=s32[3,4]",
        f"t = s32[5,3] transpose(a), dimensions={{1,0}}\n d = s32[5,4] dot(t, b), {DOT}",
    ),
    ("dot-rhs-transpose", True): module(
        "a=s32[2,5,3], b=s32[2,4,3]",
        "d = s32[2,5,4] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
        "rhs_batch_dims={0}, rhs_contracting_dims={2}",
    ),
    ("dot-rhs-transpose", False): module(
        "a=s32[2,5,3], b=s32[2,4,3]",
        "t = s32[2,3,4] transpose(b), dimensions={0,2,1}\n"
        " d = s32[2,5,4] dot(a, t), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
        "rhs_batch_dims={0}, rhs_contracting_dims={1}",
    ),
    ("transpose-of-dot", True): module(
        "a=s32[5,3], b=s32[3,4]",
        f"d = s32[5,4] dot(a, b), {DOT}\n t = s32[4,5] transpose(d), dimensions={{1,0}}",
    ),
    ("transpose-of-dot", False): module(
        "a=s32[5,3], b=s32[3,4]",
        "d = s32[4,5] dot(b, a), lhs_contracting_dims={0}, rhs_contracting_dims={1}",
    ),
    ("dot-add-concat", True): module(
        "a=s32[5,3], b=s32[3,4], c=s32[5,2], d=s32[2,4]",
        f"e = s32[5,4] dot(a, b), {DOT}\n f = s32[5,4] dot(c, d), {DOT}\n g = s32[5,4] add(e, f)",
    ),
    ("dot-merge-lhs", True): module(
        "a=s32[5,3], b=s32[3,4], c=s32[3,2]",
        f"d = s32[5,4] dot(a, b), {DOT}\n e = s32[5,2] dot(a, c), {DOT}\n"
        " t = (s32[5,4], s32[5,2]) tuple(d, e)",
    ),
    ("dot-merge-rhs", True): module(
        "a=s32[5,3], b=s32[2,3], c=s32[3,4]",
        f"d = s32[5,4] dot(a, c), {DOT}\n e = s32[2,4] dot(b, c), {DOT}\n"
        " t = (s32[5,4], s32[2,4]) tuple(d, e)",
    ),
    ("slice-C-dot", True): module(
        "a=s32[5,3], b=s32[3,4]",
        f"d = s32[5,4] dot(a, b), {DOT}\n s = s32[5,2] slice(d), slice={{[0:5], [1:3]}}",
    ),
    ("slice-C-dot", False): module(
        "a=s32[5,3], b=s32[3,4]",
        f"s = s32[3,2] slice(b), slice={{[0:3], [1:3]}}\n d = s32[5,2] dot(a, s), {DOT}",
    ),
    ("slice-R-dot", True): module(
        "a=s32[5,3], b=s32[3,4]",
        f"d = s32[5,4] dot(a, b), {DOT}\n s = s32[2,4] slice(d), slice={{[2:4], [0:4]}}",
    ),
    ("slice-R-dot", False): module(
        "a=s32[5,3], b=s32[3,4]",
        f"s = s32[2,3] slice(a), slice={{[2:4], [0:3]}}\n d = s32[2,4] dot(s, b), {DOT}",
    ),
    **_axis_cases("C"),
    **_axis_cases("R"),
}

HELPERS: dict[str, list[str]] = {"slice-R-full": ["slice-C-transpose"]}
