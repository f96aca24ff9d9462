"""`gemm-rewriter` (XLA's GemmRewriter): each dot cuBLAS computes -> a `__cublas$gemm` (or,
with cublasLt enabled, `__cublas$lt$matmul`) custom-call whose `backend_config` holds alpha,
beta, the dimension numbers and the epilogue (transposes of its operands folded into its
dimension numbers first, `transpose`); then what follows the dot is folded into the call
(`epilogues`, `gelu`, `bitcast`); last, every call gets its scratch workspace, a result
`(out, s8[n])` read through `get-tuple-element` (XLA's GemmWorkspaceRewriteVisitor).

The walk is XLA's: one post-order visit of each non-fusion computation, a dot rewritten when
visited, its users tried when they are (so `add(dot, c)` sees the call already).

Differs from XLA's: FP8 dots (XLA's FP8 pass: scaled-FP8 matching, FP8 outputs) and dots
with an explicit algorithm (XLA's DotAlgorithmRewriter, which hlopass lacks, splits them
first; bf16_bf16_f32 gets XLA's converts) are left alone, as are dots with dynamic shapes
or control edges; a matrix bias through a slice of the call (or a bitcast and a slice),
the constant folding of a broadcast constant bias, slices and bitcasts between the call and
a vector bias or an activation, and SiLU (a ROCm epilogue) are not matched; a vector bias must be broadcast along
the output's most minor physical dimension (XLA compares its size only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import HloOp, create_op
from hlopass.ir.attrs import Raw
from hlopass.ir.shape import ArrayShape, TupleShape, array
from hlopass.passes.gemm_fusion.support import classical_emitters_support, matmul_too_small
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    new_op,
    replace_op,
    unfused_computations,
)
from hlopass.text.exporter import instruction_post_order

from .bitcast import FuseBitcastMatrixBias
from .calls import new_call
from .config import GEMM, LT, gemm_config, is_gemm, new_config
from .epilogues import FoldAlpha, FuseMatrixBias, FuseRelu, FuseVectorBias
from .gelu import FuseGelu
from .support import FP8, arr, cublas_supported_matmul, lt_supported
from .transpose import FoldTranspose

HOPPER_WORKSPACE = 32 * 1024 * 1024
"""Scratch bytes XLA gives a cuBLAS call from Hopper (compute capability 9.0) on."""
DEFAULT_WORKSPACE = 4 * 1024 * 1024
"""... and before."""


@dataclass
class RewriteDot(RewritePattern):
    """`dot(a, b)` -> `custom-call(a, b)` to cuBLAS (alpha 1, beta 0, DEFAULT epilogue).

    Guards: cuBLAS takes the dot (one contracting and at most one non-contracting dimension
    per operand, no batch dimension last, a matrix operand, a supported output type); not
    one small enough for the classical emitters; no FP8, explicit algorithm, dynamic shape
    or control edge. cublasLt (when enabled) unless an operand is s8 or cublasLt lacks the
    types or the batch count."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dot",)

    ctx: RewriteContext
    enable_cublaslt: bool
    threshold: int

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if op.inst_name in self.ctx.pinned or op.attr("control-predecessors"):
            return
        shapes = [arr(op.operands[0]), arr(op.operands[1]), op.shape]
        if any(not isinstance(s, ArrayShape) or s.is_dynamic for s in shapes):
            return
        if any(s.element_type in FP8 for s in shapes):  # type: ignore[union-attr]
            return
        if not cublas_supported_matmul(op):
            return
        if matmul_too_small(op, self.threshold) and classical_emitters_support(op):
            return
        algorithm = op.attr("algorithm")
        if algorithm not in (None, "unset", "dot_bf16_bf16_f32"):
            return
        operands = list(op.operands)
        if algorithm == "dot_bf16_bf16_f32":  # XLA's TurnDotIntoConvertAndDotForBF16BF16F32
            operands = [
                new_op(rewriter, self.ctx, "convert", [v],
                       arr(v).with_element_type("bf16"), before=op).result
                for v in operands
            ]  # fmt: skip
        g = new_config(op)
        s8 = any(arr(v).element_type == "s8" for v in op.operands)
        target = LT if self.enable_cublaslt and not s8 and lt_supported(op, g) else GEMM
        new = new_call(rewriter, self.ctx, op, target, operands, op.shape, g)
        self.ctx.note(self, op, target)
        replace_op(rewriter, op, new.result)


