"""A would-be kernel and the size of the code XLA would emit for it.

`Kernel`: instructions of one computation planned to run as one launch; fusion passes plan
with kernels and build fusions only once the plan is made. `ir_size`: what XLA's
`GpuHloCostAnalysis` counts of a kernel's emitted code (how often each value is emitted, the
IR size, basic-block splits), which fusion rules bound (`ProducerConsumerMergedTooLarge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hlopass.kernel_structure.emitter import is_elementwise


@dataclass(eq=False)
class Kernel:
    """Instructions of one computation planned to run as one kernel.

    `members` are kept in block order (`position` gives it); `outputs` are the values the
    kernel writes (one for an ordinary fusion, several for a multi-output one). `version`
    grows on every change so cached estimates go stale."""

    outputs: list[Any]
    members: list[Any]
    position: dict[int, int]
    ids: set[int] = field(default_factory=set)
    version: int = 0
    alive: bool = True
    _inputs: tuple[int, list[Any]] | None = None

    @staticmethod
    def of(op: Any, position: dict[int, int]) -> Kernel:
        return Kernel([op], [op], position, {id(op)})

    @property
    def root(self) -> Any:
        return self.outputs[0]

    def copy(self) -> Kernel:
        """The same instructions as a kernel of its own (what the copy absorbs later does not
        reach this one)."""
        return Kernel(list(self.outputs), list(self.members), self.position, set(self.ids),
                      self.version, self.alive)  # fmt: skip

    def merged(self, other: Kernel) -> list[Any]:
        """Members of `self` and `other` together, in block order (no duplicates)."""
        extra = [m for m in other.members if id(m) not in self.ids]
        if not extra:
            return list(self.members)
        pos = self.position
        return sorted([*self.members, *extra], key=lambda m: pos[id(m)])

    def absorb(self, other: Kernel) -> None:
        self.members = self.merged(other)
        self.ids |= other.ids
        self.version += 1

    def inputs(self) -> list[Any]:
        """Values the kernel reads but does not compute, in first-use order (cached)."""
        if self._inputs is not None and self._inputs[0] == self.version:
            return self._inputs[1]
        seen: set[int] = set()
        out = []
        for m in self.members:
            for v in m.operands:
                if id(v.owner) not in self.ids and id(v) not in seen:
                    seen.add(id(v))
                    out.append(v)
        self._inputs = (self.version, out)
        return out


# XLA ElementalIrEmitter::OpInvalidatesCache: ops whose emitted code splits basic blocks.
_SPLITS_BLOCKS = frozenset({
    "concatenate", "dot", "dynamic-update-slice", "pad", "reduce", "reduce-window",
})  # fmt: skip
_PASS_THROUGH = frozenset({"tuple", "get-tuple-element"})


def ir_size(
    members: Sequence[Any], outputs: Sequence[Any]
) -> tuple[dict[int, float], float, float]:
    """(times each value is emitted, IR size, basic-block splits) of a kernel, as XLA's
    GpuHloCostAnalysis counts them: an instruction is emitted once per distinct
    elementwise-use root that reaches it; non-elementwise users make their operands new
    roots and add their own emission count."""
    ids = {id(m) for m in members}
    roots_of: dict[int, set[int]] = {}
    root_ir: dict[int, float] = {-1: 1.0}
    for o in outputs:
        roots_of.setdefault(id(o), set()).add(-1)
    emitted: dict[int, float] = {}
    size = splits = 0.0
    for op in reversed(members):
        rs = roots_of.get(id(op), set())
        e = sum(root_ir.get(r, 0.0) for r in rs)
        emitted[id(op)] = e
        size += e
        if op.opcode in _SPLITS_BLOCKS:
            splits += e
        ew = is_elementwise(op) or op.opcode in _PASS_THROUGH
        for v in op.operands:
            src = id(v.owner)
            if ew:
                roots_of.setdefault(src, set()).update(rs)
            else:
                roots_of.setdefault(src, set()).add(src)
                root_ir[src] = root_ir.get(src, 0.0) + e
            if src not in ids:
                emitted[src] = sum(root_ir.get(r, 0.0) for r in roots_of[src])
    return emitted, size, splits
