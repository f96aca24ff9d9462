"""Kernel signatures (hlopass.kernel_structure.signature): equal for copies of one kernel
in two layers, different whenever anything a price reads differs."""

from __future__ import annotations

from hlopass.dialects.hlo import entry_computation
from hlopass.kernel_structure.plan import Kernel
from hlopass.kernel_structure.signature import Signatures
from hlopass.text.importer import parse_hlo

TWO_LAYERS = """HloModule layers

ENTRY main {
  p0 = f32[64,32]{1,0} parameter(0)
  p1 = f32[64,32]{1,0} parameter(1)
  x = f32[64,32]{1,0} exponential(p0)
  a0 = f32[64,32]{1,0} add(x, p1), metadata={op_name="layer0"}
  e0 = f32[64,32]{1,0} exponential(a0)
  a1 = f32[64,32]{1,0} add(e0, p1), metadata={op_name="layer1"}
  e1 = f32[64,32]{1,0} exponential(a1)
  a2 = f32[64,32]{1,0} add(e1, e1)
  e2 = f32[64,32]{1,0} exponential(a2)
  t3 = f32[32,64]{1,0} transpose(e2), dimensions={1,0}
  l3 = f32[32,64]{0,1} transpose(e2), dimensions={1,0}
  ROOT r = (f32[32,64]{1,0}, f32[32,64]{0,1}) tuple(t3, l3)
}
"""


def _ops() -> dict[str, object]:
    m = parse_hlo(TWO_LAYERS)
    return {op.inst_name: op for op in entry_computation(m).instructions}


def _kernel(ops: dict[str, object], *names: str) -> Kernel:
    members = [ops[n] for n in names]
    position = {id(o): i for i, o in enumerate(ops.values())}
    return Kernel([members[-1]], members, position, {id(o) for o in members})


def test_copies_in_two_layers_share_a_signature() -> None:
    ops, sigs = _ops(), Signatures()
    k0, k1 = _kernel(ops, "a0", "e0"), _kernel(ops, "a1", "e1")
    s0, s1 = sigs.of_kernel(k0), sigs.of_kernel(k1)
    assert s0.sid == s1.sid  # names and metadata differ, nothing a price reads does
    assert [o.inst_name for o in s0.inputs] == ["x", "p1"]
    assert [o.inst_name for o in s1.inputs] == ["e0", "p1"]


def test_wiring_shapes_and_attributes_tell_kernels_apart() -> None:
    ops, sigs = _ops(), Signatures()
    base = sigs.of_kernel(_kernel(ops, "a1", "e1")).sid
    # an input made by another opcode (a parameter, not an exponential)
    assert sigs.of_kernel(_kernel(ops, "x")).sid != sigs.of_kernel(_kernel(ops, "e0")).sid
    # add(e1, e1): one input read twice, not two inputs
    assert sigs.of_kernel(_kernel(ops, "a2", "e2")).sid != base
    # the same transpose writing another layout
    assert sigs.of_kernel(_kernel(ops, "t3")).sid != sigs.of_kernel(_kernel(ops, "l3")).sid
    # a grown kernel is signed again at its new version
    k = _kernel(ops, "e1")
    before = sigs.of_kernel(k).sid
    k.absorb(_kernel(ops, "a1"))
    assert sigs.of_kernel(k).sid == base != before


def test_pair_wiring_says_where_the_producer_meets_the_consumer() -> None:
    ops, sigs = _ops(), Signatures()
    # a0 -> e0 and a1 -> e1: the same pair in two layers
    p0, c0 = _kernel(ops, "a0"), _kernel(ops, "e0")
    p1, c1 = _kernel(ops, "a1"), _kernel(ops, "e1")
    assert sigs.pair(p0, c0) == sigs.pair(p1, c1)
    # a2 reads e1 twice: another pair
    assert sigs.pair(_kernel(ops, "e1"), _kernel(ops, "a2")) != sigs.pair(p1, c1)
