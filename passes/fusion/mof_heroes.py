"""Tiled-transpose heroes for `multi-output-fusion` (XLA gpu_fusible.cc).

XLA admits a kernel whose hero is a transpose its tiled transpose emitter takes
(`GetDescriptionForTiledTransposeEmitter`) as a multi-output root
(`IsFusibleAsMultiOutputFusionRoot` via `IsInputFusibleTranspose`); its loop is the
transpose's input, and two such heroes are compatible only when they are the same
transpose after normalization (`FusionHeroesAreCompatible`: same shape, same permutation).

The size rule here is XLA's (both swapped dims at least 16, or both at least 8 with a
product of at least 64 x 128); it admits smaller transposes than the cost model's
`transpose_tiling(size_rule=True)`, which prices kernels and is left as it is.
"""

from __future__ import annotations

from typing import Any

from hlopass.kernel_structure.emitter import dim_runs
from hlopass.kernel_structure.shapes import (
    array_operand_shapes,
    transpose_is_bitcast,
    transpose_orders,
)

MIN_DIM = 16
"""XLA kMinDimensionToTransposeTiled."""
MIN_DIM_2 = 8
"""XLA kMinDimensionToTransposeTiled2 (with the product rule below)."""
MIN_PRODUCT = 64 * 128
"""XLA kMinTotalDimensionsToTransposeTiled."""

TransposeKey = tuple[tuple[int, ...], tuple[int, ...]]


def tiled_transpose_key(op: Any) -> TransposeKey | None:
    """XLA's transpose description of `op` when its tiled emitter takes it: the input
    normalized to runs of dims that move together (sizes, input order) and the runs'
    permutation (output order); None for anything else."""
    if getattr(op, "opcode", None) != "transpose" or transpose_is_bitcast(op):
        return None
    orders = transpose_orders(op)
    if orders is None:
        return None
    out_order, in_order = orders
    if not out_order:
        return None
    pos = {d: i for i, d in enumerate(in_order)}
    runs = dim_runs(out_order, in_order)
    src = array_operand_shapes(op)[0]
    by_input = sorted(range(len(runs)), key=lambda i: pos[runs[i][0]])
    sizes = tuple(_prod(src.dims[d] for d in runs[i]) for i in by_input)
    perm = tuple(by_input.index(i) for i in range(len(runs)))
    in_minor, out_minor = sizes[-1], sizes[perm[-1]]
    if perm[-1] == len(runs) - 1:
        return None  # the minor run stays minor: not a tiled transpose here
    if len(runs) > 3:
        return None  # XLA normalizes to rank 3 at most
    big = in_minor >= MIN_DIM and out_minor >= MIN_DIM
    mid = in_minor >= MIN_DIM_2 and out_minor >= MIN_DIM_2 and in_minor * out_minor >= MIN_PRODUCT
    return (sizes, perm) if big or mid else None


def transpose_hero(transposes: tuple[Any, ...]) -> Any:
    """The first of a kernel's transpose heroes that XLA's tiled emitter takes, else None."""
    for t in transposes:
        if tiled_transpose_key(t) is not None:
            return t
    return None


def heroes_refusal(t1: Any, t2: Any, reduce1: bool, reduce2: bool, sibling: bool) -> str | None:
    """XLA FusionHeroesAreCompatible for transpose heroes `t1`, `t2` (None: none) and
    whether each kernel is a reduction; None when compatible."""
    if t1 is not None and t2 is not None:
        if tiled_transpose_key(t1) != tiled_transpose_key(t2):
            return "tiled transposes with different shapes"
        return None
    if (t1 is not None and reduce2) or (t2 is not None and reduce1):
        return "MOF-fusion of a transpose and a reduction"
    if not sibling and (t1 is not None) != (t2 is not None):
        # XLA checks that the reader's path from the other kernel stays elementwise; not
        # modelled here, so a transpose kernel and its reader are never merged
        return "tiled transpose would become untiled"
    return None


def _prod(xs: Any) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
