"""`combine_scan`'s pieces the combiners' value tests do not reach: the longest in-order
run `reorder_block` keeps, and the renumbering of positions when a patch finds no room
between its neighbours (forced with a spacing of 1, the output must not change)."""

from __future__ import annotations

import itertools
import random

import hlopass
from hlopass.passes.collectives import combine_scan
from hlopass.passes.collectives.combine_scan import longest_increasing


def _longest_by_brute_force(seq: list[int]) -> int:
    best = 0
    for r in range(len(seq) + 1):
        for pick in itertools.combinations(seq, r):
            if list(pick) == sorted(pick):
                best = max(best, r)
    return best


def test_longest_increasing_is_a_longest_increasing_subsequence() -> None:
    rng = random.Random(7)
    for n in range(9):
        seq = rng.sample(range(20), n)
        kept = longest_increasing(seq)
        in_seq_order = [v for v in seq if v in kept]
        assert in_seq_order == sorted(in_seq_order)
        assert len(kept) == _longest_by_brute_force(seq)
    assert longest_increasing([3, 1, 2, 5, 4, 6]) in ({1, 2, 5, 6}, {1, 2, 4, 6})


# By hand: the post order (operands first, from the root) is p ar0 n0 ar2 ar1 ar3 ar4: ar0
# stays alone (ar2 reads negate(ar0)), ar2 and ar1 combine (the patch has to make room for
# three instructions where two stood), ar3 reads ar1 and ar4 reads ar3: four all-reduces.
_MODULE = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[4] parameter(0)
  ar0 = f32[4] all-reduce(p), to_apply=add
  n0 = f32[4] negate(ar0)
  ar1 = f32[4] all-reduce(p), to_apply=add
  ar2 = f32[4] all-reduce(n0), to_apply=add
  ar3 = f32[4] all-reduce(ar1), to_apply=add
  ar4 = f32[4] all-reduce(ar3), to_apply=add
  ROOT t = (f32[4], f32[4], f32[4]) tuple(ar2, ar4, n0)
}
"""


def _combined(spec: str) -> str:
    m = hlopass.parse_hlo(_MODULE)
    assert hlopass.run_pass(m, spec)
    return hlopass.print_hlo(m)


def test_positions_renumbered_when_a_patch_has_no_room(monkeypatch) -> None:
    spaced = _combined("all-reduce-combiner")
    monkeypatch.setattr(combine_scan, "GAP", 1)
    assert _combined("all-reduce-combiner") == spaced
    assert spaced.count(" all-reduce(") == 4
    assert "(f32[4]{0}, f32[4]{0}) all-reduce(%n0, %p)" in spaced
    assert "%ar3 = f32[4]{0} all-reduce(%get-tuple-element.1)" in spaced
