"""The TopK passes (passes/topk: topk-rewriter, topk-specializer, topk-decomposer): on each
case, what fires (checked against the guards of XLA's TopkRewriter, TopkSpecializer and
TopkDecomposer, restated in each case), and that no output changes: the interpreter before
and after bit for bit, and XLA:CPU on the rewritten module (its TopK calls as `topk`
instructions, `tests.interp_util.xla_friendly`) equal to the interpreter before. Inputs
hold ties (values drawn from a few integers) so that stability is tested too."""

from __future__ import annotations

import numpy as np
import pytest

from hlopass.dialects.hlo import computations
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.interp_util import assert_same, xla_friendly

GT = """
gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER
}
"""
GT1 = """
gt1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GT, type=TOTALORDER
}
"""
LT = """
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
"""


def _sort_slice(shape: str, dim: int, k: int, stable: bool = True, comp: str = "gt",
                start: int = 0) -> str:  # fmt: skip
    dims = [int(d) for d in shape.split(",")]
    out = list(dims)
    out[dim] = k - start
    window = ", ".join(f"[{start}:{k}]" if i == dim else f"[0:{d}]" for i, d in enumerate(dims))
    o = ",".join(map(str, out))
    st = ", is_stable=true" if stable else ""
    return f"""HloModule m
{GT}{LT}
ENTRY e {{
  x = f32[{shape}] parameter(0)
  i = s32[{shape}] iota(), iota_dimension={dim}
  s = (f32[{shape}], s32[{shape}]) sort(x, i), dimensions={{{dim}}}{st}, to_apply={comp}
  v = f32[{shape}] get-tuple-element(s), index=0
  w = s32[{shape}] get-tuple-element(s), index=1
  vs = f32[{o}] slice(v), slice={{{window}}}
  ws = s32[{o}] slice(w), slice={{{window}}}
  ROOT t = (f32[{o}], s32[{o}]) tuple(vs, ws)
}}
"""


def _topk(shape: str, k: int, largest: bool = True, values_only: bool = False) -> str:
    dims = [int(d) for d in shape.split(",")]
    o = ",".join(map(str, [*dims[:-1], k]))
    root = (f"ROOT v = f32[{o}] get-tuple-element(t), index=0" if values_only
            else f"ROOT r = (f32[{o}], s32[{o}]) tuple(t)")  # fmt: skip
    if not values_only:
        root = (f"v = f32[{o}] get-tuple-element(t), index=0\n"
                f"  w = s32[{o}] get-tuple-element(t), index=1\n"
                f"  ROOT r = (f32[{o}], s32[{o}]) tuple(v, w)")  # fmt: skip
    return f"""HloModule m

ENTRY e {{
  x = f32[{shape}] parameter(0)
  t = (f32[{o}], s32[{o}]) topk(x), k={k}, largest={"true" if largest else "false"}
  {root}
}}
"""


SINGLE = f"""HloModule m
{GT1}
ENTRY e {{
  x = f32[3,40] parameter(0)
  s = f32[3,40] sort(x), dimensions={{1}}, to_apply=gt1
  ROOT v = f32[3,5] slice(s), slice={{[0:3], [0:5]}}
}}
"""

