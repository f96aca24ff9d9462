"""Propagating a dimension order through one instruction (XLA's GetPropagatedDimOrders
and GetPropagatedDimOrdersAndRequirements, in `triton_tiling_propagation`).

`propagate(op, to_input, order, props)` returns, for output-to-input propagation
(`to_input`), the order of each operand value, else the order of `op`'s result; or XLA's
refusal text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.ir import SSAValue

from hlopass.cost.layouts import op_reshape_is_bitcast
from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape

from .dim_order import NO_SPLIT, DimOrder, Fragment, bitcast_order, combine, requirements
from .support import elementwise_supported, unique_users

Orders = dict[SSAValue, DimOrder]

MIN_CONCAT_FRAGMENT = 64
"""XLA's kMinConcatFragmentSize: each concatenated operand's size along the concatenated
dimension must be a multiple of it (the tile size is then never larger)."""


@dataclass(frozen=True)
class DotProps:
    """XLA's DotProperties of one side of the dot."""

    noncontracting: int
    """The operand's non-contracting dimension (-1 on the output side)."""
    splittable: int
    """The dimension that may be split physically once (-1: none)."""


def arr(value: SSAValue) -> ArrayShape:
    return value.type.data  # type: ignore[attr-defined]


def _group(order: DimOrder, shape: ArrayShape) -> list[list[Fragment]] | str:
    """`order`'s fragments (copies) grouped by the logical dimension of `shape` they make."""
    frags = [f.copy() for f in order.frags]
    if len(frags) < shape.rank:
        return "Cannot propagate further from trivial sized tensor"
    logical: list[list[Fragment]] = [[] for _ in shape.dims]
    k = 0
    for d in shape.minor_to_major:
        acc, group = 1, []
        while True:
            if k >= len(frags):
                return "Unsupported bitcast"
            acc *= frags[k].count
            group.append(frags[k])
            k += 1
            if acc >= shape.dims[d]:
                break
        if acc != shape.dims[d]:
            return "Unsupported bitcast"
        logical[d] = group
    return logical


def _dst_logical(op: HloOp, logical: list[list[Fragment]], dst: SSAValue, to_input: bool,
                 concat_at: list[int]) -> list[list[Fragment]] | str:  # fmt: skip
    """The source's logical fragment groups as `dst`'s logical dimensions."""
    opc, shape = op.opcode, arr(dst)
    if opc == "transpose":
        perm = list(op.attr("dimensions"))
        if not to_input:
            inv = [0] * len(perm)
            for i, p in enumerate(perm):
                inv[p] = i
            perm = inv
        out: list[list[Fragment]] = [[] for _ in perm]
        for i, p in enumerate(perm):
            out[p] = logical[i]
        return out
    if opc == "broadcast":
        return [logical[d] for d in op.attr("dimensions")]
    if opc == "copy":
        return list(logical)
    out = list(logical)
    if opc == "concatenate":
        cd = op.attr("dimensions")[0]
        if len(logical[cd]) != 1 or logical[cd][0].is_sliced:
            return "Unsupported concatenation."
        size = shape.dims[cd]
        out[cd] = [Fragment(logical[cd][0].dim, size, -concat_at[0], size)]
        concat_at[0] += size
        return out
    if opc == "slice":
        for d, s in enumerate(op.attr("slice")):
            if s.limit - s.start != shape.dims[d]:
                if len(out[d]) > 1:
                    return "Slicing of fragmented dimension."
                f = out[d][0]
                f.count = shape.dims[d]
                f.slice_start += s.start
        return out
    # dynamic-slice
    for d, size in enumerate(op.attr("dynamic_slice_sizes")):
        if size != shape.dims[d]:
            if len(out[d]) > 1:
                return "Slicing of fragmented dimension."
            f = out[d][0]
            f.count = shape.dims[d]
            f.sliced_count = shape.dims[d]  # which part is read is known only at run time
    return out


