"""A kernel's heroes and the emitter XLA would pick for it (`HloFusionAnalysis`).

* `heroes(outputs, ids)`: XLA's `FindNonTrivialHero` for each output; `hero_parts` sorts
  them into reductions, (non-bitcast) transposes, scatters and concatenates;
* `choose_emitter`: XLA's `GetEmitterFusionKind` from those heroes (reduction, transpose,
  scatter, concatenate, in_place_dus, input_slices, loop; Triton and custom fusions keep
  their own kind);
* reduction facts (`reduction_dims`, `reduction_faster_than_elemental`,
  `is_unnested_reduction`) and transpose facts (`transpose_tiling`, `is_tiled_transpose`,
  `moves_minor_dim`, `uncoalesced_sources`);
* `EmitterFacts`: what picks a kernel's emitter, in a form two sibling kernels combine.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from hlopass.ir.shape import ELEMENT_BITS, ArrayShape
from hlopass.kernel_structure.shapes import (
    array_operand_shapes,
    operand_shapes,
    transpose_is_bitcast,
    transpose_orders,
)

WARP = 32

_EW_EXTRA = frozenset({"convert", "compare", "select", "clamp", "reduce-precision", "copy"})


def is_elementwise(op: Any) -> bool:
    opc = op.opcode
    if opc in _EW_EXTRA:
        return True
    if opc == "bitcast-convert":
        a, b = operand_shapes(op)[0], op.shape
        return ELEMENT_BITS.get(getattr(a, "element_type", ""), 0) == ELEMENT_BITS.get(
            getattr(b, "element_type", ""), 1
        )
    return "elementwise" in op.spec.traits


# --- heroes ------------------------------------------------------------------------------------


def heroes(outputs: list[Any], member_ids: Any) -> list[Any]:
    """XLA FindNonTrivialHero for each output: walk up through bitcasts, reshapes and
    elementwise ops with a single non-constant operand. A reduce is the hero only when
    every op on the way has one operand (XLA's walk to a reduce is `IsIntermediate` with
    one operand allowed: `multiply(reduce, broadcast(c))` is its own hero, a loop, while
    `negate(reduce)` is a reduction); transposes and concatenates are still found past
    ops with several operands, as XLA's `FindHero` finds them."""
    leaves: list[Any] = []
    for o in outputs:
        leaves += [v.owner for v in o.operands] if o.opcode == "tuple" else [o]
    found = []
    for leaf in leaves:
        h, single = leaf, True
        for _ in range(64):
            opc = h.opcode
            if opc in ("reduce", "transpose", "scatter", "concatenate"):
                break
            if opc in ("bitcast", "reshape") or (is_elementwise(h) and opc != "copy"):
                live = [
                    v.owner
                    for v in h.operands
                    if id(v.owner) in member_ids
                    and v.owner.opcode not in ("constant", "broadcast", "iota", "parameter")
                ]
                if len(live) == 1:
                    single = single and len(h.operands) == 1
                    h = live[0]
                    continue
            break
        found.append(h if single or h.opcode != "reduce" else leaf)
    return found


class HeroParts(NamedTuple):
    """The heroes that decide an emitter, by kind."""

    reduces: list[Any]
    transposes: list[Any]
    scatters: list[Any]
    concats: list[Any]


def hero_parts(found: list[Any], ids: Any = None) -> HeroParts:
    """`found` heroes by kind (bitcast transposes left out); with `ids`, members only."""

    def keep(h: Any) -> bool:
        return ids is None or id(h) in ids

    return HeroParts(
        [h for h in found if h.opcode == "reduce" and keep(h)],
        [
            h for h in found if h.opcode == "transpose" and keep(h) and not transpose_is_bitcast(h)
        ],  # fmt: skip
        [h for h in found if h.opcode == "scatter" and keep(h)],
        [h for h in found if h.opcode == "concatenate" and keep(h)],
    )


# --- reductions --------------------------------------------------------------------------------


def physical_groups(shape: ArrayShape, marked: set[int]) -> list[tuple[bool, int]]:
    """Major-to-minor runs of (marked?, size) over the non-degenerate dims of `shape`."""
    groups: list[tuple[bool, int]] = []
    for d in reversed(shape.minor_to_major):
        size = shape.dims[d]
        if size == 1:
            continue
        m = d in marked
        if groups and groups[-1][0] == m:
            groups[-1] = (m, groups[-1][1] * size)
        else:
            groups.append((m, size))
    return groups


