"""Dimension orders: how a Triton GEMM tile walks each tensor of the fusion (XLA's
`triton_fusion::DimensionOrder`, in `triton_tiling_propagation`).

A tensor's order is a list of *fragments*, physical (minor to major): each a piece of one
of the dot operand's (or output's) logical dimensions, with its element count and, where
the tensor is a slice, the start and count read. `dims[d]` lists the fragments of logical
dimension `d` in logical order (minor first). Propagating an order through an instruction
gives the order of its operands (output to input) or of its result (input to output), or
a refusal (a string, XLA's reason), when the tiling could not follow it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_SPLIT = 1
"""XLA's `kNoSplitRequirement`: no requirement on the splittable dimension's major part."""


@dataclass
class Fragment:
    dim: int
    """The dot operand's (or output's) logical dimension this fragment belongs to."""
    count: int
    slice_start: int = 0
    sliced_count: int = -1

    def __post_init__(self) -> None:
        if self.sliced_count < 0:
            self.sliced_count = self.count

    @property
    def is_sliced(self) -> bool:
        return self.count != self.sliced_count

    def copy(self) -> Fragment:
        return Fragment(self.dim, self.count, self.slice_start, self.sliced_count)


@dataclass
class DimOrder:
    frags: list[Fragment] = field(default_factory=list)
    dims: dict[int, list[int]] = field(default_factory=dict)
    """Per logical dimension, the indices into `frags` of its fragments (minor first)."""

    @staticmethod
    def of_shape(dims: tuple[int, ...], minor_to_major: tuple[int, ...]) -> DimOrder:
        """The order of a dot operand or output: one fragment per dimension."""
        order = DimOrder()
        for d in minor_to_major:
            order.dims.setdefault(d, []).append(len(order.frags))
            order.frags.append(Fragment(d, dims[d]))
        return order

    def spec(self) -> tuple:
        """XLA's TensorIterationSpec of this order, as a hashable value: per dimension,
        (stride, count, slice start, sliced count, subfragments) of each contiguous run,
        size-1 runs dropped. Two nodes of one operand's fusion are one node when their
        instruction and spec are equal."""
        spec: dict[int, list[list]] = {}
        stride, last = 1, -1
        for f in self.frags:
            runs = spec.setdefault(f.dim, [])
            if last == f.dim:
                if runs and runs[-1][4] and runs[-1][4][-1] == 1:
                    runs[-1][4].pop()
                if f.count > 1:
                    run = runs[-1]
                    run[2] = f.slice_start * run[1]
                    run[3] = f.sliced_count * run[1]
                    run[1] *= f.count
                    run[4].append(f.sliced_count)
            else:
                runs.append([stride, f.count, f.slice_start, f.sliced_count, [f.sliced_count]])
            stride *= f.count
            last = f.dim
        out = []
        for d in sorted(spec):
            runs = spec[d]
            if len(runs) > 1:
                runs = [r for r in runs if r[1] != 1]
            if runs:
                out.append((d, tuple((r[0], r[1], r[2], r[3], tuple(r[4])) for r in runs)))
        return tuple(out)


def requirements(order: DimOrder, splittable: int) -> int | str:
    """XLA's GetRequirementsIfSupportedOrder: the major part size a split of the
    splittable dimension needs (`NO_SPLIT` for none), or why the order is not supported.
    Within a dimension fragments must stay in order; only `splittable` may be split
    physically, once."""
    split = NO_SPLIT
    for d, idx in order.dims.items():
        if any(order.frags[i].is_sliced for i in idx[:-1]):
            return "Sliced non-major-most fragment."
        groups, last_end, k = 0, -1, 0
        while k < len(idx):
            size = order.frags[idx[k]].count
            while k + 1 < len(idx) and idx[k + 1] == idx[k] + 1:
                k += 1
                size *= order.frags[idx[k]].count
            if size == 1:
                k += 1
                continue
            if last_end > idx[k]:
                return "Transpose within a dimension."
            groups += 1
            if groups > 1:
                if d != splittable:
                    return "Unsupported split of a dimension."
                if groups > 2:
                    return "2nd split of a splittable dimension."
                if split not in (NO_SPLIT, size):
                    return "Conflicting splits of splittable dimension"
                split = size
            last_end = idx[k]
            k += 1
    return split


def combine(a: int, b: int | str) -> int | str:
    """XLA's CombineDotRequirements of two split requirements."""
    if isinstance(b, str):
        return b
    if a == b or b == NO_SPLIT:
        return a
    if a == NO_SPLIT:
        return b
    return "Conflicting splits of splittable dimension"


def bitcast_order(src: DimOrder, dims: tuple[int, ...],
                  minor_to_major: tuple[int, ...]) -> DimOrder | str:  # fmt: skip
    """XLA's GetPropagatedDimOrdersForBitcast: `src` projected onto a tensor of `dims`
    laid out as `minor_to_major` holding the same bytes, fragments split where a
    destination dimension ends inside one."""
    out = DimOrder()
    made: dict[int, list[int]] = {}
    remaining = 1
    it = iter(minor_to_major)
    for si, f in enumerate(src.frags):

        def add(frag: Fragment, si: int = si) -> None:
            out.frags.append(frag)
            made.setdefault(si, []).append(len(out.frags) - 1)

        if remaining >= f.count:
            if remaining % f.count:
                return "Unsupported bitcast"
            add(f.copy())
            remaining //= f.count
            continue
        left = f.count
        if remaining > 1:
            if left % remaining or f.is_sliced:
                return "Unsupported bitcast"
            add(Fragment(f.dim, remaining))
            left //= remaining
            remaining = 1
        while left > 1:
            d = next(it, None)
            if d is None:
                return "Unsupported bitcast"
            size = dims[d]
            piece = size
            if size > left:
                if size % left:
                    return "Unsupported bitcast"
                remaining = size // left
                piece = left
            if f.is_sliced:
                return "Unsupported bitcast"
            add(Fragment(f.dim, piece))
            left //= piece
    if remaining != 1:
        return "Unsupported bitcast"
    for d in it:
        if dims[d] != 1:
            return "Unsupported bitcast"
        if out.frags:
            out.frags.append(Fragment(out.frags[-1].dim, 1))
            made.setdefault(len(src.frags) - 1, []).append(len(out.frags) - 1)
    for d, idx in src.dims.items():
        for i in idx:
            if made.get(i):
                out.dims.setdefault(d, []).extend(made[i])
    return out
