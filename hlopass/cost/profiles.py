"""Per-element ALU cost of elementwise ops per GPU, as XLA's GPU cost model counts them.

Source: XLA `xla/service/gpu/model/hlo_op_profiles_data.h` (openxla/xla @ 183fa00c), measured
with `hlo_op_profiler_run`, one section per GPU (`sm_XY`, plus a device name where XLA gives
one); the unit is XLA's "clock_cycles", which `GpuHloCostAnalysis` uses as flops per element
(XLA_GPU_COST_MODEL_REFERENCE.md 1.5). The same numbers are in
`benchmarks/data/hlo_op_profiles.csv` (written by `benchmarks/data/extract_xla_tables.py`).
(opcode, element type) pairs a GPU's section lacks cost `DEFAULT_FLOPS_PER_ELEMENT` = 3 (XLA
`kDefaultFlopsPerElement`): integer adds, comparisons, selects, converts, bf16 math...
The key is the element type of the instruction's *result* (XLA looks at `hlo->shape()`).

Each of our devices (`devices.py`) uses the section of its own compute capability, as XLA's
`HloOpProfiles::GetProfile` does (`DEVICE_PROFILE`); a device without one would get XLA's
default section, sm_86 (`fallback_section` says which section a GPU without a device of
ours would take: sm_86; sm_100 for GB300). Every section has a device today: sm_60 is the
P100 (`p100_sxm2`), sm_75 the T4, sm_103 the GB300. Without a device the cost is H100's
(sm_90), the model's default device.
"""

from __future__ import annotations

DEFAULT_FLOPS_PER_ELEMENT = 3
DEFAULT_PROFILE = "sm_86"  # XLA HloOpProfiles::Singleton default_profile_name
DEFAULT_DEVICE = "h100_sxm"

# our DeviceSpec name -> XLA's profile section (its compute capability)
DEVICE_PROFILE = {
    "h100_sxm": "sm_90", "h100_pcie": "sm_90", "a100_sxm_80": "sm_80", "v100": "sm_70",
    "b200": "sm_100", "a6000": "sm_86", "p100_sxm2": "sm_60", "t4": "sm_75", "gb300": "sm_103",
}  # fmt: skip


def compute_capability(device: str) -> tuple[int, int]:
    """A device's CUDA compute capability (major, minor), read from its profile section's
    name (`sm_90`: 9.0, `sm_86`: 8.6, `sm_103`: 10.3)."""
    digits = DEVICE_PROFILE[device].removeprefix("sm_")
    return int(digits[:-1]), int(digits[-1])


COMPUTE_CAPABILITY: dict[str, tuple[int, int]] = {d: compute_capability(d) for d in DEVICE_PROFILE}
"""Each known device's CUDA compute capability: the one table of it (layouts, fusion and
pipeline rules read it)."""

