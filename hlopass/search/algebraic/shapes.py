"""How an array shape is written in the e-graph: `pre` (element type, rank and the dims
before the last two), `rows` (the second-last dim) and `cols` (the last). Matrix rules
(transposes, dots, row slices) read only rows and cols and require `pre` to be equal, so a
rewrite is only made where XLA's shape rules hold; `decode` gives the dims back.
"""

from __future__ import annotations

import math

import numpy as np

from hlopass.ir.shape import ArrayShape, array


def encode(shape: ArrayShape) -> tuple[str, int, int]:
    """(pre, rows, cols) of `shape`: a scalar is (et|0|, 1, 1), a vector (et|1|, 1, n)."""
    d = shape.dims
    r = len(d)
    if r == 0:
        return f"{shape.element_type}|0|", 1, 1
    if r == 1:
        return f"{shape.element_type}|1|", 1, d[0]
    return f"{shape.element_type}|{r}|{','.join(map(str, d[:-2]))}", d[-2], d[-1]


def decode(pre: str, rows: int, cols: int) -> ArrayShape:
    """The array shape (default layout) that `encode` wrote as (pre, rows, cols)."""
    et, rank, lead = pre.split("|")
    r = int(rank)
    if r == 0:
        return array(et, ())
    if r == 1:
        return array(et, (cols,))
    return array(et, (*(int(x) for x in lead.split(",") if x), rows, cols))


def is_matrix(pre: str) -> bool:
    return int(pre.split("|")[1]) >= 2


def element_type(pre: str) -> str:
    return pre.split("|")[0]


def scalar_pre(pre: str) -> str:
    return f"{element_type(pre)}|0|"


def value_text(value: object) -> str:
    """A scalar constant's value as the rules match it: `1` and `1.0` alike, -0 apart."""
    v = np.asarray(value).item()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and not (v == 0 and math.copysign(1, v) < 0):
            return str(int(v))
        return repr(v)
    return str(v)


def elements(pre: str, rows: int, cols: int) -> int:
    return math.prod(decode(pre, rows, cols).dims)
