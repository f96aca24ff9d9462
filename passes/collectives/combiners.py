"""XLA's collective combiners: `all-reduce-combiner`, `all-gather-combiner`,
`reduce-scatter-combiner`, `collective-permute-combiner`.

Each gathers collectives of one kind that may run as one (equal grouping key, no data or
control path between them, within the byte and count thresholds, in post order) into a
single tuple-shaped collective (`combine_utils.combine_by_key`, `combine_ops`). With
`gpu=true` the all-reduce, all-gather and reduce-scatter passes act as XLA's GPU compiler's
variants: pipelined collectives are kept apart from the others, the `combiner_key` and
`collective_group_key` frontend attributes join the key, and when the threshold is the
default one a module's `suggested_combiner_threshold` first combines the pipelined and
synchronous collectives up to that threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from hlopass.dialects.hlo import ComputationOp, HloOp
from hlopass.rewriting import HloModulePass, RewriteContext, TraceHook, comps_by_name

from .combine_ops import (
    CombineAllGathers,
    CombineAllReduces,
    CombineCollectivePermutes,
    CombineInstructions,
    CombineReduceScatters,
)
from .combine_utils import (
    COLLECTIVE_GROUP_KEY,
    COMBINER_KEY,
    DEFAULT_THRESHOLD_BYTES,
    DEFAULT_THRESHOLD_COUNT,
    SCHEDULING_GROUP_ID,
    all_reduce_key,
    combine_by_key,
    forget_waited_on,
    frontend_attributes,
    gpu_extra_key,
    groups_key,
    module_has_constrained_layout,
    non_fusion_computations,
    reduction_kind,
    suggested_threshold,
)

BaseKey = Callable[[HloOp, dict[str, ComputationOp]], tuple | None]


def run_rounds(module: ModuleOp, trace: TraceHook | None, combiner: CombineInstructions,
               rounds: list[tuple[BaseKey, str, int]], count: int,
               skip_while_bodies: bool = False,
               opcodes: tuple[str, ...] | None = None) -> bool:  # fmt: skip
    """Each round (base key, extra-key mode, byte threshold) over every non-fusion
    computation. Mode "" adds nothing to the key; "gpu" the GPU default key's extra text;
    "gpu-special" the first GPU round's (pipelined or synchronous collectives only).
    `opcodes`: the only ones the key may accept (computations without one are skipped)."""
    comps = comps_by_name(module)
    # combining makes no computation and no domain: the computations worked on are the
    # same in every round
    work = [
        comp for comp in non_fusion_computations(module, skip_while_bodies)
        if has_work(comp, opcodes)
    ]  # fmt: skip
    changed = False
    for base, mode, threshold in rounds:
        for comp in work:
            forget_waited_on(comp)

            def key(op: HloOp, base: BaseKey = base, mode: str = mode) -> Hashable | None:
                k = base(op, comps)
                if k is None or not mode:
                    return k
                extra = gpu_extra_key(op, only_special=mode == "gpu-special")
                return None if extra is None else (k, extra)

            changed |= combine_by_key(comp, key, combiner, threshold, count, opcodes)
            forget_waited_on(comp)
    return changed


def has_work(comp: ComputationOp, opcodes: tuple[str, ...] | None) -> bool:
    """Whether `comp` holds two instructions of `opcodes` (any two when None) and no
    domain (XLA keeps different domains apart; domains are not modelled)."""
    found = 0
    for op in comp.instructions:
        if op.OPCODE == "domain":
            return False
        found += opcodes is None or op.OPCODE in opcodes
    return found > 1


def gpu_rounds(base: BaseKey, threshold: int, default: int,
               module: ModuleOp) -> list[tuple[BaseKey, str, int]]:  # fmt: skip
    """XLA's GPU combiners' rounds: a threshold other than the default runs the default key
    alone; else the suggested threshold (if the module has one) for pipelined and
    synchronous collectives, then the default threshold for everything."""
    if threshold != default:
        return [(base, "gpu", threshold)]
    suggested = suggested_threshold(module)
    first = [(base, "gpu-special", suggested)] if suggested is not None else []
    return [*first, (base, "gpu", default)]


@dataclass(frozen=True)
class CombinerPass(HloModulePass):
    """What XLA's combiners share: the byte and count thresholds (either one not above
    zero turns the pass off) and the rounds of combining by `base_key` over every
    non-fusion computation. A subclass names its key, its combining function and, when it
    has a GPU variant, the GPU threshold counted as "not specified"."""

    # the opcodes it combines (not pattern-based: the grammar page reads this)
    OPCODES: ClassVar[tuple[str, ...]]
    COMBINER: ClassVar[type[CombineInstructions]]
    # XLA's combiners but the collective-permute one leave a module with a constrained
    # layout of their opcode alone
    KEEPS_CONSTRAINED_LAYOUTS: ClassVar[bool] = True

    combine_threshold_in_bytes: int = DEFAULT_THRESHOLD_BYTES
    """Combine until the group's result bytes would pass this (XLA: 30 MiB + 7)."""

    combine_threshold_count: int = DEFAULT_THRESHOLD_COUNT
    """Combine at most this many collectives into one (XLA: 2048)."""

    def base_key(self, op: HloOp, comps: dict[str, ComputationOp]) -> tuple | None:
        """The grouping key of `op` (None: `op` is not combined)."""
        raise NotImplementedError

    def gpu_default(self) -> int | None:
        """As XLA's GPU compiler's combiner: the threshold counted as "not specified"
        (None: the plain combiner)."""
        return None

    def skips_while_bodies(self) -> bool:
        return False

    def run(self, ctx: Context, module: ModuleOp, trace: TraceHook | None = None) -> bool:
        if self.combine_threshold_in_bytes <= 0 or self.combine_threshold_count <= 0:
            return False
        if self.KEEPS_CONSTRAINED_LAYOUTS and module_has_constrained_layout(
            module, self.OPCODES[0]
        ):
            return False
        default = self.gpu_default()
        rounds: list[tuple[BaseKey, str, int]] = [
            (self.base_key, "", self.combine_threshold_in_bytes)
        ]
        if default is not None:
            rounds = gpu_rounds(self.base_key, self.combine_threshold_in_bytes, default, module)
        combiner = self.COMBINER(RewriteContext.of(module, trace), default is not None)
        return run_rounds(module, trace, combiner, rounds, self.combine_threshold_count,
                          self.skips_while_bodies(), self.OPCODES)  # fmt: skip


