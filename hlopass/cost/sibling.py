"""Kernel summaries the fusion cost models price, in a form two sibling kernels (no value
flows between them) combine: a multi-output kernel priced without building it.

A multi-output merge that re-analysed the merged kernel cost O(|a| + |b|) per candidate, and a
fusion that keeps absorbing siblings made the pass quadratic in the group's size. What
decides the merged kernel's time is a combination of the two kernels' facts:

* its emitter comes from the two kernels' `hlopass.kernel_structure.emitter.EmitterFacts`;
* per input (`SiblingSummary`), the utilisation adds up, except that the outputs' shared 1 counts once for an
  input that reaches outputs of both kernels through elementwise ops only (`direct`);
  flops, tensor flops and bytes written add up.

Inputs are keyed by the value outside the kernel (`key_of(source op)`: a fused computation's
parameter -> the fusion's operand), so a value both kernels read is one input.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from hlopass.cost.counts import shape_size


@dataclass
class Input:
    """One input of a summarised kernel."""

    size: float  # bytes
    elem_bytes: int
    transposed: bool  # a minor-dimension transpose lies between it and an output
    util: float
    direct: bool  # reaches an output through elementwise ops only

    def add(self, other: Input) -> None:
        """The same value read by a sibling too."""
        shared = 1.0 if self.direct and other.direct else 0.0
        self.util = self.util + other.util - shared
        self.direct = self.direct or other.direct
        self.transposed = self.transposed or other.transposed


@dataclass
class SiblingSummary:
    """A kernel as the default cost model prices it, in a form siblings combine."""

    alu: float
    tensor: float
    inputs: dict[Hashable, Input]
    written: float

    def rekeyed(self, key: Callable[[Hashable], Hashable]) -> SiblingSummary:
        """The same kernel with its inputs keyed by `key(old key)` (inputs that become one
        value, as when a fusion read one value through two parameters, are added)."""
        inputs: dict[Hashable, Input] = {}
        add_inputs(inputs, [(key(k), v) for k, v in self.inputs.items()])
        return SiblingSummary(self.alu, self.tensor, inputs, self.written)

    def merged(self, other: SiblingSummary) -> SiblingSummary:
        """The two (keyed alike, no value flowing between them) as one kernel."""
        inputs: dict[Hashable, Input] = {}
        add_inputs(inputs, self.inputs.items())
        add_inputs(inputs, other.inputs.items())
        return SiblingSummary(self.alu + other.alu, self.tensor + other.tensor, inputs,
                              self.written + other.written)  # fmt: skip


def add_inputs(into: dict[Hashable, Input], items: Any) -> None:
    for k, v in items:
        got = into.get(k)
        if got is None:
            into[k] = Input(v.size, v.elem_bytes, v.transposed, v.util, v.direct)
        else:
            got.add(v)


@dataclass
class BytesSummary:
    """A kernel as the roofline model prices it: bytes of each distinct input, bytes written."""

    inputs: dict[Hashable, float]
    written: float

    def rekeyed(self, key: Callable[[Hashable], Hashable]) -> BytesSummary:
        return BytesSummary({key(k): v for k, v in self.inputs.items()}, self.written)

    def merged(self, other: BytesSummary) -> BytesSummary:
        return BytesSummary({**self.inputs, **other.inputs}, self.written + other.written)


def shape_bytes(shape: Any) -> float:
    """Bytes of every array of `shape` (a tuple's leaves, not its pointer table)."""
    leaves = shape.leaves() if hasattr(shape, "leaves") else [shape]
    return float(sum(shape_size(s) for s in leaves))
