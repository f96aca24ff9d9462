"""`priority-fusion{max-temp-bytes=N}`: a fusion must not raise the peak of live
intermediate bytes of its computation above N.

Fusing a producer into its readers removes the producer's buffer but moves the reads of
the producer's inputs to the readers' places in the schedule, so those inputs live longer
(XLA has shipped fusion changes that raised a BERT's buffers from 34 to 54 GiB this way).
`LiveBytes` keeps the live ranges of one computation's buffers in block order -- the model
of `hlopass.ir.memory.peak_live_bytes`: one buffer per array leaf of each result, parameters
not counted, bitcast / get-tuple-element / tuple / while alias their operands, root
buffers live to the end -- in a segment tree (range add, global max), so each decision is
priced and applied in O(log n) per buffer touched. Nested computations (while bodies) are
guarded on their own.
"""

from __future__ import annotations

from typing import Any

from hlopass.dialects.hlo import ComputationOp
from hlopass.ir.memory import array_leaves, element_buffers, leaf_bytes
from hlopass.kernel_structure.plan import Kernel

_ALIASES = ("bitcast", "while")

TOO_MUCH_MEMORY = "peak live intermediate bytes would exceed max-temp-bytes ({} > {})"


class _MaxTree:
    """Range add, global max over positions 0..n-1 (lazy segment tree)."""

    def __init__(self, values: list[int]):
        self.n = max(1, len(values))
        self.mx = [0] * (4 * self.n)
        self.add = [0] * (4 * self.n)
        if values:
            self._build(1, 0, self.n - 1, values)

    def _build(self, node: int, lo: int, hi: int, values: list[int]) -> None:
        if lo == hi:
            self.mx[node] = values[lo]
            return
        mid = (lo + hi) // 2
        self._build(2 * node, lo, mid, values)
        self._build(2 * node + 1, mid + 1, hi, values)
        self.mx[node] = max(self.mx[2 * node], self.mx[2 * node + 1])

    def range_add(self, lo: int, hi: int, delta: int) -> None:
        if lo <= hi and delta:
            self._add(1, 0, self.n - 1, lo, hi, delta)

    def _add(self, node: int, lo: int, hi: int, a: int, b: int, delta: int) -> None:
        if b < lo or hi < a:
            return
        if a <= lo and hi <= b:
            self.mx[node] += delta
            self.add[node] += delta
            return
        mid = (lo + hi) // 2
        self._add(2 * node, lo, mid, a, b, delta)
        self._add(2 * node + 1, mid + 1, hi, a, b, delta)
        self.mx[node] = max(self.mx[2 * node], self.mx[2 * node + 1]) + self.add[node]

    @property
    def peak(self) -> int:
        return self.mx[1]


class LiveBytes:
    """Live ranges of one computation's buffers, updated as fusions are planned."""

    def __init__(self, comp: ComputationOp, position: dict[int, int]):
        ops = list(comp.instructions)
        self.position = position
        self.size: list[int] = []
        self.start: list[int] = []
        self.last: list[int] = []
        self.bufs: dict[int, list[int]] = {}  # value id -> buffers
        self.owned: dict[int, list[int]] = {}  # instruction id -> buffers it defines
        for i, op in enumerate(ops):
            operand_bufs = [self.bufs.get(id(v), []) for v in op.operands]
            for bufs in operand_bufs:
                for b in bufs:
                    self.last[b] = max(self.last[b], i)
            opc = op.opcode
            if opc == "parameter":
                ids: list[int] = []
            elif opc in _ALIASES:
                ids = list(operand_bufs[0]) if operand_bufs else []
            elif opc == "get-tuple-element":
                ids = element_buffers(op, operand_bufs[0])
            elif opc == "tuple":
                ids = [b for bufs in operand_bufs for b in bufs]
            else:
                ids = []
                for leaf in array_leaves(op.shape):
                    self.size.append(leaf_bytes(leaf))
                    self.start.append(i)
                    self.last.append(i)
                    ids.append(len(self.size) - 1)
                self.owned[id(op)] = ids
            self.bufs[id(op.result)] = ids
        end = len(ops)
        for b in self.bufs.get(id(comp.root.result), []):
            self.last[b] = end
        delta = [0] * (end + 2)
        for b, size in enumerate(self.size):
            delta[self.start[b]] += size
            delta[self.last[b] + 1] -= size
        live, values = 0, []
        for i in range(end + 1):
            live += delta[i]
            values.append(live)
        self.tree = _MaxTree(values)
        self.removed: set[int] = set()

    def _changes(self, producer: Kernel, consumers: list[Kernel], dies: bool) -> list[tuple[int, int, int]]:  # fmt: skip
        """(lo, hi, delta) range updates that fusing `producer` into `consumers` makes."""
        out: list[tuple[int, int, int]] = []
        at = max(self.position[id(c.root)] for c in consumers)
        seen: set[int] = set()
        for v in producer.inputs():
            for b in self.bufs.get(id(v), []):
                if b in seen or b in self.removed or self.last[b] >= at:
                    continue
                seen.add(b)
                out.append((self.last[b] + 1, at, self.size[b]))
        if dies:
            for b in self.owned.get(id(producer.root), []):
                if b not in self.removed:
                    out.append((self.start[b], self.last[b], -self.size[b]))
        return out

    def peak_if(self, producer: Kernel, consumers: list[Kernel], dies: bool) -> int:
        """The peak after the fusion (the tree is left unchanged)."""
        changes = self._changes(producer, consumers, dies)
        for lo, hi, d in changes:
            self.tree.range_add(lo, hi, d)
        peak = self.tree.peak
        for lo, hi, d in changes:
            self.tree.range_add(lo, hi, -d)
        return peak

    def apply(self, producer: Kernel, consumers: list[Kernel], dies: bool) -> None:
        at = max(self.position[id(c.root)] for c in consumers)
        for lo, hi, d in self._changes(producer, consumers, dies):
            self.tree.range_add(lo, hi, d)
        if dies:
            self.removed.update(self.owned.get(id(producer.root), []))
        for v in producer.inputs():
            for b in self.bufs.get(id(v), []):
                self.last[b] = max(self.last[b], at)

    @property
    def peak(self) -> int:
        return self.tree.peak


def guard_reason(live: Any, limit: int, producer: Kernel, consumers: list[Kernel],
                 dies: bool) -> str | None:  # fmt: skip
    """Refuse when the fusion lifts the peak above `limit` (a plan already above it may
    still take fusions that do not raise its peak)."""
    if not consumers:
        return None
    before = live.peak
    after = live.peak_if(producer, consumers, dies)
    if after > limit and after > before:
        return TOO_MUCH_MEMORY.format(after, limit)
    return None