def reduction_dims(reduce: Any) -> tuple[bool, tuple[int, int, int]]:
    """XLA ReductionDimensions: (is_row, [major_reduced, kept, minor_reduced]) for a row
    reduction, (False, [major_kept, reduced, minor_kept]) for a column reduction."""
    inp = operand_shapes(reduce)[0]
    if not isinstance(inp, ArrayShape):
        return True, (1, 1, 1)
    groups = physical_groups(inp, set(reduce.attr("dimensions") or ()))
    if not groups:
        return True, (1, 1, 1)
    if groups[-1][0]:  # minor-most run reduced: row reduction
        minor = groups[-1][1]
        kept = math.prod(s for r, s in groups[:-1] if not r)
        major = math.prod(s for r, s in groups[:-1] if r)
        return True, (major, kept, minor)
    minor_kept = groups[-1][1]
    reduced = math.prod(s for r, s in groups if r)
    major_kept = math.prod(s for r, s in groups[:-1] if not r)
    return False, (major_kept, reduced, minor_kept)


def reduction_faster_than_elemental(is_row: bool, dims: tuple[int, int, int]) -> bool:
    if is_row:
        return dims[2] >= WARP or WARP % dims[2] == 0
    major, minor = dims[1], dims[2]
    elemental = (major < WARP or (major < 2 * WARP and minor < WARP)
                 or (major < 4 * WARP and minor < 8) or (major < 8 * WARP and minor < 3))  # fmt: skip
    return not elemental


def dims_consecutive(shape: ArrayShape, dims: Sequence[int]) -> bool:
    """XLA LayoutUtil::AreDimensionsConsecutive: `dims` sit next to each other in the
    layout (size-1 dims count)."""
    pos = sorted(shape.minor_to_major.index(d) for d in dims)
    return all(b == a + 1 for a, b in zip(pos, pos[1:], strict=False))


def is_unnested_reduction(op: Any) -> bool:
    """XLA `IsReductionFromOrToContiguousDimensions`: the kept or the reduced dims are
    consecutive in the operand's layout, and the reduction emitter beats the loop one."""
    if op.opcode != "reduce":
        return False
    inp = operand_shapes(op)[0]
    if isinstance(inp, ArrayShape):
        reduced = set(op.attr("dimensions") or ())
        kept = [d for d in range(len(inp.dims)) if d not in reduced]
        if not (dims_consecutive(inp, kept) or dims_consecutive(inp, sorted(reduced))):
            return False
    is_row, dims = reduction_dims(op)
    return reduction_faster_than_elemental(is_row, dims)


# --- transposes --------------------------------------------------------------------------------


class TransposeTiling(NamedTuple):
    """A tiled transpose: sizes of the runs of dims that move together (output order), which
    run is the input's and which the output's minor one, the tile edge."""

    sizes: list[int]
    in_minor: int
    out_minor: int
    tile: int


def dim_runs(out_order: Sequence[int], in_order: Sequence[int]) -> list[list[int]]:
    """A transpose's dims in output order, cut into runs that are consecutive in the input
    order as well: the dims the transpose moves together (XLA's normalized transpose)."""
    pos = {d: i for i, d in enumerate(in_order)}
    runs: list[list[int]] = []
    for d in out_order:
        if runs and pos[d] == pos[runs[-1][-1]] + 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    return runs


def _tiled_size(a: int, b: int) -> bool:
    """XLA GetDescriptionForTiledTransposeEmitter's size rule for the two swapped dims: both
    at least kMinDimensionToTransposeTiled (16), or both at least 8 with a product of at
    least kMinTotalDimensionsToTransposeTiled (64 x 128)."""
    return (a >= 16 and b >= 16) or (a >= 8 and b >= 8 and a * b >= 64 * 128)


