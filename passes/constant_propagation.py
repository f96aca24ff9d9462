"""Interprocedural constant propagation for `constant-folding`: constants passed to `call`s.

A parameter of a computation that only `call` instructions reference, and that every one of
them passes the same constant (bit for bit, same shape and layout), is replaced inside the
callee by that constant; folding then continues there. The parameter and the call's operand
stay (the signature is unchanged); `dce` may drop them. Computations holding an
optimization barrier are left alone, as constant-folding leaves calls of them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ComputationOp, HloOp, computations, create_op
from hlopass.rewriting import (
    RewriteContext,
    Scope,
    call_sites_only,
    instructions,
    owner,
    same_shape,
)


def _constant_key(op: HloOp | None) -> object:
    if op is None or op.opcode != "constant":
        return None
    lit = op.attr("value")
    if lit is None or lit.literal.elided:
        return None
    arr = lit.literal.array
    return (op.shape, arr.dtype.str, arr.shape, arr.tobytes())


def _has_barrier(comp: ComputationOp) -> bool:
    return any(op.opcode == "opt-barrier" for op in instructions(comp))


def _same_constant_everywhere(sites: list, k: int) -> bool:
    """Every call site passes the same constant as operand `k`."""
    keys = {_constant_key(owner(site.operands[k])) for site in sites}
    return len(keys) == 1 and None not in keys


def propagate_call_constants(
    module: ModuleOp,
    ctx: RewriteContext,
    edited: set[ComputationOp] | None = None,
    scope: Scope | None = None,
) -> bool:
    """Propagate what can be (see above) in the whole module: the call sites it reads may
    be anywhere. The computations it edits go into `edited`."""
    changed = False
    by_name = {c.comp_name: c for c in computations(module)}
    for name, sites in call_sites_only(module, scope).items():
        comp = by_name.get(name)
        if not sites or comp is None or comp.is_entry is not None or _has_barrier(comp):
            continue
        if all(_same_constant_everywhere(sites, p.attr("number")) for p in comp.parameters()):
            continue  # (XLA: then the call itself folds where the callee allows it)
        for param in comp.parameters():
            if not param.result.uses:
                continue
            k = param.attr("number")
            consts = [owner(site.operands[k]) for site in sites]
            keys = {_constant_key(c) for c in consts}
            if len(keys) != 1 or None in keys:
                continue
            src = consts[0]
            assert src is not None
            if not same_shape(src.shape, param.shape):
                continue
            c = create_op("constant", [], param.shape, ctx.names.fresh(param.inst_name),
                          {"value": src.attr("value")})  # fmt: skip
            block = comp.body.block
            assert block.first_op is not None
            block.insert_op_before(c, block.first_op)
            param.result.replace_all_uses_with(c.result)
            if edited is not None:
                edited.add(comp)
            ctx.note(
                PropagateCallConstant(), param, f"-> {c.inst_name} (from {len(sites)} call site(s))"
            )
            changed = True
    return changed


class PropagateCallConstant:
    """Trace label of a propagated constant."""
