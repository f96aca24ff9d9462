"""`all-reduce-decomposer` (XLA:GPU's AllReduceDecomposer): a small all-reduce becomes
an all-gather over a new size-1 major dimension and a local reduce of it,

    all-reduce(x) -> reduce(all-gather(reshape(x) to [1, ...]), identity), dimensions={0}

for all-reduces of at most 256Ki elements (XLA:GPU's one-shot size). The reduce folds the
participants' values onto the reduction's identity in group order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp, computations
from hlopass.ir.literal import numpy_dtype
from hlopass.ir.shape import ArrayShape, array
from hlopass.passes.algsimp.helpers import reducer_opcode
from hlopass.passes.collectives.decomposers import (
    COLLECTIVE_ATTRS,
    copied,
    explicit_groups,
    group_mode,
    module_int,
)
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    new_op,
    replace_op,
    run_patterns,
    scalar_constant,
)

ONE_SHOT_ALL_REDUCE_THRESHOLD = 256 * 1024
"""XLA:GPU's `kOneShotAllReduceThreshold`: all-reduces of at most this many elements."""

_KINDS = {"add": "sum", "multiply": "product", "minimum": "min", "maximum": "max"}


def reduction_identity(op: HloOp) -> Any:
    """The identity of `op`'s reduction (XLA's `GetReductionIdentity`: +0 for a sum, the
    type's max / min for min / max, infinities for floats), or None: not a sum, product,
    min or max (`and` / `or` for pred), or min / max of complex numbers or of floats
    without infinities (XLA takes their largest finite value; left alone here)."""
    opcode = reducer_opcode(op)
    et = op.shape.element_type  # type: ignore[attr-defined]
    kind = _KINDS.get(opcode or "")
    if et == "pred":
        kind = {"and": "min", "or": "max"}.get(opcode or "", kind)
    if kind is None or (kind in ("min", "max") and et.startswith("c")):
        return None
    if kind == "sum":
        return 0
    if kind == "product":
        return 1
    if et == "pred":
        return kind == "min"
    if et.startswith(("f", "bf")):
        if "fn" in et:
            return None  # (f8e4m3fn, f4e2m1fn, ...: no infinity; not decomposed here)
        return np.inf if kind == "min" else -np.inf
    info = np.iinfo(numpy_dtype(et))
    return info.max if kind == "min" else info.min


def group_size(op: HloOp) -> int | None:
    """Participants per group (XLA's `GetReplicaGroupCountAndSize`); None when groups
    differ in size or the mode is invalid."""
    mode, groups = group_mode(op), explicit_groups(op)
    replicas, partitions = module_int(op, "replica_count"), module_int(op, "num_partitions")
    if mode is None or (mode == "flattened-id" and not groups):
        return None
    sizes = {len(g) for g in groups} if groups else {replicas}
    if len(sizes) != 1:
        return None
    (size,) = sizes
    return size * partitions if mode == "cross-replica-and-partition" else size


@dataclass
class AllReduceToAllGatherReduce(RewritePattern):
    """`all-reduce(x)` -> `reduce(all-gather(reshape(x) to [1, ...]), identity)` over the
    new major dimension, for all-reduces of at most `max_elements` elements (XLA:GPU: 256Ki).

    Guards: one array operand, a sum / product / min / max reduction with an identity,
    groups of one size."""

    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)

    ctx: RewriteContext
    max_elements: int = ONE_SHOT_ALL_REDUCE_THRESHOLD

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.OPCODE not in self.OPCODES or len(op.operands) != 1:
            return
        shape = op.shape
        if not isinstance(shape, ArrayShape) or shape.num_elements > self.max_elements:
            return
        init_value, n = reduction_identity(op), group_size(op)
        if init_value is None or n is None:
            return
        x = op.operands[0]
        xs = x.type.data  # type: ignore[attr-defined]
        one = new_op(
            rewriter, self.ctx, "reshape", [x], array(xs.element_type, (1, *xs.dims)), None, op
        )
        attrs = copied(op, *COLLECTIVE_ATTRS, "frontend_attributes") | {"dimensions": (0,)}
        gathered = array(xs.element_type, (n, *xs.dims))
        ag = new_op(rewriter, self.ctx, "all-gather", [one.result], gathered, attrs, op)
        init = scalar_constant(rewriter, self.ctx, init_value, xs.element_type)
        red = new_op(rewriter, self.ctx, "reduce", [ag.result, init.result], xs,
                     {"dimensions": (0,), "to_apply": op.attr("to_apply")}, op)  # fmt: skip
        self.ctx.note(self, op, f"into all-gather of {n} + reduce")
        replace_op(rewriter, op, red.result)


@dataclass(frozen=True)
class AllReduceDecomposerPass(HloModulePass):
    """Rewrite small all-reduces (XLA:GPU's one-shot size) as all-gather + reduce."""

    name: ClassVar[str] = "all-reduce-decomposer"

    max_elements: int = ONE_SHOT_ALL_REDUCE_THRESHOLD
    """Decompose all-reduces of at most this many elements (XLA:GPU's one-shot size, 256Ki;
    the search's collectives space tries other size bands)."""

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        return run_patterns(
            module, [AllReduceToAllGatherReduce(rctx, self.max_elements)], computations(module)
        )
