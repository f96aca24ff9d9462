"""`algsimp` family: map (XLA's `HandleMap`): a map whose computation is one elementwise
instruction of its parameters, a parameter, or a scalar constant, inlined."""

from __future__ import annotations

from hlopass.dialects.hlo import HloOp
from hlopass.dialects.opcodes import OPCODES
from hlopass.passes.algsimp.base import Simplification
from hlopass.passes.algsimp.helpers import array, callee

_ELEMENTWISE = frozenset(op for op, spec in OPCODES.items() if "elementwise" in spec.traits)
_KEPT_ATTRS = frozenset({"metadata", "sharding", "frontend_attributes", "backend_config"})
"""Attributes of the computation's root that are not copied to the inlined instruction
(it takes the map's own)."""


class MapOfElementwise(Simplification):
    """`map(xs..., to_apply={ROOT f(p_i, p_j, ...)}) -> f(x_i, x_j, ...)` (f elementwise, not
    a fusion, every operand of f a parameter); `map(xs..., {ROOT p_i}) -> x_i`;
    `map(xs..., {ROOT constant(k)}) -> broadcast(k)` (k a scalar)."""

    OPCODES = ("map",)

    def rewrite(self, op: HloOp):
        comp = callee(op)
        shape = array(op.shape)
        if comp is None or shape is None:
            return None
        root = comp.root
        if root.OPCODE == "parameter":
            return op.operands[root.attr("number", 0)]
        if root.OPCODE == "constant":
            rs = array(root.shape)
            if rs is None or rs.dims:
                return None
            c = self.array_const(root.attr("value").literal.array, rs)
            if not shape.dims:
                return c
            return self.new("broadcast", [c.result], shape, {"dimensions": ()}, like=op)
        if root.OPCODE not in _ELEMENTWISE:
            return None
        args = []
        for v in root.operands:
            p = v.owner
            if not isinstance(p, HloOp) or p.OPCODE != "parameter":
                return None
            args.append(op.operands[p.attr("number", 0)])
        attrs = {s.name: val for s, val in root.hlo_attrs() if s.name not in _KEPT_ATTRS}
        return self.new(root.OPCODE, args, shape, attrs, like=op)


PATTERNS: tuple[type[Simplification], ...] = (MapOfElementwise,)
"""This family's rewrites, in the order they fire."""
