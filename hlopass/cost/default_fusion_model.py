"""The default fusion cost model: candidate fusions priced with XLA's default GPU
performance model (`kernel_analysis` counts, `model.kernel_time` prices), plus our gemm rule.

As XLA's `EstimateRunTimeForFusion`, a producer-consumer fusion is priced from the two
kernels' summaries (flops = producer's x its utilisation in the consumer + consumer's; inputs
merged), not by re-analysing the merged kernel; sibling (multi-output) merges are priced
from `sibling.SiblingSummary`s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from hlopass.cost.analysis import ModuleCostAnalysis
from hlopass.cost.devices import DeviceSpec
from hlopass.cost.fusion_cost_model import FusionCostModel
from hlopass.cost.fusion_gemm import GemmFacts, gemm_facts
from hlopass.cost.kernel_analysis import Read, emitting_roots, utilizations
from hlopass.cost.launch import facts_launch, launch, loop_launch
from hlopass.cost.model import KernelWork, kernel_time
from hlopass.cost.shared_summaries import SharedSummaries
from hlopass.cost.sibling import Input, SiblingSummary, add_inputs, shape_bytes
from hlopass.ir.memo import VersionMemo
from hlopass.ir.shape import ELEMENT_BITS, ArrayShape
from hlopass.kernel_structure.emitter import (
    EmitterFacts,
    choose_emitter,
    hero_parts,
    heroes,
    is_elementwise,
    uncoalesced_sources,
)
from hlopass.kernel_structure.plan import Kernel
from hlopass.kernel_structure.shapes import elements


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
    gemm: GemmFacts | None = None  # its largest dot or convolution, priced as model.py does


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
        self._analysis: ModuleCostAnalysis | None = None
        self._summary: VersionMemo[_Summary] = VersionMemo()
        self._shared: SharedSummaries[_Summary] = SharedSummaries(self.signatures)
        self._whole: dict[int, float] = {}

    def _an(self, op: Any) -> Any:
        """The kernel analyzer of `op`'s module, made on first use and kept as long as this
        model (a fusion pass's run): the reducers' flops are counted once per run."""
        if self._analysis is None:
            self._analysis = ModuleCostAnalysis.of_op(op)
        return self._analysis.analyzer

    def kernel_time_us(self, members: Sequence[Any], outputs: Sequence[Any]) -> float:
        return self._time_of(self._summarize(list(members), list(outputs)))

    def summary(self, k: Kernel) -> _Summary:
        s = self._summary.get(k)
        if s is None:
            members, outputs = k.members, k.outputs
            s = self._shared.get(k, lambda: self._summarize(members, outputs), _relabel)
            s = self._summary.put(k, s)
        return s

    def price_kernel(self, k: Kernel) -> float:
        return self._time_of(self.summary(k))

    def price_fused(self, producer: Kernel, consumer: Kernel) -> float:
        key = self.signatures.pair(producer, consumer)
        pairs = self._shared.pairs
        t = pairs.get(key)
        if t is None:
            t, shared = self._fused_time(producer, consumer)
            if shared:
                pairs[key] = t
        return t

    def invalidate(self, k: Kernel) -> None:
        super().invalidate(k)
        self._summary.pop(k)

    def clear(self) -> None:
        super().clear()
        self._summary.clear()

    # -- analysis ------------------------------------------------------------------------

    def _summarize(self, members: list[Any], outputs: list[Any]) -> _Summary:
        if len(members) == 1 and outputs[0] is members[0] and _plain_elementwise(members[0]):
            return self._summarize_elementwise(members[0])
        util = utilizations(members, outputs)
        ids = {id(m) for m in members}
        alu, tensor, sources = self._flops_and_sources(members, util)
        roots = emitting_roots(outputs, members)
        parts = hero_parts(heroes(roots, ids), ids)
        emitter = choose_emitter("", roots, parts)
        bad = uncoalesced_sources(members, sources, ids) if emitter != "transpose" else set()
        inputs = [(s, float(shape_bytes(s.shape)), _elem_bytes(s.shape), id(s) not in bad)
                  for s in sources]  # fmt: skip
        written = _written(outputs)
        dev = self.device
        blocks, threads = launch(emitter, None, roots, parts, dev.sm_count, members,
                                 dev.threads_per_sm)  # fmt: skip
        ext = {id(s): util.get(id(s), 0.0) for s in sources}
        g = gemm_facts(members) if tensor else None
        return _Summary(alu, tensor, ext, inputs, written, emitter, blocks, threads, g)

    def sibling_summary(self, members: Sequence[Any], outputs: Sequence[Any],
                        key_of: Callable[[Any], Any]) -> SiblingSummary:  # fmt: skip
        members, outputs = list(members), list(outputs)
        direct: set[int] = set()
        util = utilizations(members, outputs, direct=direct)
        alu, tensor, sources = self._flops_and_sources(members, util)
        ids = {id(m) for m in members}
        bad = uncoalesced_sources(members, sources, ids)
        inputs: dict[Any, Input] = {}
        add_inputs(inputs, [
            (key_of(src), Input(shape_bytes(src.shape), _elem_bytes(src.shape), id(src) in bad,
                                util.get(id(src), 0.0), id(src) in direct))
            for src in sources
        ])  # fmt: skip
        return SiblingSummary(alu, tensor, inputs, _written(outputs))

    def sibling_time_us(self, summary: SiblingSummary, facts: EmitterFacts) -> float:
        s, dev = summary, self.device
        emitter = facts.emitter()
        blocks, threads = facts_launch(facts, emitter, dev.sm_count, dev.threads_per_sm)
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
        alu = self._an(op).counter.alu(op)
        inputs = []
        seen: set[int] = set()
        for v in op.operands:
            src = v.owner
            if id(src) not in seen:
                seen.add(id(src))
                inputs.append((src, float(shape_bytes(src.shape)), _elem_bytes(src.shape), True))
        dev = self.device
        blocks, threads = loop_launch(elements(op.shape), dev.sm_count, dev.threads_per_sm)
        util = dict.fromkeys(seen, 1.0)
        return _Summary(alu, 0.0, util, inputs, shape_bytes(op.shape), "loop", blocks, threads)

    def _time_of(self, s: _Summary, reads: list[Any] | None = None) -> float:
        if reads is None:
            reads = []
            for src, size, eb, coalesced in s.inputs:
                total = float(int(size * s.util.get(id(src), 0.0)))
                reads.append(Read(min(size, total), total, eb, coalesced))
        w = KernelWork(alu_ops=s.alu, tensor_flops=s.tensor, reads=reads,
                       bytes_written=s.written, blocks=s.blocks,
                       threads_per_block=s.threads, emitter=s.emitter)  # fmt: skip
        w.threads = s.blocks * s.threads
        if s.gemm is not None:  # a library GEMM: gemm.py's fixed cost, tiles and rates
            s.gemm.into(w)
        return kernel_time(w, self.device).time_us

    def _whole_time_us(self, members: list[Any], outputs: list[Any]) -> float:
        """`kernel_time_us` of a merged kernel, shared by its signature as the kernels'
        summaries are (a layer's pairs whose producer changes the emitter are analysed
        once, not once per layer)."""
        sid = self.signatures.of(members, outputs).sid
        t = self._whole.get(sid)
        if t is None:
            t = self._whole[sid] = self.kernel_time_us(members, outputs)
        return t

    def _fused_time(self, producer: Kernel, consumer: Kernel) -> tuple[float, bool]:
        """(the fused kernel's time, whether it follows from the two summaries alone and may
        be shared by the pair's signature: not when the emitter changes and the kernel is
        analysed whole, in its members' block order)."""
        p, c = self.summary(producer), self.summary(consumer)
        ids = _Union(consumer.ids, producer.ids)
        parts = hero_parts(heroes(consumer.outputs, ids), ids)
        emitter = choose_emitter("", consumer.outputs, parts)
        if emitter != c.emitter:  # the producer changes the emitter: analyse it whole
            return self._whole_time_us(consumer.merged(producer), consumer.outputs), False
        if p.emitter != c.emitter and "transpose" in (p.emitter, c.emitter):
            # the producer's reads were judged coalesced or not under its own emitter: the
            # tiled transpose emitter reads through shared memory, so its transposes read
            # coalesced, but moved into another emitter's kernel the same transpose makes
            # its inputs' reads strided (XLA's coalescing analysis): judged again, whole
            return self._whole_time_us(consumer.merged(producer), consumer.outputs), False
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
                         c.emitter, c.blocks, c.threads, c.gemm or p.gemm)  # fmt: skip
        return self._time_of(fused, reads), True


def _relabel(s: _Summary, new_of: dict[int, Any]) -> _Summary | None:
    """`s` with its inputs replaced by the instructions at their positions in another
    kernel of the same signature (None if an input is not among them)."""
    try:
        inputs = [(new_of[id(src)], size, eb, c) for src, size, eb, c in s.inputs]
        util = {id(new_of[k]): u for k, u in s.util.items()}
    except KeyError:
        return None
    return replace(s, inputs=inputs, util=util)


def _written(outputs: list[Any]) -> float:
    written = 0.0
    for o in outputs:
        if o.opcode == "dynamic-update-slice":
            written += shape_bytes(o.operands[1].type.data)
        else:
            written += shape_bytes(o.shape)
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


def _elem_bytes(shape: Any) -> int:
    return max(1, (ELEMENT_BITS.get(getattr(shape, "element_type", "f32"), 32) + 7) // 8)
