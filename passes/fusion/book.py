"""A producer's consumers and their prices, kept up to date one consumer at a time.

Re-pricing a producer after one of its consumers changed used to walk every consumer (find
them through the users' kernels, look each price up in the caches): a scalar read by the
~870 kernels of a Llama layer stack, re-priced each time one of them grew, made priority
fusion quadratic. The driver tells the book what changed (`put`: a consumer is new or
grew; `drop`: it died or now computes the producer itself), so re-pricing costs the changed
consumers plus sums over floats kept in block order (the same sums, in the same order, as
summing over the consumers).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from hlopass.kernel_structure.plan import Kernel
from hlopass.passes.fusion.rules import is_bitcast_kernel


class ConsumerBook:
    """The live consumers of one producer kernel (`version`: the producer's when built), in
    block order of their roots, with each one's refusal reason and times (bitcast
    consumers: no reason, times 0.0, so they add nothing to the sums)."""

    def __init__(self, version: int, consumers: list[Kernel], position: dict[int, int]):
        self.version = version
        self.position = position
        self.keys = [position[id(c.root)] for c in consumers]
        self.kernels = list(consumers)
        self.bitcast = [False] * len(consumers)
        self.why: list[str | None] = [None] * len(consumers)
        self.t = [0.0] * len(consumers)
        self.f = [0.0] * len(consumers)
        self.stale: set[int] = set(self.keys)
        """Keys whose reason is not computed yet."""
        self.untimed: set[int] = set(self.keys)
        """Keys whose times are not computed yet."""

    def put(self, c: Kernel) -> None:
        """c is a consumer now (new, or changed since it was priced)."""
        key = self.position[id(c.root)]
        i = bisect_left(self.keys, key)
        if i == len(self.keys) or self.keys[i] != key:
            for lst, v in ((self.keys, key), (self.kernels, c), (self.bitcast, False),
                           (self.why, None), (self.t, 0.0), (self.f, 0.0)):  # fmt: skip
                lst.insert(i, v)  # type: ignore[attr-defined]
        else:
            self.kernels[i] = c
        self.stale.add(key)
        self.untimed.add(key)

    def drop(self, c: Kernel) -> None:
        """c is no consumer any more."""
        key = self.position[id(c.root)]
        i = bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key and self.kernels[i] is c:
            for lst in (self.keys, self.kernels, self.bitcast, self.why, self.t, self.f):
                del lst[i]  # type: ignore[attr-defined]
            self.stale.discard(key)
            self.untimed.discard(key)

    def _index(self, key: int) -> int:
        return bisect_left(self.keys, key)

    def refusal(self, can_fuse: Callable[[Kernel], str | None]) -> tuple[str | None, bool]:
        """(the first reader's refusal in block order, whether any reader is not a bitcast)."""
        for key in self.stale:
            i = self._index(key)
            c = self.kernels[i]
            self.bitcast[i] = is_bitcast_kernel(c)
            self.why[i] = None if self.bitcast[i] else can_fuse(c)
        self.stale.clear()
        why = next((w for w in self.why if w is not None), None)
        return why, not all(self.bitcast)

    def times(self, time_us: Callable[[Kernel], float],
              fused_us: Callable[[Kernel], float]) -> tuple[float, float]:  # fmt: skip
        """(sum of the readers' own times, sum of their times with the producer fused)."""
        for key in self.untimed:
            i = self._index(key)
            if not self.bitcast[i]:
                c = self.kernels[i]
                self.t[i], self.f[i] = time_us(c), fused_us(c)
            else:
                self.t[i] = self.f[i] = 0.0
        self.untimed.clear()
        return sum(self.t), sum(self.f)

    def readers(self) -> list[Any]:
        return [c for c, b in zip(self.kernels, self.bitcast, strict=True) if not b]
