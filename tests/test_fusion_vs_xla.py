"""benchmarks/fusion_vs_xla.py: its kernel counter, agreement matcher and pipeline fallback on
hand-written modules (expected values counted by hand in the comments)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hlopass import parse_hlo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import fusion_vs_xla as fx  # noqa: E402

# An XLA-style plan: a loop fusion (add+multiply), a cuBLAS call with workspace, and a while
# loop whose body holds one fusion and whose condition one compare.
XLA_PLAN = """HloModule xla
fused_mul_add {
  a = f32[8,4] parameter(0)
  b = f32[8,4] parameter(1)
  s = f32[8,4] add(a, b)
  ROOT m = f32[8,4] multiply(s, b)
}
fused_neg {
  p = f32[8,4] parameter(0)
  ROOT n = f32[8,4] negate(p)
}
body {
  st = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  x = f32[8,4] get-tuple-element(st), index=1
  f = f32[8,4] fusion(x), kind=kLoop, calls=fused_neg
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[8,4]) tuple(j, f)
}
cond {
  st = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[8,4] parameter(0)
  y = f32[4,4] parameter(1)
  fu = f32[8,4] fusion(x, x), kind=kLoop, calls=fused_mul_add
  g = (f32[8,4], s8[0]) custom-call(fu, y), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
  d = f32[8,4] get-tuple-element(g), index=0
  bc = f32[32] bitcast(d)
  r = f32[8,4] reshape(bc)
  z = s32[] constant(0)
  init = (s32[], f32[8,4]) tuple(z, r)
  w = (s32[], f32[8,4]) while(init), condition=cond, body=body
  ROOT out = f32[8,4] get-tuple-element(w), index=1
}
"""

# The same program unfused: every computing instruction is a kernel.
OURS_UNFUSED = """HloModule ours
body {
  st = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  x = f32[8,4] get-tuple-element(st), index=1
  f = f32[8,4] negate(x)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[8,4]) tuple(j, f)
}
cond {
  st = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[8,4] parameter(0)
  y = f32[4,4] parameter(1)
  s = f32[8,4] add(x, x)
  m = f32[8,4] multiply(s, x)
  d = f32[8,4] dot(m, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,8] transpose(d), dimensions={1,0}
  z = s32[] constant(0)
  init = (s32[], f32[4,8]) tuple(z, t)
  w = (s32[], f32[4,8]) while(init), condition=cond, body=body
  ROOT out = f32[4,8] get-tuple-element(w), index=1
}
"""


def test_kernel_count_xla_plan():
    # entry: fu, g (cuBLAS) = 2 (bitcast, reshape, gte, tuple, constant, while: none);
    # body: f (fusion), j (add) = 2; cond: lt = 1 -> 5
    m = parse_hlo(XLA_PLAN)
    assert fx.count_kernels(m) == 5
    names = [op.inst_name for op in fx.kernels(m)]
    assert sorted(names) == ["f", "fu", "g", "j", "lt"]


def test_kernel_count_unfused_plan():
    # body body/cond as above but f is a plain negate: 2 + 1; entry: s, m, d (a dot is a
    # kernel), t (a real transpose: it moves data) = 4 -> 7
    assert fx.count_kernels(parse_hlo(OURS_UNFUSED)) == 7


def test_bitcast_transpose_is_no_kernel():
    m = parse_hlo("""HloModule m
ENTRY e {
  x = f32[8,1] parameter(0)
  t = f32[1,8] transpose(x), dimensions={1,0}
  ROOT n = f32[1,8] negate(t)
}""")
    assert [op.inst_name for op in fx.kernels(m)] == ["n"]


def test_agreement_unfused_plan_splits_every_fusion():
    # XLA fusions with >= 2 anchors: fused_mul_add (add, multiply) only; fused_neg has one.
    a = fx.agreement(parse_hlo(XLA_PLAN), parse_hlo(OURS_UNFUSED))
    assert (a.fusions, a.contained, a.exact, a.missed) == (1, 0, 0, ["fu"])


OURS_FUSED = OURS_UNFUSED.replace(
    """  s = f32[8,4] add(x, x)
  m = f32[8,4] multiply(s, x)
""",
    """  m = f32[8,4] fusion(x), kind=kLoop, calls=fused_computation
""",
).replace(
    "body {",
    """fused_computation {
  p = f32[8,4] parameter(0)
  s = f32[8,4] add(p, p)
  ROOT m = f32[8,4] multiply(s, p)
}
body {""",
    1,
)

OURS_BIGGER = OURS_FUSED.replace(
    "  ROOT m = f32[8,4] multiply(s, p)\n}",
    "  m = f32[8,4] multiply(s, p)\n  ROOT e = f32[8,4] exponential(m)\n}",
)


def test_agreement_same_group_is_exact():
    a = fx.agreement(parse_hlo(XLA_PLAN), parse_hlo(OURS_FUSED))
    assert (a.fusions, a.contained, a.exact) == (1, 1, 1)
    assert a.contained_pct == 100.0


def test_agreement_larger_group_contains_but_is_not_exact():
    a = fx.agreement(parse_hlo(XLA_PLAN), parse_hlo(OURS_BIGGER))
    assert (a.fusions, a.contained, a.exact) == (1, 1, 0)


def test_agreement_needs_the_same_element_counts():
    # the same opcodes on 4 instead of 32 elements are other instructions
    fused_small = """HloModule ours
fused_computation {
  p = f32[4] parameter(0)
  s = f32[4] add(p, p)
  ROOT m = f32[4] multiply(s, p)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT m = f32[4] fusion(x), kind=kLoop, calls=fused_computation
}
"""
    a = fx.agreement(parse_hlo(XLA_PLAN), parse_hlo(fused_small))
    assert (a.fusions, a.contained) == (1, 0)


def test_pipeline_falls_back_to_the_prefix_that_runs(tmp_path: Path):
    src = tmp_path / "m.hlo"
    src.write_text(
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT n = f32[4] negate(x)\n}\n"
    )
    ran, note, _ = fx.run_pipeline(src, "dce,no-such-pass,cse", tmp_path / "out.hlo")
    assert ran == "dce"
    assert "unknown pass 'no-such-pass'" in note
    assert "negate" in (tmp_path / "out.hlo").read_text()


@pytest.mark.parametrize("program", ["attention_block", "cnn_train", "mlp_adam"])
def test_xla_plan_agrees_with_itself_and_not_with_its_inlined_form(corpus: Path, program: str):
    from tests.interp_util import xla_friendly

    text = (corpus / "jax" / program / "xla_h100_optimized.hlo").read_text()
    a = fx.agreement(parse_hlo(text), parse_hlo(text))
    assert a.fusions > 0 and a.contained == a.exact == a.fusions
    # every fusion inlined into its caller: no XLA fusion of >= 2 anchors is one kernel
    inlined = fx.agreement(parse_hlo(text), parse_hlo(xla_friendly(text)))
    assert (inlined.fusions, inlined.contained) == (a.fusions, 0)
