"""`select-and-scatter-expander`: every select-and-scatter into an arg-select reduce-window
and a scatter (XLA's SelectAndScatterExpander, which XLA's GPU compiler runs in its
"optimization" pipeline: its emitters have no select-and-scatter kernel, and the two parts
fuse with their neighbours).

`select-and-scatter(x, s, init), select=S, scatter=T` ->

    r = reduce-window(x, iota_0(x), .., iota_{n-1}(x), init, -1, .., -1), to_apply=R
    scatter(broadcast(init), concatenate(reshape(r.1), .., reshape(r.n)), s), to_apply=T

The reduce-window carries, for each window, the element S selects and its index along
every dimension (one s32 iota per dimension of x); -1 marks the init, which a padded
window reads and which is never selected over a real element. R picks the left-hand
element when `S(lhs, rhs)` holds and the left-hand index is real, or when the right-hand
one is the init (S inlined into R). The scatter then adds (T) each source element into the
selected position of a broadcast of init. A window that is padding only selects index -1,
which the scatter skips; select-and-scatter writes nothing there either.

Guards: none of XLA's (every select-and-scatter is expanded). Differs from XLA's: an
instruction with control edges is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import (
    ComputationOp,
    HloOp,
    computations,
    create_op,
    new_return_op,
)
from hlopass.ir.attrs import ShapedLiteral
from hlopass.ir.literal import Literal
from hlopass.ir.shape import ArrayShape, TupleShape, array, scalar
from hlopass.rewriting import (
    HloModulePass,
    RewriteContext,
    TraceHook,
    control_predecessor_names,
    expand_in_post_order,
    insert_computation,
    new_op,
    replace_with_new,
    scalar_constant,
)


def _attrs(op: HloOp) -> dict[str, Any]:
    return {spec.name: value for spec, value in op.hlo_attrs() if spec.name != "metadata"}


class _Reducer:
    """Builds XLA's arg-select reducer of `n` iotas: parameters (x_lhs, i_lhs.., x_rhs,
    i_rhs..), root tuple (select(p, x_lhs, x_rhs), select(p, i_lhs, i_rhs)..)."""

    def __init__(self, ctx: RewriteContext, select: ComputationOp, element_type: str, n: int):
        self.ctx, self.block = ctx, Block()
        self.select, self.element_type, self.n = select, element_type, n

    def _add(self, opcode: str, operands: list[SSAValue], shape: Any, name: str,
             attrs: dict[str, Any] | None = None) -> SSAValue:  # fmt: skip
        op = create_op(opcode, operands, shape, self.ctx.names.fresh(name), attrs)
        self.block.add_op(op)
        return op.results[0]

    def _param(self, number: int, element_type: str, name: str) -> SSAValue:
        return self._add("parameter", [], scalar(element_type), name, {"number": number})

    def _inline_select(self, lhs: SSAValue, rhs: SSAValue) -> SSAValue:
        """The select computation's body on (lhs, rhs): XLA calls it, then inlines the call."""
        mapping: dict[int, SSAValue] = {}
        root: SSAValue | None = None
        for op in self.select.instructions:
            if op.opcode == "parameter":
                mapping[id(op.results[0])] = lhs if op.attr("number") == 0 else rhs
                continue
            operands = [mapping[id(v)] for v in op.operands]
            root = self._add(op.opcode, operands, op.shape, op.inst_name, _attrs(op))
            mapping[id(op.results[0])] = root
        out = mapping.get(id(self.select.root.results[0]), root)
        assert out is not None, "a select computation computes its predicate"
        return out

    def build(self) -> Block:
        n, t = self.n, self.element_type
        rhs_begin = n + 1
        neg_one = self._add("constant", [], scalar("s32"), "constant", _s32(-1))
        lhs_iota0 = self._param(1, "s32", "iota_lhs")
        rhs_iota0 = self._param(1 + rhs_begin, "s32", "iota_lhs")
        pred = scalar("pred")
        lhs_real = self._add("compare", [lhs_iota0, neg_one], pred, "compare", {"direction": "NE"})
        rhs_real = self._add("compare", [rhs_iota0, neg_one], pred, "compare", {"direction": "NE"})
        rhs_init = self._add("not", [rhs_real], pred, "not")
        x_lhs = self._param(0, t, "operand_lhs")
        x_rhs = self._param(rhs_begin, t, "operand_rhs")
        chosen = self._inline_select(x_lhs, x_rhs)
        p = self._add("and", [chosen, lhs_real], pred, "and")
        p = self._add("or", [p, rhs_init], pred, "or")
        outs = [self._add("select", [p, x_lhs, x_rhs], scalar(t), "select")]
        for i in range(1, rhs_begin):
            if i == 1:
                il, ir = lhs_iota0, rhs_iota0
            else:
                il = self._param(i, "s32", "iota_lhs")
                ir = self._param(i + rhs_begin, "s32", "iota_rhs")
            outs.append(self._add("select", [p, il, ir], scalar("s32"), "select"))
        shape = TupleShape(tuple(scalar(t) if k == 0 else scalar("s32") for k in range(n + 1)))
        root = self._add("tuple", outs, shape, "tuple")
        self.block.add_op(new_return_op(root))
        return self.block


