"""`call-inliner`: replace each `call` by the instructions of the computation it calls
(XLA's CallInliner, which runs before fusion so calls do not cut fusion regions).

The callee's parameters become the call's operands and its root replaces the call; names
are kept where no surviving instruction holds them. Calls whose callee has side effects
are inlined too (order is kept by the operands and control edges XLA keeps; here only
calls without control predecessors or side-effecting callees are inlined). Computations
no longer called are removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.passes.defuse import UsedNames, inline_computation, remove_uncalled
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    calls_side_effect,
    comps_by_name,
    fusion_computations,
    is_control_predecessor,
)


@dataclass(frozen=True)
class CallInlinerPass(HloModulePass):
    """Inline every `call` (without side effects or control edges) into its caller."""

    name: ClassVar[str] = "call-inliner"
    # what it inlines (not pattern-based: the grammar page reads this)
    OPCODES: ClassVar[tuple[str, ...]] = ("call",)

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        changed = False
        for _ in range(64):  # nested calls surface as outer ones are inlined
            comps = comps_by_name(module)
            fused = fusion_computations(module)
            calls = [
                op
                for comp in computations(module)
                if comp.comp_name not in fused
                for op in comp.instructions
                if self._inlinable(op, comps)
            ]
            # names of callees that only these calls use are free once they are inlined
            refs: dict[str, int] = {}
            for c in computations(module):
                for op in c.instructions:
                    for n in op.callees():
                        refs[n] = refs.get(n, 0) + 1
            inlined: dict[str, int] = {}
            for op in calls:
                inlined[op.attr("to_apply")] = inlined.get(op.attr("to_apply"), 0) + 1
            freed = {n for n, k in inlined.items() if refs.get(n) == k}
            names = UsedNames({
                op.inst_name
                for c in computations(module)
                if c.comp_name not in freed
                for op in c.instructions
            })  # fmt: skip
            round_changed = False
            called: set[str] = set()
            for op in calls:
                callee = comps[op.attr("to_apply")]
                root = inline_computation(op, callee, names)
                rctx.note(self, op, f"inlined {callee.comp_name}")
                op.result.replace_all_uses_with(root.result)
                op.detach()
                op.erase()
                called.add(callee.comp_name)
                round_changed = True
            remove_uncalled(module, called)
            changed |= round_changed
            if not round_changed:
                break
        return changed

    @staticmethod
    def _inlinable(op: HloOp, comps: dict[str, ComputationOp]) -> bool:
        if op.opcode not in CallInlinerPass.OPCODES or op.attr("control-predecessors"):
            return False
        if (op.attr("to_apply") or "") not in comps or is_control_predecessor(op):
            return False
        return not calls_side_effect(op, comps)
