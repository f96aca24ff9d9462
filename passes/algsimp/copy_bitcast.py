"""`algsimp` family: moving a copy across a bitcast (XLA's `SwapCopyBitcastCopy`).

In `copy(bitcast(copy(x)))` the two copies may merge once they are next to each other: the
bitcast is rebuilt on `x` itself (`copy(bitcast'(x))`), or the first copy is rebuilt into
the layout the last one asks for (`bitcast(copy'(x))`). Both need the bitcast's dims to be a
grouping of the copied dims along memory order (XLA's dim map of a bitcast), and the
rebuilt op a layout that keeps each group's dims in order; with tiled layouts, the tiles
must line up as XLA checks them.
"""

from __future__ import annotations

from dataclasses import replace

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, Layout
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import src
from hlopass.rewriting import owner, value_shape


def bitcast_dim_map(bitcast: ArrayShape, operand: ArrayShape) -> list[list[int]] | None:
    """For each dim of `operand`, the dims of `bitcast` it is split into or merged with,
    walking both shapes from the most minor dim (XLA's `ComputeBitcastDimMap`; size-1
    operand dims map to nothing). None where a group of dims is re-partitioned (e.g.
    [4,4] as [2,8]) or the sizes run out."""
    out: list[list[int]] = [[] for _ in operand.dims]
    b_order, o_order = bitcast.minor_to_major, operand.minor_to_major
    b_size = o_size = 1
    pos, o_dim = -1, -1
    for b_dim in b_order:
        size = bitcast.dims[b_dim]
        if pos >= operand.rank:
            if size != 1:
                return None  # (the bitcast is larger than its operand)
            continue
        prev, b_size = b_size, b_size * size
        if o_size < b_size and prev < o_size:
            return None  # re-partitioned
        while pos < operand.rank:
            if pos < 0 or o_size < b_size:
                pos += 1
                if pos >= operand.rank:
                    return None
                o_dim = o_order[pos]
                o_size *= operand.dims[o_dim]
                if o_size > b_size and operand.dims[o_dim] < size and pos > 0:
                    return None  # re-partitioned
            if operand.dims[o_dim] > 1:
                out[o_dim].append(b_dim)
            if o_size >= b_size:
                if operand.dims[o_dim] == 1:
                    pos += 1
                break
    return out


def inverted(shape: ArrayShape, rank: int, dim_map: list[list[int]]) -> list[list[int]]:
    """The other direction of a dim map of `shape`: for each of the `rank` dims of the
    bitcast, the dims of `shape` mapping onto it, from the most minor (XLA's
    `InvertBitcastDimMap`)."""
    out: list[list[int]] = [[] for _ in range(rank)]
    for d in shape.minor_to_major:
        for k in dim_map[d]:
            out[k].append(d)
    return out


def _tile(shape: ArrayShape) -> tuple[int, ...] | None:
    layout = shape.layout
    if layout is None or not layout.tiles:
        return None
    return tuple(layout.tiles[0].dims)  # type: ignore[arg-type]


def tiling_kept(bitcast: ArrayShape, operand: ArrayShape, dim_map: list[list[int]]) -> bool:
    """The first tile of `operand` and `bitcast` cover the same elements (XLA's
    `ValidateTilingOfBitcast`): equal tile sizes, and each tiled dim split or merged only
    where the major tile dim divides it evenly. True when either is untiled."""
    t_op, t_bc = _tile(operand), _tile(bitcast)
    if t_op is None or t_bc is None:
        return True
    if len(t_bc) != len(t_op):
        return False
    k = len(t_op) - 1
    for d in operand.minor_to_major:
        if t_op[k] != t_bc[k]:
            return False
        to = dim_map[d] if d < len(dim_map) else []
        if not to:
            if t_op[k] != 1:
                return False
        elif to[0] >= bitcast.rank or not _tiled_dim_kept(
            bitcast.dims[to[0]], operand.dims[d], len(to), t_op[k], k
        ):
            return False
        k -= 1
        if k < 0:
            break
    return True


def _tiled_dim_kept(b: int, o: int, parts: int, tile: int, k: int) -> bool:
    """Tiled operand dim of size `o` (tile `tile`, tile position `k`) as bitcast dim `b`."""
    if b < o:  # split
        return parts > 1 and k == 0 and b % tile == 0 and o % b == 0
    if b > o:  # merged
        return k == 0 and b % o == 0 and o % tile == 0
    return True


