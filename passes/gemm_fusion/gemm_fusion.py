"""`gemm-fusion` (XLA's GemmFusion): a dot with the producers and users Triton's GEMM
emitter can tile with it -> one `kCustom` fusion `gemm_fusion_<dot>` whose backend config
names the `__triton_gemm` kind.

Which dots (XLA's CreateDotFusion and HandleDot): types, algorithm and precision Triton
supports on the device (`support`), at most one batch dimension, a non-contracting
dimension on both sides; not one small enough for the classical emitters
(`gemm-rewrite-size-threshold`); and one that is more than a plain matmul (only bitcasts
and reshapes around it), unless `triton-gemm-any`, an explicit algorithm, or operand
shapes cuBLAS would need padded make Triton take it anyway. What joins is in `plan`; how the tiling
follows each instruction is in `propagate` and `dim_order`.

Differs from XLA's: a dot whose operand has more than one contracting or non-contracting
dimension is left alone (XLA's pipeline canonicalizes dots first, as `dot-decomposer`
does here; XLA's pass fails on them); a fusion with an s4 input and a batch dimension is refused (XLA checks whether the
batch dimension is minor); a root read by one user too is not output-fused; sparse dots
do not exist in this IR. A user whose other operands depend on the dot is not fused (XLA
would build a cycle); a dot or user with control edges stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    computations,
    create_op,
    new_computation_op,
    new_return_op,
)
from hlopass.rewriting import (
    HloModulePass,
    TraceHook,
    claim_name,
    control_predecessor_names,
    erase_dead,
    fusion_computations,
)
from hlopass.text.exporter import instruction_post_order

from .dim_order import NO_SPLIT, DimOrder
from .plan import MAX_PARAMS_PER_OPERAND, Build, fuse_toward_operands, fuse_toward_users
from .propagate import DotProps, arr
from .support import (
    classical_emitters_support,
    cublas_requires_padding,
    matmul_too_small,
    triton_refusal,
)

BACKEND_CONFIG = (
    '{"operation_queue_id":"0","wait_on_operation_queues":[],'
    '"fusion_backend_config":{"kind":"__triton_gemm"},"force_earliest_schedule":false}'
)
"""The fusion's GpuBackendConfig as XLA prints it after GemmFusion."""

_ALWAYS = frozenset(
    ("dot_bf16_bf16_f32_x9", "dot_bf16_bf16_f32_x6", "dot_bf16_bf16_f32_x3", "dot_bf16_bf16_f32",
     "dot_tf32_tf32_f32", "dot_tf32_tf32_f32_x3", "dot_f32_f32_f32")
)  # fmt: skip
"""Algorithms with which XLA gives a dot to Triton even as a plain matmul."""

_PURE = frozenset(("bitcast", "dot", "parameter", "reshape"))


def _side(dot: HloOp, i: int) -> DotProps | None:
    """XLA's FusionContext::FromDotOperand (None where the operand is not [batch,
    non-contracting, contracting] with one of each but batch)."""
    key = "lhs" if i == 0 else "rhs"
    batch = dot.attr(f"{key}_batch_dims") or ()
    contracting = dot.attr(f"{key}_contracting_dims") or ()
    rest = [d for d in range(arr(dot.operands[i]).rank) if d not in batch and d not in contracting]
    if len(contracting) != 1 or len(rest) != 1:
        return None
    return DotProps(rest[0], rest[0] if i == 0 and not batch else -1)


def _depends_on(value: SSAValue, target: HloOp, pos: dict[HloOp, int]) -> bool:
    """`value` is computed from `target`. `pos`: positions in a topological order, so the
    walk up stops at instructions placed before `target` (they cannot read it)."""
    limit = pos.get(target, -1)
    seen: set[int] = set()
    stack = [value.owner]
    while stack:
        op = stack.pop()
        if op is target:
            return True
        if not isinstance(op, HloOp) or id(op) in seen or pos.get(op, limit) < limit:
            continue
        seen.add(id(op))
        stack.extend(v.owner for v in op.operands)
    return False


