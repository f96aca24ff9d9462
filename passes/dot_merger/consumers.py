"""After `dot-merger`: shorten the transposes and reshapes that follow each slice of a
merged dot (XLA's SimplifyConsumerChain), e.g. a transpose pair that undoes itself."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from hlopass.dialects.hlo import HloOp
from hlopass.rewriting import RewriteContext, erase_dead, new_op

MAX_ELEMENTS = 1 << 22
"""Chains are composed on an index array of the slice's size; longer ones stay as they
are (XLA composes them symbolically, without a limit)."""


def _chain(start: HloOp, pinned: frozenset[str]) -> list[HloOp]:
    """Transposes and reshapes from `start` on, each the only user of the one before."""
    chain: list[HloOp] = []
    op = start
    while op.opcode in ("transpose", "reshape"):
        if op.attr("control-predecessors") or op.inst_name in pinned:
            break
        chain.append(op)
        uses = list(op.result.uses)
        if len(uses) != 1 or not isinstance(uses[0].operation, HloOp):
            break
        op = uses[0].operation
    return chain


def _compose(dims: tuple[int, ...], chain: list[HloOp]) -> np.ndarray:
    """Where each element of the chain's result comes from in its input (flat index)."""
    a = np.arange(int(np.prod(dims, dtype=np.int64))).reshape(dims)
    for op in chain:
        if op.opcode == "transpose":
            a = a.transpose(op.attr("dimensions"))
        else:
            a = a.reshape(op.shape.dims)  # type: ignore[attr-defined]
    return a


def _as_transpose(dims: tuple[int, ...], a: np.ndarray) -> list[int] | None:
    """The permutation `perm` with `arange(dims).transpose(perm) == a`, if one is."""
    if a.ndim != len(dims) or sorted(a.shape) != sorted(dims):
        return None
    strides = [int(np.prod(dims[k + 1 :], dtype=np.int64)) for k in range(len(dims))]
    perm: list[int] = []
    for k, n in enumerate(a.shape):
        step = int(a[tuple(1 if j == k else 0 for j in range(a.ndim))]) if n > 1 else -1
        free = [d for d in range(len(dims)) if d not in perm and dims[d] == n
                and (n == 1 or strides[d] == step)]  # fmt: skip
        if not free:
            return None
        perm.append(free[0])
    src = np.arange(a.size).reshape(dims).transpose(perm)
    return perm if np.array_equal(src, a) else None


def simplify_consumers(rewriter: PatternRewriter, ctx: RewriteContext, producer: HloOp,
                       pinned: frozenset[str]) -> None:  # fmt: skip
    """Replace each transpose/reshape chain after `producer` by the identity, one reshape
    or one transpose where the chain amounts to that and is longer."""
    dims = producer.shape.dims  # type: ignore[attr-defined]
    if int(np.prod(dims, dtype=np.int64)) > MAX_ELEMENTS:
        return
    for use in list(producer.result.uses):
        user = use.operation
        if not isinstance(user, HloOp) or user.parent is None:
            continue
        chain = _chain(user, pinned)
        if len(chain) < 2 and not (chain and _identity(producer, chain)):
            continue
        end = chain[-1]
        a = _compose(dims, chain)
        value: SSAValue | None = None
        if _identity(producer, chain):
            value = producer.result
        elif np.array_equal(a.ravel(), np.arange(a.size)):
            value = new_op(rewriter, ctx, "reshape", [producer.result], end.shape,
                           like=end, before=end).result  # fmt: skip
        elif (perm := _as_transpose(dims, a)) is not None:
            value = new_op(rewriter, ctx, "transpose", [producer.result], end.shape,
                           {"dimensions": tuple(perm)}, end, end).result  # fmt: skip
        if value is None:
            continue
        end.result.replace_all_uses_with(value)
        erase_dead(rewriter, [end.result])


def _identity(producer: HloOp, chain: list[HloOp]) -> bool:
    """The chain gives back the producer's value, in the producer's shape and layout."""
    dims = producer.shape.dims  # type: ignore[attr-defined]
    if chain[-1].shape != producer.shape:
        return False
    a = _compose(dims, chain)
    return np.array_equal(a.ravel(), np.arange(a.size))
