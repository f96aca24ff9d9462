"""Totals in XLA's `HloCostAnalysis` conventions (flops, transcendentals, bytes accessed), the
ones `jax ... .cost_analysis()` and `hlopass.execution.oracle.cost_analysis` report on the CPU client.

The per-opcode rules are `work.OPCODE_WORK[opcode].hlo`; this module applies the categories
first (no memory; transcendental; elementwise) and the default (operands read, output
written) to opcodes without a rule.
"""

from __future__ import annotations

from typing import Any

from hlopass.cost.counts import Work, leaf_bytes, shape_size
from hlopass.cost.work import ELEMENTWISE_EXTRA, NO_MEMORY, OPCODE_WORK, TRANSCENDENTAL
from hlopass.kernel_structure.shapes import elements, operand_shapes


class XlaCostAnalysis:
    """HloCostAnalysis conventions over a parsed module (`hlopass.parse_hlo`)."""

    def __init__(self, module: Any, unknown_custom_call: float = -1.0):
        self.unknown = unknown_custom_call
        from hlopass.dialects import hlo

        self.comps = {c.comp_name: c for c in hlo.computations(module)}
        self.module = module
        self._cache: dict[str, Work] = {}

    def entry(self) -> Any:
        from hlopass.dialects import hlo

        return hlo.entry_computation(self.module)

    def total(self) -> Work:
        return self.computation(self.entry().comp_name)

    def computation(self, name: str) -> Work:
        w = self._cache.get(name)
        if w is None:
            w = Work()
            for op in self.comps[name].instructions:
                w += self.instruction(op)
            self._cache[name] = w
        return w

    def sub(self, name: str | None, k: float) -> Work:
        """Flops and transcendentals of `k` runs of the computation `name` (no bytes)."""
        if not name or name not in self.comps:
            return Work()
        w = self.computation(name)
        return Work(w.flops * k, w.transcendentals * k, 0.0)

    def instruction(self, op: Any) -> Work:
        opc = op.opcode
        shape = op.shape
        shapes = operand_shapes(op)
        if opc in NO_MEMORY:
            return Work()
        # a tuple instruction writes its pointer table; other tuple-shaped results (variadic
        # reduce/sort, rng-bit-generator, ...) write their arrays (jaxlib 0.10)
        out_size = shape_size(shape) if opc == "tuple" else leaf_bytes(shape)
        default_bytes = out_size + sum(shape_size(s) for s in shapes)
        w = Work(bytes_accessed=default_bytes)
        if opc in TRANSCENDENTAL:
            w.transcendentals = elements(shape)
        elif "elementwise" in op.spec.traits or opc in ELEMENTWISE_EXTRA:
            w.flops = elements(shape)
        else:
            rule = OPCODE_WORK.get(opc)
            if rule is not None and rule.hlo is not None:
                return rule.hlo(self, op, w, shapes, out_size)
        return w


def xla_cost(module: Any) -> dict[str, float]:
    """Totals in XLA's HloCostAnalysis conventions: {flops, transcendentals, bytes accessed}."""
    return XlaCostAnalysis(module).total().as_dict()
