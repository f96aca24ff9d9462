"""XLA's GPU layout constraints (xla/service/gpu/transforms/layout_assignment.cc), restated.

Each function returns layouts (minor-to-major tuples) an instruction wants for its operands
and result; the assignment engine (`engine.py`) turns them into requests and copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.ir import Operation, SSAValue

from hlopass.cost.layouts import COMPUTE_CAPABILITY as LAYOUT_CC
from hlopass.cost.layouts import conv_roles
from hlopass.dialects.hlo import HloOp
from hlopass.ir.attrs import ConvDims
from hlopass.ir.shape import ArrayShape, Shape, TupleShape

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
COMPUTE_CAPABILITY: dict[str, int] = LAYOUT_CC
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


def matrix_layout_ok(shape: ArrayShape, m2m: M2M, groups: Sequence[tuple[int, ...]]) -> bool:
    """XLA's MatrixLayout::For succeeds for groups (batch, rows, cols): each group's dims
    physically consecutive in their listed order (major to minor), and the batch group not
    the most minor of the three (a missing group counts as most major)."""
    batch, rows, cols = (tuple(g) for g in groups)
    order: list[int] = []
    i = 0
    while i < len(m2m):
        for gid, group in ((1, rows), (2, cols), (0, batch)):
            if group and m2m[i] == group[-1]:
                if tuple(m2m[i : i + len(group)]) != group[::-1]:
                    return False
                order.append(gid)
                i += len(group)
                break
        else:
            return False
    order += [gid for gid, group in ((2, cols), (1, rows), (0, batch)) if not group]
    return order[0] != 0


def dot_operand_layout(op: HloOp, i: int, device: str, existing: M2M | None = None,
                       pack_k: bool = False) -> M2M | None:  # fmt: skip
    """XLA's AddDotBackendConstraints for operand `i`: None when left free. `existing`: the
    operand's layout where it already has one (a parameter's), kept when gemm can read it;
    `pack_k`: operands of sub-byte types (through unary/elementwise chains) take their
    contracting dims minor (xla_gpu_experimental_pack_dot_operands_along_k_dimension)."""
    lhs, rhs = dot_sides(op)
    side = (lhs, rhs)[i]
    shape = value_shape(op.operands[i])
    assert isinstance(shape, ArrayShape)
    types = {value_shape(o).element_type for o in op.operands[:2]}  # type: ignore[attr-defined]
    s8 = types == {"s8"} and op.shape.element_type == "s32"  # type: ignore[attr-defined]
    fp8 = types <= FP8_DOT_TYPES and COMPUTE_CAPABILITY.get(device, HOPPER) < BLACKWELL
    if s8 or fp8 or (pack_k and is_packed(op.operands[i])):
        k = len(side.contracting)
        if (existing is not None and set(existing[:k]) == set(side.contracting)
                and matrix_layout_ok(shape, existing, (side.batch, side.free, side.contracting))):  # fmt: skip
            return existing
        return from_major_to_minor([*side.batch, *side.free, *side.contracting])
    if side.batch or len(side.contracting) > 1 or len(side.free) > 1:
        groups = (side.batch, side.contracting, side.free)
        if existing is not None and matrix_layout_ok(shape, existing, groups):
            return existing
        default = default_m2m(shape.rank)
        if matrix_layout_ok(shape, default, groups):
            return default
        return from_major_to_minor([*side.batch, *side.contracting, *side.free])
    return None


SUB_BYTE_TYPES = frozenset({"s1", "s2", "s4", "u1", "u2", "u4", "f4e2m1fn"})


def is_packed(v: SSAValue) -> bool:
    """XLA's IsPackedInstruction: a sub-byte value up a chain of unary ops, or of either
    operand of an elementwise binary op on the way."""
    seen: set[Operation] = set()

    def walk(v: SSAValue) -> bool:
        op: Any = v.owner  # an HloOp, or a block (a computation's argument)
        while isinstance(op, HloOp) and op not in seen:
            seen.add(op)
            shape = op.shape
            if isinstance(shape, ArrayShape) and shape.element_type in SUB_BYTE_TYPES:
                return True
            if len(op.operands) == 1:
                op = op.operands[0].owner
                continue
            if len(op.operands) == 2 and "elementwise" in op.spec.traits:
                return walk(op.operands[0]) or walk(op.operands[1])
            return False
        return False

    return walk(v)


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
TOPK_TARGETS = frozenset({"TopK", "__gpu$TopK"})
CUB_SORT_TARGET = "xla.gpu.ext.cub_sort_unassigned_scratch_size"
"""The CUB radix sort SortRewriter makes of a sort (before its scratch size is set)."""
CUDNN_CONV_ROLES: dict[str, tuple[str, str, str]] = {
    "__cudnn$convForward": ("input", "filter", "output"),
    "__cudnn$convForwardGraph": ("input", "filter", "output"),
    "__cudnn$convBiasActivationForward": ("input", "filter", "output"),
    "__cudnn$convBackwardInput": ("output", "filter", "input"),
    "__cudnn$convBackwardFilter": ("input", "output", "filter"),
}
"""cuDNN convolution calls (ConvRewriter's output) -> the roles of operand 0, operand 1 and
the result in the forward convolution the dim labels describe: input (N, C, spatial),
filter (O, I, spatial), output (N, C, spatial)."""


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


def fixed_layouts(op: HloOp, device: str = "h100_sxm") -> Fixed | None:
    """XLA's GPU constraints on sort (and CUB's), fft, triangular-solve, TopK, cuDNN forward
    convolution calls, memory-placement and layout-constrained custom calls, send/recv and
    rank-changing bitcast-converts; None for anything else."""
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
        if target in TOPK_TARGETS:  # default result; it cannot change layout, so neither operand
            return Fixed(with_default(shape), _arrays_default(op))
        if target == CUB_SORT_TARGET:  # a sort: keys, values and sorted outputs default
            return Fixed(with_default(shape), _arrays_default(op))
        if target in MEMORY_PLACEMENT_TARGETS:  # no transposes on host memory
            return Fixed(with_default(shape), _arrays_default(op, [0]))
        if target in CUDNN_CONV_ROLES and op.attr("dim_labels") is not None:
            return cudnn_conv_layouts(op, device)
        constraints = op.attr("operand_layout_constraints")
        if constraints is not None:  # a layout-constrained call: its layouts as written
            return Fixed(shape, dict(enumerate(constraints)))
        return None
    if opc == "recv-done":  # the data recv delivered: recv's (default) layout
        return Fixed(with_default(shape), _arrays_default(op))
    if opc == "send":
        return Fixed(None, _arrays_default(op, [0]))
    if opc == "recv":
        return Fixed(with_default(shape), {})
    if opc == "bitcast-convert":
        return bitcast_convert_layouts(op)
    return None


def cudnn_conv_layouts(op: HloOp, device: str) -> Fixed:
    """XLA's AddBackendConstraintsToDnnConvCustomCall: the input, filter and output of the
    forward convolution the call's labels describe in the heuristic's NHWC or NCHW order,
    given to the operands and result (tuple element 0) by the call's kind; side inputs of
    the result's rank in the result's layout, the bias and scratch buffer default."""
    labels: ConvDims = op.attr("dim_labels")
    roles = CUDNN_CONV_ROLES[op.attr("custom_call_target")]
    shape = op.shape
    elements = shape.elements if isinstance(shape, TupleShape) else (shape,)
    first = elements[0]
    assert isinstance(first, ArrayShape)
    x = first if roles[2] == "input" else value_shape(op.operands[0])
    assert isinstance(x, ArrayShape)
    b, f, sp = labels.input
    ki, ko, ksp = labels.kernel
    ob, of, osp = labels.output
    if conv_prefers_nhwc(x.element_type, len(sp), device):
        orders = ([b, *sp, f], [ko, *ksp, ki], [ob, *osp, of])
    else:
        orders = ([b, f, *sp], [ko, ki, *ksp], [ob, of, *osp])
    by_role: dict[str, M2M] = dict(
        zip(("input", "filter", "output"), (from_major_to_minor(o) for o in orders), strict=True)
    )
    out_m2m = by_role["output"]
    result = with_m2m(first, by_role[roles[2]])
    rest = tuple(with_default(e) for e in elements[1:])
    operands: dict[int, Shape] = {}
    for i, v in enumerate(op.operands):
        s = value_shape(v)
        if not isinstance(s, ArrayShape):
            continue
        m2m = by_role[roles[i]] if i < 2 else out_m2m
        operands[i] = with_m2m(s, m2m) if s.rank == len(m2m) else with_default(s)
    return Fixed(TupleShape((result, *rest)) if isinstance(shape, TupleShape) else result, operands)


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