FULL = "topk-decomposer{topk-only=true},topk-rewriter,topk-specializer,topk-decomposer"
# (name, module, pipeline, the custom-call targets and sorts left, and why)
CASES = [
    # TopkDecomposer: a topk instruction becomes sort(x, iota) + slices
    ("topk_decomposed", _topk("4,8", 2), "topk-decomposer{topk-only=true}", [], 1),
    ("topk_values_only", _topk("4,8", 3, values_only=True), "topk-decomposer", [], 1),
    ("topk_smallest", _topk("5,7", 3, largest=False), "topk-decomposer", [], 1),
    ("topk_rank3", _topk("2,3,9", 4), "topk-decomposer", [], 1),
    # TopkRewriter: sort + [0:k] slices -> TopK (then left by the specializer: n < 1024)
    ("sort_last_dim", _sort_slice("4,16", 1, 3), "topk-rewriter", ["TopK"], 0),
    ("sort_dim0", _sort_slice("16,4", 0, 3), "topk-rewriter", ["TopK"], 0),
    ("sort_rank3", _sort_slice("2,3,16", 2, 5), "topk-rewriter", ["TopK"], 0),
    ("sort_rank1", _sort_slice("32", 0, 4), "topk-rewriter", ["TopK"], 0),
    ("sort_single_operand", SINGLE, "topk-rewriter", ["TopK"], 0),
    ("sort_slice_from_1", _sort_slice("4,16", 1, 5, start=1), "topk-rewriter", ["TopK"], 0),
    # must not fire: an LT comparator is not XLA's NaN-safe greater-than
    ("sort_lt_kept", _sort_slice("4,16", 1, 3, comp="lt"), "topk-rewriter", [], 1),
    # must not fire: the sort dimension is neither the first nor the last
    ("sort_middle_dim_kept", _sort_slice("3,16,4", 1, 3), "topk-rewriter", [], 1),
    # TopkSpecializer: stable, k <= 16, n >= 1024 -> __gpu$TopK
    ("specialized_stable", _sort_slice("2,2048", 1, 4), FULL, ["__gpu$TopK"], 0),
    # stable with n < 1024: back to sort + slice
    ("not_specialized_small_n", _sort_slice("4,64", 1, 4), FULL, [], 1),
    # stable with k > 16: back to sort + slice
    ("not_specialized_big_k", _sort_slice("2,2048", 1, 17), FULL, [], 1),
    # unstable on CUDA (RAFT select_k): any n, k <= 128
    ("specialized_unstable", _sort_slice("4,64", 1, 4, stable=False), FULL, ["__gpu$TopK"], 0),
    # k / n >= 0.85: never the kernel
    ("not_specialized_ratio", _sort_slice("4,20", 1, 17, stable=False), FULL, [], 1),
]


def _census(text: str) -> tuple[list[str], int]:
    module = parse_hlo(text)
    ops = [op for c in computations(module) for op in c.instructions]
    targets = sorted(str(op.attr("custom_call_target")) for op in ops if op.opcode == "custom-call")
    return targets, sum(op.opcode in ("sort", "topk") for op in ops)


def _inputs(module, ties: bool) -> list[np.ndarray]:
    """Values from a few integers (ties) for stable sorts; distinct values for unstable
    ones, whose order among equal keys is unspecified (XLA:CPU's differs from ours)."""
    rng = np.random.default_rng(0)
    entry = next(c for c in computations(module) if c.is_entry)
    out = []
    for p in sorted(entry.parameters(), key=lambda p: p.attr("number")):
        n = int(np.prod(p.shape.dims))
        flat = rng.integers(-3, 4, size=n) if ties else rng.permutation(n) - n // 2
        out.append(flat.reshape(p.shape.dims).astype(np.float32))
    return out


@pytest.mark.parametrize(("name", "text", "pipeline", "targets", "sorts"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_fires_as_xla_and_keeps_values(name, text, pipeline, targets, sorts, xla) -> None:
    import hlopass.interpreter as interp

    module = parse_hlo(text)
    args = _inputs(module, ties="sort(" not in text or "is_stable=true" in text)
    want = interp.evaluate(parse_hlo(text), *args)
    run_pipeline(module, pipeline + ",dce", verify_each=True)
    out = print_hlo(module)
    got_targets, got_sorts = _census(out)
    assert (got_targets, got_sorts) == (targets, sorts), out
    for g, w in zip(interp.evaluate(parse_hlo(out), *args), want, strict=True):
        assert_same(g, w, what=f"{name} (interpreter)")
    for g, w in zip(xla.execute(xla_friendly(out), args), want, strict=True):
        assert_same(g, w, what=f"{name} (XLA:CPU)")


def test_decomposed_topk_is_one_fused_sort_under_gpu() -> None:
    """XLA's H100 plan of moe_gate: the top-2 of 8 experts is a sort fused with its iota
    and slices (n = 8 < 1024: no TopK kernel), not a TopK kernel."""
    module = parse_hlo(_topk("256,8", 2))
    run_pipeline(module, "gpu")
    out = print_hlo(module)
    assert "topk(" not in out and "TopK" not in out
    assert out.count(" sort(") == 1 and "iota(" in out
