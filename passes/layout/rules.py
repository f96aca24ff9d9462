"""XLA's GPU layout constraints (xla/service/gpu/transforms/layout_assignment.cc), restated.

Each function returns layouts (minor-to-major tuples) an instruction wants for its operands
and result; the assignment engine (`engine.py`) turns them into requests and copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hlopass.attrs import ConvDims
from hlopass.cost.layouts import conv_roles
from hlopass.dialects.hlo import HloOp
from hlopass.shape import ArrayShape, Shape

from .layouts import (
    M2M,
    default_m2m,
    from_major_to_minor,
    m2m_of,
    value_shape,
    with_default,
    with_m2m,
)

# CUDA compute capability (major) of each device the cost model knows.
COMPUTE_CAPABILITY: dict[str, int] = {
    "v100": 7, "a100_sxm_80": 8, "a6000": 8, "h100_sxm": 9, "h100_pcie": 9, "b200": 10,
}  # fmt: skip
VOLTA, HOPPER, BLACKWELL = 7, 9, 10

ROW_REDUCTION_MIN = 32
"""Reduced elements from which XLA asks for a row-reduction layout (PropagateReductionLayoutToOperand)."""

FP8_DOT_TYPES = frozenset({"f8e4m3fn", "f8e5m2fnuz"})

CONV_CHOICES = ("xla", "nchw", "nhwc", "keep")
"""Per-convolution plans: XLA's heuristic, all NCHW, all NHWC, the operands' own layouts."""


@dataclass(frozen=True)
class ConvLayouts:
    input: M2M
    kernel: M2M
    output: M2M


def conv_nhwc(op: HloOp) -> ConvLayouts:
    """Channel dims minor in cuDNN's roles: (N, spatial.., C) for each tensor, (O, spatial..,
    I) for the filter; the roles follow the kind of cuDNN call (`conv_roles`)."""
    _, roles = conv_roles(op)
    lhs, rhs, out = (from_major_to_minor([n, *sp, c]) for n, c, sp in roles)
    return ConvLayouts(lhs, rhs, out)


def conv_nchw(op: HloOp) -> ConvLayouts:
    """Spatial dims minor in cuDNN's roles: (N, C, spatial..) for each tensor."""
    _, roles = conv_roles(op)
    lhs, rhs, out = (from_major_to_minor([n, c, *sp]) for n, c, sp in roles)
    return ConvLayouts(lhs, rhs, out)


def conv_prefers_nhwc(element_type: str, spatial_dims: int, device: str) -> bool:
    """XLA's HeuristicLayoutAssignment: integers and fp8 NHWC; Hopper+ NHWC except f64;
    before Hopper NHWC only for 2-D f16/bf16 convolutions on Volta+."""
    cc = COMPUTE_CAPABILITY.get(device, HOPPER)
    if element_type.startswith(("s", "u")) or element_type.startswith("f8"):
        return True
    if cc >= HOPPER:
        return element_type != "f64"
    return element_type in ("f16", "bf16") and cc >= VOLTA and spatial_dims == 2


def conv_layouts(op: HloOp, device: str, choice: str = "xla") -> ConvLayouts:
    if choice == "keep":
        lhs, rhs = value_shape(op.operands[0]), value_shape(op.operands[1])
        return conv_keep(op, lhs, rhs)  # type: ignore[arg-type]
    if choice == "nchw":
        return conv_nchw(op)
    if choice == "nhwc":
        return conv_nhwc(op)
    lhs = value_shape(op.operands[0])
    assert isinstance(lhs, ArrayShape)
    labels: ConvDims = op.attr("dim_labels")
    nhwc = conv_prefers_nhwc(lhs.element_type, len(labels.input[2]), device)
    return conv_nhwc(op) if nhwc else conv_nchw(op)