# "[section] device name" then "opcode type=cycles ..." lines, in XLA's order
_TABLE = """
[sm_103] GB300
popcnt s8=37 s16=37 s32=37 s64=37 u8=37 u16=37 u32=37 u64=33
add s8=4 s16=4 s32=4 s64=12 u8=4 u16=4 u32=4 u64=12 f16=8 f32=8 f64=136 c64=12 c128=277
divide s8=372 s16=380 s32=302 s64=1068 u8=298 u16=293 u32=136 u64=890 f16=49 f32=24 f64=2028 c64=335 c128=14299
multiply s8=8 s16=8 s32=8 s64=12 u8=8 u16=8 u32=8 u64=12 f16=8 f32=8 f64=132 c64=33 c128=832
subtract s8=4 s16=4 s32=4 s64=12 u8=4 u16=4 u32=4 u64=12 f16=8 f32=8 f64=132 c64=12 c128=285
cbrt f16=198 f32=173 f64=2248
cosine f16=442 f32=347 f64=2782 c64=761 c128=10312
erf f16=235 f32=190 f64=6276
exponential f16=111 f32=86 f64=2322 c64=823 c128=11749
exponential-minus-one f16=186 f32=144 f64=2802 c64=894 c128=10076
log f16=120 f32=186 f64=488 c64=695 c128=14022
log-plus-one f16=219 f32=211 f64=3369 c64=741 c128=16025
logistic f16=244 f32=202 f64=3142 c64=2852 c128=27390
round-nearest-afz f16=66 f32=57 f64=364
round-nearest-even f16=62 f32=33 f64=136
rsqrt f16=111 f32=78 f64=939 c64=2976 c128=18369
sine f16=372 f32=376 f64=2761 c64=790 c128=10399
sqrt f16=111 f32=78 f64=1465 c64=4375 c128=29046
tan f16=372 f32=405 f64=3502 c64=1771 c128=16137
tanh f16=149 f32=140 f64=2094 c64=1668 c128=16191
atan2 f16=451 f32=438 f64=5464 c64=6582 c128=63780
[sm_100] B200
divide s8=373 s16=369 s32=306 s64=730 u8=302 u16=302 u32=125 u64=628 f16=43 f32=23 f64=483 c64=330 c128=2338
multiply s8=7 s16=7 s32=3 s64=11 u8=7 u16=7 u32=3 u64=11 f16=7 f32=7 f64=15 c64=31 c128=39
power s8=153 s16=145 s32=172 s64=298 u8=153 u16=149 u32=172 u64=298 f16=451 f32=463 f64=1796 c64=5285 c128=8685
cbrt f16=200 f32=180 f64=569
cosine f16=1017 f32=1002 f64=538 c64=2511 c128=1862
erf f16=161 f32=161 f64=746
exponential f16=106 f32=82 f64=314 c64=695 c128=1375
exponential-minus-one f16=216 f32=196 f64=385 c64=864 c128=1513
log f16=102 f32=165 f64=844 c64=703 c128=3859
log-plus-one f16=216 f32=200 f64=793 c64=664 c128=5985
logistic f16=220 f32=176 f64=428 c64=2314 c128=5973
rsqrt f16=98 f32=74 f64=231 c64=2507 c128=5792
sine f16=1006 f32=990 f64=534 c64=2440 c128=1878
sqrt f16=98 f32=74 f64=294 c64=4271 c128=6602
tanh f16=141 f32=137 f64=459 c64=2444 c128=4519
add f16=7 f32=7 f64=15 c64=11 c128=15
atan2 f16=400 f32=373 f64=829 c64=6346 c128=13310
subtract f16=7 f32=7 f64=15 c64=11 c128=15
[sm_90] NVIDIA H100 80GB HBM3
divide s8=356 s16=364 s32=297 s64=685 u8=300 u16=304 u32=122 u64=629 f16=43 f32=19 f64=526 c64=498 c128=2280
multiply s8=7 s16=7 s32=3 s64=11 u8=7 u16=7 u32=3 u64=11 f16=7 f32=3 f64=15 c64=79 c128=39
power s8=122 s16=122 s32=71 s64=253 u8=122 u16=126 u32=71 u64=253 f16=526 f32=510 f64=2205 c64=5532 c128=8363
cbrt f16=201 f32=178 f64=586
cosine f16=997 f32=978 f64=558 c64=2415 c128=1750
exponential f16=102 f32=79 f64=376 c64=641 c128=1342
exponential-minus-one f16=217 f32=190 f64=712 c64=2055 c128=1275
log f16=182 f32=166 f64=815 c64=756 c128=2455
log-plus-one f16=245 f32=229 f64=1259 c64=633 c128=2403
rsqrt f16=95 f32=75 f64=277 c64=3148 c128=5500
sine f16=993 f32=958 f64=554 c64=2324 c128=1999
sqrt f16=95 f32=75 f64=332 c64=4344 c128=6636
tanh f16=502 f32=467 f64=431 c64=2379 c128=4613
add f16=7 f32=7 f64=15 c64=7 c128=15
atan2 f16=451 f32=431 f64=930 c64=6462 c128=13131
subtract f16=7 f32=7 f64=15 c64=7 c128=15
[sm_86]
divide s8=370 s16=367 s32=306 s64=918 u8=306 u16=302 u32=115 u64=838 f64=2016 c64=687 c128=7941
power s8=392 s16=396 s64=601 u8=388 u16=399 u64=604 f16=975 f32=925 f64=5511 c64=3351 c128=18205
cbrt f16=925 f32=867 f64=6339
cosine f16=691 f32=662 f64=1717 c128=6613
exponential f16=108 f32=86 f64=1652 c64=1360 c128=4028
exponential-minus-one f16=396 f32=381 f64=1900 c64=1400 c128=4161
log f16=266 f32=244 f64=608 c64=950 c128=7599
log-plus-one f16=284 f32=262 f64=2073 c64=842 c128=6962
logistic f16=226 f32=176 f64=2412
rsqrt f16=97 f32=75 f64=698 c64=2383 c128=11318
sqrt f16=97 f32=75 f64=986 c64=3193 c128=15606
tanh f16=212 f32=190 f64=1609 c128=9939
atan2 f16=482 f32=486 f64=3747 c64=5353 c128=39027
sine f32=662 f64=1789 c128=5878
add f64=97 c128=97
multiply f64=97 c128=270
subtract f64=97 c128=97
[sm_80] NVIDIA A100-SXM4-40GB
divide s8=417 s16=468 s64=1094 u8=420 u16=391 u64=908 f64=831 c128=3037
power u8=417 u16=454 u64=744 f32=1221 f64=1861 c64=4131 c128=6054
cbrt f16=1195 f64=1638
log f16=321 f32=259 f64=699 c64=1037 c128=2371
log-plus-one f16=346 f64=1223 c64=1029 c128=2405
sqrt f16=124 f64=397 c128=5304
tanh f16=499 f32=504 f64=733 c128=3618
exponential-minus-one f64=572
rsqrt f64=329 c128=3945
sine f64=597 c128=2284
atan2 f64=1080 c64=6618 c128=13564
cosine c128=2309
[sm_70] Tesla V100-SXM2-16GB
divide s8=336 s16=345 s32=287 s64=685 u8=293 u16=293 u32=113 u64=599 f16=73 f32=21 f64=501 c64=480 c128=2423
multiply s8=9 s16=9 s32=3 s64=12 u8=9 u16=9 u32=3 u64=12 f16=9 f32=6 f64=15 c64=42 c128=45
power s8=189 s16=183 s32=104 s64=376 u8=189 u16=183 u32=104 u64=376 f16=709 f32=673 f64=2099 c64=8105 c128=9810
add s64=3 u64=3 f16=9 f32=6 f64=15 c64=12 c128=15
cbrt f16=226 f32=189 f64=599
cosine f16=425 f32=373 f64=624 c64=780 c128=1808
exponential f16=128 f32=79 f64=358 c64=722 c128=1487
exponential-minus-one f16=241 f32=205 f64=410 c64=703 c128=1334
log f16=232 f32=180 f64=318 c64=758 c128=1805
log-plus-one f16=266 f32=217 f64=633 c64=654 c128=1618
rsqrt f16=122 f32=76 f64=263 c64=3261 c128=7261
sine f16=425 f32=373 f64=618 c64=789 c128=2013
sqrt f16=122 f32=76 f64=324 c64=6282 c128=8237
tanh f16=284 f32=269 f64=406 c64=1924 c128=6343
atan2 f16=449 f32=406 f64=973 c64=8151 c128=15355
subtract f16=9 f32=6 f64=15 c64=12 c128=15
[sm_60] Tesla P100-SXM2-16GB
add s8=2 s16=2 s32=2 s64=2 u8=2 u16=2 u32=2 u64=2 f16=11 f32=11 f64=14 c64=20 c128=20
divide s8=426 s16=420 s32=444 s64=1018 u8=299 u16=307 u32=189 u64=888 f16=68 f32=35 f64=565 c64=760 c128=3194
multiply s8=5 s16=5 s32=14 s64=82 u8=5 u16=5 u32=14 u64=79 f16=11 f32=11 f64=14 c64=65 c128=65
power s8=216 s16=216 s32=417 s64=1569 u8=213 u16=216 u32=420 u64=1548 f16=1012 f32=988 f64=2682 c64=8335 c128=17893
cbrt f16=233 f32=213 f64=645
cosine f16=532 f32=494 f64=1427 c64=1128 c128=4302
exponential f16=142 f32=109 f64=405 c64=1021 c128=3665
exponential-minus-one f16=364 f32=337 f64=544 c64=991 c128=3656
log f16=325 f32=284 f64=441 c64=1107 c128=2057
log-plus-one f16=373 f32=328 f64=784 c64=994 c128=1806
rsqrt f16=100 f32=71 f64=355 c64=2158 c128=6135
sine f16=497 f32=473 f64=1640 c64=1139 c128=4169
sqrt f16=100 f32=71 f64=417 c64=2934 c128=8595
tanh f16=458 f32=426 f64=473 c64=1883 c128=5294
atan2 f16=675 f32=663 f64=1169 c64=16282 c128=22278
subtract f16=11 f32=11 f64=14 c64=20 c128=20
[sm_75]
divide s8=360 s16=357 s32=296 s64=979 u8=293 u16=290 u32=118 u64=812 f16=74 f64=1915 c128=8040
power s8=336 s16=339 s64=495 u8=334 u16=336 u64=515 f16=1120 f32=1085 f64=5538 c64=3219 c128=18550
cbrt f16=792 f32=783 f64=6494
cosine f16=815 f32=737 f64=1800 c64=1702 c128=6474
exponential f16=132 f32=83 f64=1630 c64=1503 c128=4962
exponential-minus-one f16=342 f32=319 f64=1929 c64=1474 c128=4037
log f16=239 f32=201 f64=596 c64=835 c128=7286
log-plus-one f16=239 f32=218 f64=1774 c64=737 c128=6848
logistic f16=262 f32=181 f64=2430
rsqrt f16=126 f32=74 f64=705 c64=2232 c128=10748
sine f16=794 f32=717 f64=1805 c64=1632 c128=5391
sqrt f16=123 f32=74 f64=984 c64=2989 c128=15981
tanh f16=175 f32=167 f64=1535 c64=2263 c128=9653
atan2 f16=414 f32=414 f64=3744 c64=4847 c128=38206
add f64=95 c128=95
multiply f64=95 c128=273
subtract f64=95 c128=97
"""


