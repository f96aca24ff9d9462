"""GPU device descriptions for the cost model, each number with its source.

Sources (named in each `sources` field):
* `gpu_specs/<name>.txtpb`: XLA's device descriptions (openxla/xla
  `xla/tools/hlo_opt/gpu_specs`), copied in `../shared/gpu_specs`: SM count (`core_count`),
  FP32 lanes per SM (`fpus_per_core`), clock (`clock_rate_ghz`), DRAM bandwidth
  (`memory_bandwidth`), L2 size (`l2_cache_size`), shared memory per SM.
* Dense (no sparsity) tensor-core peaks from NVIDIA's datasheets / architecture whitepapers:
  H100 datasheet (SXM5 and PCIe columns), A100 datasheet (SXM4 80GB), Tesla V100
  datasheet (SXM2), DGX/HGX B200 datasheet (per-GPU = HGX total / 8, sparse figures halved),
  RTX A6000 datasheet / NVIDIA Ampere GA102 whitepaper Table. The same H100 SXM figures are
  reproduced by the `matrix_unit_description` of XLA's h100_sxm spec (2 x ops/clock x 4 units x
  132 SMs x 1.8295 GHz; see `XLA_GPU_COST_MODEL_REFERENCE.md` section 3).
* Kernel launch overhead: XLA `gpu_performance_model_base.h` `kKernelLaunchOverhead = 1 us`
  (the same for every device in XLA's model).
* FP32 (non-tensor) peak = 2 x fpus_per_core x core_count x clock (the spec file's numbers),
  which matches each datasheet's FP32 figure to within its rounding.
A zero tensor peak means the GPU has no tensor-core path for that type; the model then uses
the next wider type the hardware runs (what XLA does: e.g. bf16 dots on V100 are upcast).
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


_SPEC = "gpu_specs/{}.txtpb (core_count, fpus_per_core, clock_rate_ghz, memory_bandwidth, l2_cache_size, shared_memory_per_core)"
_LAUNCH = "launch: XLA gpu_performance_model_base.h kKernelLaunchOverhead = 1us"

DEVICES: dict[str, DeviceSpec] = {
    "h100_sxm": DeviceSpec(
        "h100_sxm", 132, 128, 1.98, 3_352_320_000_000, 52_428_800, 233_472,
        tf32_peak=494.7 * T, bf16_peak=989.4 * T, fp16_peak=989.4 * T, fp8_peak=1978.9 * T,
        int8_peak=1978.9 * T, fp64_peak=66.9 * T,
        sources=(_SPEC.format("h100_sxm"),
                 "tensor peaks: NVIDIA H100 Tensor Core GPU datasheet, SXM5 column, dense "
                 "(sparse/2); = h100_sxm matrix_unit_description (XLA target_config specs)",
                 _LAUNCH),
    ),
    "h100_pcie": DeviceSpec(
        "h100_pcie", 114, 128, 1.755, 2_039_040_000_000, 52_428_800, 233_472,
        tf32_peak=378 * T, bf16_peak=756 * T, fp16_peak=756 * T, fp8_peak=1513 * T,
        int8_peak=1513 * T, fp64_peak=51 * T,
        sources=(_SPEC.format("h100_pcie"),
                 "tensor peaks: NVIDIA H100 Tensor Core GPU datasheet, PCIe column, dense (sparse/2)",
                 _LAUNCH),
    ),
    "a100_sxm_80": DeviceSpec(
        "a100_sxm_80", 108, 64, 1.41, 2_039_040_000_000, 41_943_040, 167_936,
        tf32_peak=156 * T, bf16_peak=312 * T, fp16_peak=312 * T, fp8_peak=0.0,
        int8_peak=624 * T, fp64_peak=19.5 * T,
        sources=(_SPEC.format("a100_sxm_80"),
                 "tensor peaks: NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB), dense; "
                 "no FP8 tensor cores (Ampere)", _LAUNCH),
    ),
    "v100": DeviceSpec(
        "v100", 80, 64, 1.53, 898_048_000_000, 6_291_456, 98_304,
        tf32_peak=0.0, bf16_peak=0.0, fp16_peak=125 * T, fp8_peak=0.0,
        int8_peak=0.0, fp64_peak=7.8 * T,
        sources=(_SPEC.format("v100"),
                 "tensor peaks: NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS FP16 tensor; "
                 "no TF32/BF16/FP8/INT8 tensor cores (Volta)", _LAUNCH),
    ),
    "b200": DeviceSpec(
        "b200", 148, 128, 1.965, 7_672_320_000_000, 132_644_864, 233_472,
        tf32_peak=1125 * T, bf16_peak=2250 * T, fp16_peak=2250 * T, fp8_peak=4500 * T,
        int8_peak=4500 * T, fp64_peak=37 * T,
        sources=(_SPEC.format("b200"),
                 "tensor peaks: NVIDIA HGX B200 datasheet (8 GPUs: TF32 18 PF, FP16/BF16 36 PF, "
                 "FP8 72 PF, sparse) / 8 / 2 for dense; FP64 296 TF / 8", _LAUNCH),
    ),
    "a6000": DeviceSpec(
        "a6000", 84, 128, 1.8, 768_096_000_000, 6_291_456, 102_400,
        tf32_peak=77.4 * T, bf16_peak=154.8 * T, fp16_peak=154.8 * T, fp8_peak=0.0,
        int8_peak=309.7 * T, fp64_peak=1.2 * T,
        sources=(_SPEC.format("a6000"),
                 "tensor peaks: NVIDIA RTX A6000 datasheet / Ampere GA102 whitepaper (dense: "
                 "TF32 77.4, FP16/BF16 154.8 TFLOPS, INT8 309.7 TOPS)", _LAUNCH),
    ),
}


def get_device(device: str | DeviceSpec) -> DeviceSpec:
    if isinstance(device, DeviceSpec):
        return device
    key = device.lower().replace("-", "_")
    aliases = {"h100": "h100_sxm", "a100": "a100_sxm_80", "a100_80": "a100_sxm_80"}
    key = aliases.get(key, key)
    if key not in DEVICES:
        raise KeyError(f"unknown device {device!r}; known: {', '.join(DEVICES)}")
    return DEVICES[key]