def _s32(value: int) -> dict[str, Any]:
    """The attributes of an s32 scalar constant (as `constant_from_numpy` builds them)."""
    return {"value": ShapedLiteral(scalar("s32"), Literal(np.asarray(value, dtype=np.int32)))}


@dataclass
class ExpandSelectAndScatter(RewritePattern):
    """`select-and-scatter(x, s, init)` -> `scatter(broadcast(init), indices, s)` where the
    indices are the arg-select `reduce-window` of x and one s32 iota per dimension.

    Guards: no control edges (ours)."""

    OPCODES: ClassVar[tuple[str, ...]] = ("select-and-scatter",)

    ctx: RewriteContext
    comps: dict[str, ComputationOp]
    pinned: frozenset[str] = frozenset()

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode not in self.OPCODES:
            return
        if op.inst_name in self.pinned or op.attr("control-predecessors"):
            return
        x, source, init = op.operands
        xs, ss = x.type.data, source.type.data  # type: ignore[attr-defined]
        select = self.comps.get(op.attr("select"))
        host = op.parent_op()
        if not (isinstance(xs, ArrayShape) and isinstance(ss, ArrayShape)) or select is None:
            return
        assert isinstance(host, ComputationOp)
        n = len(xs.dims)
        iota_shape = array("s32", xs.dims)
        iotas = [
            new_op(
                rewriter,
                self.ctx,
                "iota",
                [],
                iota_shape,
                {"iota_dimension": i},
                like=op,
                before=op,
            ).result  # fmt: skip
            for i in range(n)
        ]
        block = _Reducer(self.ctx, select, xs.element_type, n).build()
        reducer = insert_computation(self.ctx, op, f"{select.comp_name}.reduce_window", block)
        neg_one = scalar_constant(rewriter, self.ctx, -1, "s32", before=op).result
        reduced = array("s32", ss.dims)
        window = new_op(rewriter, self.ctx, "reduce-window", [x, *iotas, init, *[neg_one] * n],
                        TupleShape((ss, *[reduced] * n)),
                        {"window": op.attr("window"), "to_apply": reducer}, like=op,
                        before=op)  # fmt: skip
        column = array("s32", (*ss.dims, 1))
        parts = []
        for i in range(1, n + 1):
            g = new_op(rewriter, self.ctx, "get-tuple-element", [window.result], reduced,
                       {"index": i}, like=op, before=op)  # fmt: skip
            r = new_op(rewriter, self.ctx, "reshape", [g.result], column, like=op, before=op)
            parts.append(r.result)
        base = new_op(rewriter, self.ctx, "broadcast", [init], op.shape, {"dimensions": ()},
                      like=op, before=op)  # fmt: skip
        indices = new_op(rewriter, self.ctx, "concatenate", parts, array("s32", (*ss.dims, n)),
                         {"dimensions": (n,)}, like=op, before=op)  # fmt: skip
        dims = tuple(range(n))
        attrs = {
            "update_window_dims": (),
            "inserted_window_dims": dims,
            "scatter_dims_to_operand_dims": dims,
            "index_vector_dim": len(ss.dims),
            "to_apply": op.attr("scatter"),
        }
        replace_with_new(rewriter, self.ctx, op, "scatter", [base.result, indices.result, source],
                         attrs=attrs)  # fmt: skip


@dataclass(frozen=True)
class SelectAndScatterExpanderPass(HloModulePass):
    """Expand every select-and-scatter into an arg-select reduce-window and a scatter
    (XLA's SelectAndScatterExpander)."""

    name: ClassVar[str] = "select-and-scatter-expander"

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        rctx = RewriteContext.of(module, trace)
        comps = {c.comp_name: c for c in computations(module)}
        pattern = ExpandSelectAndScatter(rctx, comps, frozenset(control_predecessor_names(module)))
        return expand_in_post_order(module, {"select-and-scatter": pattern})
