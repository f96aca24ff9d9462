"""`sort-iota-fusion`: a sort reading iotas -> one `kCustom` fusion computing the iotas
and the sort (XLA's GPU `SortIotaFusion`, which XLA's fusion pipeline runs right before
priority fusion).

An argsort or a top-k is a sort of (keys, iota): the iota gives each key its index. Left
alone, the iota is a kernel of its own that writes the indices to memory for the sort to
read back; fused, the sort kernel makes them where it needs them. XLA's pass fuses every
distinct iota operand of every sort, whatever the sort's other operands are (they become
the fusion's parameters, a non-iota producer stays outside), and names the fusion
`fusion`, its computation `fused_computation`, as `HloInstruction::CreateFusion` does.
The fusion is `kCustom`: priority fusion does not grow it further.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.passes.fusion.rewrites import FusionBuilder
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook, fusion_computations


@dataclass
class FuseIotasIntoSort(RewritePattern):
    """`sort(x, iota, ...)` -> `fusion(x, ...)`, kind=kCustom, computing the iotas and the
    sort. Guards: a sort (in a computation that is not itself fused) with at least one
    iota operand."""

    OPCODES: ClassVar[tuple[str, ...]] = ("sort",)

    ctx: RewriteContext
    builder: FusionBuilder
    made: int = 0

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode != "sort":
            return
        iotas: list[HloOp] = []
        for v in op.operands:
            src = v.owner
            if isinstance(src, HloOp) and src.opcode == "iota" and src not in iotas:
                iotas.append(src)
        if not iotas:
            return
        name = op.inst_name
        fusion = self.builder.wrap(op)
        for iota in iotas:
            self.builder.fuse_into(iota, fusion)
        fusion.set_attr("kind", "kCustom")
        self.ctx.note(self, fusion, f"{name} with {', '.join(i.inst_name for i in iotas)}")
        self.made += 1


@dataclass(frozen=True)
class SortIotaFusionPass(HloModulePass):
    """Fuse the iota operands of every sort into a kCustom fusion with the sort."""

    name: ClassVar[str] = "sort-iota-fusion"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        fused = fusion_computations(module)
        comps = [c for c in computations(module) if c.comp_name not in fused]
        pattern = FuseIotasIntoSort(rctx, FusionBuilder(module))
        # the builder edits the module directly (as priority fusion's rewrites do), so the
        # sorts are listed first and each is offered to the pattern once
        sorts = [op for c in comps for op in c.instructions if op.opcode == "sort"]
        for op in sorts:
            pattern.match_and_rewrite(op, PatternRewriter(op))
        return pattern.made > 0