@dataclass(frozen=True)
class AllReduceCombinerPass(CombinerPass):
    """Combine all-reduces of equal key into tuple-shaped all-reduces (XLA's
    AllReduceCombiner; `gpu=true`: GpuAllReduceCombiner)."""

    name: ClassVar[str] = "all-reduce-combiner"
    OPCODES: ClassVar[tuple[str, ...]] = ("all-reduce",)
    COMBINER: ClassVar[type[CombineInstructions]] = CombineAllReduces

    combine_threshold_count: int = DEFAULT_THRESHOLD_COUNT
    """Combine at most this many all-reduces into one (XLA: 2048)."""

    gpu: bool = False
    """Act as XLA's GPU compiler's combiner (pipelined apart, combiner frontend attributes
    in the key, the suggested threshold first when the threshold is the default one)."""

    default_combine_threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    """With `gpu=true`: the threshold counted as "not specified" (XLA's
    `kDefaultAllReduceCombineThreshold`)."""

    def base_key(self, op: HloOp, comps: dict[str, ComputationOp]) -> tuple | None:
        """AllReduceCombiner's key: GetAllReduceKey, never an all-reduce in a scheduling
        group (`_scheduling_group_id` frontend attribute)."""
        if op.OPCODE != "all-reduce":
            return None
        if SCHEDULING_GROUP_ID in frontend_attributes(op.attr("frontend_attributes")):
            return None
        return all_reduce_key(op, comps)

    def gpu_default(self) -> int | None:
        return self.default_combine_threshold_bytes if self.gpu else None


