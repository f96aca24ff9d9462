"""`hlopass.search.elided`: a module whose text elides a constant (`{...}`, seed 001) gets
random values for it so that its plans can be run, and `reelide` prints it as given."""

from __future__ import annotations

import hlopass
from hlopass.execution.inputs import random_inputs
from hlopass.interpreter import elided_constant
from hlopass.search.elided import fill_elided, reelide

ELIDED = """HloModule elided

ENTRY e {
  x = f32[2,3] parameter(0)
  c = f32[2,3] constant({...})
  k = s32[4] constant({...})
  p = pred[2] constant({...})
  s = s32[] constant(2)
  a = f32[2,3] add(x, c)
  ROOT t = (f32[2,3], s32[4], pred[2], s32[]) tuple(a, k, p, s)
}
"""


def test_filled_constants_run_and_reelide_gives_the_module_back():
    m = hlopass.parse_hlo(ELIDED)
    assert elided_constant(m) is not None
    filled, names = fill_elided(m, seed=1)
    assert names == ["c", "k", "p"] and elided_constant(filled) is None
    a, k, p, s = hlopass.evaluate(filled, *random_inputs(filled, 0))
    assert a.shape == (2, 3) and k.shape == (4,) and k.min() >= 0 and k.max() < 16
    assert p.dtype == bool and int(s) == 2
    assert reelide(hlopass.print_hlo(filled), names) == hlopass.print_hlo(m)
    again, _ = fill_elided(m, seed=1)  # the same seed, the same values
    assert hlopass.print_hlo(again) == hlopass.print_hlo(filled)


def test_a_module_without_elided_constants_is_left_as_it_is():
    m = hlopass.parse_hlo(
        ELIDED.replace("{...}", "{1, 2, 3, 4}")
        .replace("f32[2,3] constant({1, 2, 3, 4})", "f32[2,3] constant({{1,2,3},{4,5,6}})")
        .replace("pred[2] constant({1, 2, 3, 4})", "pred[2] constant({true, false})")
    )
    assert fill_elided(m) == (m, [])
