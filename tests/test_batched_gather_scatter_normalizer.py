"""`batched-gather-scatter-normalizer` (XLA's BatchedGatherScatterNormalizer): on each case,
whether it fires (no batching dims left, the iota-concatenated indices there) and that no
output changes: the interpreter before and after bit for bit, and XLA:CPU on the rewritten
module equal to the interpreter before. Indices are drawn past both ends of their
dimension (gathers clamp them, scatters skip them); values are small integers, so a
scatter-add's sums are exact in any order."""

from __future__ import annotations

import numpy as np
import pytest

from hlopass.dialects.hlo import computations
from hlopass.ir.shape import ArrayShape
from hlopass.pipeline import run_pipeline
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.interp_util import assert_same

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""
ADD2 = """
add2 {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] add(b, d)
  ROOT r = (f32[], s32[]) tuple(s, t)
}
"""

CASES = [
    # take_along_axis: one batching dim, the index vector dim past the last indices dim
    (
        "gather_trailing_index_vector",
        """HloModule m
ENTRY e {
  x = f32[6,10] parameter(0)
  i = s32[6,1] parameter(1)
  ROOT g = f32[6,1] gather(x, i), offset_dims={}, collapsed_slice_dims={1},
    start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},
    index_vector_dim=2, slice_sizes={1,1}
}""",
        True,
    ),
    # two batching dims (the indices' in another order), an offset dim, the index vector
    # dim inside the indices
    (
        "gather_two_batching_dims",
        """HloModule m
ENTRY e {
  x = f32[3,4,7,5] parameter(0)
  i = s32[4,1,3] parameter(1)
  ROOT g = f32[4,3,2] gather(x, i), offset_dims={2}, collapsed_slice_dims={2},
    start_index_map={2}, operand_batching_dims={0,1}, start_indices_batching_dims={2,0},
    index_vector_dim=1, slice_sizes={1,1,1,2}
}""",
        True,
    ),
    # s8 indices along a batching dim of 200: promoted to s32 before the iota is joined
    (
        "gather_s8_promoted",
        """HloModule m
ENTRY e {
  x = f32[200,9] parameter(0)
  i = s8[200,1] parameter(1)
  ROOT g = f32[200,1] gather(x, i), offset_dims={}, collapsed_slice_dims={1},
    start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},
    index_vector_dim=2, slice_sizes={1,1}
}""",
        True,
    ),
    (
        "scatter_add",
        ADD
        + """
ENTRY e {
  x = f32[6,10] parameter(0)
  i = s32[6,3,1] parameter(1)
  u = f32[6,3] parameter(2)
  ROOT s = f32[6,10] scatter(x, i, u), update_window_dims={}, inserted_window_dims={1},
    scatter_dims_to_operand_dims={1}, input_batching_dims={0},
    scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add
}""",
        True,
    ),
    (
        "scatter_variadic",
        ADD2
        + """
ENTRY e {
  x = f32[4,8] parameter(0)
  y = s32[4,8] parameter(1)
  i = s32[4,2] parameter(2)
  u = f32[4,2] parameter(3)
  v = s32[4,2] parameter(4)
  ROOT s = (f32[4,8], s32[4,8]) scatter(x, y, i, u, v), update_window_dims={},
    inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0},
    scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add2
}""",
        True,
    ),
    # must not fire: no batching dims
    (
        "gather_plain",
        """HloModule m
ENTRY e {
  x = f32[6,10] parameter(0)
  i = s32[6,2] parameter(1)
  ROOT g = f32[6] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1},
    start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
}""",
        False,
    ),
    # must not fire: the operand batching dim is in start_index_map
    (
        "gather_overlap",
        """HloModule m
ENTRY e {
  x = f32[6,10] parameter(0)
  i = s32[6,1] parameter(1)
  ROOT g = f32[6,1] gather(x, i), offset_dims={}, collapsed_slice_dims={1},
    start_index_map={0}, operand_batching_dims={0}, start_indices_batching_dims={0},
    index_vector_dim=2, slice_sizes={1,1}
}""",
        False,
    ),
]


def _inputs(module) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    entry = next(c for c in computations(module) if c.is_entry)
    out = []
    for p in sorted(entry.parameters(), key=lambda p: p.attr("number")):
        shape = p.shape
        assert isinstance(shape, ArrayShape)
        dims, t = shape.dims, shape.element_type
        if t.startswith("s"):
            # indices: past both ends of the largest operand dimension they may address
            out.append(rng.integers(-3, 12, size=dims).astype(np.int8 if t == "s8" else np.int32))
        else:
            out.append(rng.integers(-4, 5, size=dims).astype(np.float32))
    return out


@pytest.mark.parametrize(("name", "text", "fires"), CASES, ids=[c[0] for c in CASES])
def test_normalizes_as_xla_and_keeps_values(name: str, text: str, fires: bool, xla) -> None:
    import hlopass.interpreter as interp

    module = parse_hlo(text)
    args = _inputs(module)
    want = interp.evaluate(parse_hlo(text), *args)
    changed = run_pipeline(module, "batched-gather-scatter-normalizer", verify_each=True)
    out = print_hlo(module)
    assert changed == fires, out
    if not fires:
        assert out == print_hlo(parse_hlo(text))
        return  # (StableHLO, XLA:CPU's way in, rejects the overlapping form outright)
    assert "batching_dims" not in out and "concatenate(" in out, out
    for g, w in zip(interp.evaluate(parse_hlo(out), *args), want, strict=True):
        assert_same(g, w, what=f"{name} (interpreter)")
    for g, w in zip(xla.execute(out, args), want, strict=True):
        assert_same(g, w, what=f"{name} (XLA:CPU)")
