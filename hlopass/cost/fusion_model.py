"""Fusion cost models: what a fusion pass asks a performance model, shaped like XLA's
`FusionCostModel` (xla/hlo/transforms/fusion_cost_model.h).

A `Kernel` is a would-be kernel: instructions of one computation (`members`, in block
order) run as one launch writing `outputs`. Passes price candidate fusions by passing
kernels; nothing is built. A model answers:

* `estimate_run_times(producer, consumers)` -> `RunTimes(unfused_us, fused_us)`, XLA's
  `EstimateRunTimesForPriorityFusion`: unfused = t(producer) + sum t(consumer_i), fused =
  sum t(producer + consumer_i); every t includes the 1 µs launch of its kernel;
* `estimate_multi_output(a, b)`: the two kernels separately vs as one multi-output kernel;
* `would_explode_ir_size(producer, consumer)`: XLA's `ProducerConsumerMergedTooLarge`;
* `on_instruction_fused(producer, consumer, fused)` and `invalidate(kernel)`: cached
  estimates are keyed by kernel identity and version, dropped when a kernel changes.

`DefaultFusionCostModel` prices kernels with `hlopass.cost` (XLA's default GPU performance
model plus our gemm rule); `RooflineFusionCostModel` only counts DRAM bytes. Pick one by
name with `fusion_cost_model("default" | "roofline", device)`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hlopass.cost.devices import DeviceSpec, get_device
from hlopass.cost.fusion import (
    _emitter,
    _heroes,
    is_elementwise,
    reduction_dims,
    reduction_faster_than_elemental,
    transpose_launch,
)
from hlopass.cost.sibling import (
    BytesSummary,
    EmitterFacts,
    Input,
    SiblingSummary,
    _add_inputs,
)
from hlopass.cost.work import shape_size, transpose_is_bitcast
from hlopass.shape import ArrayShape

# --- kernels ---------------------------------------------------------------------------------


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


# --- what XLA's emitters see ------------------------------------------------------------------


def emitter_kind(members: Sequence[Any], outputs: Sequence[Any]) -> str:
    """The emitter XLA would pick for `members` writing `outputs` (HloFusionAnalysis):
    reduction, transpose, scatter, concatenate, in_place_dus or loop."""
    ids = {id(m) for m in members}
    parts = _hero_parts(_heroes(list(outputs), ids), ids)
    return _emitter("", None, list(outputs), *parts)


INPUT_EMITTERS = frozenset({"reduction", "transpose", "scatter", "concatenate", "input_slices"})


def fusion_kind(members: Sequence[Any], outputs: Sequence[Any]) -> str:
    """XLA's `ChooseKind`: kInput for reduction, tiled-transpose, scatter and concatenate
    heroes, else kLoop."""
    return "kInput" if emitter_kind(members, outputs) in INPUT_EMITTERS else "kLoop"


def is_unnested_reduction(op: Any) -> bool:
    """XLA `IsReductionFromOrToContiguousDimensions` (and faster than the loop emitter)."""
    if op.opcode != "reduce":
        return False
    is_row, dims = reduction_dims(op)
    return reduction_faster_than_elemental(is_row, dims)


def is_tiled_transpose(op: Any) -> bool:
    return (
        op.opcode == "transpose"
        and not transpose_is_bitcast(op)
        and transpose_launch(op, size_rule=True) is not None
    )


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


MAX_IR_SIZE = 10000  # XLA kMaxIRSize
MAX_BASIC_BLOCK_SPLITS = 10  # XLA kMaxBasicBlockSplitsPerFusion


# --- the interface ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunTimes:
    unfused_us: float
    fused_us: float

    @property
    def benefit_us(self) -> float:
        return self.unfused_us - self.fused_us


class FusionCostModel(ABC):
    """What fusion passes ask a performance model; subclasses price one kernel."""

    name: str = ""

    def __init__(self, device: str | DeviceSpec = "h100_sxm"):
        self.device = get_device(device)
        self._time: dict[int, tuple[int, float]] = {}
        self._pair: dict[tuple[int, int], tuple[int, int, float]] = {}
        self._ir: dict[int, tuple[int, dict[int, float], float, float]] = {}
        self._pairs_of: dict[int, set[tuple[int, int]]] = {}

    @abstractmethod
    def kernel_time_us(self, members: Sequence[Any], outputs: Sequence[Any]) -> float:
        """Estimated time of `members` run as one kernel writing `outputs`, launch included."""

    @property
    def launch_us(self) -> float:
        return self.device.launch_overhead_us

    # sibling (multi-output) merges priced from summaries, nothing built
    def sibling_summary(self, members: Sequence[Any], outputs: Sequence[Any],
                        key_of: Callable[[Any], Any]) -> Any:  # fmt: skip
        """What this model needs of a kernel to price it merged with a sibling: a summary
        with `merged(other)` and `rekeyed(key)`, its inputs keyed by `key_of(source op)`."""
        raise NotImplementedError(f"cost model '{self.name}' has no sibling summaries")

    def sibling_time_us(self, summary: Any, facts: EmitterFacts) -> float:
        """Estimated time of a (possibly merged) `sibling_summary` whose emitter is decided
        by `facts`, launch included."""
        raise NotImplementedError(f"cost model '{self.name}' has no sibling summaries")

    # cached queries
    def time_us(self, k: Kernel) -> float:
        hit = self._time.get(id(k))
        if hit is not None and hit[0] == k.version:
            return hit[1]
        t = self.kernel_time_us(k.members, k.outputs)
        self._time[id(k)] = (k.version, t)
        return t

    def fused_time_us(self, producer: Kernel, consumer: Kernel) -> float:
        key = (id(producer), id(consumer))
        hit = self._pair.get(key)
        if hit is not None and hit[0] == producer.version and hit[1] == consumer.version:
            return hit[2]
        t = self.kernel_time_us(consumer.merged(producer), consumer.outputs)
        self._pair[key] = (producer.version, consumer.version, t)
        self._pairs_of.setdefault(id(producer), set()).add(key)
        self._pairs_of.setdefault(id(consumer), set()).add(key)
        return t

    def estimate_run_times(self, producer: Kernel, consumers: Sequence[Kernel]) -> RunTimes:
        unfused = self.time_us(producer) + sum(self.time_us(c) for c in consumers)
        fused = sum(self.fused_time_us(producer, c) for c in consumers)
        return RunTimes(unfused, fused)

    def estimate_multi_output(self, a: Kernel, b: Kernel) -> RunTimes:
        """a and b as two kernels vs one kernel writing both (sibling or producer-consumer
        multi-output fusion; a value b reads from a is then not re-read from memory)."""
        members = a.merged(b)
        outputs = [*a.outputs, *[o for o in b.outputs if id(o) not in {id(x) for x in a.outputs}]]
        return RunTimes(self.time_us(a) + self.time_us(b), self.kernel_time_us(members, outputs))

    def ir_size(self, k: Kernel) -> tuple[dict[int, float], float, float]:
        """(times each value is emitted, IR size, basic-block splits), cached."""
        hit = self._ir.get(id(k))
        if hit is not None and hit[0] == k.version:
            return hit[1], hit[2], hit[3]
        emitted, size, splits = ir_size(k.members, k.outputs)
        self._ir[id(k)] = (k.version, emitted, size, splits)
        return emitted, size, splits

    def would_explode_ir_size(self, producer: Kernel, consumer: Kernel) -> bool:
        """XLA's ProducerConsumerMergedTooLarge: the producer's code is emitted as often as
        the consumer reads it; each basic-block split doubles what follows."""
        emitted, c_size, c_splits = self.ir_size(consumer)
        replication = max(1.0, emitted.get(id(producer.root), 1.0))
        _, p_size, p_splits = self.ir_size(producer)
        n_splits = replication * p_splits + c_splits
        if n_splits > MAX_BASIC_BLOCK_SPLITS:
            return True
        return (p_size * replication + c_size) * 2**n_splits > MAX_IR_SIZE

    # hooks
    def on_instruction_fused(self, producer: Kernel, consumer: Kernel, fused: Kernel) -> None:
        for k in (producer, consumer, fused):
            self.invalidate(k)

    def invalidate(self, k: Kernel) -> None:
        self._time.pop(id(k), None)
        self._ir.pop(id(k), None)
        for key in self._pairs_of.pop(id(k), ()):
            self._pair.pop(key, None)

    def clear(self) -> None:
        self._time.clear()
        self._pair.clear()
        self._ir.clear()
        self._pairs_of.clear()


@dataclass
class _Summary:
    """What the default model keeps per kernel to price fusions with it cheaply."""

    alu: float
    tensor: float
    util: dict[int, float]  # utilisation of each input (by producing instruction)
    inputs: list[tuple[Any, float, int, bool]]  # (producer op, bytes, element bytes, coalesced)
    written: float
    emitter: str
    blocks: int
    threads: int


class DefaultFusionCostModel(FusionCostModel):
    """`hlopass.cost`: XLA's default GPU performance model (per-input reads with
    utilisation and cache re-reads, measured op costs, the emitter's launch grid).

    As XLA's `EstimateRunTimeForFusion`, a producer-consumer fusion is priced from the
    two kernels' analyses (flops = producer's x its utilisation in the consumer +
    consumer's; inputs merged), not by re-analysing the merged kernel, so re-pricing after
    a fusion costs O(inputs), not O(instructions)."""

    name = "default"

    def __init__(self, device: str | DeviceSpec = "h100_sxm"):
        super().__init__(device)
        self._analyzer: Any = None
        self._summary: dict[int, tuple[int, _Summary]] = {}

    def _an(self, op: Any) -> Any:
        if self._analyzer is None:
            from hlopass.cost import _module_of, _state

            self._analyzer = _state(_module_of(op))[0]
        return self._analyzer

    def kernel_time_us(self, members: Sequence[Any], outputs: Sequence[Any]) -> float:
        return self._time_of(self._summarize(list(members), list(outputs)))

    def summary(self, k: Kernel) -> _Summary:
        hit = self._summary.get(id(k))
        if hit is not None and hit[0] == k.version:
            return hit[1]
        s = self._summarize(k.members, k.outputs)
        self._summary[id(k)] = (k.version, s)
        return s

    def time_us(self, k: Kernel) -> float:
        hit = self._time.get(id(k))
        if hit is not None and hit[0] == k.version:
            return hit[1]
        t = self._time_of(self.summary(k))
        self._time[id(k)] = (k.version, t)
        return t

    def fused_time_us(self, producer: Kernel, consumer: Kernel) -> float:
        key = (id(producer), id(consumer))
        hit = self._pair.get(key)
        if hit is not None and hit[0] == producer.version and hit[1] == consumer.version:
            return hit[2]
        t = self._fused_time(producer, consumer)
        self._pair[key] = (producer.version, consumer.version, t)
        self._pairs_of.setdefault(id(producer), set()).add(key)
        self._pairs_of.setdefault(id(consumer), set()).add(key)
        return t

    def invalidate(self, k: Kernel) -> None:
        super().invalidate(k)
        self._summary.pop(id(k), None)

    def clear(self) -> None:
        super().clear()
        self._summary.clear()

    # -- analysis ------------------------------------------------------------------------

    def _summarize(self, members: list[Any], outputs: list[Any]) -> _Summary:
        from hlopass.cost.fusion import _launch, _uncoalesced_sources, utilizations

        if len(members) == 1 and outputs[0] is members[0] and _plain_elementwise(members[0]):
            return self._summarize_elementwise(members[0])
        util = utilizations(members, outputs)
        ids = {id(m) for m in members}
        alu, tensor, sources = self._flops_and_sources(members, util)
        heroes = _heroes(outputs, ids)
        parts = _hero_parts(heroes, ids)
        emitter = _emitter("", None, outputs, *parts)
        bad = _uncoalesced_sources(members, sources, ids) if emitter != "transpose" else set()
        inputs = [(s, float(_bytes(s.shape)), _elem_bytes(s.shape), id(s) not in bad)
                  for s in sources]  # fmt: skip
        written = _written(outputs)
        dev = self.device
        blocks, threads = _launch(emitter, None, outputs, *parts, dev.sm_count, members,
                                  dev.threads_per_sm)  # fmt: skip
        ext = {id(s): util.get(id(s), 0.0) for s in sources}
        return _Summary(alu, tensor, ext, inputs, written, emitter, blocks, threads)

    def sibling_summary(self, members: Sequence[Any], outputs: Sequence[Any],
                        key_of: Callable[[Any], Any]) -> SiblingSummary:  # fmt: skip
        from hlopass.cost.fusion import _uncoalesced_sources, utilizations

        members, outputs = list(members), list(outputs)
        direct: set[int] = set()
        util = utilizations(members, outputs, direct=direct)
        alu, tensor, sources = self._flops_and_sources(members, util)
        ids = {id(m) for m in members}
        bad = _uncoalesced_sources(members, sources, ids)
        inputs: dict[Any, Input] = {}
        _add_inputs(inputs, [
            (key_of(src), Input(_bytes(src.shape), _elem_bytes(src.shape), id(src) in bad,
                                util.get(id(src), 0.0), id(src) in direct))
            for src in sources
        ])  # fmt: skip
        return SiblingSummary(alu, tensor, inputs, _written(outputs))

    def sibling_time_us(self, summary: SiblingSummary, facts: EmitterFacts) -> float:
        from hlopass.cost.fusion import Read

        s, dev = summary, self.device
        emitter = facts.emitter()
        blocks, threads = facts.launch(emitter, dev.sm_count, dev.threads_per_sm)
        reads = []
        for x in s.inputs.values():
            total = float(int(x.size * x.util))
            coalesced = emitter == "transpose" or not x.transposed
            reads.append(Read(min(x.size, total), total, x.elem_bytes, coalesced))
        work = _Summary(s.alu, s.tensor, {}, [], s.written, emitter, blocks, threads)
        return self._time_of(work, reads)

    def _flops_and_sources(self, members: list[Any], util: dict[int, float]) -> tuple[float, float, list[Any]]:  # fmt: skip
        """(ALU flops, tensor flops, inputs in first-use order) of a kernel."""
        counter = self._an(members[0]).counter
        ids = {id(m) for m in members}
        alu = tensor = 0.0
        sources: list[Any] = []
        seen: set[int] = set()
        for op in members:
            opc = op.opcode
            if opc not in ("parameter", "constant", "get-tuple-element", "tuple"):
                t = counter.tensor(op)
                if t:
                    tensor += t
                else:
                    alu += util.get(id(op), 0.0) * counter.alu(op)
            elif opc == "parameter" and id(op) not in seen:  # a fused computation's input
                seen.add(id(op))
                sources.append(op)
            for v in op.operands:
                src = v.owner
                if id(src) not in ids and id(src) not in seen:
                    seen.add(id(src))
                    sources.append(src)
        return alu, tensor, sources

    def _summarize_elementwise(self, op: Any) -> _Summary:
        """The general analysis, short-cut for one elementwise instruction (most kernels
        before fusion): every operand read once per output element, the loop emitter."""
        from hlopass.cost.fusion import loop_launch
        from hlopass.cost.work import elements

        alu = self._an(op).counter.alu(op)
        inputs = []
        seen: set[int] = set()
        for v in op.operands:
            src = v.owner
            if id(src) not in seen:
                seen.add(id(src))
                inputs.append((src, float(_bytes(src.shape)), _elem_bytes(src.shape), True))
        dev = self.device
        blocks, threads = loop_launch(elements(op.shape), dev.sm_count, dev.threads_per_sm)
        util = dict.fromkeys(seen, 1.0)
        return _Summary(alu, 0.0, util, inputs, _bytes(op.shape), "loop", blocks, threads)

    def _time_of(self, s: _Summary, reads: list[Any] | None = None) -> float:
        from hlopass.cost.fusion import Read
        from hlopass.cost.model import KernelWork, kernel_time

        if reads is None:
            reads = []
            for src, size, eb, coalesced in s.inputs:
                total = float(int(size * s.util.get(id(src), 0.0)))
                reads.append(Read(min(size, total), total, eb, coalesced))
        w = KernelWork(alu_ops=s.alu, tensor_flops=s.tensor, reads=reads,
                       bytes_written=s.written, blocks=s.blocks,
                       threads_per_block=s.threads, emitter=s.emitter)  # fmt: skip
        w.threads = s.blocks * s.threads
        return kernel_time(w, self.device).time_us

    def _fused_time(self, producer: Kernel, consumer: Kernel) -> float:
        from hlopass.cost.fusion import Read

        p, c = self.summary(producer), self.summary(consumer)
        ids = _Union(consumer.ids, producer.ids)
        parts = _hero_parts(_heroes(consumer.outputs, ids), ids)
        emitter = _emitter("", None, consumer.outputs, *parts)
        if emitter != c.emitter:  # the producer changes the emitter: analyse it whole
            return self.kernel_time_us(consumer.merged(producer), consumer.outputs)
        u = c.util.get(id(producer.root), 0.0)
        totals: dict[int, list[Any]] = {}
        for src, size, eb, coalesced in c.inputs:
            if src is producer.root:
                continue
            totals[id(src)] = [size, size * c.util.get(id(src), 0.0), eb, coalesced]
        for src, size, eb, coalesced in p.inputs:
            extra = size * p.util.get(id(src), 0.0) * u
            got = totals.get(id(src))
            if got is None:
                totals[id(src)] = [size, extra, eb, coalesced]
            else:
                got[1] += extra
                got[3] = got[3] and coalesced
        reads = []
        for size, total, eb, coalesced in totals.values():
            total = float(int(total))
            reads.append(Read(min(size, total), total, eb, coalesced))
        fused = _Summary(p.alu * u + c.alu, p.tensor * u + c.tensor, {}, [], c.written,
                         c.emitter, c.blocks, c.threads)  # fmt: skip
        return self._time_of(fused, reads)


def _written(outputs: list[Any]) -> float:
    written = 0.0
    for o in outputs:
        if o.opcode == "dynamic-update-slice":
            written += _bytes(o.operands[1].type.data)
        else:
            written += _bytes(o.shape)
    return written


def _plain_elementwise(op: Any) -> bool:
    return (
        is_elementwise(op)
        and op.opcode != "copy"
        and bool(op.operands)
        and isinstance(getattr(op, "shape", None), ArrayShape)
    )


class _Union:
    """Membership in either of two id sets, without building their union."""

    __slots__ = ("a", "b")

    def __init__(self, a: set[int], b: set[int]):
        self.a, self.b = a, b

    def __contains__(self, x: object) -> bool:
        return x in self.a or x in self.b


def _hero_parts(heroes: list[Any], ids: Any) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    reduces = [h for h in heroes if h.opcode == "reduce" and id(h) in ids]
    transposes = [
        h for h in heroes
        if h.opcode == "transpose" and id(h) in ids and not transpose_is_bitcast(h)
    ]  # fmt: skip
    scatters = [h for h in heroes if h.opcode == "scatter" and id(h) in ids]
    concats = [h for h in heroes if h.opcode == "concatenate" and id(h) in ids]
    return reduces, transposes, scatters, concats


def _elem_bytes(shape: Any) -> int:
    from hlopass.shape import ELEMENT_BITS

    return max(1, (ELEMENT_BITS.get(getattr(shape, "element_type", "f32"), 32) + 7) // 8)


class RooflineFusionCostModel(FusionCostModel):
    """Bytes only: launch + (distinct inputs read + outputs written) / DRAM bandwidth."""

    name = "roofline"

    def kernel_time_us(self, members: Sequence[Any], outputs: Sequence[Any]) -> float:
        return self._bytes_time(self.sibling_summary(members, outputs, id))

    def sibling_summary(self, members: Sequence[Any], outputs: Sequence[Any],
                        key_of: Callable[[Any], Any]) -> BytesSummary:  # fmt: skip
        """Inputs: values read from outside, and a fused computation's parameters."""
        ids = {id(m) for m in members}
        inputs: dict[Any, float] = {}
        for m in members:
            if m.opcode == "parameter":
                inputs.setdefault(key_of(m), _bytes(m.shape))
            for v in m.operands:
                if id(v.owner) not in ids:
                    inputs.setdefault(key_of(v.owner), _bytes(v.type.data))
        return BytesSummary(inputs, sum(_bytes(o.shape) for o in outputs))

    def sibling_time_us(self, summary: BytesSummary, facts: EmitterFacts) -> float:
        return self._bytes_time(summary)

    def _bytes_time(self, summary: BytesSummary) -> float:
        nbytes = sum(summary.inputs.values()) + summary.written
        return self.launch_us + nbytes / self.device.hbm_bandwidth * 1e6


