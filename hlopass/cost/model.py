"""GPU time per kernel and per module.

A kernel is a fusion, a library call (cuBLAS gemm, cuDNN convolution) or, in an unfused
module, one instruction. For each kernel `KernelWork` counts what it does:

* tensor-core flops (dot, convolution, 2 per multiply-accumulate, XLA's convention) with the
  operand type and the gemm shape (batch, m, n, k);
* ALU work in FP32-lane operations: elements x a per-opcode cost. The costs are XLA's
  measured H100 `hlo_op_profiles` (sm_90, F32 "clock_cycles"; default 3 for ops too fast to
  profile), see XLA_GPU_COST_MODEL_REFERENCE.md 1.5; f64 costs 4x, other types as f32;
* DRAM bytes: each kernel input once (slices, dynamic-slices and gathers only what they
  take; re-reads through several users/broadcasts are extra "cached" bytes), plus outputs
  (a dynamic-update-slice root writes only its update: it works in place).

Time (µs), XLA's default GPU performance model (`GpuPerformanceModel::
EstimateRunTimeForInstruction`) with what `kernel_analysis.analyze` finds in the kernel -- per-input
reads with utilisation, XLA GPU flops (measured H100 op costs), the launch grid of the
emitter XLA would use:

    alu     = flops / floor(2 * clock * min(blocks, SMs) * min(threads_per_block, 128))
    tensor  = gemm.gemm_compute(batch, m, n, k, dtype)                 (XLA: scalar FPUs)
    read_i  = net_i / min(BW * coalescing_i, blocks * clock * 32 B)
              + (total_i - net_i) / min(BW * 2.5 [* 8 if net_i < 2 KiB * SMs], blocks * clock * 32 B)
    memory  = sum_i read_i + written / BW
    kernel  = compute + memory - 0.95 * min(compute, memory)      (XLA's rule, rho = 0.95)
    time    = kernel + launch (1 µs)

* coalescing = element bytes / 64 for an input that reaches an output through a transpose
  of the minor dimension (outside the tiled transpose emitter), else 1.
* tensor: `gemm.py` (fixed cost, 128x128 tiles in waves over the SMs, best split-K,
  per-dtype tensor rates; fp8 on Hopper the faster of the library GEMM and Triton's),
  constants fitted on XLA's measured sm_90 matmul table; a kernel
  with a GEMM also takes gemm.py's DRAM efficiency (memory / mem_eff) and overlap
  (`gemm.overlap`: 0.95, less for f32). Convolutions, which the table does not measure:
  tensor_flops / (peak x CONV_EFFICIENCY x wave quantisation of 128x128 output tiles). This is the one deliberate departure from XLA's
  default model, which prices dots on the scalar FPUs.
* Triton block-level fusions keep broadcast operands in registers per tile (XLA's indexing
  model) rather than re-reading them per output element (its default model).
* Module time = sum over kernels (a while body counts `known_trip_count` times when the
  backend_config gives it, else once; a conditional its most expensive branch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import hlopass.cost.gemm as gemm
from hlopass.cost.collectives import price_row as price_collective
from hlopass.cost.counts import conv_flops, shape_size
from hlopass.cost.devices import DeviceSpec, get_device
from hlopass.cost.gpu_flops import FlopCounter
from hlopass.cost.kernel_analysis import Read, analyze
from hlopass.cost.layouts import conv_transpose_bytes, op_reshape_is_bitcast
from hlopass.cost.topk import TOPK_TARGETS, topk_work
from hlopass.cost.topology import Topology
from hlopass.cost.work import DEFAULT_ALU, GEMM_TILE, OPCODE_WORK, gemm_tiles
from hlopass.ir.attrs import backend_config as _backend_config
from hlopass.ir.shape import ArrayShape
from hlopass.kernel_structure.shapes import (
    elements,
    first_array,
    operand_shapes,
    transpose_is_bitcast,
)

RHO = 0.95  # XLA kMemoryComputeParallelism (PriorityFusion's 0.95)
CONV_EFFICIENCY = 0.8  # cuBLAS's best on H100 in XLA's matmul table: 789 of 989 TFLOP/s bf16
THREADS_PER_BLOCK = 128
# Launch grids (XLA's emitters read the SM count and threads per SM of the device) are
# computed for the DeviceSpec being estimated; this one is used when no device is given.
DEFAULT_LAUNCH_DEVICE = "h100_sxm"

# FP32-lane operations per element (XLA hlo_op_profiles, sm_90 F32; default 3).
ALU_COST: dict[str, float] = {
    "add": 7, "subtract": 7, "multiply": 3, "divide": 19, "remainder": 19,
    "exponential": 79, "exponential-minus-one": 79, "log": 166, "log-plus-one": 166,
    "logistic": 100, "tanh": 467, "rsqrt": 75, "sqrt": 75, "cbrt": 100, "sine": 958,
    "cosine": 978, "tan": 1000, "power": 510, "atan2": 431, "erf": 200, "acos": 300,
    "asin": 300, "atan": 300, "acosh": 300, "asinh": 300, "atanh": 300, "cosh": 200,
    "sinh": 200,
}  # fmt: skip
FREE_IN_KERNEL = frozenset({
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "reshape", "broadcast",
    "iota", "slice", "dynamic-slice", "dynamic-update-slice", "transpose", "copy", "pad",
    "concatenate", "reverse", "gather",
})  # fmt: skip
NO_KERNEL = frozenset({
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
    "add-dependency", "opt-barrier", "domain", "partition-id", "replica-id",
    "all-gather-done", "all-reduce-done", "collective-permute-done", "async-done",
    "async-update", "copy-done", "send-done", "recv-done", "get-dimension-size",
})  # fmt: skip


@dataclass
class KernelWork:
    """What one kernel does; only the launch grid (blocks, threads_per_block) depends on the
    device it was computed for (its SM count and threads per SM)."""

    flops: float = 0.0  # XLA-convention flops (dot 2*MACs, 1 per elementwise op)
    transcendentals: float = 0.0
    tensor_flops: float = 0.0
    tensor_dtype: str = "f32"
    tensor_precision: str = "default"
    gemm_tiles: int = 0  # 128x128 output tiles (x batch) of the largest dot/conv
    gemm_shape: tuple[int, ...] = ()  # (batch, m, n, k) of the largest dot, for gemm.py
    alu_ops: float = 0.0  # FP32-lane operations
    bytes_read: float = 0.0  # unique DRAM reads
    bytes_reread: float = 0.0  # further reads of the same data (L2 hits when it fits)
    bytes_written: float = 0.0
    threads: int = 1
    uncoalesced: bool = False
    kind: str = "loop"
    # XLA default-model view (kernel_analysis.analyze): per-input reads and the emitter's launch grid
    reads: list[Read] = field(default_factory=list)
    blocks: int = 0
    threads_per_block: int = 0
    emitter: str = ""

    @property
    def bytes_accessed(self) -> float:
        return self.bytes_read + self.bytes_reread + self.bytes_written


@dataclass
class KernelRow:
    name: str
    kind: str
    flops: float
    transcendentals: float
    bytes_accessed: float
    compute_us: float
    memory_us: float
    launch_us: float
    time_us: float
    bound: str
    count: int = 1

    @property
    def exec_us(self) -> float:
        """Time without the launch overhead (XLA's `exec_time_us` convention)."""
        return self.time_us - self.launch_us

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "name", "kind", "flops", "transcendentals", "bytes_accessed", "compute_us",
            "memory_us", "launch_us", "time_us", "bound", "count")}  # fmt: skip


