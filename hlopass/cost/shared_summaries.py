"""Kernel analyses shared by kernels of one structure (`kernel_signature`).

A fusion cost model keeps a summary per kernel; the summary names the kernel's inputs by
instruction. `SharedSummaries` computes a summary once per signature and gives a kernel of
the same signature a copy relabelled onto its own members and inputs (the model's
`relabel`). On Mixtral 8x7B and Llama 3.1 8B (benchmarks/fusion_scale.py) most summaries
priority fusion asks for are of kernels that an earlier layer already had.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from hlopass.kernel_structure.signature import Signatures

T = TypeVar("T")


class SharedSummaries(Generic[T]):
    """Summaries by signature, with the instructions (members, then inputs) each was made
    of, so that a hit can be relabelled position by position."""

    def __init__(self) -> None:
        self.signatures = Signatures()
        self._by_key: dict[Any, tuple[T, list[Any]]] = {}

    def get(self, members: Sequence[Any], outputs: Sequence[Any],
            compute: Callable[[], T], relabel: Callable[[T, dict[int, Any]], T | None]) -> T:  # fmt: skip
        """`compute()`'s summary of the kernel, or a summary of the same signature relabelled
        (`relabel(summary, new instruction by id of the old)`; None: not relabelable)."""
        key, inputs = self.signatures.of(members, outputs)
        objs = [*members, *inputs]
        hit = self._by_key.get(key)
        if hit is not None:
            value, old = hit
            got = relabel(value, {id(o): n for o, n in zip(old, objs, strict=True)})
            if got is not None:
                return got
        value = compute()
        if hit is None:
            self._by_key[key] = (value, objs)
        return value
