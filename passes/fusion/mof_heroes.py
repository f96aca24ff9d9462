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

from hlopass.cost.layouts import reshape_is_bitcast
from hlopass.ir.shape import ArrayShape
from hlopass.kernel_structure.emitter import dim_runs, is_elementwise
from hlopass.kernel_structure.shapes import (
    array_operand_shapes,
    transpose_is_bitcast,
    transpose_orders,
)
from hlopass.rewriting import value_shape

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


def deep_transpose_hero(outputs: list[Any], members: list[Any]) -> Any:
    """XLA FindNonTrivialHero's harder search (`FindHero`) for a kernel whose outputs reach
    a tiled transpose only through elementwise ops of up to three operands: the single
    tiled transpose so reached from the first output (a root tuple's first element that
    has one), provided nothing but such ops reads it on the way out; else None."""
    ids = {id(m) for m in members}
    for out in outputs:
        hero = _find_hero(out, ids)
        if hero is not None:
            return hero
    return None


def _find_hero(root: Any, ids: set[int]) -> Any:
    hero, seen, queue = None, {id(root)}, [root]
    while queue:
        node = queue.pop(0)
        if tiled_transpose_key(node) is not None:
            if hero is not None:
                return None  # two candidates: XLA bails out
            hero = node
            continue
        if not _intermediate(node):
            continue
        for v in node.operands:
            o = v.owner
            if id(o) in ids and id(o) not in seen:
                seen.add(id(o))
                queue.append(o)
    if hero is None or hero is root or not _trivial_readers(hero, ids):
        return None
    return hero


def _intermediate(op: Any) -> bool:
    """XLA IsIntermediate with three operands allowed: elementwise ops (a copy only when it
    keeps the layout), bitcasts, and reshapes or transposes that are bitcasts."""
    if not 1 <= len(op.operands) <= 3:
        return False
    opc = op.opcode
    if opc == "copy":
        return op.shape == value_shape(op.operands[0])
    if opc in ("bitcast",) or (opc == "transpose" and transpose_is_bitcast(op)):
        return True
    if opc == "reshape":
        src, dst = value_shape(op.operands[0]), op.shape
        return (
            isinstance(src, ArrayShape)
            and isinstance(dst, ArrayShape)
            and reshape_is_bitcast(src, dst)
        )
    return is_elementwise(op)


def _trivial_readers(hero: Any, ids: set[int]) -> bool:
    """Everything reachable from `hero`'s readers inside the kernel is a tuple or an
    intermediate op (XLA: no non-elementwise op after the transpose)."""
    seen: set[int] = set()
    queue = [u.operation for u in hero.result.uses]
    while queue:
        op = queue.pop()
        if id(op) in seen or id(op) not in ids:
            continue
        seen.add(id(op))
        if op.opcode not in ("tuple", "parameter") and not _intermediate(op):
            return False
        if op.opcode != "tuple":
            queue += [u.operation for u in op.result.uses]
    return True


def nested_transpose(outputs: list[Any], tiled: Any, reduction: bool) -> bool:
    """XLA's nested (elemental) transpose hero: a kernel whose hero is a transpose its
    tiled emitter does not take. With no reduction or tiled-transpose hero, XLA's hero
    (`GetRealHeroForMultiOutputFusion`) is the kernel's first output."""
    if tiled is not None or reduction or not outputs:
        return False
    first = outputs[0]
    return getattr(first, "opcode", None) == "transpose" and tiled_transpose_key(first) is None


def nested_transpose_refusal(nested1: bool, nested2: bool, unnested1: bool,
                             unnested2: bool) -> str | None:  # fmt: skip
    """XLA FusionHeroesAreCompatible: a nested transpose hero beside a tiled transpose or
    an unnested reduction hero (`unnested1`, `unnested2`) reads its input in another order,
    so the merged kernel would read the shared input twice; None when compatible."""
    if (nested1 and unnested2) or (unnested1 and nested2):
        return "multi-output fusion of a nested transpose with an unnested hero op"
    return None


def _prod(xs: Any) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
