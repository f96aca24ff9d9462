"""Per-element ALU cost of elementwise ops on H100, as XLA's GPU cost model counts them.

Source: XLA `xla/service/gpu/model/hlo_op_profiles_data.h`, section `sm_90` ("NVIDIA H100 80GB
HBM3"), measured with `hlo_op_profiler_run`; the unit is XLA's "clock_cycles" which
`GpuHloCostAnalysis` uses as flops per element (see XLA_GPU_COST_MODEL_REFERENCE.md 1.5).
(opcode, element type) pairs that are not in the table cost `DEFAULT_FLOPS_PER_ELEMENT` = 3
(XLA `kDefaultFlopsPerElement`): integer adds, comparisons, selects, converts, bf16 math...
The key is the element type of the instruction's *result* (XLA looks at `hlo->shape()`).
"""

from __future__ import annotations

DEFAULT_FLOPS_PER_ELEMENT = 3

_INT = {
    # type: (divide, multiply, power)
    "s8": (356, 7, 122), "s16": (364, 7, 122), "s32": (297, 3, 71), "s64": (685, 11, 253),
    "u8": (300, 7, 122), "u16": (304, 7, 126), "u32": (122, 3, 71), "u64": (629, 11, 253),
}  # fmt: skip
_FLOAT_OPS = ("cbrt", "cosine", "exponential", "exponential-minus-one", "log", "log-plus-one",
              "rsqrt", "sine", "sqrt", "tanh", "add", "atan2", "divide", "multiply", "power",
              "subtract")  # fmt: skip
_FLOAT = {
    "f16": (201, 997, 102, 217, 182, 245, 95, 993, 95, 502, 7, 451, 43, 7, 526, 7),
    "f32": (178, 978, 79, 190, 166, 229, 75, 958, 75, 467, 7, 431, 19, 3, 510, 7),
    "f64": (586, 558, 376, 712, 815, 1259, 277, 554, 332, 431, 15, 930, 526, 15, 2205, 15),
    "c64": (None, 2415, 641, 2055, 756, 633, 3148, 2324, 4344, 2379, 7, 6462, 498, 79, 5532, 7),
    "c128": (None, 1750, 1342, 1275, 2455, 2403, 5500, 1999, 6636, 4613, 15, 13131, 2280, 39,
             8363, 15),
}  # fmt: skip

SM90: dict[tuple[str, str], int] = {}
for _t, (_d, _m, _p) in _INT.items():
    SM90[("divide", _t)] = _d
    SM90[("multiply", _t)] = _m
    SM90[("power", _t)] = _p
for _t, _row in _FLOAT.items():
    for _op, _v in zip(_FLOAT_OPS, _row, strict=True):
        if _v is not None:
            SM90[(_op, _t)] = _v


def flops_per_element(opcode: str, element_type: str) -> int:
    return SM90.get((opcode, element_type), DEFAULT_FLOPS_PER_ELEMENT)
