"""`sort` with `is_stable=false` puts equivalent elements where XLA-CPU does (its
SortThunk's std::sort, replayed by hlopass/interpreter/stdsort.py), checked against XLA-CPU
index for index: rows with many ties, of every length around the insertion-sort threshold
and far beyond it, simple and general comparators, NaN and signed-zero keys, and an input
that drives introsort into its heapsort fallback."""

from __future__ import annotations

import numpy as np
import pytest

import hlopass
from hlopass.interpreter.stdsort import std_sort_order
from tests.interp_util import xla_execute_many

_SIMPLE = """HloModule s

cmp {
  a = %(t)s[] parameter(0)
  b = %(t)s[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=%(dir)s%(type)s
}

ENTRY e {
  x = %(t)s[%(rows)d,%(n)d] parameter(0)
  i = s32[%(rows)d,%(n)d] iota(), iota_dimension=1
  ROOT s = (%(t)s[%(rows)d,%(n)d], s32[%(rows)d,%(n)d]) sort(x, i), dimensions={1}, to_apply=cmp
}
"""

# JAX's comparator: NaNs canonicalised, then a total order on the first operand, ties
# broken by nothing (the payload is not compared).
_GENERAL = """HloModule g

cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  qnan = f32[] constant(nan)
  a_nan = pred[] compare(a, a), direction=NE
  b_nan = pred[] compare(b, b), direction=NE
  a1 = f32[] select(a_nan, qnan, a)
  b1 = f32[] select(b_nan, qnan, b)
  ROOT c = pred[] compare(a1, b1), direction=LT, type=TOTALORDER
}

ENTRY e {
  x = f32[%(rows)d,%(n)d] parameter(0)
  i = s32[%(rows)d,%(n)d] iota(), iota_dimension=1
  ROOT s = (f32[%(rows)d,%(n)d], s32[%(rows)d,%(n)d]) sort(x, i), dimensions={1}, to_apply=cmp
}
"""

_NP = {"f32": np.float32, "s32": np.int32, "bf16": None}