@dataclass
class AddWorkspace(RewritePattern):
    """`gemm(...)` -> `get-tuple-element(gemm'(...), 0)` with gemm' returning `(out,
    s8[workspace])`: 32 MiB from Hopper on (4 MiB before), for legacy cuBLAS at most its
    operands' bytes; an output aliasing a bias moves to tuple index {0}.

    Guards: a cuBLAS call without its workspace yet (an array result, or an *_AUX call's
    pair)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("custom-call",)

    ctx: RewriteContext
    hopper: bool

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not is_gemm(op):
            return
        aux = gemm_config(op)["epilogue"].endswith("_AUX")
        shape = op.shape
        if aux != isinstance(shape, TupleShape) or (aux and len(shape.elements) != 2):
            return
        size = HOPPER_WORKSPACE if self.hopper else DEFAULT_WORKSPACE
        if op.attr("custom_call_target") == GEMM:
            size = min(size, sum(arr(v).byte_size() for v in op.operands))
        parts = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
        out = TupleShape((*parts, array("s8", [size])))
        attrs = {k: op.attr(k) for k in ("custom_call_target", "backend_config", "metadata")}
        if op.attr("output_to_operand_aliasing") is not None:
            attrs["output_to_operand_aliasing"] = Raw("{{0}: (2, {})}")
        attrs = {k: v for k, v in attrs.items() if v is not None}
        new = create_op("custom-call", list(op.operands), out, op.inst_name, attrs)
        rewriter.insert(new, InsertPoint.before(op))
        if aux:  # its users are get-tuple-elements already: they read the new call
            rewriter.replace_all_uses_with(op.result, new.result)
            rewriter.erase(op)
            return
        gte = create_op("get-tuple-element", [new.result], shape,
                        self.ctx.names.fresh("get-tuple-element"), {"index": 0})  # fmt: skip
        rewriter.insert(gte, InsertPoint.before(op))
        rewriter.replace_all_uses_with(op.result, gte.result)
        rewriter.erase(op)


@dataclass(frozen=True)
class GemmRewriterPass(HloModulePass):
    """Rewrite the dots cuBLAS computes into cuBLAS custom-calls with their epilogues."""

    name: ClassVar[str] = "gemm-rewriter"

    compute_capability: float = 9.0
    """The device's CUDA compute capability, major.minor (XLA's GemmRewriter argument; 9.0
    is an H100): from 9.0 on each call gets the 32 MiB Hopper workspace."""
    enable_cublaslt: bool = False
    """XLA's `xla_gpu_enable_cublaslt` (default false): dots become `__cublas$lt$matmul`
    calls where cublasLt takes them, and vector bias, ReLU and GELU epilogues fuse."""
    bias: bool = True
    """Fold bias additions into the calls (XLA's BiasMode::kBias; XLA turns it off with
    `xla_gpu_async_dot`)."""
    gemm_rewrite_size_threshold: int = 100
    """XLA's `xla_gpu_gemm_rewrite_size_threshold`: float dots whose (lhs + rhs
    non-contracting) x contracting elements are fewer stay dots."""
    fold_transposes: bool = True
    """Fold transposes into the dots' dimension numbers first (XLA's TransposeFolding with
    CanFoldTransposeOperandIntoDot, which its GPU compiler reruns right before rewriting)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rc = RewriteContext.of(module, trace)
        by_opcode: dict[str, list[RewritePattern]] = {
            "dot": [RewriteDot(rc, self.enable_cublaslt, self.gemm_rewrite_size_threshold)],
            "multiply": [FoldAlpha(rc), FuseGelu(rc)],
            "maximum": [FuseRelu(rc)],
        }
        if self.bias:
            by_opcode["add"] = [FuseVectorBias(rc), FuseMatrixBias(rc), FuseBitcastMatrixBias(rc)]
        workspace = AddWorkspace(rc, self.compute_capability >= 9.0)
        fold = FoldTranspose(rc) if self.fold_transposes else None
        changed = False
        for comp in unfused_computations(module):
            rewriter = PatternRewriter(comp)
            for op in instruction_post_order(comp):
                if op.opcode == "dot" and fold is not None and op.inst_name not in rc.pinned:
                    op = fold.fold(op, rewriter) or op
                for pattern in by_opcode.get(op.opcode, ()):
                    if op.parent is None:
                        break
                    pattern.match_and_rewrite(op, rewriter)
            for op in list(comp.instructions):
                if op.opcode == "custom-call":
                    workspace.match_and_rewrite(op, rewriter)
            changed |= rewriter.has_done_action
        return changed