def conv_keep(op: HloOp, lhs: ArrayShape, rhs: ArrayShape) -> ConvLayouts:
    """No copies for the operands: their own layouts; the result with its (N, C, spatial)
    roles in the order the lhs has them."""
    _, ((n, c, sp), _k, (on, oc, osp)) = conv_roles(op)
    where = {n: on, c: oc, **dict(zip(sp, osp, strict=True))}
    return ConvLayouts(m2m_of(lhs), m2m_of(rhs), tuple(where[d] for d in m2m_of(lhs)))


# --- dots ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DotSide:
    batch: tuple[int, ...]
    contracting: tuple[int, ...]
    free: tuple[int, ...]


def dot_sides(op: HloOp) -> tuple[DotSide, DotSide]:
    out = []
    for i, prefix in enumerate(("lhs", "rhs")):
        shape = value_shape(op.operands[i])
        assert isinstance(shape, ArrayShape)
        batch = tuple(op.attr(f"{prefix}_batch_dims") or ())
        contracting = tuple(op.attr(f"{prefix}_contracting_dims") or ())
        free = tuple(d for d in range(shape.rank) if d not in batch and d not in contracting)
        out.append(DotSide(batch, contracting, free))
    return out[0], out[1]


def _groups_in_order(
    m2m: M2M, dims_of: Sequence[tuple[int, ...]], sizes: Sequence[int]
) -> list[int]:
    """Group index of each non-degenerate dim, major to minor."""
    group = {d: g for g, ds in enumerate(dims_of) for d in ds}
    return [group[d] for d in reversed(m2m) if sizes[d] != 1 and d in group]


def matrix_layout_ok(shape: ArrayShape, m2m: M2M, groups: Sequence[tuple[int, ...]]) -> bool:
    """XLA's MatrixLayout::For succeeds: the batch group (groups[0]) most major, every group
    contiguous in memory, a batch dim never minor-most."""
    seq = _groups_in_order(m2m, groups, shape.dims)
    runs: list[int] = []
    for g in seq:
        if not runs or runs[-1] != g:
            if g in runs:
                return False
            runs.append(g)
    if 0 in runs and runs[0] != 0:
        return False
    return not (runs and runs[-1] == 0)


def dot_operand_layout(op: HloOp, i: int, device: str) -> M2M | None:
    """XLA's AddDotBackendConstraints for operand `i`: None when left free."""
    lhs, rhs = dot_sides(op)
    side = (lhs, rhs)[i]
    shape = value_shape(op.operands[i])
    assert isinstance(shape, ArrayShape)
    types = {value_shape(o).element_type for o in op.operands[:2]}  # type: ignore[attr-defined]
    s8 = types == {"s8"} and op.shape.element_type == "s32"  # type: ignore[attr-defined]
    fp8 = types <= FP8_DOT_TYPES and COMPUTE_CAPABILITY.get(device, HOPPER) < BLACKWELL
    if s8 or fp8:
        current = m2m_of(shape)
        k = len(side.contracting)
        if set(current[:k]) == set(side.contracting) and matrix_layout_ok(
            shape, current, (side.batch, side.free, side.contracting)
        ):
            return current
        return from_major_to_minor([*side.batch, *side.free, *side.contracting])
    if side.batch or len(side.contracting) > 1 or len(side.free) > 1:
        default = default_m2m(shape.rank)
        if matrix_layout_ok(shape, default, (side.batch, side.contracting, side.free)):
            return default
        return from_major_to_minor([*side.batch, *side.contracting, *side.free])
    return None


def dot_output_groups(op: HloOp) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Result dims: (batch, lhs free, rhs free)."""
    lhs, rhs = dot_sides(op)
    nb, nl = len(lhs.batch), len(lhs.free)
    return (
        tuple(range(nb)),
        tuple(range(nb, nb + nl)),
        tuple(range(nb + nl, nb + nl + len(rhs.free))),
    )


def dot_output_constrained(op: HloOp) -> bool:
    lhs, rhs = dot_sides(op)
    return bool(lhs.batch) or len(lhs.free) > 1 or len(rhs.free) > 1


def dot_can_produce(op: HloOp, m2m: M2M) -> bool:
    """XLA's DotCanSupportShapeWithLayout for the result."""
    shape = op.shape
    assert isinstance(shape, ArrayShape)
    b, lf, rf = dot_output_groups(op)
    return matrix_layout_ok(shape, m2m, (b, lf, rf))