@dataclass(frozen=True)
class AllGatherCombinerPass(CombinerPass):
    """Combine all-gathers of equal key into tuple-shaped all-gathers (XLA's
    AllGatherCombiner; `gpu=true`: GpuAllGatherCombiner)."""

    name: ClassVar[str] = "all-gather-combiner"
    OPCODES: ClassVar[tuple[str, ...]] = ("all-gather",)
    COMBINER: ClassVar[type[CombineInstructions]] = CombineAllGathers

    combine_threshold_count: int = DEFAULT_THRESHOLD_COUNT
    """Combine at most this many all-gathers into one (XLA: 2048)."""

    combine_by_dim: bool = False
    """Combine only all-gathers of the same gather dimension (XLA's GPU flag
    `xla_gpu_enable_all_gather_combine_by_dim`, off by default); otherwise the others are
    bitcast to gather the most frequent dimension."""

    combine_different_dtypes: bool = True
    """Combine all-gathers of different element types (XLA's default)."""

    combine_while_loops: bool = True
    """Combine inside computations whose only caller is a while loop."""

    gpu: bool = False
    """Act as XLA's GPU compiler's combiner (see all-reduce-combiner)."""

    default_combine_threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    """With `gpu=true`: the threshold counted as "not specified"."""

    def gpu_default(self) -> int | None:
        return self.default_combine_threshold_bytes if self.gpu else None

    def base_key(self, op: HloOp, comps: dict[str, ComputationOp]) -> tuple | None:
        """AllGatherCombiner's key: gather dimension (if by dim), channel id presence,
        use_global_device_ids, element type (unless different ones combine), groups."""
        if op.OPCODE != "all-gather":
            return None
        dim = int(op.attr("dimensions")[0]) if self.combine_by_dim else -1
        et = "" if self.combine_different_dtypes else getattr(op.shape, "element_type", "")
        return (dim, op.attr("channel_id") is not None, bool(op.attr("use_global_device_ids")),
                et, groups_key(op))  # fmt: skip

    def skips_while_bodies(self) -> bool:
        return not self.combine_while_loops


@dataclass(frozen=True)
class ReduceScatterCombinerPass(CombinerPass):
    """Combine reduce-scatters of equal key into tuple-shaped reduce-scatters (XLA's
    ReduceScatterCombiner; `gpu=true`: GpuReduceScatterCombiner)."""

    name: ClassVar[str] = "reduce-scatter-combiner"
    OPCODES: ClassVar[tuple[str, ...]] = ("reduce-scatter",)
    COMBINER: ClassVar[type[CombineInstructions]] = CombineReduceScatters

    combine_threshold_count: int = DEFAULT_THRESHOLD_COUNT
    """Combine at most this many reduce-scatters into one (XLA: 2048)."""

    combine_by_dim: bool = False
    """Combine only reduce-scatters of the same scatter dimension (XLA's GPU flag
    `xla_gpu_enable_reduce_scatter_combine_by_dim`, off by default)."""

    combine_while_loops: bool = True
    """Combine inside computations whose only caller is a while loop."""

    gpu: bool = False
    """Act as XLA's GPU compiler's combiner (see all-reduce-combiner)."""

    default_combine_threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    """With `gpu=true`: the threshold counted as "not specified"."""

    def skips_while_bodies(self) -> bool:
        return not self.combine_while_loops

    def base_key(self, op: HloOp, comps: dict[str, ComputationOp]) -> tuple | None:
        """ReduceScatterCombiner's key: GetAllReduceKey, a recognised reduction kind, and
        the scatter dimension when combining by dimension."""
        if op.OPCODE != "reduce-scatter":
            return None
        key = all_reduce_key(op, comps)
        if key is None or reduction_kind(op, comps) is None:
            return None
        dim = int(op.attr("dimensions")[0]) if self.combine_by_dim else -1
        return (key, dim)

    def gpu_default(self) -> int | None:
        return self.default_combine_threshold_bytes if self.gpu else None


@dataclass(frozen=True)
class CollectivePermuteCombinerPass(CombinerPass):
    """Combine collective-permutes of equal source-target pairs into tuple-shaped ones
    (XLA's CollectivePermuteCombiner, which the GPU compiler runs as it is)."""

    name: ClassVar[str] = "collective-permute-combiner"
    OPCODES: ClassVar[tuple[str, ...]] = ("collective-permute",)
    COMBINER: ClassVar[type[CombineInstructions]] = CombineCollectivePermutes
    KEEPS_CONSTRAINED_LAYOUTS: ClassVar[bool] = False

    combine_threshold_count: int = DEFAULT_THRESHOLD_COUNT
    """Combine at most this many collective-permutes into one (XLA: 2048)."""

    def base_key(self, op: HloOp, comps: dict[str, ComputationOp]) -> tuple | None:
        """XLA's `GetCollectivePermuteKey`: the source-target pairs (in order), the
        combiner_key and the (non-empty) collective_group_key frontend attributes."""
        if op.OPCODE != "collective-permute":
            return None
        attrs = frontend_attributes(op.attr("frontend_attributes"))
        pairs = tuple(tuple(int(x) for x in p) for p in (op.attr("source_target_pairs") or ()))
        return (pairs, attrs.get(COMBINER_KEY, ""), attrs.get(COLLECTIVE_GROUP_KEY, ""))
