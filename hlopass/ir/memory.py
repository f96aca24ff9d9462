"""Peak of live intermediate bytes of a module, in its instruction order.

    >>> from hlopass.ir.memory import peak_live_bytes
    >>> report = peak_live_bytes(module)
    >>> report.peak_bytes, report.at_instruction, report.per_computation["body"].peak_bytes

The model (a simple, schedule-faithful stand-in for XLA's buffer assignment):

* Each instruction defines buffers: one per leaf of its result shape (a tuple result's
  leaves; an array result is one leaf), sized as the leaf's bytes (elements x element size).
* `bitcast` and `get-tuple-element` define nothing: they alias (a leaf of) their operand,
  `tuple` aliases its operands' buffers, and `while` aliases its loop-state operand (XLA runs
  a loop in place). Uses through an alias extend the life of the aliased buffer.
* Parameters are the caller's buffers: never counted as intermediates (their total is
  `parameter_bytes`). Constants are buffers like any other result.
* A buffer is live from its defining instruction through its last use (in block order);
  buffers reachable from the root stay live to the end (they are the outputs). At
  instruction i the live set includes i's operands and i's result (no in-place reuse).
* Fused computations (`fusion` callees) and scalar combiners (reduce/sort/scatter/map
  `to_apply`) keep their intermediates in registers: only the fusion's result counts.
  A `while`, `call` or `conditional` adds the peak of its called computations (max over
  conditional branches, body and condition) on top of what is live at that instruction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hlopass.ir.shape import ArrayShape, Shape, TupleShape, byte_size

_ALIAS_OPERAND = ("bitcast",)
_NESTED = {"while": ("condition", "body"), "call": ("to_apply",),
           "conditional": ("branch_computations", "true_computation", "false_computation")}  # fmt: skip
_NO_BYTES = ("token", "opaque")


def leaf_bytes(shape: ArrayShape) -> int:
    """Bytes of one array buffer (sub-byte types as XLA stores them unpacked: 1 byte each)."""
    if shape.element_type in _NO_BYTES:
        return 0
    return shape.num_elements * max(1, byte_size(shape.element_type))


def array_leaves(shape: Shape) -> list[ArrayShape]:
    if isinstance(shape, TupleShape):
        return [leaf for e in shape.elements for leaf in array_leaves(e)]
    return [shape] if isinstance(shape, ArrayShape) else []


@dataclass
class ComputationMemory:
    """Peak of one (non-fused) computation, its called computations included."""

    name: str
    peak_bytes: int
    at_instruction: str | None  # the instruction where the peak is reached
    parameter_bytes: int
    buffer_bytes: int  # sum of all buffers it defines (no reuse): an upper bound on peak


@dataclass
class MemoryReport:
    peak_bytes: int
    at_instruction: str | None  # `computation/instruction` where the peak is reached
    parameter_bytes: int  # the entry's parameters (not part of the peak)
    per_computation: dict[str, ComputationMemory] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"peak live intermediate bytes: {self.peak_bytes} at {self.at_instruction} "
                 f"(parameters: {self.parameter_bytes})"]  # fmt: skip
        for c in self.per_computation.values():
            lines.append(f"  {c.name}: peak {c.peak_bytes} at {c.at_instruction}, "
                         f"buffers {c.buffer_bytes}, parameters {c.parameter_bytes}")  # fmt: skip
        return "\n".join(lines)


class _Analysis:
    def __init__(self, comps: dict[str, Any]):
        self.comps = comps
        self.done: dict[str, ComputationMemory] = {}
        self.deepest: dict[str, str | None] = {}  # computation -> `comp/inst` of its peak

    def computation(self, comp: Any) -> ComputationMemory:
        name = comp.comp_name
        if name in self.done:
            return self.done[name]
        self.done[name] = ComputationMemory(name, 0, None, 0, 0)  # recursion guard
        ops = [op for op in comp.instructions if op.opcode != "return"]
        # buffers: (size, defining index); per value, the buffer ids of its leaves
        sizes: list[int] = []
        start: list[int] = []
        last: list[int] = []
        of_value: dict[int, list[int]] = {}
        params = 0
        for i, op in enumerate(ops):
            opc = op.opcode
            if opc == "parameter":
                params += sum(leaf_bytes(s) for s in array_leaves(op.shape))
                of_value[id(op.result)] = []
                continue
            operand_bufs = [of_value.get(id(v), []) for v in op.operands]
            for bufs in operand_bufs:
                for b in bufs:
                    last[b] = max(last[b], i)
            if opc in _ALIAS_OPERAND or opc == "while":
                of_value[id(op.result)] = list(operand_bufs[0]) if operand_bufs else []
            elif opc == "get-tuple-element":
                of_value[id(op.result)] = element_buffers(op, operand_bufs[0])
            elif opc == "tuple":
                of_value[id(op.result)] = [b for bufs in operand_bufs for b in bufs]
            else:
                ids = []
                for leaf in array_leaves(op.shape):
                    sizes.append(leaf_bytes(leaf))
                    start.append(i)
                    last.append(i)
                    ids.append(len(sizes) - 1)
                of_value[id(op.result)] = ids
        end = len(ops)
        root = comp.root
        for b in of_value.get(id(root.result), []):
            last[b] = end
        # sweep: +size at start, -size after last use
        delta = [0] * (end + 2)
        for b, size in enumerate(sizes):
            delta[start[b]] += size
            delta[last[b] + 1] -= size
        live = 0
        peak, at = 0, None
        for i, op in enumerate(ops):
            live += delta[i]
            nested = self._nested_peak(op)
            here = live + nested[0]
            if here > peak or at is None:
                peak = here
                at = nested[1] if nested[0] else f"{name}/{op.inst_name}"
        result = ComputationMemory(name, peak, at, params, sum(sizes))
        self.done[name] = result
        return result

    def _nested_peak(self, op: Any) -> tuple[int, str | None]:
        keys = _NESTED.get(op.opcode)
        if keys is None:
            return 0, None
        best, where = 0, None
        for key in keys:
            value = op.attr(key)
            names = value if isinstance(value, tuple) else (value,) if value else ()
            for callee in names:
                comp = self.comps.get(callee)
                if comp is None:
                    continue
                m = self.computation(comp)
                if m.peak_bytes > best:
                    best, where = m.peak_bytes, m.at_instruction
        return best, where


def element_buffers(op: Any, tuple_bufs: list[int]) -> list[int]:
    """The buffers of element `index` among the flattened leaf buffers of a tuple operand."""
    shape = op.operands[0].type.data
    if not isinstance(shape, TupleShape):
        return list(tuple_bufs)
    k = op.attr("index")
    counts = [len(array_leaves(e)) for e in shape.elements]
    if len(tuple_bufs) != sum(counts):  # aliasing through something unknown: keep all
        return list(tuple_bufs)
    first = sum(counts[:k])
    return tuple_bufs[first : first + counts[k]]


def peak_live_bytes(module: Any, computation: str | None = None) -> MemoryReport:
    """Peak live intermediate bytes of `module`'s entry (or of the named computation)."""
    from hlopass.dialects.hlo import computations, entry_computation

    comps = {c.comp_name: c for c in computations(module)}
    comp = comps[computation] if computation is not None else entry_computation(module)
    an = _Analysis(comps)
    top = an.computation(comp)
    return MemoryReport(top.peak_bytes, top.at_instruction, top.parameter_bytes, dict(an.done))
