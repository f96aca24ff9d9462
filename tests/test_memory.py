"""hlopass.ir.memory.peak_live_bytes on hand-written modules (expected values worked out by hand
in the comments: f32[100] = 400 bytes)."""

from __future__ import annotations

import pytest

from hlopass import parse_hlo
from hlopass.ir.memory import peak_live_bytes


def _peak(text: str):
    return peak_live_bytes(parse_hlo(text))


def test_chain_frees_dead_buffers():
    # a: [1,2]; b: [2,end]; c: [3,4]; d: [4,end] -> at d: b + c + d = 400 + 400 + 200
    r = _peak("""HloModule m
ENTRY e {
  p = f32[100] parameter(0)
  a = f32[100] exponential(p)
  b = f32[100] negate(a)
  c = f32[100] add(b, p)
  d = f32[50] slice(c), slice={[0:50]}
  ROOT t = (f32[50], f32[100]) tuple(d, b)
}""")
    assert (r.peak_bytes, r.at_instruction, r.parameter_bytes) == (1000, "e/d", 400)
    assert r.per_computation["e"].buffer_bytes == 400 * 3 + 200


def test_bitcast_and_gte_alias_their_operand():
    # t aliases a (400) and b (400); g aliases a's leaf, bc aliases g (no new bytes).
    # Uses through aliases: a lives to n (index 6); b to g (index 4, g reads the tuple).
    r = _peak("""HloModule m
ENTRY e {
  p = f32[100] parameter(0)
  a = f32[100] exponential(p)
  b = f32[100] negate(p)
  t = (f32[100], f32[100]) tuple(a, b)
  g = f32[100] get-tuple-element(t), index=0
  bc = f32[10,10] bitcast(g)
  ROOT n = f32[10,10] negate(bc)
}""")
    # live: index 2..4: a + b = 800; 5: a = 400; 6: a + n = 800 -> 800, first at b
    assert r.peak_bytes == 800
    assert r.at_instruction == "e/b"


def test_get_tuple_element_of_multi_output_picks_its_leaf():
    # fu defines two leaves (400 + 40); g1 reads the tuple (both leaves live to g1) and
    # aliases leaf 1 only, so leaf 0 dies at g1.
    r = _peak("""HloModule m
f {
  q = f32[100] parameter(0)
  e = f32[100] exponential(q)
  r = f32[10] slice(e), slice={[0:10]}
  ROOT t = (f32[100], f32[10]) tuple(e, r)
}
ENTRY e {
  p = f32[100] parameter(0)
  fu = (f32[100], f32[10]) fusion(p), kind=kLoop, calls=f
  g1 = f32[10] get-tuple-element(fu), index=1
  ROOT x = f32[10] negate(g1)
}""")
    # at fu: 440. at g1 (index 2): both leaves live (fu last used at g1) -> 440.
    # at x: leaf 1 (40) + x (40) = 80. The fused computation's insides do not count.
    assert r.peak_bytes == 440
    assert r.at_instruction == "e/fu"


def test_while_adds_body_peak_and_runs_in_place():
    # body: s (param, not counted) -> n = negate(s) 400, m = exponential(n) 400: peak 800 at m
    # entry: p param; i = exponential(p) 400 live through w (w aliases i) -> at w: 400 + 800
    r = _peak("""HloModule m
body {
  s = f32[100] parameter(0)
  n = f32[100] negate(s)
  ROOT m = f32[100] exponential(n)
}
cond {
  s = f32[100] parameter(0)
  ROOT c = pred[] constant(true)
}
ENTRY e {
  p = f32[100] parameter(0)
  i = f32[100] exponential(p)
  ROOT w = f32[100] while(i), condition=cond, body=body
}""")
    assert r.per_computation["body"].peak_bytes == 800
    assert r.per_computation["body"].at_instruction == "body/m"
    assert r.per_computation["cond"].peak_bytes == 1
    assert r.peak_bytes == 1200
    assert r.at_instruction == "body/m"


@pytest.mark.parametrize(
    "etype,nbytes", [("f16", 200), ("s8", 100), ("pred", 100), ("f64", 800), ("c64", 800)]
)
def test_element_sizes(etype: str, nbytes: int):
    r = _peak(f"""HloModule m
ENTRY e {{
  p = {etype}[100] parameter(0)
  ROOT c = {etype}[100] copy(p)
}}""")
    assert r.peak_bytes == nbytes
