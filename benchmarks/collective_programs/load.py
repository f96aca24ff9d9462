"""The generated collective programs as the tests and the benchmark read them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
DEVICES = 8
NAMES = ("mlp_grads", "batch_norm", "adam_global_norm", "zero_step", "ppermute_ring",
         "moe_all_to_all", "scan_psum", "large_grads")  # fmt: skip

# XLA GPU's asynchronous collectives (every size), then its scheduler overlapping them
ASYNC = ("async-collective-creator{convert-all-reduce=true convert-all-gather=true "
         "convert-reduce-scatter=true convert-collective-permute=true convert-all-to-all=true},"
         "latency-hiding-scheduler")  # fmt: skip
# the data-parallel cleanups, then XLA GPU's combiners: the collectives still synchronous
SYNC_PIPELINE = ("all-reduce-folder,all-reduce-simplifier,reduce-scatter-creator,"
                 "all-reduce-combiner{gpu=true},all-gather-combiner{gpu=true},"
                 "reduce-scatter-combiner{gpu=true},collective-permute-combiner")  # fmt: skip
# our collective pipeline: SYNC_PIPELINE, then ASYNC
PIPELINE = SYNC_PIPELINE + "," + ASYNC

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all")
_COLLECTIVE = re.compile(r" (" + "|".join(KINDS) + r")(-start)?\(")


@dataclass(frozen=True)
class Program:
    name: str
    per_device: str  # the module every device runs (replica_count=8)
    inputs: list[list[np.ndarray]]  # per device
    outputs: list[list[np.ndarray]]  # per device, as jax computed them on 8 host devices
    xla_h100: str | None  # XLA's GPU compilation for 8 H100s, when generated


def read_io(path: Path) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Every device's inputs and outputs from an `io.npz` that `make.py` wrote."""
    io = np.load(path)
    n_in = sum(1 for k in io.files if k.startswith("d0_in"))
    n_out = sum(1 for k in io.files if k.startswith("d0_out"))
    return ([[io[f"d{r}_in{k}"] for k in range(n_in)] for r in range(DEVICES)],
            [[io[f"d{r}_out{k}"] for k in range(n_out)] for r in range(DEVICES)])  # fmt: skip


def load(name: str) -> Program:
    d = ROOT / name
    inputs, outputs = read_io(d / "io.npz")
    h100 = d / "xla_h100_optimized.hlo"
    return Program(
        name,
        (d / "per_device.hlo").read_text(),
        inputs,
        outputs,
        h100.read_text() if h100.exists() else None,
    )


def collective_count(text: str) -> int:
    """Collectives in HLO text, an async start counted once (its done is not a collective)."""
    return len(_COLLECTIVE.findall(text))
