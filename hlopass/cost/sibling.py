"""Kernels summarised so that two sibling kernels (no value flows between them) are priced
as one multi-output kernel without building it.

A multi-output merge that re-analysed the merged kernel cost O(|a| + |b|) per candidate, and a
fusion that keeps absorbing siblings made the pass quadratic in the group's size. What
decides the merged kernel's time is a combination of the two kernels' facts:

* its emitter (XLA HloFusionAnalysis) comes from the outputs' heroes, which a sibling does
  not change (a hero walk stops at parameters), and from whether every root slices one
  value (the values are compared by the key of the value outside, not by parameter);
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

from hlopass.cost.fusion import _emitter, _heroes, _launch, _slices_of_one_input

NOT_SLICES = object()
"""`EmitterFacts.slices` of a kernel whose roots are not all slices of one value."""


@dataclass(frozen=True)
class EmitterFacts:
    """What picks a kernel's emitter and launch grid: its outputs, their heroes (by kind) and
    the key of the one value every root slices (`NOT_SLICES` if none)."""

    outputs: tuple[Any, ...]
    reduces: tuple[Any, ...]
    transposes: tuple[Any, ...]
    scatters: tuple[Any, ...]
    concats: tuple[Any, ...]
    slices: Any
    slices_shape: Any

    @staticmethod
    def of(members: list[Any], outputs: list[Any], key_of: Callable[[Any], Hashable]) -> EmitterFacts:  # fmt: skip
        from hlopass.cost.fusion_model import _hero_parts

        ids = {id(m) for m in members}
        parts = _hero_parts(_heroes(outputs, ids), ids)
        shape = _slices_of_one_input(outputs)
        slices: Any = NOT_SLICES
        if shape is not None:
            first = outputs[0].operands[0].owner
            slices = key_of(first)
        return EmitterFacts(tuple(outputs), *map(tuple, parts), slices, shape)  # type: ignore[arg-type]

    def rekeyed(self, key: Callable[[Hashable], Hashable]) -> EmitterFacts:
        if self.slices is NOT_SLICES:
            return self
        return EmitterFacts(self.outputs, self.reduces, self.transposes, self.scatters,
                            self.concats, key(self.slices), self.slices_shape)  # fmt: skip

    def moved(self, copies: dict[int, Any]) -> EmitterFacts:
        """The same facts once the kernel's instructions were copied (id -> copy)."""
        if not copies:
            return self

        def m(xs: tuple[Any, ...]) -> tuple[Any, ...]:
            return tuple(copies.get(id(x), x) for x in xs)

        return EmitterFacts(m(self.outputs), m(self.reduces), m(self.transposes),
                            m(self.scatters), m(self.concats), self.slices, self.slices_shape)  # fmt: skip

    def merged(self, other: EmitterFacts) -> EmitterFacts:
        same = self.slices is not NOT_SLICES and self.slices == other.slices
        return EmitterFacts(
            self.outputs + other.outputs,
            self.reduces + other.reduces,
            self.transposes + other.transposes,
            self.scatters + other.scatters,
            self.concats + other.concats,
            self.slices if same else NOT_SLICES,
            self.slices_shape if same else None,
        )

    def _parts(self) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        return list(self.reduces), list(self.transposes), list(self.scatters), list(self.concats)

    def emitter(self) -> str:
        return _emitter("", None, list(self.outputs), *self._parts(), slices=self.slices_shape)

    def launch(self, emitter: str, sm_count: int, threads_per_sm: int) -> tuple[int, int]:
        return _launch(emitter, None, list(self.outputs), *self._parts(), sm_count, [],
                       threads_per_sm, slices=self.slices_shape)  # fmt: skip


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
        _add_inputs(inputs, [(key(k), v) for k, v in self.inputs.items()])
        return SiblingSummary(self.alu, self.tensor, inputs, self.written)

    def merged(self, other: SiblingSummary) -> SiblingSummary:
        """The two (keyed alike, no value flowing between them) as one kernel."""
        inputs: dict[Hashable, Input] = {}
        _add_inputs(inputs, self.inputs.items())
        _add_inputs(inputs, other.inputs.items())
        return SiblingSummary(self.alu + other.alu, self.tensor + other.tensor, inputs,
                              self.written + other.written)  # fmt: skip


def _add_inputs(into: dict[Hashable, Input], items: Any) -> None:
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