def reshaped_layout(
    original: ArrayShape, result: ArrayShape, o_map: list[list[int]], r_map: list[list[int]]
) -> ArrayShape | None:
    """`result` with a layout ordering its dims as `original`'s layout orders the dims
    they map from (`o_map`: original to result dims, `r_map` back; size-1 dims last, as
    majors). None where the groups would need non-contiguous or reordered original dims
    (XLA's `ReshapeLayoutDimensions`)."""
    order = original.minor_to_major
    m2m = list(result.minor_to_major)
    pos = -1
    for i, o_dim in enumerate(order):
        for r_dim in o_map[o_dim] if o_dim < len(o_map) else ():
            if pos < 0 or m2m[pos] != r_dim:
                pos += 1
                if pos >= len(m2m):
                    return None
                if result.dims[r_dim] == 1:
                    continue  # (size-1 dims go last)
                m2m[pos] = r_dim
            group = r_map[r_dim]
            if (
                len(group) > 1
                and i > 0
                and not _group_in_order(group, r_dim, o_dim, order[i - 1], o_map)
            ):
                return None
    for d in range(result.rank):
        if result.dims[d] == 1:
            pos += 1
            if pos >= len(m2m):
                return None
            m2m[pos] = d
    if pos + 1 != result.rank or sorted(m2m) != list(range(result.rank)):
        return None
    layout = result.layout or Layout(tuple(m2m))
    return result.with_layout(replace(layout, minor_to_major=tuple(m2m)))


def _group_in_order(group: list[int], r_dim: int, o_dim: int, prev: int,
                   o_map: list[list[int]]) -> bool:  # fmt: skip
    """`o_dim`, one of the original dims merged into `r_dim` (`group`, minor first), is
    the group's first or comes right after the dim before it in memory (`prev`), and
    `prev`, where it is in the group, is followed there by `o_dim`."""
    if group[0] != o_dim and (not o_map[prev] or o_map[prev][0] != r_dim):
        return False
    for k, d in enumerate(group):
        if d == prev and (k == len(group) - 1 or group[k + 1] != o_dim):
            return False
    return True


def _plain_array(s: object) -> bool:
    """A static array shape in the default memory space whose tiles have no `*` dims."""
    if not isinstance(s, ArrayShape) or s.is_dynamic:
        return False
    layout = s.layout
    if layout is None:
        return True
    return not layout.memory_space and all(None not in t.dims for t in layout.tiles)


class SwapCopyBitcastCopy(Simplification):
    """`copy(bitcast(copy(x)))` -> `copy(bitcast'(x))` when the bitcast's dims group x's dims
    as they group the inner copy's and x's tiling allows it, else -> `bitcast(copy'(x))`
    with the copy going straight to the layout the outer copy asks for (XLA's
    `SwapCopyBitcastCopy`; bitcasts between the bitcast and the inner copy are looked
    through). The new op's layout orders each group of dims as the old side's layout
    does (`reshaped_layout`); where that fails the rewrite stops, as XLA's does, without
    trying the second form.

    Guards: with `is-layout-sensitive` only (a bitcast means its layouts: before layout
    assignment they may still change); one element type; static shapes; no memory space
    on any of them (XLA refuses host-memory copies; hlopass refuses every memory space);
    tiles as XLA's `ValidateTilingOfBitcast` checks them."""

    OPCODES = ("copy",)
    OPERAND_FROM = frozenset({"bitcast"})

    def rewrite(self, op: HloOp):
        if not self.opts.is_layout_sensitive:
            return None
        bitcast = src(op.operands[0], "bitcast")
        if bitcast is None:
            return None
        inner = owner(bitcast.operands[0])
        while inner is not None and inner.OPCODE == "bitcast":
            inner = owner(inner.operands[0])
        if inner is None or inner.OPCODE != "copy":
            return None
        x = inner.operands[0]
        shapes = (value_shape(x), inner.shape, bitcast.shape, op.shape)
        if not all(_plain_array(s) for s in shapes):
            return None
        sx, sc, sb, so = shapes
        assert isinstance(sx, ArrayShape) and isinstance(sc, ArrayShape)
        assert isinstance(sb, ArrayShape) and isinstance(so, ArrayShape)
        if len({s.element_type for s in (sx, sc, sb, so)}) != 1 or sc.num_elements == 0:
            return None
        o_map = bitcast_dim_map(sb, sc)
        if o_map is None or not tiling_kept(sb, sc, o_map):
            return None
        r_map = inverted(sc, sb.rank, o_map)
        if tiling_kept(sb, sx, o_map):
            new_shape = reshaped_layout(sx, sb, o_map, r_map)
            if new_shape is None:
                return None
            moved = self.new("bitcast", [x], new_shape, like=bitcast)
            return self.new("copy", [moved.result], so, like=op)
        if tiling_kept(sc, so, r_map):
            new_shape = reshaped_layout(so, sc, r_map, o_map)
            if new_shape is None:
                return None
            copied = self.new("copy", [x], new_shape, like=op)
            return self.new("bitcast", [copied.result], so, like=op)
        return None


PATTERNS: tuple[type[Simplification], ...] = (SwapCopyBitcastCopy,)
"""This family's rewrites, in the order they fire."""