@dataclass
class FuseGemm(RewritePattern):
    """`dot(f(a), g(b))` (and its distributive users u) -> `fusion(a, b)`, kind=kCustom,
    calling `u(dot(f(a), g(b)))` on parameters, `__triton_gemm` in its backend config.

    Guards: the dot Triton supports (types, algorithm, precision, one batch dimension,
    non-contracting dimensions), not tiny, not a plain matmul cuBLAS takes as it is."""

    OPCODES: ClassVar[tuple[str, ...]] = ("dot",)

    cc: tuple[int, int]
    level: int
    gemm_any: bool
    threshold: int
    names: set[str]
    comp_names: set[str]
    pinned: frozenset[str] = frozenset()
    """Instructions with control edges (either end): left alone."""
    pos: dict[HloOp, int] = field(default_factory=dict)
    """Positions of the computation's instructions in a topological order."""

    def decide(self, dot: HloOp, b: Build, users: bool = True) -> tuple[bool, HloOp | None]:
        """(XLA wants it fused, the instruction the fusion replaces: None when XLA cannot
        fuse it). Without `users`, the dot's users stay out."""
        if triton_refusal(dot, self.cc) is not None:
            return False, None
        lhs, rhs = _side(dot, 0), _side(dot, 1)
        if lhs is None or rhs is None:
            return False, None
        fused, req = [], NO_SPLIT
        for i, props in enumerate((lhs, rhs)):
            v = dot.operands[i]
            order = DimOrder.of_shape(arr(v).dims, arr(v).minor_to_major)
            value, r = fuse_toward_operands(v, order, MAX_PARAMS_PER_OPERAND, props, NO_SPLIT, b)
            fused.append(value)
            req = r if i == 0 else req  # (the RHS imposes no split: XLA's comment)
        fused_dot = b.clone(dot, fused)
        output = dot
        if users:
            out = DotProps(-1, 0 if req > 1 else -1)
            order = DimOrder.of_shape(arr(dot.result).dims, arr(dot.result).minor_to_major)
            output = fuse_toward_users(dot, fused_dot, order, out, req, b)
        if any(arr(v).element_type == "s4" for v in b.inputs) and dot.attr("lhs_batch_dims"):
            return False, None
        if dot.attr("algorithm") in _ALWAYS or self.gemm_any:
            return True, output
        return not all(m.opcode in _PURE for m in b.members), output

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        if matmul_too_small(op, self.threshold) and classical_emitters_support(op):
            return
        b = Build(set(self.names), self.cc, self.level, self.pinned)
        want, output = self.decide(op, b)
        if (
            output is not None
            and output is not op
            and any(_depends_on(v, op, self.pos) for v in b.inputs)
        ):
            b = Build(set(self.names), self.cc, self.level, self.pinned)
            want, output = self.decide(op, b, users=False)
        if output is None or (not want and not cublas_requires_padding(op, self.cc)):
            return
        self.install(op, output, b, rewriter)

    def install(self, dot: HloOp, output: HloOp, b: Build, rewriter: PatternRewriter) -> None:
        """The built block as computation `gemm_fusion_<dot>_computation`, called by a
        fusion that replaces `output`."""
        root = b.block.last_op
        assert isinstance(root, HloOp)
        b.block.add_op(new_return_op(root.result))
        base = f"gemm_fusion_{dot.inst_name}"
        comp = new_computation_op(claim_name(f"{base}_computation", self.comp_names, {}), b.block)
        host = output.parent_op()
        assert isinstance(host, ComputationOp)
        mblock = host.parent_block()
        assert mblock is not None
        mblock.insert_op_before(comp, host)
        self.names.update(b.names)
        attrs = {"kind": "kCustom", "calls": comp.comp_name, "backend_config": BACKEND_CONFIG}
        fusion = create_op("fusion", b.inputs, root.shape, claim_name(base, self.names, {}), attrs)
        md = dot.attr("metadata")
        if md is not None:
            fusion.set_attr("metadata", md)
        rewriter.insert(fusion, InsertPoint.before(output))
        self.pos[fusion] = self.pos.get(output, len(self.pos))
        output.result.replace_all_uses_with(fusion.result)
        operands = list(output.operands)
        rewriter.erase(output)
        erase_dead(rewriter, operands)


@dataclass(frozen=True)
class GemmFusionPass(HloModulePass):
    """Fuse each dot Triton's GEMM emitter should run with its producers and users."""

    name: ClassVar[str] = "gemm-fusion"

    compute_capability: float = 9.0
    """The device's CUDA compute capability, major.minor (XLA's GemmFusion argument; 9.0
    is an H100). Triton GEMMs need 8.0 (Ampere) or later."""
    triton_gemm_any: bool = True
    """XLA's `xla_gpu_triton_gemm_any` (default true): Triton takes plain matmuls too."""
    gemm_rewrite_size_threshold: int = 100
    """XLA's `xla_gpu_gemm_rewrite_size_threshold`: float dots whose (lhs + rhs
    non-contracting) x contracting elements are fewer stay dots."""
    triton_fusion_level: int = 2
    """XLA's `xla_gpu_triton_fusion_level`: below 2 only converts join as producers and no
    users join."""

    def __post_init__(self) -> None:
        cc = self.capability()
        if cc < (8, 0):
            raise ValueError(
                "Triton support is only enabled for Ampere GPUs (compute capability 8.0) and "
                f"up, but got compute capability {cc[0]}.{cc[1]}."
            )

    def capability(self) -> tuple[int, int]:
        major = int(self.compute_capability)
        return major, round((self.compute_capability - major) * 10)

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        comps = computations(module)
        names = {op.inst_name for c in comps for op in c.instructions}
        pattern = FuseGemm(
            self.capability(), self.triton_fusion_level, self.triton_gemm_any,
            self.gemm_rewrite_size_threshold, names, {c.comp_name for c in comps},
            frozenset(control_predecessor_names(module)),
        )  # fmt: skip
        fused = fusion_computations(module)
        changed = False
        for comp in comps:
            if comp.comp_name in fused:
                continue
            rewriter = PatternRewriter(comp)
            order = instruction_post_order(comp)
            pattern.pos = {op: i for i, op in enumerate(order)}
            for op in order:
                if op.opcode == "dot" and op.parent is not None:
                    pattern.match_and_rewrite(op, rewriter)
            changed |= rewriter.has_done_action
        return changed
