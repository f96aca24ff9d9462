"""The seed's all-reduce spec (TensorFlow's `tf_cnn_benchmarks` `parse_all_reduce_spec`):

    spec  ::= range (":" limit ":" range)*
    range ::= alg ["#" shards] ["/" alg]        (the seed's own `alg/alg#shards` too)
    limit ::= digits [k | K | M | G | T]        (powers of 1024)

Each range is a band: gradients of at most `limit` elements (the seed's
`split_grads_by_size` counts elements, not bytes) take that band's algorithm, the first
band that holds them winning; the last band takes the rest. Limits must grow.

Algorithms with an HLO meaning: `nccl` (a flat all-reduce) and `xring` (a ring:
reduce-scatter then all-gather); `a/b` is hierarchical (`a` inside each host, `b` across
hosts). The seed's other algorithms reduce on parameter servers or through TensorFlow's
runtime (`pscpu`, `psgpu`, `collective`, `rechd`) and have none: they are refused by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hlopass.errors import HloInputError

ALGORITHMS = ("nccl", "xring")
"""Algorithms with an HLO meaning."""

NO_HLO_MEANING = ("pscpu", "psgpu", "collective", "rechd")
"""The seed's algorithms that reduce on a parameter server's CPU or GPU, through
TensorFlow's collective runtime, or by recursive halving-doubling of TensorFlow ops."""

_SUFFIX = {"": 1, "k": 1024, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_LIMIT = re.compile(r"(\d+)([kKMGT]?)")
_RANGE = re.compile(r"([a-z]+)(?:#(\d+))?(?:/([a-z]+))?(?:#(\d+))?")


class SpecError(HloInputError):
    """A spec that does not parse, or names an algorithm without an HLO meaning."""


@dataclass(frozen=True)
class Band:
    """One range of the spec: `alg` (and `inner`, the across-host algorithm of a
    hierarchical `alg/inner`), `shards` pieces, for gradients of at most `limit` elements
    (None: the last band, no limit)."""

    alg: str
    shards: int = 1
    inner: str | None = None
    limit: int | None = None

    def text(self) -> str:
        """The range as the issue's grammar writes it: `alg[#shards][/alg]`."""
        shards = f"#{self.shards}" if self.shards != 1 else ""
        return self.alg + shards + (f"/{self.inner}" if self.inner else "")


def parse_limit(text: str) -> int:
    """`32k` -> 32768 (the seed's `parse_general_int`); SpecError otherwise."""
    m = _LIMIT.fullmatch(text)
    if not m:
        raise SpecError(f"bad all-reduce spec limit {text!r}: expected digits with k, M, G or T")
    return int(m.group(1)) * _SUFFIX[m.group(2)]


def format_limit(n: int) -> str:
    """The shortest text `parse_limit` reads back as `n`."""
    for suffix, scale in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("k", 1024)):
        if n and n % scale == 0:
            return f"{n // scale}{suffix}"
    return str(n)


def _range(text: str, spec: str) -> tuple[str, int, str | None]:
    m = _RANGE.fullmatch(text)
    if not m:
        raise SpecError(f"bad all-reduce spec {spec!r}: cannot read {text!r} (alg[#shards][/alg])")
    alg, s1, inner, s2 = m.groups()
    if s1 and s2:
        raise SpecError(f"bad all-reduce spec {spec!r}: {text!r} gives #shards twice")
    for name in (alg, inner):
        if name in NO_HLO_MEANING:
            raise SpecError(
                f"all-reduce algorithm '{name}' has no HLO meaning (it reduces on parameter "
                f"servers or through TensorFlow's runtime); use {' or '.join(ALGORITHMS)}"
            )
        if name is not None and name not in ALGORITHMS:
            raise SpecError(f"unknown all-reduce algorithm '{name}' in {spec!r} "
                            f"(known: {', '.join(ALGORITHMS)})")  # fmt: skip
    shards = int(s1 or s2 or 1)
    if shards < 1:
        raise SpecError(f"bad all-reduce spec {spec!r}: #shards must be at least 1")
    return alg, shards, inner


def parse_spec(text: str) -> tuple[Band, ...]:
    """The bands of `text`; SpecError (one line) for anything the grammar refuses."""
    parts = text.strip().split(":")
    if len(parts) % 2 == 0 or not text.strip():
        raise SpecError(f"bad all-reduce spec {text!r}: expected alg(:limit:alg)*")
    bands: list[Band] = []
    for i in range(0, len(parts), 2):
        alg, shards, inner = _range(parts[i], text)
        limit = parse_limit(parts[i + 1]) if i + 1 < len(parts) else None
        if limit is not None and bands and limit <= (bands[-1].limit or 0):
            raise SpecError(f"bad all-reduce spec {text!r}: limits must grow")
        bands.append(Band(alg, shards, inner, limit))
    return tuple(bands)


def format_spec(bands: tuple[Band, ...]) -> str:
    """The text `parse_spec` reads back as `bands`."""
    out = []
    for b in bands:
        out.append(b.text())
        if b.limit is not None:
            out.append(format_limit(b.limit))
    return ":".join(out)


def band_of(bands: tuple[Band, ...], elements: int) -> int:
    """Index of the band a gradient of `elements` elements falls in."""
    for i, b in enumerate(bands):
        if b.limit is None or elements <= b.limit:
            return i
    return len(bands) - 1
