"""Which collectives of a while body `collective-pipeliner{pipelining-direction=backward}`
can compute one iteration ahead (XLA's `CollectIndependentOperandChain` and the backward
half of `CollectCollectivesToMove`)."""

from __future__ import annotations

from dataclasses import dataclass

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.ir.shape import ArrayShape
from hlopass.passes.collectives.all_reduce_folder import has_control_deps, unique_users
from hlopass.rewriting import owner

from .analysis import gte_index


@dataclass
class Chain:
    """One collective to compute ahead and the operand chain it is computed from (in
    post order: operands first), all of it cloned for the next iteration."""

    collective: HloOp
    chain: list[HloOp]


def invariant_elements(body: ComputationOp) -> set[int]:
    """XLA's invariant loop parameters: tuple elements the root passes back unchanged."""
    root = body.root
    if root.opcode != "tuple":
        return set()
    return {i for i, v in enumerate(root.operands) if gte_index(v) == i}


def _scalar(op: HloOp) -> bool:
    shape = op.shape
    return isinstance(shape, ArrayShape) and all(d == 1 for d in shape.dims)


def operand_chain(instr: HloOp, iterator: int, invariant: set[int]) -> list[HloOp] | None:
    """XLA's `CollectIndependentOperandChain`: the instructions `instr` is computed from,
    down to the body's parameter; None when the chain reads a tuple element the loop
    changes (other than the induction variable), holds a recv-done, or has an instruction
    used outside the chain that is neither an invariant element nor a scalar."""
    chain: list[HloOp] = []
    seen: set[HloOp] = {instr}
    stack: list[tuple[HloOp, int]] = [(instr, 0)]
    while stack:
        op, k = stack[-1]
        if k == len(op.operands):
            stack.pop()
            if op is not instr:
                chain.append(op)
            continue
        stack[-1] = (op, k + 1)
        src = owner(op.operands[k])
        if src is None:
            return None
        if src.opcode == "parameter":
            continue
        index = gte_index(src.result)
        if index is not None and index != iterator and index not in invariant:
            return None  # XLA's loop-variant parameter (its callback's default: refused)
        if src not in seen:
            seen.add(src)
            stack.append((src, 0))
    for op in chain:
        if op.opcode == "after-all":
            continue
        if op.opcode == "recv-done":
            return None
        if all(u in seen for u in unique_users(op.result)):
            continue
        if gte_index(op.result) in invariant or _scalar(op):
            continue
        return None
    return chain


def backward_chains(body: ComputationOp, iterator: int, should_process, limit: int,
                    allow_control: bool) -> list[Chain]:  # fmt: skip
    """XLA's `CollectChainsToPushBackwards` over the body, in order, at most `limit` (as
    forward, checked after each one)."""
    invariant = invariant_elements(body)
    out: list[Chain] = []
    for instr in list(body.instructions):
        if not should_process(instr):
            continue
        if has_control_deps(instr) and not allow_control:
            continue
        chain = operand_chain(instr, iterator, invariant)
        if chain is None:
            continue
        out.append(Chain(instr, chain))
        if len(out) >= limit:
            break
    return out
