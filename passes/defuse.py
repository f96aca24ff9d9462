"""`defuse`: inline every fusion back into the computation that calls it.

The inverse of the fusion passes: `fusion(a, b), calls=f` becomes f's instructions, with f's
parameters replaced by the fusion's operands and the fusion's users reading f's root. A
multi-output fusion's `get-tuple-element` users read the tuple's elements directly.
Instructions keep their names where no surviving instruction holds them; fused computations
left without callers are removed. Library calls (`custom-call`) are not fusions and stay.
The result is a pre-fusion module again: `defuse,priority-fusion` re-plans an optimized one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.errors import HloVerifyError
from hlopass.ir.names import claim_name
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook, comps_by_name


@dataclass
class UsedNames:
    """Instruction names that stay in the module (those of fused computations are free)."""

    used: set[str]
    # per name: where `claim_name`'s probing resumes (`used` only grows, so the names
    # below it stay taken and the result is the lowest free `name.N`, as probing from 1)
    next_n: dict[str, int] = field(default_factory=dict)

    def keep_or_fresh(self, name: str) -> str:
        return claim_name(name, self.used, self.next_n)


@dataclass
class InlineFusion(RewritePattern):
    """`fusion(x...), calls=f` -> f's instructions on x... (its root replaces the fusion).

    Guards: the callee exists. get-tuple-element users of a tuple-rooted fusion are
    replaced by the tuple's elements.
    """

    OPCODES: ClassVar[tuple[str, ...]] = ("fusion",)

    ctx: RewriteContext
    comps: dict[str, ComputationOp]
    names: UsedNames

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        comp = self.comps.get(op.attr("calls") or "")
        if comp is None:
            return
        root = inline_computation(op, comp, self.names)
        self.ctx.note(self, op, f"inlined {comp.comp_name}")
        if root.opcode == "tuple":
            for use in list(op.result.uses):
                user = use.operation
                if isinstance(user, HloOp) and user.opcode == "get-tuple-element":
                    element = root.operands[user.attr("index")]
                    rewriter.replace_all_uses_with(user.result, element)
                    rewriter.erase(user)
        rewriter.replace_all_uses_with(op.result, root.result)
        rewriter.erase(op)
        if root.opcode == "tuple" and not root.result.uses:
            rewriter.erase(root)


def inline_computation(call: HloOp, comp: ComputationOp, names: UsedNames,
                       clones: list[HloOp] | None = None) -> HloOp:  # fmt: skip
    """Clone `comp`'s instructions before `call`, parameters bound to `call`'s operands;
    returns the clone of the root (and appends every clone to `clones`)."""
    mapping: dict[SSAValue, SSAValue] = {}
    params = comp.parameters()
    for p in params:
        n = p.attr("number")
        if n >= len(call.operands) or not _same_dims(call.operands[n].type.data, p.shape):  # type: ignore[attr-defined]
            raise HloVerifyError(
                f"error: {call.opcode} {call.inst_name}: operand {n} does not match parameter "
                f"{p.inst_name} ({p.shape.text()}) of {comp.comp_name}; cannot inline it"
            )
        mapping[p.result] = call.operands[n]
    block = call.parent_block()
    assert block is not None
    for inner in comp.instructions:
        if inner.opcode == "parameter":
            continue
        clone = inner.clone(value_mapper=mapping)
        clone.inst_name = names.keep_or_fresh(inner.inst_name)
        block.insert_op_before(clone, call)
        if clones is not None:
            clones.append(clone)
    out = mapping[comp.root.result].owner
    assert isinstance(out, HloOp)
    return out


def _same_dims(a: object, b: object) -> bool:
    return getattr(a, "dims", None) == getattr(b, "dims", None) and getattr(
        a, "element_type", None
    ) == getattr(b, "element_type", None)


def fusion_callees(module: ModuleOp) -> set[str]:
    return {
        name
        for c in computations(module)
        for op in c.instructions
        if op.opcode == "fusion"
        for name in op.callees()
    }


def remove_uncalled(module: ModuleOp, candidates: set[str]) -> None:
    """Erase the computations named in `candidates` that nothing calls any more."""
    while True:
        called = {n for c in computations(module) for op in c.instructions for n in op.callees()}
        dead = [c for c in computations(module) if c.comp_name in candidates - called]
        if not dead:
            return
        for c in dead:
            c.detach()
            c.erase(safe_erase=False)


@dataclass(frozen=True)
class DefusePass(HloModulePass):
    """Inline every fusion into its caller and remove the fused computations."""

    name: ClassVar[str] = "defuse"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        changed = False
        # Nested fusions (a fusion inside a fused computation) surface as the outer one is
        # inlined: repeat until no caller outside a fused computation holds a fusion.
        while True:
            fused = fusion_callees(module)
            if not fused:
                break
            comps = comps_by_name(module)
            outer = [c for c in computations(module) if c.comp_name not in fused]
            names = UsedNames({op.inst_name for c in outer for op in c.instructions})
            pattern = InlineFusion(rctx, comps, names)
            round_changed = False
            for comp in outer:
                for op in list(comp.instructions):
                    if op.opcode == "fusion" and op.parent is not None:
                        pattern.match_and_rewrite(op, PatternRewriter(op))
                        round_changed = True
            remove_uncalled(module, fused)
            changed |= round_changed
            if not round_changed:
                break
        if changed:
            from hlopass.passes.fusion.rewrites import settle

            settle(module)
        return changed