def _bytes(shape: Any) -> float:
    leaves = shape.leaves() if hasattr(shape, "leaves") else [shape]
    return float(sum(shape_size(s) for s in leaves))


COST_MODELS: dict[str, Callable[[str | DeviceSpec], FusionCostModel]] = {
    "default": DefaultFusionCostModel,
    "roofline": RooflineFusionCostModel,
}


def check_pricing_options(device: str, cost_model: str) -> None:
    """A fusion pass's `device` and `cost-model` options, refused as one `ValueError` line."""
    try:
        get_device(device)
    except KeyError as e:
        raise ValueError(str(e.args[0]).removeprefix("error: ")) from None
    if cost_model not in COST_MODELS:
        raise ValueError(
            f"unknown cost model '{cost_model}' (known: {', '.join(sorted(COST_MODELS))})"
        )


def fusion_cost_model(name: str = "default", device: str | DeviceSpec = "h100_sxm") -> FusionCostModel:  # fmt: skip
    """A fusion cost model by name (`default` or `roofline`) for `device`."""
    try:
        return COST_MODELS[name](device)
    except KeyError:
        raise ValueError(
            f"unknown cost model '{name}' (known: {', '.join(sorted(COST_MODELS))})"
        ) from None


def element_count(shape: Any) -> int:
    dims = getattr(shape, "dims", None)
    return math.prod(dims) if dims is not None else 1
