"""Building cuBLAS calls: the custom-call that replaces a dot or an epilogue's root, named
as XLA names them (`cublas-gemm`, `cublas-batch-gemm`, `cublas-lt-matmul`), and the users
and aliasing questions the bias rewrites ask."""

from __future__ import annotations

import re
from typing import Any

from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op, entry_computation
from hlopass.ir.attrs import Raw
from hlopass.ir.shape import Shape
from hlopass.rewriting import RewriteContext, module_of

from .config import LT, config_text

ALIAS_BIAS = "{{}: (2, {})}"
"""The call's output shares the matrix bias's buffer (operand 2)."""


def call_name(target: str, gemm: dict[str, Any]) -> str:
    """XLA's SetName."""
    if target == LT:
        return "cublas-lt-matmul"
    dn = gemm["dot_dimension_numbers"]
    batched = dn["lhs_batch_dimensions"] or dn["rhs_batch_dimensions"]
    return "cublas-batch-gemm" if batched else "cublas-gemm"


def new_call(
    rewriter: PatternRewriter, ctx: RewriteContext, like: HloOp, target: str,
    operands: list[SSAValue], shape: Shape, gemm: dict[str, Any], alias: str | None = None,
    before: HloOp | None = None,
) -> HloOp:  # fmt: skip
    """A cuBLAS custom-call with `like`'s metadata (XLA clones the call it replaces),
    inserted before `before` (default: `like`)."""
    attrs: dict[str, Any] = {"custom_call_target": target, "backend_config": config_text(gemm)}
    if alias is not None:
        attrs["output_to_operand_aliasing"] = Raw(alias)
    md = like.attr("metadata")
    if md is not None:
        attrs["metadata"] = md
    op = create_op("custom-call", operands, shape, ctx.names.fresh(call_name(target, gemm)), attrs)
    rewriter.insert(op, InsertPoint.before(before or like))
    return op


def users(op: HloOp) -> list[HloOp]:
    """`op`'s users, each once (XLA's `users()`): the computation's return is none."""
    return [u for u in dict.fromkeys(x.operation for x in op.result.uses) if isinstance(u, HloOp)]


def owner(value: SSAValue) -> HloOp | None:
    return value.owner if isinstance(value.owner, HloOp) else None


def _aliased_parameters(op: HloOp) -> set[int]:
    """Entry parameters (whole, not a tuple element) the module aliases with an output."""
    module = module_of(op)
    raw = module.attributes.get("hlo.input_output_alias") if module is not None else None
    if raw is None:
        return set()
    text = getattr(raw.data, "text", str(raw.data))  # type: ignore[attr-defined]
    pattern = r"\}\s*:\s*\(\s*(\d+)\s*,\s*\{\s*\}"
    return {int(m.group(1)) for m in re.finditer(pattern, text)}


def can_overwrite(bias: SSAValue) -> bool:
    """XLA's can_overwrite_bias: the add is the bias's only user and the bias is no
    parameter, or an entry parameter the module aliases with an output."""
    src = owner(bias)
    if src is None or len(users(src)) > 1:
        return False
    if src.opcode != "parameter":
        return True
    module = module_of(src)
    if module is None or src.parent_op() is not entry_computation(module):
        return False
    return int(src.attr("number")) in _aliased_parameters(src)
