"""Whether fusing one instruction into a GEMM fusion is supported *and* worth it (XLA's
GetPropagatedDimOrdersAndRequirementsIfProfitablyFusible)."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape, byte_size
from hlopass.rewriting import is_root

from .dim_order import DimOrder
from .propagate import DotProps, Orders, arr, propagate_with_requirements
from .support import triton_refusal, unique_users, xla_elementwise

IO_TOLERANCE_BYTES = 1024
"""XLA's kIoToleranceBytes: how much a fusion's input or output volume may grow."""


def nbytes(shape: ArrayShape) -> int:
    return shape.num_elements * byte_size(shape.element_type)


def _input_minus_output(op: HloOp) -> int:
    return sum(nbytes(arr(v)) for v in op.operands) - nbytes(arr(op.result))


def _param_or_constant(op: object) -> bool:
    return getattr(op, "opcode", None) in ("parameter", "constant")


def input_worth_fusing(op: HloOp) -> bool:
    """XLA's IsInputWorthFusing: it does not grow the reads much, or it is the only reader
    of parameters or constants."""
    if _input_minus_output(op) <= IO_TOLERANCE_BYTES:
        return True
    if len(unique_users(op)) > 1:
        return False
    owners = [v.owner for v in op.operands]
    if op.opcode == "slice" and all(_param_or_constant(o) for o in owners):
        return True
    return all(
        _param_or_constant(o) and len(unique_users(o)) == 1  # type: ignore[arg-type]
        for o in owners
    )


def _is_root_like(op: HloOp) -> bool:
    """XLA's CanNotBeFusedIntoAUser: the root, or the only operand of a root tuple."""
    if is_root(op):
        return True
    us = unique_users(op)
    return len(us) == 1 and us[0].opcode == "tuple" and is_root(us[0])


def output_worth_fusing(op: HloOp) -> bool:
    return _is_root_like(op) or _input_minus_output(op) >= -IO_TOLERANCE_BYTES


def effective_parameter(op: object) -> bool:
    """XLA's hlo_query::IsEffectiveParameter: a parameter, or a bitcast or
    get-tuple-element of one."""
    opc = getattr(op, "opcode", None)
    if opc == "parameter":
        return True
    if opc in ("bitcast", "get-tuple-element"):
        return effective_parameter(op.operands[0].owner)  # type: ignore[attr-defined]
    return False


def _cheap_broadcast_operand(op: HloOp, orders: Orders, props: DotProps,
                             cc: tuple[int, int], level: int) -> bool:  # fmt: skip
    """A binary elementwise op one of whose operands is a broadcast of a parameter or
    constant that can be fused too: worth fusing though it adds reads."""
    if not (xla_elementwise(op) and len(op.operands) == 2):
        return False
    for v in op.operands:
        b = v.owner
        if not isinstance(b, HloOp) or b.opcode != "broadcast":
            continue
        if not _param_or_constant(b.operands[0].owner):
            continue
        if not isinstance(profitable(b, True, None, orders[v], props, cc, level), str):
            return True
    return False


def profitable(op: HloOp, to_input: bool, src_operand: int | None, order: DimOrder,
               props: DotProps, cc: tuple[int, int],
               level: int) -> tuple[Orders, int] | str:  # fmt: skip
    """The propagated orders and split requirement of fusing `op` (its operands' orders
    when `to_input`, else its result's, propagated from operand `src_operand`), or XLA's
    reason not to fuse it."""
    opc = op.opcode
    if opc in ("tuple", "get-tuple-element"):
        return "Unsupported instruction."
    if opc in ("reduce", "all-reduce", "all-reduce-start", "all-reduce-done"):
        return "Reductions are not fused yet."
    if opc == "pad":
        return "Pads are not fused yet."
    if opc == "power" and len(unique_users(op)) > 1:  # each user's copy would recompute it
        return "Not fusing power with multiple users because it may result in expensive op duplication."
    refusal = triton_refusal(op, cc)
    if refusal is not None:
        return refusal
    got = propagate_with_requirements(op, to_input, order, props)
    if isinstance(got, str):
        return got
    orders = got[0]
    if to_input:
        if level < 2:
            if opc == "convert":
                if nbytes(arr(op.operands[0])) > nbytes(arr(op.result)):
                    return "Narrowing conversion."
            elif xla_elementwise(op) and opc != "copy":
                return "Ignored elementwise operation"
        elif not _cheap_broadcast_operand(op, orders, props, cc, level) and not (
            input_worth_fusing(op)
        ):
            return "Not obviously profitable to fuse as input."
        return got
    if level < 2:
        return "Skipping fusing outputs at low fusion levels."
    for i, v in enumerate(op.operands):
        if i == src_operand:
            continue
        o = v.owner
        if isinstance(o, HloOp) and o.opcode == "broadcast":
            inner = o.operands[0]
            if arr(inner).rank == 0 or effective_parameter(inner.owner):
                continue
        if effective_parameter(o):
            continue
        return "Has multiple inputs - not properly analyzed yet."
    if not output_worth_fusing(op):
        return "Not obviously profitable to fuse as output."
    return got