def _case(kind: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    rows = 3
    if kind == "general":
        x = rng.integers(-3, 4, (rows, n)).astype(np.float32)
        x[0, :: max(1, n // 5)] = np.nan
        return _GENERAL % {"rows": rows, "n": n}, x
    t, direction, typ = kind.split("-")
    if t == "bf16":
        import ml_dtypes

        x = rng.integers(-4, 4, (rows, n)).astype(np.float32).astype(ml_dtypes.bfloat16)
    else:
        x = rng.integers(-4, 4, (rows, n)).astype(_NP[t])
    if t != "s32":  # signed zeros tie with each other
        x[1] = np.where(rng.random(n) < 0.5, -0.0, 0.0).astype(x.dtype)
        if typ == "partial":  # NaN compares false both ways
            x[2, :: max(1, n // 7)] = np.nan
    text = _SIMPLE % {"t": t, "rows": rows, "n": n, "dir": direction,
                      "type": ", type=TOTALORDER" if typ == "total" else ""}  # fmt: skip
    return text, x


_KINDS = ["f32-LT-partial", "f32-GT-partial", "f32-LT-total", "s32-GT-plain", "bf16-GT-partial",
          "general"]  # fmt: skip
_SIZES = [2, 5, 16, 17, 18, 33, 100, 257, 1000]


@pytest.fixture(scope="module")
def xla_sorts(xla):
    cases = [(k, n, _case(k, n, seed=n)) for k in _KINDS for n in _SIZES]
    results = xla_execute_many([(text, [x]) for _, _, (text, x) in cases])
    return {(k, n): (text, x, r) for (k, n, (text, x)), r in zip(cases, results, strict=True)}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


@pytest.mark.parametrize("n", _SIZES)
@pytest.mark.parametrize("kind", _KINDS)
def test_unstable_sort_order_is_xla_cpu_order(xla_sorts, kind, n):
    text, x, r = xla_sorts[(kind, n)]
    assert "outputs" in r, r
    got = hlopass.evaluate(hlopass.parse_hlo(text), x)
    want = r["outputs"]
    assert np.array_equal(got[1], want[1]), f"payload order differs:\n{got[1]}\n{want[1]}"
    assert np.array_equal(_bits(got[0]), _bits(want[0]))  # -0/+0 and NaNs where XLA has them


def test_stable_sort_keeps_input_order_of_ties(xla):
    text, x = _case("s32-GT-plain", 100, seed=1)
    text = text.replace("dimensions={1}", "dimensions={1}, is_stable=true")
    got = hlopass.evaluate(hlopass.parse_hlo(text), x)
    (want,) = xla_execute_many([(text, [x])])
    assert np.array_equal(got[1], want["outputs"][1])
    assert np.array_equal(got[1], np.argsort(-x, axis=1, kind="stable"))


def _adversary(n: int) -> np.ndarray:
    """McIlroy's "killer adversary" for this very algorithm: values are fixed lazily,
    always making the pivot candidate the smallest, so introsort runs out of depth and
    finishes with heapsort (distinct values: the caller halves them to make ties)."""
    gas = n
    val = [gas] * n
    solid = 0
    candidate = 0

    def less(x: int, y: int) -> bool:
        nonlocal solid, candidate
        if val[x] == gas and val[y] == gas:
            if x == candidate:
                val[x], solid = solid, solid + 1
            else:
                val[y], solid = solid, solid + 1
        if val[x] == gas:
            candidate = x
        elif val[y] == gas:
            candidate = y
        return val[x] < val[y]

    std_sort_order(n, less)
    return np.array(val, np.float32)


def test_adversarial_input_reaches_heapsort_and_matches_xla(xla, monkeypatch):
    from hlopass.interpreter import stdsort

    n = 600
    v = _adversary(n)
    x = np.stack([v // 2, v // 3])  # pairs and triples of ties; the first still degrades
    heapsorts = []
    real = stdsort._heap_sort
    monkeypatch.setattr(stdsort, "_heap_sort", lambda *a: heapsorts.append(1) or real(*a))
    text = _SIMPLE % {"t": "f32", "rows": 2, "n": n, "dir": "LT", "type": ""}
    got = hlopass.evaluate(hlopass.parse_hlo(text), x)
    assert heapsorts, "introsort should have fallen back to heapsort"
    (want,) = xla_execute_many([(text, [x])])
    assert np.array_equal(got[1], want["outputs"][1])
    assert not np.array_equal(got[1][0], np.argsort(x[0], kind="stable")), "order must differ"


@pytest.mark.parametrize("n", [0, 1, 2, 16, 17, 200, 3000])
def test_std_sort_order_sorts(n):
    rng = np.random.default_rng(n)
    k = rng.integers(0, 4, n).tolist()
    order = std_sort_order(n, lambda i, j: k[i] < k[j])
    assert sorted(order) == list(range(n))
    assert [k[i] for i in order] == sorted(k)


@pytest.mark.parametrize("stable", [False, True])
def test_denormal_keys_compare_as_zero_like_xla(xla, stable):
    """The comparator's compare runs under XLA-CPU's DAZ: denormals tie with zeros."""
    rng = np.random.default_rng(7)
    pool = np.array([1e-40, -1e-40, 3e-39, 0.0, -0.0, 1e-37, -1e-37], np.float32)
    x = rng.choice(pool, (3, 40)).astype(np.float32)
    text = _SIMPLE % {"t": "f32", "rows": 3, "n": 40, "dir": "LT", "type": ""}
    if stable:
        text = text.replace("dimensions={1}", "dimensions={1}, is_stable=true")
    got = hlopass.evaluate(hlopass.parse_hlo(text), x)
    (want,) = xla_execute_many([(text, [x])])
    assert np.array_equal(got[1], want["outputs"][1])
    assert np.array_equal(_bits(got[0]), _bits(want["outputs"][0]))


_ONE = """HloModule one

cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=%s
}

ENTRY e {
  x = f32[4,%d] parameter(0)
  ROOT s = f32[4,%d] sort(x), dimensions={1}, to_apply=cmp
}
"""


@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("n", [10, 17, 300])
def test_single_operand_signed_zeros_and_nans_where_xla_puts_them(xla, direction, n):
    """One operand (XLA-CPU's builtin std::less / std::greater path): only ties of
    different bits (+0 and -0) and NaNs can show the order."""
    rng = np.random.default_rng(n)
    x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0], np.float32), (4, n)).astype(np.float32)
    x[3, ::5] = np.nan
    x[2] = np.abs(x[2])  # identical ties only: the stable result is XLA's too
    text = _ONE % (direction, n, n)
    got = hlopass.evaluate(hlopass.parse_hlo(text), x)
    (want,) = xla_execute_many([(text, [x])])
    assert np.array_equal(_bits(got[0]), _bits(want["outputs"][0]))