@dataclass
class Estimate:
    device: str
    kernels: list[KernelRow] = field(default_factory=list)
    # critical path with async collectives overlapped (`overlap.py`); None: not computed
    overlapped_us: float | None = None

    @property
    def time_us(self) -> float:
        """The serial sum of the kernel times."""
        return sum(k.time_us * k.count for k in self.kernels)

    @property
    def step_us(self) -> float:
        """The step time: async collectives overlapped with the compute scheduled between
        their start and done (the serial sum when that was not computed)."""
        return self.time_us if self.overlapped_us is None else self.overlapped_us

    @property
    def totals(self) -> dict[str, float]:
        return {
            "flops": sum(k.flops * k.count for k in self.kernels),
            "transcendentals": sum(k.transcendentals * k.count for k in self.kernels),
            "bytes_accessed": sum(k.bytes_accessed * k.count for k in self.kernels),
            "time_us": self.time_us,
        }

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device, "totals": self.totals, "step_us": self.step_us,
                "kernels": self.rows()}  # fmt: skip

    def rows(self) -> list[dict[str, Any]]:
        """One dict per kernel (name, kind, flops, ..., time_us, bound, count): tabular data
        for any tool, no pandas needed (`pandas.DataFrame(est.rows())` if you have it)."""
        return [k.as_dict() for k in self.kernels]

    SORT_KEYS: ClassVar[dict[str, str]] = {
        "time": "time_us", "flops": "flops", "bytes": "bytes_accessed", "name": "name",
        "compute": "compute_us", "memory": "memory_us",
    }  # fmt: skip

    def top(self, n: int = 10, by: str = "time") -> list[KernelRow]:
        """The `n` kernels with the most total `by` (time, flops, bytes, compute, memory;
        repeated kernels count times their count), largest first; `by="name"` sorts A-Z."""
        return self.sorted(by)[:n]

    def sorted(self, by: str = "time") -> list[KernelRow]:
        key = self.SORT_KEYS.get(by)
        if key is None:
            raise ValueError(f"cannot sort by {by!r}; one of: {', '.join(self.SORT_KEYS)}")
        if key == "name":
            return sorted(self.kernels, key=lambda k: k.name)
        return sorted(self.kernels, key=lambda k: -getattr(k, key) * k.count)

    def table(self, kernels: list[KernelRow] | None = None) -> str:
        """Aligned text: one row per kernel (all, or `kernels`), then the module's totals.
        `dram_bytes` is the model's DRAM traffic (unique reads, re-reads, writes)."""
        head = ("name", "kind", "flops", "transcendentals", "dram_bytes", "compute_us",
                "memory_us", "launch_us", "estimate_us", "bound")  # fmt: skip
        rows: list[tuple[str, ...]] = [head]
        for k in self.kernels if kernels is None else kernels:
            n = f"{k.name} x{k.count}" if k.count != 1 else k.name
            rows.append((n, k.kind, f"{k.flops:.4g}", f"{k.transcendentals:.4g}",
                         f"{k.bytes_accessed:.4g}", f"{k.compute_us:.3f}", f"{k.memory_us:.3f}",
                         f"{k.launch_us:.3f}", f"{k.time_us * k.count:.3f}", k.bound))  # fmt: skip
        if kernels is not None and len(kernels) < len(self.kernels):
            rows.append((f"({len(self.kernels) - len(kernels)} more kernels)",) + ("",) * 9)
        t = self.totals
        rows.append(("TOTAL", "", f"{t['flops']:.4g}", f"{t['transcendentals']:.4g}",
                     f"{t['bytes_accessed']:.4g}", "", "", "", f"{t['time_us']:.3f}", ""))  # fmt: skip
        if self.overlapped_us is not None and any(k.kind == "collective" for k in self.kernels):
            rows.append(("STEP (async collectives overlapped)",) + ("",) * 7
                        + (f"{self.step_us:.3f}", ""))  # fmt: skip
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = [f"device: {self.device}"]
        for r in rows:
            lines.append("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths, strict=True))))  # fmt: skip
        return "\n".join(lines)

    __str__ = table


# --- work of a group of instructions ---------------------------------------------------


class KernelAnalyzer:
    """Work of kernels in one module: the reducers' work counted once per reducer; owned by a
    `analysis.ModuleCostAnalysis`, so it lives as long as one analysis of the module."""

    def __init__(self, comps: dict[str, Any]):
        self.comps = comps
        self.inner_cache: dict[str, KernelWork] = {}
        self.counter = FlopCounter(comps)
        self.topology: Topology | None = None  # collectives priced on its links

    def inner_work(self, ops: list[Any], w: KernelWork, scale: float = 1.0) -> None:
        """Flops and ALU work of instructions executed inside one kernel: an opcode's own
        rule (`work.OPCODE_WORK[opcode].kernel`), else nothing for data movement, else its
        elements x its ALU cost (f64 four times f32)."""
        for op in ops:
            opc = op.opcode
            rule = OPCODE_WORK.get(opc)
            if rule is not None and rule.kernel is not None:
                rule.kernel(self, op, w, scale)
                continue
            if opc in FREE_IN_KERNEL:
                continue
            shape = op.shape
            n = elements(shape) * scale
            traits = op.spec.traits if hasattr(op, "spec") else ()
            if "transcendental" in traits:
                w.transcendentals += n
            elif "elementwise" in traits or opc in ("convert", "compare", "select",
                                                    "clamp", "bitcast-convert"):  # fmt: skip
                w.flops += n
            et = getattr(first_array(shape), "element_type", "f32")
            if opc == "compare":
                et = getattr(operand_shapes(op)[0], "element_type", "f32")
            k = ALU_COST.get(opc, DEFAULT_ALU) * (4.0 if et in ("f64", "c128") else 1.0)
            w.alu_ops += k * n

    def reducer_cost(self, name: str | None) -> tuple[float, float, float]:
        """(flops, transcendentals, ALU ops) of one run of the reducer `name`."""
        if not name or name not in self.comps:
            return (1.0, 0.0, DEFAULT_ALU)
        w = self.inner_cache.get(name)
        if w is None:
            w = KernelWork()
            self.inner_work(list(self.comps[name].instructions), w)
            self.inner_cache[name] = w
        return (w.flops, w.transcendentals, w.alu_ops)

    def group_work(self, group: list[Any], outputs: list[Any] | None = None,
                   fusion_op: Any = None, kind: str = "",
                   dev: DeviceSpec | None = None) -> KernelWork:  # fmt: skip
        """Work of `group` (instructions of one computation) run as one fused kernel.

        Inputs are the values the group uses but does not define (a fused computation's
        parameters); outputs are `outputs` or the members used outside the group. The launch
        grid (blocks, threads per block) is the one XLA's emitter picks on `dev` (its SM
        count and threads per SM); everything else is device-independent."""
        dev = get_device(dev or DEFAULT_LAUNCH_DEVICE)
        w = KernelWork()
        members = set(map(id, group))
        self.inner_work([op for op in group if op.opcode != "parameter"], w)
        if outputs is None:
            outputs = []
            for op in group:
                if op.opcode == "parameter":
                    continue
                uses = [u.operation for u in op.result.uses]
                if not uses or any(id(u) not in members for u in uses):
                    outputs.append(op)
        info = analyze(
            group,
            outputs,
            self.counter,
            dev.sm_count,
            fusion_op,
            kind,
            threads_per_sm=dev.threads_per_sm,
        )
        w.alu_ops = info.alu_flops
        w.reads = info.reads
        w.bytes_read = sum(r.net for r in info.reads)
        w.bytes_reread = sum(r.total - r.net for r in info.reads)
        w.bytes_written = info.bytes_written
        w.blocks, w.threads_per_block = info.blocks, info.threads_per_block
        w.threads = info.blocks * info.threads_per_block
        w.emitter = info.emitter
        w.uncoalesced = any(not r.coalesced for r in info.reads)
        return w


# --- kernels of a module -------------------------------------------------------------------


def _fusion_kind(op: Any) -> str:
    kind = op.attr("kind") or "kLoop"
    cfg = _backend_config(op).get("fusion_backend_config", {})
    fkind = cfg.get("kind", "") if isinstance(cfg, dict) else ""
    if kind == "kCustom":
        if "gemm" in fkind:
            return "triton_gemm"
        if "triton" in fkind:
            return "triton"
        return "custom_fusion"
    return {"kLoop": "loop", "kInput": "input", "kOutput": "output"}.get(kind, "loop")


def kernel_work(op: Any, comps: dict[str, Any], analyzer: KernelAnalyzer | None = None,
                dev: DeviceSpec | None = None) -> KernelWork:  # fmt: skip
    """Work of the kernel one instruction launches (fusion, custom-call or plain op), with
    the launch grid XLA would use on `dev` (default H100 SXM)."""
    an = analyzer or KernelAnalyzer(comps)
    opc: str = op.opcode
    if opc == "fusion":
        comp = comps[op.attr("calls")]
        instrs = list(comp.instructions)
        kind = _fusion_kind(op)
        w = an.group_work(instrs, outputs=[comp.root], fusion_op=op, kind=kind, dev=dev)
        if kind == "loop" and w.kind == "reduction":
            kind = "reduction"
        w.kind = kind
        return w
    if opc == "custom-call":
        return _custom_call_work(op, an)
    w = an.group_work([op], outputs=[op], dev=dev)
    w.kind = {"dot": "gemm", "convolution": "conv", "reduce": "reduction"}.get(opc, opc)
    if opc == "convolution":  # cuDNN's own transposes when the layouts are not native
        moved = conv_transpose_bytes(op, (dev or get_device(DEFAULT_LAUNCH_DEVICE)).name) / 2
        if moved:
            w.reads.append(Read(moved, moved, 4, True))
            w.bytes_read += moved
            w.bytes_written += moved
    return w


def _custom_call_work(op: Any, an: KernelAnalyzer) -> KernelWork:
    target = op.attr("custom_call_target") or ""
    w = KernelWork(kind="custom")
    sh = operand_shapes(op)
    for s in sh:
        w.bytes_read += sum(shape_size(leaf) for leaf in s.leaves())
    outs = op.shape.leaves()
    out0 = outs[0] if outs else None
    cfg = _backend_config(op)
    if "cublas" in target or "gemm" in target.lower():
        w.kind = "gemm"
        g = cfg.get("gemm_backend_config", cfg)  # old-style configs (the seeds) are bare
        dn = g.get("dot_dimension_numbers", {})
        contracting = [int(d) for d in dn.get("lhs_contracting_dimensions", [])]
        prec = str(g.get("precision_config", {}).get("operand_precision", "")).lower()
        w.tensor_precision = "highest" if "highest" in prec else "default"
        if sh and out0 is not None:
            lhs = cast(ArrayShape, sh[0])  # a cuBLAS call multiplies arrays
            width = math.prod(lhs.dims[d] for d in contracting) if contracting else 1
            w.tensor_flops = w.flops = 2.0 * out0.num_elements * width
            w.tensor_dtype = lhs.element_type
            w.gemm_tiles = gemm_tiles(out0, 0)
            w.gemm_shape = gemm.dims(out0, width)
        w.bytes_written = shape_size(out0) if out0 is not None else 0
        if out0 is not None:
            _add_epilogue(w, g, out0, outs)
    elif "cudnn" in target and "conv" in target.lower():
        w.kind = "conv"
        if len(sh) >= 2 and out0 is not None and op.attr("dim_labels") is not None:
            x, wt, y = _conv_roles(target, cast("list[ArrayShape]", sh), out0)
            f = conv_flops(op, x, wt, y)
            w.tensor_flops = w.flops = float(f)
            w.tensor_dtype = x.element_type
            # the implicit GEMM's output tiles: dx or y; a filter gradient splits its long
            # reduction (N x positions) across blocks, so it is tiled as large as dy
            tiled = y if target.endswith("BackwardFilter") else out0
            w.gemm_tiles = math.ceil(tiled.num_elements / GEMM_TILE**2)
        w.bytes_written = shape_size(out0) if out0 is not None else 0
    elif target in TOPK_TARGETS:
        return topk_work(op, w)  # its threads read the input, not the k outputs
    else:
        w.bytes_written = sum(shape_size(leaf) for leaf in outs)
        names = op.callees() if hasattr(op, "callees") else []
        for name in names:
            if name in an.comps:
                an.inner_work(list(an.comps[name].instructions), w)
    w.threads = max(1, int(max((o.num_elements for o in outs), default=1)))
    return w


_ACTIVATION_WORK = {"RELU": (1, 0), "GELU": (8, 1), "SILU": (3, 1)}
"""(flops, transcendentals) per output element of a cublasLt activation, XLA-convention
counts of the elementwise ops it replaces: max(x, 0); the tanh GELU's seven multiplies and
adds and its tanh; x / (1 + exp(-x))."""


def _add_epilogue(w: KernelWork, g: dict, out0: ArrayShape, outs: list[ArrayShape]) -> None:
    """A cuBLAS call's epilogue on its output tile: alpha's multiply, beta's multiply-add
    (an add when beta is 1), the vector bias's add, the activation (counted as the
    elementwise ops it fused, also as FP32-lane work), and an *_AUX call's second output
    written."""
    n = out0.num_elements
    per = 0.0
    if float(g.get("alpha_real", 1)) != 1 or float(g.get("alpha_imag", 0)) != 0:
        per += 1
    beta = float(g.get("beta", 0))
    if beta != 0:
        per += 1 if beta == 1 else 2
    epilogue = str(g.get("epilogue", "DEFAULT"))
    parts = epilogue.split("_")
    per += parts[0] == "BIAS"
    trans = 0.0
    for name, (f, t) in _ACTIVATION_WORK.items():
        if name in parts:
            per, trans = per + f, trans + t
    w.flops += per * n
    w.transcendentals += trans * n
    w.alu_ops += (per + trans) * n
    if parts[-1] == "AUX" and len(outs) > 1:
        w.bytes_written += shape_size(outs[1])


def _conv_roles(target: str, operands: list[ArrayShape],
               result: ArrayShape) -> tuple[ArrayShape, ArrayShape, ArrayShape]:  # fmt: skip
    """(x, w, y) of the forward convolution a cuDNN call's labels describe: a
    backward-input call reads (dy, w) and writes dx, a backward-filter call reads (x, dy)
    and writes dw."""
    if target.endswith("BackwardInput"):
        return result, operands[1], operands[0]
    if target.endswith("BackwardFilter"):
        return operands[0], result, operands[1]
    return operands[0], operands[1], result


def _read_time(r: Read, dev: DeviceSpec, block_bw: float) -> float:
    """XLA ReadTimeWithDRAMHeuristic: first reads from DRAM (at elem/64 B of the bandwidth
    when uncoalesced), re-reads from L2 (x2.5) or L1 (x8 more) when the input fits there;
    both capped by what the launched blocks can issue (32 B per clock per block)."""
    rate = 1.0 if r.coalesced else min(1.0, r.elem_bytes / dev.dram_transaction_bytes)
    dram = min(dev.hbm_bandwidth * rate, block_bw)
    t = r.net / dram if r.net else 0.0
    rest = r.total - r.net
    if rest > 0:
        if r.net < dev.l2_bytes:
            bw = dev.hbm_bandwidth * dev.l2_speedup
            if r.net < dev.l1_bytes_per_sm * dev.sm_count:
                bw *= dev.l1_speedup
        else:
            bw = dev.hbm_bandwidth * rate
        t += rest / min(bw, block_bw)
    return t


def kernel_time(w: KernelWork, dev: DeviceSpec, name: str = "", count: int = 1) -> KernelRow:
    clock = dev.clock_ghz * 1e9
    if w.blocks:
        blocks, tpb = w.blocks, w.threads_per_block
    else:
        blocks = max(1, math.ceil(w.threads / THREADS_PER_BLOCK))
        tpb = min(THREADS_PER_BLOCK, max(1, w.threads))
    # compute
    compute = 0.0
    rho, mem_scale = RHO, 1.0
    if w.tensor_flops and not w.gemm_shape:
        # a convolution (no GEMM shape): the measured table holds GEMMs only, so cuDNN is
        # priced at the tensor peak x CONV_EFFICIENCY x wave quantisation of its tiles
        tiles = max(1, w.gemm_tiles)
        waves = math.ceil(tiles / dev.sm_count)
        eff = CONV_EFFICIENCY * tiles / (waves * dev.sm_count)
        compute += w.tensor_flops / (dev.matrix_peak(w.tensor_dtype, w.tensor_precision) * eff)
        blocks = max(blocks, min(tiles, dev.sm_count))
        tpb = max(tpb, THREADS_PER_BLOCK)
    elif w.tensor_flops:  # gemm.py: fixed cost, waves of tiles, split-K, per-dtype rates
        b, m, n, k = w.gemm_shape
        c = gemm.SM90  # read at call time: benchmarks/fit_gemm_sm90.py swaps it while fitting
        g = gemm.gemm_compute(dev, b, m, n, k, w.tensor_dtype, w.tensor_precision, c)
        compute += g.compute_us * 1e-6
        rho, mem_scale = gemm.overlap(w.tensor_dtype, c), 1.0 / c.mem_eff
        blocks = max(blocks, min(g.ctas, dev.sm_count))
        tpb = max(tpb, THREADS_PER_BLOCK)
    if w.alu_ops:
        # XLA CalculateEffectiveFlopsPerNs: 2 x clock x active FPUs, truncated to an integer
        fpus = min(blocks, dev.sm_count) * min(tpb, dev.fp32_lanes_per_sm)
        per_ns = max(1, int(2.0 * dev.clock_ghz * fpus))
        compute += w.alu_ops / per_ns * 1e-9
    # memory
    block_bw = blocks * clock * dev.bytes_per_clock_per_sm
    reads = w.reads
    if not reads and (w.bytes_read or w.bytes_reread):
        reads = [Read(w.bytes_read, w.bytes_read + w.bytes_reread, 4, not w.uncoalesced)]
    memory = sum(_read_time(r, dev, block_bw) for r in reads)
    memory += w.bytes_written / dev.hbm_bandwidth
    compute_us, memory_us = compute * 1e6, memory * 1e6 * mem_scale
    kernel = compute_us + memory_us - rho * min(compute_us, memory_us)
    launch = dev.launch_overhead_us
    total = kernel + launch
    bound = "compute" if compute_us >= memory_us else "memory"
    if launch > kernel:
        bound = "launch"
    return KernelRow(name, w.kind, w.flops, w.transcendentals, w.bytes_accessed, compute_us,
                     memory_us, launch, total, bound, count)  # fmt: skip


def trip_count(op: Any) -> int | None:
    cfg = _backend_config(op)
    n = (
        cfg.get("known_trip_count", {}).get("n")
        if isinstance(cfg.get("known_trip_count"), dict)
        else None
    )
    try:
        return int(n) if n is not None else None
    except ValueError:
        return None


def module_kernels(comp: Any, comps: dict[str, Any], dev: DeviceSpec, an: KernelAnalyzer,
                   count: int = 1, cache: dict | None = None) -> list[KernelRow]:  # fmt: skip
    """Kernel rows for the instructions of a non-fused computation."""
    rows: list[KernelRow] = []
    for op in comp.instructions:
        rows += op_kernels(op, comps, dev, an, count, cache)
    return rows


def op_kernels(op: Any, comps: dict[str, Any], dev: DeviceSpec, an: KernelAnalyzer,
               count: int = 1, cache: dict | None = None) -> list[KernelRow]:  # fmt: skip
    """Kernel rows of one instruction of a non-fused computation (those of the computations
    it calls for a while, call, conditional or async-start; none for a no-op)."""
    opc = op.opcode
    if opc in NO_KERNEL:
        return []
    if (opc == "reshape" and op_reshape_is_bitcast(op)) or (
        opc == "transpose" and transpose_is_bitcast(op)
    ):
        return []
    if opc == "while":
        n = trip_count(op) or 1
        names = [op.attr(key) for key in ("condition", "body")]
        return [r for x in names if x in comps
                for r in module_kernels(comps[x], comps, dev, an, count * n, cache)]  # fmt: skip
    if opc == "call" or opc == "async-start":
        name = op.attr("to_apply") if opc == "call" else op.attr("calls")
        return module_kernels(comps[name], comps, dev, an, count, cache) if name in comps else []
    if opc == "conditional":
        names = op.attr("branch_computations") or tuple(
            x for x in (op.attr("true_computation"), op.attr("false_computation")) if x
        )
        branches = [module_kernels(comps[x], comps, dev, an, count, cache)
                    for x in names if x in comps]  # fmt: skip
        return max(branches, key=lambda rs: sum(r.time_us * r.count for r in rs), default=[])
    return [leaf_kernel(op, comps, dev, an, count, cache)]


def leaf_kernel(op: Any, comps: dict[str, Any], dev: DeviceSpec, an: KernelAnalyzer,
                count: int, cache: dict | None) -> KernelRow:  # fmt: skip
    """The kernel row of an instruction that launches one kernel (a collective's priced on
    the interconnect when the analyzer has a topology)."""
    opc = op.opcode
    # the launch grid depends on the device: cache per (fused computation, launch limits)
    key = (op.attr("calls"), dev.sm_count, dev.threads_per_sm) if opc == "fusion" else None
    w = None
    if cache is not None and key is not None:
        w = cache.get(key)
    if w is None:
        w = kernel_work(op, comps, an, dev)
        if cache is not None and key is not None:
            cache[key] = w
    row = kernel_time(w, dev, op.inst_name, count)
    if "collective" in (op.spec.traits if hasattr(op, "spec") else ()):
        row.kind = "collective"
        if an.topology is not None:
            price_collective(row, op, an.topology)
    return row