# --- other backend constraints (AddBackendConstraints besides conv and dot) -----------------

MEMORY_PLACEMENT_TARGETS = frozenset({"MoveToHost", "MoveToDevice"})


@dataclass(frozen=True)
class Fixed:
    """Layouts an instruction must have: its result (None: left as planned) and, by operand
    index, the layouts its operands must come in."""

    result: Shape | None
    operands: dict[int, Shape]


def fortran_m2m(rank: int) -> M2M:
    """The default layout with the two minor dims swapped (XLA's SetFortranLayout)."""
    m2m = list(default_m2m(rank))
    if rank >= 2:
        m2m[0], m2m[1] = m2m[1], m2m[0]
    return tuple(m2m)


def _arrays_default(op: HloOp, which: Sequence[int] | None = None) -> dict[int, Shape]:
    idx = range(len(op.operands)) if which is None else which
    out: dict[int, Shape] = {}
    for i in idx:
        s = value_shape(op.operands[i])
        if isinstance(s, ArrayShape) and s.element_type not in ("token", "opaque"):
            out[i] = with_default(s)
    return out


def fixed_layouts(op: HloOp) -> Fixed | None:
    """XLA's GPU constraints on sort, fft, triangular-solve, TopK, memory-placement custom
    calls, send/recv and rank-changing bitcast-converts; None for anything else."""
    opc = op.opcode
    shape = op.shape
    if opc == "sort":
        # keys of rank > 1: every operand and result in the default layout (rank 1 has no other)
        return Fixed(with_default(shape), _arrays_default(op))
    if opc == "fft":
        return Fixed(with_default(shape), _arrays_default(op, [0]))  # cuFFT: dim 0 major
    if opc == "triangular-solve":
        assert isinstance(shape, ArrayShape)
        ops = {}
        for i in (0, 1):
            s = value_shape(op.operands[i])
            assert isinstance(s, ArrayShape)
            ops[i] = with_m2m(s, fortran_m2m(s.rank))
        return Fixed(with_m2m(shape, fortran_m2m(shape.rank)), ops)
    if opc == "custom-call":
        target = op.attr("custom_call_target") or ""
        if target == "TopK":  # default result; it cannot change layout, so neither operand
            return Fixed(with_default(shape), _arrays_default(op))
        if target in MEMORY_PLACEMENT_TARGETS:  # no transposes on host memory
            return Fixed(with_default(shape), _arrays_default(op, [0]))
        return None
    if opc == "send":
        return Fixed(None, _arrays_default(op, [0]))
    if opc == "recv":
        return Fixed(with_default(shape), {})
    if opc == "bitcast-convert":
        return bitcast_convert_layouts(op)
    return None


def bitcast_convert_layouts(op: HloOp) -> Fixed | None:
    """A bitcast-convert between element sizes: the extra (last) dim of the larger-rank side
    most minor, the other side that layout without it (so it stays a no-op)."""
    src, dst = value_shape(op.operands[0]), op.shape
    if not isinstance(src, ArrayShape) or not isinstance(dst, ArrayShape) or src.rank == dst.rank:
        return None
    larger, smaller = (src, dst) if src.rank > dst.rank else (dst, src)
    changed = larger.rank - 1
    big = (changed, *(d for d in m2m_of(larger) if d != changed))
    small = tuple(d for d in big if d != changed)
    big_shape, small_shape = with_m2m(larger, big), with_m2m(smaller, small)
    if larger is src:
        return Fixed(small_shape, {0: big_shape})
    return Fixed(big_shape, {0: small_shape})
