"""GPU device descriptions for the cost model, each number with its source.

Sources (named in each `sources` field):
* `gpu_specs/<name>.txtpb`: XLA's device descriptions (openxla/xla
  `xla/tools/hlo_opt/gpu_specs`), copied in `../shared/gpu_specs`: SM count (`core_count`),
  FP32 lanes per SM (`fpus_per_core`), clock (`clock_rate_ghz`), DRAM bandwidth
  (`memory_bandwidth`), L2 size (`l2_cache_size`), shared memory per SM.
* GPUs XLA ships no spec file for (P100 `p100_sxm2`, T4 `t4`, GB300 `gb300`: the op-profile
  table's sm_60, sm_75 and sm_103): every field from the datasheet or architecture
  whitepaper their `sources` name (`datasheet/<name>` in place of the spec file).
* Dense (no sparsity) tensor-core peaks from NVIDIA's datasheets / architecture whitepapers:
  H100 datasheet (SXM5 and PCIe columns), A100 datasheet (SXM4 80GB), Tesla V100
  datasheet (SXM2), DGX/HGX B200 datasheet (per-GPU = HGX total / 8, sparse figures halved),
  RTX A6000 datasheet / NVIDIA Ampere GA102 whitepaper Table. The same H100 SXM figures are
  reproduced by the `matrix_unit_description` of XLA's h100_sxm spec (2 x ops/clock x 4 units x
  132 SMs x 1.8295 GHz; see `XLA_GPU_COST_MODEL_REFERENCE.md` section 3).
* Kernel launch overhead and the memory-model constants (64 B DRAM transactions, 32 B per
  clock per SM, L2/L1 speedups 2.5/8, 2 KiB L1 per SM): XLA's code, the same for every
  device (`XLA_CONSTANT_SOURCES`).
* Each device's `sources` names, field by field, where its numbers come from; tensor peaks
  were cross-checked against XLA_GPU_COST_MODEL_REFERENCE.md section 3 (H100 SXM, A100 SXM4
  80GB, V100 SXM2: all agree). `fp64_peak` is the f64 dot rate: FP64 tensor cores where the GPU
  has them (H100, A100, B200), else the FP64 ALUs (V100, A6000).
* FP32 (non-tensor) peak = 2 x fpus_per_core x core_count x clock (the spec file's numbers),
  which matches each datasheet's FP32 figure to within its rounding.
A zero tensor peak means the GPU has no tensor-core path for that type; the model then uses
the next wider type the hardware runs (what XLA does: e.g. bf16 dots on V100 are upcast).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlopass.errors import HloError

T = 1e12


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    sm_count: int
    fp32_lanes_per_sm: int
    clock_ghz: float
    hbm_bandwidth: float  # bytes/s
    l2_bytes: int
    smem_per_sm: int
    tf32_peak: float  # flop/s, dense tensor core
    bf16_peak: float
    fp16_peak: float
    fp8_peak: float
    int8_peak: float
    fp64_peak: float
    launch_overhead_us: float = 1.0
    threads_per_sm: int = 2048  # gpu_specs threads_per_core_limit (XLA's loop-unroll threshold)
    dram_transaction_bytes: int = 64  # XLA device description: dram_to_l2_transaction_size_bytes
    bytes_per_clock_per_sm: int = 32  # XLA: memory_transactions_per_clock (32 B)
    l2_speedup: float = 2.5  # XLA kL2CacheSpeedup: re-reads that hit L2
    l1_speedup: float = 8.0  # XLA kL1CacheSpeedup: re-reads of inputs < l1_bytes_per_sm x SMs
    l1_bytes_per_sm: int = 2048  # XLA device description l1_cache_size_per_SM (NVIDIA)
    sources: tuple[str, ...] = field(default=(), compare=False)

    @property
    def fp32_peak(self) -> float:
        """Scalar FP32 flop/s: 2 (FMA) x lanes x SMs x clock."""
        return 2.0 * self.fp32_lanes_per_sm * self.sm_count * self.clock_ghz * 1e9

    def matrix_peak(self, dtype: str, precision: str = "default") -> float:
        """Peak dot/conv flop/s for operands of `dtype` on this GPU (tensor cores when present)."""
        if dtype == "f32":
            if precision in ("highest",) or not self.tf32_peak:
                return self.fp32_peak
            return self.tf32_peak
        if dtype == "f64":
            return self.fp64_peak
        if dtype == "bf16":
            return self.bf16_peak or self.fp32_peak
        if dtype == "f16":
            return self.fp16_peak or self.fp32_peak
        if dtype.startswith("f8") or dtype.startswith("f4"):
            return self.fp8_peak or self.fp16_peak or self.fp32_peak
        if dtype in ("s8", "u8", "s4", "u4"):
            return self.int8_peak or self.fp32_peak
        return self.fp32_peak  # s32 and others run on the ALUs

    @property
    def ridge_point(self) -> float:
        return self.bf16_peak / self.hbm_bandwidth

    def as_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        d = asdict(self)
        d["fp32_peak"] = self.fp32_peak
        return d


# gpu_specs/<name>.txtpb field (in ../shared/gpu_specs) each DeviceSpec field is copied from
SPEC_FIELDS = {
    "sm_count": "core_count", "fp32_lanes_per_sm": "fpus_per_core",
    "clock_ghz": "clock_rate_ghz", "hbm_bandwidth": "memory_bandwidth",
    "l2_bytes": "l2_cache_size", "smem_per_sm": "shared_memory_per_core",
    "threads_per_sm": "threads_per_core_limit",
}  # fmt: skip
# fields with the same value on every device, from XLA's code (not the spec files)
XLA_CONSTANT_SOURCES = (
    "launch_overhead_us: XLA gpu_performance_model_base.h kKernelLaunchOverhead = 1us",
    "dram_transaction_bytes: XLA gpu_device_info dram_to_l2_transaction_size_bytes = 64 "
    "(not in the gpu_specs files; XLA_GPU_COST_MODEL_REFERENCE.md 1.2)",
    "bytes_per_clock_per_sm: XLA memory_transactions_per_clock = 32 B (reference 1.2)",
    "l2_speedup / l1_speedup: XLA gpu_performance_model_base.cc kL2CacheSpeedup 2.5, "
    "kL1CacheSpeedup 8 (reference 1.2)",
    "l1_bytes_per_sm: XLA gpu_device_info l1_cache_size_per_SM = 2 KiB for NVIDIA (reference 1.2)",
)
REFERENCE = "XLA_GPU_COST_MODEL_REFERENCE.md section 3 (dense, no sparsity)"


def _spec(name: str) -> str:
    return f"gpu_specs/{name}.txtpb: " + ", ".join(
        f"{ours} <- {theirs}" for ours, theirs in SPEC_FIELDS.items()
    )


def _sources(name: str, *peaks: str) -> tuple[str, ...]:
    return (_spec(name), *peaks, *XLA_CONSTANT_SOURCES)


def _datasheet_sources(name: str, *facts: str) -> tuple[str, ...]:
    """Sources of a device XLA has no gpu_specs file for: each spec field from the named
    datasheet (the first fact), the peaks from the others."""
    fields = ", ".join(f"{ours} <- datasheet" for ours in SPEC_FIELDS)
    return (f"datasheet/{name}: {fields}", *facts, *XLA_CONSTANT_SOURCES)


DEVICES: dict[str, DeviceSpec] = {
    "h100_sxm": DeviceSpec(
        "h100_sxm",
        132,
        128,
        1.98,
        3_352_320_000_000,
        52_428_800,
        233_472,
        tf32_peak=494.7 * T,
        bf16_peak=989.4 * T,
        fp16_peak=989.4 * T,
        fp8_peak=1978.9 * T,
        int8_peak=1978.9 * T,
        fp64_peak=66.9 * T,
        sources=_sources(
            "h100_sxm",
            "tf32/bf16/fp16/fp8/int8/fp64 peaks: " + REFERENCE + ", H100 SXM5 column (TF32 "
            "494.7, FP16/BF16 989.4, FP8 1978.9, INT8 1978.9 TOPS, FP64 tensor 66.9); = NVIDIA "
            "H100 Tensor Core GPU datasheet, SXM column, sparse figures / 2; = XLA "
            "target_config/specs/h100_sxm.txtpb matrix_unit_description "
            "(2 x ops/clock x 4 units x 132 SMs x 1.8295 GHz)",
            "fp64_peak is the FP64 tensor-core rate (f64 dots); FP64 vector is 33.5 (reference)",
        ),
    ),
    "h100_pcie": DeviceSpec(
        "h100_pcie",
        114,
        128,
        1.755,
        2_039_040_000_000,
        52_428_800,
        233_472,
        tf32_peak=378 * T,
        bf16_peak=756 * T,
        fp16_peak=756 * T,
        fp8_peak=1513 * T,
        int8_peak=1513 * T,
        fp64_peak=51 * T,
        sources=_sources(
            "h100_pcie",
            "tf32/bf16/fp16/fp8/int8/fp64 peaks: NVIDIA H100 Tensor Core GPU datasheet, PCIe "
            "column: TF32 756, BF16/FP16 1513, FP8 3026, INT8 3026 TOPS, all 'with sparsity', "
            "halved for dense; FP64 Tensor Core 51 (dense); not in the reference's table",
        ),
    ),
    "a100_sxm_80": DeviceSpec(
        "a100_sxm_80",
        108,
        64,
        1.41,
        2_039_040_000_000,
        41_943_040,
        167_936,
        tf32_peak=156 * T,
        bf16_peak=312 * T,
        fp16_peak=312 * T,
        fp8_peak=0.0,
        int8_peak=624 * T,
        fp64_peak=19.5 * T,
        sources=_sources(
            "a100_sxm_80",
            "tf32/bf16/fp16/int8/fp64 peaks: " + REFERENCE + ", A100 SXM4 80GB column (TF32 "
            "156, FP16/BF16 312, INT8 624 TOPS, FP64 tensor 19.5); = NVIDIA A100 Tensor Core "
            "GPU datasheet dense figures (sparse = 2x); fp8: none (Ampere has no FP8 tensor "
            "cores); fp64_peak is FP64 tensor (FP64 vector 9.7)",
        ),
    ),
    "v100": DeviceSpec(
        "v100",
        80,
        64,
        1.53,
        898_048_000_000,
        6_291_456,
        98_304,
        tf32_peak=0.0,
        bf16_peak=0.0,
        fp16_peak=125 * T,
        fp8_peak=0.0,
        int8_peak=0.0,
        fp64_peak=7.8 * T,
        sources=_sources(
            "v100",
            "fp16/fp64 peaks: " + REFERENCE + ", V100 SXM2 column (FP16 tensor 125, FP64 7.8; "
            "no sparsity on Volta); = NVIDIA Tesla V100 datasheet (SXM2); tf32/bf16/fp8/int8: "
            "none (Volta tensor cores are FP16 only)",
        ),
    ),
    "b200": DeviceSpec(
        "b200",
        148,
        128,
        1.965,
        7_672_320_000_000,
        132_644_864,
        233_472,
        tf32_peak=1125 * T,
        bf16_peak=2250 * T,
        fp16_peak=2250 * T,
        fp8_peak=4500 * T,
        int8_peak=4500 * T,
        fp64_peak=37 * T,
        sources=_sources(
            "b200",
            "tf32/bf16/fp16/fp8/int8/fp64 peaks: NVIDIA HGX B200 datasheet (8-GPU totals, "
            "sparse: TF32 18 PF, FP16/BF16 36 PF, FP8 72 PF, INT8 72 POPS; FP64/FP64 Tensor "
            "296 TF dense) / 8 GPUs, sparse figures / 2; not in the reference's table",
        ),
    ),
    "a6000": DeviceSpec(
        "a6000",
        84,
        128,
        1.8,
        768_096_000_000,
        6_291_456,
        102_400,
        tf32_peak=77.4 * T,
        bf16_peak=154.8 * T,
        fp16_peak=154.8 * T,
        fp8_peak=0.0,
        int8_peak=309.7 * T,
        fp64_peak=0.6048 * T,
        threads_per_sm=1536,
        sources=_sources(
            "a6000",
            "tf32/bf16/fp16/int8 peaks: NVIDIA Ampere GA102 GPU Architecture whitepaper, "
            "RTX A6000 column, dense (sparse in brackets there): TF32 77.4, FP16/BF16 (FP32 "
            "accumulate) 154.8, INT8 309.7 TOPS; the RTX A6000 datasheet's 'Tensor performance "
            "309.7 TFLOPS' is the sparse FP16 figure; fp8: none (Ampere); not in the reference",
            "fp64_peak: no FP64 tensor cores on GA102; CUDA C++ Programming Guide, arithmetic "
            "instruction throughput, compute capability 8.6: 2 FP64 FMA/clock/SM (FP32: 128) -> "
            "2 x 2 x 84 x 1.8 GHz = 0.605 TFLOP/s (was 1.2, a 1:32 figure; GA102 is 1:64)",
        ),
    ),
    # GPUs XLA ships no gpu_specs file for (the op-profile table's sm_60, sm_75, sm_103):
    # every field from the datasheet or whitepaper named in `_datasheet_sources`
    "p100_sxm2": DeviceSpec(
        "p100_sxm2",
        56,
        64,
        1.48,
        732_000_000_000,
        4_194_304,
        65_536,
        tf32_peak=0.0,
        bf16_peak=0.0,
        fp16_peak=21.2 * T,
        fp8_peak=0.0,
        int8_peak=0.0,
        fp64_peak=5.3 * T,
        sources=_datasheet_sources(
            "p100_sxm2",
            "NVIDIA Tesla P100 datasheet (SXM2, NVLink) and the Pascal GP100 architecture "
            "whitepaper (Tesla P100 column): 56 SMs x 64 FP32 cores, GPU boost 1480 MHz, "
            "HBM2 732 GB/s, L2 4096 KB, 64 KB shared memory per SM, 2048 threads per SM; "
            "FP32 10.6 TFLOPS = 2 x 64 x 56 x 1.48 GHz",
            "tf32/bf16/fp8/int8: none (Pascal has no tensor cores); fp16_peak: the datasheet's "
            "half precision 21.2 TFLOPS (the ALUs' paired FP16); fp64_peak: double precision "
            "5.3 TFLOPS (the FP64 ALUs)",
        ),
    ),
    "t4": DeviceSpec(
        "t4",
        40,
        64,
        1.59,
        320_000_000_000,
        4_194_304,
        65_536,
        tf32_peak=0.0,
        bf16_peak=0.0,
        fp16_peak=65 * T,
        fp8_peak=0.0,
        int8_peak=130 * T,
        fp64_peak=0.2544 * T,
        threads_per_sm=1024,
        sources=_datasheet_sources(
            "t4",
            "NVIDIA T4 datasheet and the Turing architecture whitepaper (Tesla T4 column): 40 "
            "SMs x 64 FP32 cores, boost 1590 MHz, GDDR6 320 GB/s, L2 4096 KB, 64 KB shared "
            "memory per SM, 1024 threads per SM (compute capability 7.5); FP32 8.1 TFLOPS = "
            "2 x 64 x 40 x 1.59 GHz",
            "fp16_peak: mixed precision (FP16/FP32) tensor 65 TFLOPS; int8_peak: INT8 130 TOPS; "
            "tf32/bf16/fp8: none (Turing tensor cores take FP16/INT8/INT4); fp64_peak: CUDA C++ "
            "Programming Guide throughput table, 7.5: 2 FP64 FMA/clock/SM -> 2 x 2 x 40 x "
            "1.59 GHz = 0.254 TFLOP/s",
        ),
    ),
    "gb300": DeviceSpec(
        "gb300",
        160,
        128,
        1.831,
        8_000_000_000_000,
        132_644_864,
        233_472,
        tf32_peak=1125 * T,
        bf16_peak=2250 * T,
        fp16_peak=2250 * T,
        fp8_peak=4500 * T,
        int8_peak=125 * T,
        fp64_peak=1.25 * T,
        sources=_datasheet_sources(
            "gb300",
            "NVIDIA Blackwell Ultra (B300 / GB300) technical blog: 160 SMs (the full GPU) x 128 FP32 cores, "
            "4 tensor cores per SM, 288 GB HBM3e at 8 TB/s; the clock is the HGX B300 "
            "datasheet's FP32 75 TFLOPS per GPU / (2 x 128 x 160) = 1.831 GHz; L2 and shared "
            "memory per SM: not published for B300, B200's (gpu_specs/b200.txtpb: 132644864 "
            "and 233472, the same compute capability 10.x limit of 228 KB) assumed",
            "tf32/bf16/fp16/fp8/int8/fp64 peaks: NVIDIA HGX B300 datasheet (8-GPU totals, "
            "sparse: TF32 18 PF, FP16/BF16 36 PF, FP8 72 PF, INT8 2 POPS; FP64/FP64 Tensor "
            "10 TF) / 8 GPUs, sparse figures / 2",
        ),
    ),
}


class UnknownDeviceError(HloError, KeyError):
    """A device name that names no DeviceSpec (one line, with the closest known name)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown device"


_ALIASES = {"h100": "h100_sxm", "a100": "a100_sxm_80", "a100_80": "a100_sxm_80"}


def device_name(device: str) -> str:
    """The DeviceSpec key for `device`: exact, an alias (`h100`), or a unique prefix."""
    key = device.lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key in DEVICES:
        return key
    starts = [name for name in DEVICES if name.startswith(key)]
    if len(starts) == 1:
        return starts[0]
    import difflib

    close = difflib.get_close_matches(key, list(DEVICES) + list(_ALIASES), n=1, cutoff=0.5)
    hint = f" (did you mean '{_ALIASES.get(close[0], close[0])}'?)" if close else ""
    which = f"ambiguous device {device!r}: {', '.join(starts)}" if starts else (
        f"unknown device {device!r}{hint}")  # fmt: skip
    raise UnknownDeviceError(f"error: {which}; known: {', '.join(DEVICES)}")


def get_device(device: str | DeviceSpec) -> DeviceSpec:
    if isinstance(device, DeviceSpec):
        return device
    return DEVICES[device_name(device)]