def _parse(text: str) -> tuple[dict[str, dict[tuple[str, str], int]], dict[str, str]]:
    table: dict[str, dict[tuple[str, str], int]] = {}
    names: dict[str, str] = {}
    row: dict[tuple[str, str], int] = {}
    for line in text.strip().splitlines():
        if line.startswith("["):
            key, _, name = line[1:].partition("]")
            row = table.setdefault(key, {})
            names[key] = name.strip()
            continue
        opcode, *cells = line.split()
        for cell in cells:
            t, _, v = cell.partition("=")
            row[(opcode, t)] = int(v)
    return table, names


PROFILES, PROFILE_NAMES = _parse(_TABLE)
SM90 = PROFILES["sm_90"]


def profile_name(device: str | None = None) -> str:
    """XLA's profile section for our device `device` (None: the default device, H100)."""
    if device is None:
        device = DEFAULT_DEVICE
    return DEVICE_PROFILE.get(device, DEFAULT_PROFILE)


def device_for_profile(section: str) -> tuple[str | None, str]:
    """(our device of XLA's profile `section`, the section that device is priced with);
    (None, `fallback_section(section)`) when we have no device of that GPU."""
    for dev, sec in DEVICE_PROFILE.items():
        if sec == section:
            return dev, sec
    return None, fallback_section(section)


# sections of GPUs we have no device for -> the section that would price them: XLA's default
# (sm_86), except GB300 (sm_103), a Blackwell like B200, which takes B200's (sm_100)
FALLBACK = {"sm_103": "sm_100"}


def fallback_section(section: str) -> str:
    """The section to price a GPU whose own section no device of ours uses."""
    return FALLBACK.get(section, DEFAULT_PROFILE)


def section_cost(section: str, opcode: str, element_type: str) -> int:
    """Cycles per element in XLA's profile `section` (an unknown section: XLA's default)."""
    row = PROFILES.get(section, PROFILES[DEFAULT_PROFILE])
    return row.get((opcode, element_type), DEFAULT_FLOPS_PER_ELEMENT)


def flops_per_element(opcode: str, element_type: str, device: str | None = None) -> int:
    """Measured cycles per element of `opcode` with an `element_type` result on `device`."""
    return section_cost(profile_name(device), opcode, element_type)
