"""What a kernel is, up to which instructions it holds: its structural signature.

LLMs repeat one layer 32 times (Mixtral: x 8 experts), so most kernels priced while fusing
are copies of a kernel priced in an earlier layer. `kernel_signature` names a kernel by
everything a price of it reads (each member's opcode, shape and attributes, its operands as
positions within the kernel or among its inputs, each input's opcode and shape, which
members are outputs), never by identity; two kernels with the same signature get the same
analysis, relabelled onto their own instructions (`hlopass.cost.shared_summaries`).
Names, metadata and control predecessors are left out (no price reads them); called
computations stay in by name (reducers are told apart, never merged by content).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_LEFT_OUT = frozenset({"name", "metadata", "control-predecessors"})


class Signatures:
    """Signatures of kernels, with each instruction's own part (opcode, shape, attributes)
    made once. Holds the instructions it has seen, so their ids are never reused while it
    lives."""

    def __init__(self) -> None:
        self._own: dict[int, tuple[Any, tuple[Any, ...]]] = {}

    def own(self, op: Any) -> tuple[Any, ...]:
        hit = self._own.get(id(op))
        if hit is None:
            props = tuple((k, v) for k, v in op.properties.items() if k not in _LEFT_OUT)
            try:
                hash(props)
            except TypeError:  # an unhashable payload (a literal's array): by identity
                props = tuple((k, _hashable(v)) for k, v in props)
            hit = self._own[id(op)] = (op, (op.opcode, op.shape, props))
        return hit[1]

    def of(self, members: Sequence[Any], outputs: Sequence[Any]) -> tuple[Any, list[Any]]:
        """(signature, inputs): the inputs are the instructions outside the kernel that its
        members read, in first-use order (a member's operand -1-j is input j)."""
        local = {id(m): i for i, m in enumerate(members)}
        seen: dict[int, int] = {}
        inputs: list[Any] = []
        items = []
        own = self.own
        for m in members:
            refs = []
            for v in m.operands:
                o = v.owner
                i = local.get(id(o))
                if i is None:
                    j = seen.get(id(o))
                    if j is None:
                        j = seen[id(o)] = len(inputs)
                        inputs.append(o)
                    i = -1 - j
                refs.append(i)
            items.append((own(m), tuple(refs)))
        outs = tuple(local.get(id(o), -1) for o in outputs)
        ins = tuple(own(o)[:2] for o in inputs)  # an input is read by its opcode and shape
        return (tuple(items), ins, outs), inputs


def _hashable(v: Any) -> Any:
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return v
