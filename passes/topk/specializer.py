"""`topk-specializer`: a `TopK` custom call the GPU TopK kernel handles becomes a call of
that kernel, `__gpu$TopK` (XLA's TopkSpecializer and its SmallBufferOptimization).

`custom-call(x), custom_call_target="TopK"` -> the same call with target `__gpu$TopK`
(XLA keeps the comparator and the backend config; the kernel is a typed-FFI call).

Guards (XLA's): f32 or bf16 values; `[n]` or `[batch, n]`; `k / n < 0.85`; then, for a
stable TopK (or off CUDA), `k <= 16` and `n >= 1024`; for an unstable one on CUDA (XLA
then uses RAFT's select_k), `k <= 128` for any `n`, raised to 256 for f32 with
`batch >= 64` and `n >= 16384`, for bf16 with `batch >= 16` and `n >= 65536`, and lowered
to 64 for bf16 with `64 <= batch <= 128` and `8192 <= n <= 32768`. What is not
specialized is left for `topk-decomposer` (sort + slice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.passes.topk.common import GPU_TOPK_TARGET, is_stable_call, is_topk_call
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    new_op,
    replace_op,
    run_patterns,
    unfused_computations,
)

MAX_K, MIN_N, MAX_RATIO = 16, 1024, 0.85
"""The GPU TopK kernel's limits for a stable TopK (XLA's SmallBufferOptimization)."""


def raft_max_k(element_type: str, batch: int, n: int) -> int:
    """The largest k XLA gives RAFT's select_k (unstable TopK on CUDA)."""
    if element_type == "f32":
        return 256 if batch >= 64 and n >= 16384 else 128
    if 64 <= batch <= 128 and 8192 <= n <= 32768:
        return 64
    return 256 if batch >= 16 and n >= 65536 else 128


def kernel_takes(x: ArrayShape, k: int, stable: bool, cuda: bool) -> bool:
    """Whether XLA's GPU TopK kernel takes a TopK of `x` keeping `k`."""
    if x.element_type not in ("f32", "bf16") or x.rank not in (1, 2):
        return False
    n = x.dims[-1]
    batch = x.dims[0] if x.rank == 2 else 0
    if n == 0 or k / n >= MAX_RATIO:
        return False
    if cuda and not stable:
        return k <= raft_max_k(x.element_type, batch, n)
    return k <= MAX_K and n >= MIN_N


@dataclass
class SpecializeTopK(RewritePattern):
    """`custom-call(x), custom_call_target="TopK"` -> `custom_call_target="__gpu$TopK"`.

    Guards: the kernel takes it (`kernel_takes`: dtype, rank, k/n, k and n limits)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)

    ctx: RewriteContext
    cuda: bool = True

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES or not is_topk_call(op):
            return
        x = op.operands[0].type.data  # type: ignore[attr-defined]
        k = op.shape.elements[0].dims[-1]  # type: ignore[attr-defined]
        if not isinstance(x, ArrayShape) or not kernel_takes(x, k, is_stable_call(op), self.cuda):
            return
        attrs = {name: op.attr(name) for name in ("called_computations", "backend_config",
                                                   "metadata", "frontend_attributes")
                 if op.attr(name) is not None}  # fmt: skip
        attrs["custom_call_target"] = GPU_TOPK_TARGET
        attrs["api_version"] = "API_VERSION_TYPED_FFI"
        self.ctx.note(self, op, f"k={k}")
        call = new_op(rewriter, self.ctx, "custom-call", [op.operands[0]], op.shape, attrs,
                      before=op)  # fmt: skip
        replace_op(rewriter, op, call.result)


@dataclass(frozen=True)
class TopkSpecializerPass(HloModulePass):
    """Turn `TopK` custom calls the GPU TopK kernel handles into `__gpu$TopK` calls."""

    name: ClassVar[str] = "topk-specializer"

    cuda: bool = True
    """The target is a CUDA GPU (XLA then sends unstable TopKs to RAFT's select_k); false
    for ROCm."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        comps = unfused_computations(module)
        return run_patterns(module, [SpecializeTopK(rctx, self.cuda)], comps)