def transpose_tiling(op: Any, size_rule: bool = False) -> TransposeTiling | None:
    """How XLA's tiled transpose emitter would tile `op`, None if it is not a tiled
    transpose (with `size_rule`, also None for the small ones XLA leaves to the loop
    emitter)."""
    orders = transpose_orders(op)
    if orders is None:
        return None
    out_order, in_order = orders
    src = array_operand_shapes(op)[0]  # an array: transpose_orders gave orders
    if not out_order or out_order == in_order:
        return None
    pos = {d: i for i, d in enumerate(in_order)}
    groups = dim_runs(out_order, in_order)
    sizes = [math.prod(src.dims[d] for d in g) for g in groups]
    out_minor = len(groups) - 1
    in_minor = max(range(len(groups)), key=lambda i: pos[groups[i][-1]])
    if in_minor == out_minor:
        return None
    if size_rule and not _tiled_size(sizes[in_minor], sizes[out_minor]):
        return None  # XLA leaves small transposes to the loop emitter
    bits = ELEMENT_BITS.get(src.element_type, 32)
    tile = WARP * max(1, min(4, 32 // max(bits, 1)))
    return TransposeTiling(sizes, in_minor, out_minor, tile)


def is_tiled_transpose(op: Any) -> bool:
    return (
        op.opcode == "transpose"
        and not transpose_is_bitcast(op)
        and transpose_tiling(op, size_rule=True) is not None
    )


def moves_minor_dim(op: Any) -> bool:
    """XLA TransposesMinorDimension for transposes and layout-changing copies."""
    opc = op.opcode
    src = operand_shapes(op)[0] if op.operands else None
    dst = op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape) or not src.dims:
        return False
    if opc == "transpose":
        if transpose_is_bitcast(op):
            return False
        perm = op.attr("dimensions") or ()
        minor_out = next((d for d in dst.minor_to_major if dst.dims[d] != 1), None)
        minor_in = next((d for d in src.minor_to_major if src.dims[d] != 1), None)
        return minor_out is not None and perm[minor_out] != minor_in
    if opc == "copy":
        minor_out = next((d for d in dst.minor_to_major if dst.dims[d] != 1), None)
        minor_in = next((d for d in src.minor_to_major if src.dims[d] != 1), None)
        return minor_out != minor_in
    return False


def uncoalesced_sources(members: list[Any], sources: list[Any], member_ids: set[int]) -> set[int]:
    """Inputs from which a minor-dimension transpose (not of a broadcast or iota) is reached."""
    reach: dict[int, set[int]] = {id(s): {id(s)} for s in sources}
    bad: set[int] = set()
    for op in members:
        if op.opcode == "parameter":
            continue
        acc: set[int] = set()
        for v in op.operands:
            r = reach.get(id(v.owner))
            if r:
                acc |= r
        if (op.opcode in ("transpose", "copy") and moves_minor_dim(op)
                and op.operands[0].owner.opcode not in ("broadcast", "iota")):  # fmt: skip
            bad |= reach.get(id(op.operands[0].owner), set())
        reach[id(op)] = acc
    return bad


# --- the emitter -------------------------------------------------------------------------------

FIND = object()
"""`slices` of `choose_emitter` when the caller does not know it: look at the outputs."""


def slices_of_one_input(outputs: list[Any]) -> Any:
    """XLA IsInputFusibleSlices (the horizontal fusion's sliced form): every root a slice
    of one common input; that input's shape (the launch grid of XLA's input-slices
    emitter, one thread per element of the input), else None."""
    roots: list[Any] = []
    for o in outputs:
        roots += [v.owner for v in o.operands] if o.opcode == "tuple" else [o]
    if not roots or any(getattr(r, "opcode", None) != "slice" for r in roots):
        return None
    src = roots[0].operands[0]
    if any(r.operands[0] is not src for r in roots):
        return None
    return src.type.data


def choose_emitter(kind: str, outputs: list[Any], parts: HeroParts, slices: Any = FIND) -> str:
    """XLA HloFusionAnalysis::GetEmitterFusionKind, from the heroes of the outputs.
    `slices`: `slices_of_one_input(outputs)` when the caller knows it (a merged kernel
    whose roots slice one value through different parameters)."""
    if kind in ("triton", "triton_gemm", "custom_fusion"):
        return kind
    if any(is_unnested_reduction(r) for r in parts.reduces):  # XLA IsRealReductionHero
        return "reduction"
    if kind in ("input", "") and any(
        transpose_tiling(t, kind == "") is not None for t in parts.transposes
    ):
        return "transpose"
    n_roots = sum(len(o.operands) if o.opcode == "tuple" else 1 for o in outputs)
    if n_roots == 1:
        if parts.scatters:
            return "scatter"
        if parts.concats:
            return "concatenate"
        if outputs[0].opcode == "dynamic-update-slice":
            return "in_place_dus"
    # XLA takes the input-slices emitter only for several roots; one slice root is a loop
    if n_roots > 1 and (slices_of_one_input(outputs) if slices is FIND else slices) is not None:
        return "input_slices"
    return "loop"


def emitter_kind(members: Sequence[Any], outputs: Sequence[Any]) -> str:
    """The emitter XLA would pick for `members` writing `outputs` (HloFusionAnalysis):
    reduction, transpose, scatter, concatenate, in_place_dus or loop."""
    ids = {id(m) for m in members}
    parts = hero_parts(heroes(list(outputs), ids), ids)
    return choose_emitter("", list(outputs), parts)


INPUT_EMITTERS = frozenset({"reduction", "transpose", "scatter", "concatenate", "input_slices"})


def fusion_kind(members: Sequence[Any], outputs: Sequence[Any]) -> str:
    """XLA's `ChooseKind`: kInput for reduction, tiled-transpose, scatter and concatenate
    heroes, else kLoop."""
    return "kInput" if emitter_kind(members, outputs) in INPUT_EMITTERS else "kLoop"


# --- emitter facts that siblings combine --------------------------------------------------------

NOT_SLICES = object()


@dataclass(frozen=True)
class _Internal:
    """The key of a sliced value computed inside the kernel (not one of its inputs): equal
    only to itself, never rekeyed onto another kernel's operands."""

    op_id: int


"""`EmitterFacts.slices` of a kernel whose roots are not all slices of one value."""


@dataclass(frozen=True)
class EmitterFacts:
    """What picks a kernel's emitter and launch grid: its outputs, their heroes (by kind) and
    the key of the one value every root slices (`NOT_SLICES` if none).

    A sibling does not change a kernel's heroes (a hero walk stops at parameters), so two
    siblings' facts merge by concatenation; the sliced value is compared by the key of the
    value outside (`key_of(source op)`), not by parameter."""

    outputs: tuple[Any, ...]
    reduces: tuple[Any, ...]
    transposes: tuple[Any, ...]
    scatters: tuple[Any, ...]
    concats: tuple[Any, ...]
    slices: Any
    slices_shape: Any

    @staticmethod
    def of(members: list[Any], outputs: list[Any], key_of: Callable[[Any], Hashable]) -> EmitterFacts:  # fmt: skip
        ids = {id(m) for m in members}
        parts = hero_parts(heroes(outputs, ids), ids)
        shape = slices_of_one_input(outputs)
        slices: Any = NOT_SLICES
        if shape is not None:
            first = outputs[0].operands[0].owner
            slices = key_of(first)
            if slices is None:  # the kernel computes what it slices: no other kernel's
                slices = _Internal(id(first))
        return EmitterFacts(tuple(outputs), *map(tuple, parts), slices, shape)  # type: ignore[arg-type]

    def rekeyed(self, key: Callable[[Hashable], Hashable]) -> EmitterFacts:
        if self.slices is NOT_SLICES or isinstance(self.slices, _Internal):
            return self
        return EmitterFacts(self.outputs, self.reduces, self.transposes, self.scatters,
                            self.concats, key(self.slices), self.slices_shape)  # fmt: skip

    def moved(self, copies: dict[int, Any]) -> EmitterFacts:
        """The same facts once the kernel's instructions were copied (id -> copy)."""
        if not copies:
            return self

        def m(xs: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(copies.get(id(x), x) for x in xs)

        return EmitterFacts(m(self.outputs), m(self.reduces), m(self.transposes),
                            m(self.scatters), m(self.concats), self.slices, self.slices_shape)  # fmt: skip

    def merged(self, other: EmitterFacts) -> EmitterFacts:
        same = self.slices is not NOT_SLICES and self.slices == other.slices
        return EmitterFacts(
            self.outputs + other.outputs,
            self.reduces + other.reduces,
            self.transposes + other.transposes,
            self.scatters + other.scatters,
            self.concats + other.concats,
            self.slices if same else NOT_SLICES,
            self.slices_shape if same else None,
        )

    def parts(self) -> HeroParts:
        return HeroParts(list(self.reduces), list(self.transposes), list(self.scatters),
                         list(self.concats))  # fmt: skip

    def emitter(self) -> str:
        return choose_emitter("", list(self.outputs), self.parts(), slices=self.slices_shape)