def altering_orders(op: HloOp, to_input: bool, src_order: DimOrder) -> Orders | str:
    """XLA's GetPropagatedDimOrdersForDimAlteringOp: transpose, copy, broadcast, slice,
    dynamic-slice and concatenate move, drop or cut fragments by whole dimensions."""
    src = op.result if to_input else op.operands[0]
    if op.opcode == "slice" and arr(op.result).num_elements == 1:
        return "Slice to scalar is not implemented yet."
    logical = _group(src_order, arr(src))
    if isinstance(logical, str):
        return logical
    dsts = list(dict.fromkeys(op.operands)) if to_input else [op.result]
    if to_input and op.opcode == "dynamic-slice":
        dsts = [op.operands[0]]
    out: Orders = {v: DimOrder() for v in dict.fromkeys(op.operands)} if to_input else {}
    concat_at = [0]
    # the source fragments, by identity: `_group` copied them, so map copy -> index
    copies = [f for d in arr(src).minor_to_major for f in logical[d]]
    index_of = {id(f): i for i, f in enumerate(copies)}
    for dst in dsts:
        dl = _dst_logical(op, logical, dst, to_input, concat_at)
        if isinstance(dl, str):
            return dl
        order = DimOrder()
        placed: dict[int, int] = {}
        present: set[int] = set()
        for d in arr(dst).minor_to_major:
            for f in dl[d]:
                order.frags.append(f.copy())
                if id(f) in index_of:
                    placed[index_of[id(f)]] = len(order.frags) - 1
                if f.count > 1:
                    present.add(f.dim)
        for d, idx in src_order.dims.items():
            for i in idx:
                if i not in placed:
                    if op.opcode == "broadcast" and src_order.frags[i].count > 1 and d in present:
                        return "Unsupported broadcast"
                    continue
                order.dims.setdefault(d, []).append(placed[i])
        out[dst] = order
    return out


def _labeled_dim(shape: ArrayShape, order: DimOrder, label: int) -> int | None:
    """XLA's LogicalIndexOfLabeledDimension."""
    k = 0
    for d in shape.minor_to_major:
        size = 1
        while size < shape.dims[d] and k < len(order.frags):
            size *= order.frags[k].count
            if order.frags[k].dim == label:
                return d
            k += 1
    return None


def _concat_refusal(op: HloOp, order: DimOrder, props: DotProps) -> str | None:
    label = props.noncontracting
    if len(order.dims.get(label, [])) > 1:
        return "Concatenations on split non-contracting dimensions are unsupported."
    cd = op.attr("dimensions")[0]
    if _labeled_dim(arr(op.result), order, label) != cd:
        return "Unsupported concatenation."
    if any(arr(v).dims[cd] % MIN_CONCAT_FRAGMENT for v in op.operands):
        return "At least one operand of concatenation can not be perfectly tiled."
    return None


def is_scalar_constant(op: Any) -> bool:
    return op.opcode == "constant" and arr(op.result).rank == 0


def propagate(op: HloOp, to_input: bool, order: DimOrder, props: DotProps) -> Orders | str:
    """XLA's GetPropagatedDimOrders."""
    opc = op.opcode
    if (
        opc != "parameter"
        and to_input
        and any(u.opcode in ("concatenate", "dynamic-slice") for u in unique_users(op))
    ):
        return "No fusion into concatenations or dynamic slice."
    if opc == "parameter" or is_scalar_constant(op):
        return {}
    if opc in ("transpose", "copy"):
        return altering_orders(op, to_input, order)
    if opc == "broadcast":
        return (
            altering_orders(op, to_input, order) if to_input else "Unsupported broadcast direction."
        )
    if op.operands and elementwise_supported(opc, arr(op.operands[0]).element_type):
        if to_input:
            return {v: order for v in op.operands}
        return {op.result: order}
    if opc in ("bitcast", "reshape"):
        if opc == "reshape" and not op_reshape_is_bitcast(op):
            return "Non-bitcast reshape."
        dst = op.operands[0] if to_input else op.result
        got = bitcast_order(order, arr(dst).dims, arr(dst).minor_to_major)
        return got if isinstance(got, str) else {dst: got}
    if opc == "slice":
        return altering_orders(op, to_input, order) if to_input else "Unsupported slice direction."
    if opc == "dynamic-slice" and to_input:
        return altering_orders(op, to_input, order)
    if opc == "concatenate" and to_input:
        refusal = _concat_refusal(op, order, props)
        return refusal or altering_orders(op, to_input, order)
    return "Unimplemented instruction."


def propagate_with_requirements(op: HloOp, to_input: bool, order: DimOrder,
                                props: DotProps) -> tuple[Orders, int] | str:  # fmt: skip
    """XLA's GetPropagatedDimOrdersAndRequirements: the orders and the split requirement
    of every known order around `op` combined."""
    orders = propagate(op, to_input, order, props)
    if isinstance(orders, str):
        return orders
    req: int | str = NO_SPLIT
    for v in [*op.operands, op.result]:
        if v in orders:
            req = combine(req, requirements(orders[v], props.splittable))  # type: ignore[arg-type]
            if isinstance(req, str):
                return req
    return orders, req  # type: ignore[return-value]
