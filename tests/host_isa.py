"""The x86 features XLA-CPU compiles for on this host, for tests whose XLA-CPU side depends
on them.

XLA-CPU generates code for the host's features, less those above `--xla_cpu_max_isa` in
`XLA_FLAGS`. The cap follows XLA's rule (xla/backends/cpu/codegen/cpu_features.cc): each
level drops the features of every later generation: SSE4_2 drops avx*, f16c, vaes and
vpclmulqdq; AVX drops avx2* and fma*; AVX2 drops avx512* and evex512; AVX512 drops
avx512vnni; AVX512_VNNI drops avx512bf16; AVX512_BF16 drops amx*; AMX drops amx-fp16.
Features are named as LLVM names them (`/proc/cpuinfo`'s `avx512_bf16` is `avx512bf16`).
"""

from __future__ import annotations

import os
import platform
import re
from functools import cache

LEVELS = ("SSE4_2", "AVX", "AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX", "AMX_FP16")

# /proc/cpuinfo flag -> LLVM feature, where the two spell it differently
_LLVM_NAME = {"avx512_bf16": "avx512bf16", "avx512_fp16": "avx512fp16", "avx512_vnni":
              "avx512vnni", "amx_bf16": "amx-bf16", "amx_fp16": "amx-fp16", "amx_int8":
              "amx-int8", "amx_tile": "amx-tile", "avx_ne_convert": "avxneconvert",
              "avx_vnni": "avxvnni"}  # fmt: skip


def _dropped_at(level: str, feature: str) -> bool:
    """Whether XLA drops `feature` with `--xla_cpu_max_isa=level`."""
    rules = [
        lambda f: f.startswith("avx") or f in ("f16c", "vpclmulqdq", "vaes"),
        lambda f: f.startswith(("avx2", "fma")),
        lambda f: f.startswith("avx512") or f == "evex512",
        lambda f: f == "avx512vnni",
        lambda f: f == "avx512bf16",
        lambda f: f.startswith("amx"),
        lambda f: f == "amx-fp16",
    ]
    start = LEVELS.index(level)
    return any(rule(feature) for rule in rules[start:])


def host_features() -> frozenset[str]:
    """The host's x86 features in LLVM's names (empty where /proc/cpuinfo is unreadable)."""
    return _host_features()


@cache
def _host_features() -> frozenset[str]:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return frozenset()
    m = re.search(r"^flags\s*:(.*)$", text, re.M)
    flags = m.group(1).split() if m else []
    return frozenset(_LLVM_NAME.get(f, f) for f in flags)


def max_isa() -> str | None:
    """The `--xla_cpu_max_isa` level in XLA_FLAGS (upper-cased), or None."""
    m = re.search(r"--xla_cpu_max_isa=(\w+)", os.environ.get("XLA_FLAGS", ""))
    return m.group(1).upper() if m else None


def xla_cpu_has(feature: str) -> bool:
    """Whether XLA-CPU in this process compiles with the LLVM feature `feature`."""
    if feature not in host_features():
        return False
    level = max_isa()
    return level is None or level not in LEVELS or not _dropped_at(level, feature)


def older_level() -> str | None:
    """A `--xla_cpu_max_isa` level that differs from what XLA-CPU uses here (no FMA, no
    AVX2, no AVX-512; f16 still compiles, which it does not at SSE4_2), or None where the
    host has nothing above it."""
    feats = host_features()
    return "AVX" if "avx2" in feats or "fma" in feats else None
