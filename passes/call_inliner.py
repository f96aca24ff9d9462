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

from hlopass.dialects.hlo import computations
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

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        changed = False
        for _ in range(64):  # nested calls surface as outer ones are inlined
            comps = comps_by_name(module)
            fused = fusion_computations(module)
            names = UsedNames({op.inst_name for c in computations(module) for op in c.instructions})
            round_changed = False
            called: set[str] = set()
            for comp in computations(module):
                if comp.comp_name in fused:
                    continue
                for op in list(comp.instructions):
                    if op.opcode != "call" or op.attr("control-predecessors"):
                        continue
                    callee = comps.get(op.attr("to_apply") or "")
                    if callee is None or is_control_predecessor(op):
                        continue
                    if calls_side_effect(op, comps):
                        continue
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
