"""The fusion cost model interface: what a fusion pass asks a performance model, shaped like
XLA's `FusionCostModel` (xla/hlo/transforms/fusion_cost_model.h). It prices nothing itself.

A `Kernel` (`hlopass.kernel_structure.plan`) is a would-be kernel: instructions of one
computation (`members`, in block order) run as one launch writing `outputs`. Passes price
candidate fusions by passing kernels; nothing is built. A model answers:

* `estimate_run_times(producer, consumers)` -> `RunTimes(unfused_us, fused_us)`, XLA's
  `EstimateRunTimesForPriorityFusion`: unfused = t(producer) + sum t(consumer_i), fused =
  sum t(producer + consumer_i); every t includes the 1 µs launch of its kernel;
* `estimate_multi_output(a, b)`: the two kernels separately vs as one multi-output kernel;
* `would_explode_ir_size(producer, consumer)`: XLA's `ProducerConsumerMergedTooLarge`;
* `on_instruction_fused(producer, consumer, fused)` and `invalidate(kernel)`: cached
  estimates are keyed by kernel identity and version, dropped when a kernel changes.

`DefaultFusionCostModel` (`default_fusion_model.py`) prices kernels with XLA's default GPU
performance model plus our gemm rule; `RooflineFusionCostModel` (`roofline_fusion_model.py`)
counts DRAM bytes, and for a library GEMM its fixed cost and flops. Both price a dot kernel
as a GEMM (`fusion_gemm.py`). Pick one by name with `fusion_models.fusion_cost_model("default" |
"roofline", device)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hlopass.cost.devices import DeviceSpec, get_device
from hlopass.ir.memo import VersionMemo
from hlopass.kernel_structure.emitter import EmitterFacts
from hlopass.kernel_structure.plan import Kernel, ir_size
from hlopass.kernel_structure.signature import Signatures

MAX_IR_SIZE = 10000  # XLA kMaxIRSize


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
        self._time: VersionMemo[float] = VersionMemo()
        self._pair: dict[tuple[int, int], tuple[int, int, float]] = {}
        self._ir: VersionMemo[tuple[dict[int, float], float, float]] = VersionMemo()
        self._pairs_of: dict[int, set[tuple[int, int]]] = {}
        self.signatures = Signatures()
        """Kernels by structure, for answers that depend on nothing else (kept for the
        model's life: a layer's kernels are priced once, see `shared_summaries`)."""
        self._explodes: dict[tuple[int, int, tuple[Any, ...]], bool] = {}

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

    # what the cached queries compute; a model may price a kernel more cheaply than from its
    # members (the default model from kept summaries)
    def price_kernel(self, k: Kernel) -> float:
        return self.kernel_time_us(k.members, k.outputs)

    def price_fused(self, producer: Kernel, consumer: Kernel) -> float:
        return self.kernel_time_us(consumer.merged(producer), consumer.outputs)

    # cached queries
    def time_us(self, k: Kernel) -> float:
        t = self._time.get(k)
        if t is None:
            t = self._time.put(k, self.price_kernel(k))
        return t

    def fused_time_us(self, producer: Kernel, consumer: Kernel) -> float:
        key = (id(producer), id(consumer))
        hit = self._pair.get(key)
        if hit is not None and hit[0] == producer.version and hit[1] == consumer.version:
            return hit[2]
        t = self.price_fused(producer, consumer)
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
        hit = self._ir.get(k)
        if hit is None:
            hit = self._ir.put(k, ir_size(k.members, k.outputs))
        return hit

    def would_explode_ir_size(self, producer: Kernel, consumer: Kernel) -> bool:
        """XLA's ProducerConsumerMergedTooLarge: the producer's code is emitted as often as
        the consumer reads it, and the sum must stay within kMaxIRSize. Basic-block splits
        no longer count: XLA dropped that bound with its legacy emitters (bb002d99b6,
        "Remove legacy emitters"). Answered once per pair signature (`Signatures.pair`):
        the sizes read the two kernels alone."""
        key = self.signatures.pair(producer, consumer)
        hit = self._explodes.get(key)
        if hit is None:
            hit = self._explodes[key] = self._explodes_ir_size(producer, consumer)
        return hit

    def _explodes_ir_size(self, producer: Kernel, consumer: Kernel) -> bool:
        emitted, c_size, _ = self.ir_size(consumer)
        replication = max(1.0, emitted.get(id(producer.root), 1.0))
        _, p_size, _ = self.ir_size(producer)
        return p_size * replication + c_size > MAX_IR_SIZE

    # hooks
    def on_instruction_fused(self, producer: Kernel, consumer: Kernel, fused: Kernel) -> None:
        for k in (producer, consumer, fused):
            self.invalidate(k)

    def invalidate(self, k: Kernel) -> None:
        self._time.pop(k)
        self._ir.pop(k)
        for key in self._pairs_of.pop(id(k), ()):
            self._pair.pop(key, None)

    def clear(self) -> None:
        self._time.clear()
        self._pair.clear()
        self._ir.clear()
        self._pairs_of.clear()
