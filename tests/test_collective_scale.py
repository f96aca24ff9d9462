"""`benchmarks/collective_scale.py`'s doubled modules: still valid HLO, twice the
collectives in the computations that hold them, the reducers left alone."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from collective_scale import doubled  # noqa: E402

import hlopass  # noqa: E402
from hlopass.dialects.hlo import computations  # noqa: E402
from hlopass.pipeline import run_pipeline  # noqa: E402

MODULE = """HloModule m, replica_count=4

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %c = f32[] add(%a, %b)
}

ENTRY %e (p: f32[8], q: f32[8]) -> (f32[8], f32[8]) {
  %p = f32[8] parameter(0)
  %q = f32[8] parameter(1)
  %x = f32[8] all-reduce(%p), channel_id=1, replica_groups={}, to_apply=%add
  %y = f32[8] all-reduce(%q), channel_id=2, replica_groups={}, to_apply=%add
  ROOT %t = (f32[8], f32[8]) tuple(%x, %y)
}
"""


def opcodes(module) -> list[str]:
    return [op.opcode for c in computations(module) for op in c.instructions]


def test_doubled_copies_the_collective_computations_only():
    text = doubled(MODULE)
    assert "%x.dup = f32[8] all-reduce(%p), channel_id=3" in text  # parameters shared
    assert "%t.dup = (f32[8], f32[8]) tuple(%x.dup, %y.dup)" in text  # not the ROOT
    assert "%c.dup" not in text  # the reducer stays a single add
    m = hlopass.parse_hlo(text)
    assert opcodes(m).count("all-reduce") == 4
    # the four independent all-reduces of one key combine into one
    assert run_pipeline(m, "all-reduce-combiner")
    assert opcodes(m).count("all-reduce") == 1


def test_doubled_twice_has_four_copies():
    text = doubled(doubled(MODULE, ".dup0"), ".dup1")
    assert opcodes(hlopass.parse_hlo(text)).count("all-reduce") == 8
