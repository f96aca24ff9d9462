"""Kernel analyses shared by kernels of one structure (`kernel_signature`).

A fusion cost model keeps a summary per kernel; the summary names the kernel's inputs by
instruction. `SharedSummaries` computes a summary once per signature and gives a kernel of
the same signature a copy relabelled onto its own members and inputs (the model's
`relabel`). On Mixtral 8x7B and Llama 3.1 8B (benchmarks/fusion_scale.py) most summaries
priority fusion asks for are of kernels that an earlier layer already had.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from hlopass.kernel_structure.plan import Kernel
from hlopass.kernel_structure.signature import Signatures

T = TypeVar("T")


class SharedSummaries(Generic[T]):
    """Summaries by signature, with the instructions (members, then inputs) each was made
    of, so that a hit can be relabelled position by position."""

    def __init__(self, signatures: Signatures) -> None:
        self.signatures = signatures
        self._by_key: dict[int, tuple[T, list[Any]]] = {}
        self.pairs: dict[tuple[int, int, tuple[Any, ...]], float] = {}
        """Prices of producer-consumer fusions by `Signatures.pair` (see the model)."""

    def get(self, k: Kernel, compute: Callable[[], T],
            relabel: Callable[[T, dict[int, Any]], T | None]) -> T:  # fmt: skip
        """`compute()`'s summary of kernel `k`, or a summary of the same signature relabelled
        (`relabel(summary, new instruction by id of the old)`; None: not relabelable)."""
        sig = self.signatures.of_kernel(k)
        key = sig.sid
        objs = [*k.members, *sig.inputs]
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
