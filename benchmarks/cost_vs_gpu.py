"""Measured GPU kernel times vs hlopass.cost estimates (Kendall tau).

Needs an NVIDIA GPU and jax with CUDA. Builds a set of single-kernel programs (elementwise,
reductions, transposes, dots of several sizes and types), times each with JAX (median of
repeated runs after warm-up), estimates the unoptimized HLO JAX emits with hlopass.cost on
the matching device, and prints the Kendall rank correlation. Without a GPU it says so and
exits 0. Usage: python benchmarks/cost_vs_gpu.py [--device h100_sxm]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def have_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def kendall_tau(a: list[float], b: list[float]) -> float:
    conc = disc = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            s = (a[i] - a[j]) * (b[i] - b[j])
            conc += s > 0
            disc += s < 0
    return (conc - disc) / max(conc + disc, 1)


def guess_device(name: str) -> str:
    n = name.lower()
    for key, dev in (("h100 pcie", "h100_pcie"), ("h100", "h100_sxm"), ("a100", "a100_sxm_80"),
                     ("v100", "v100"), ("b200", "b200"), ("a6000", "a6000")):  # fmt: skip
        if key in n:
            return dev
    return "h100_sxm"


def cases():
    import jax.numpy as jnp

    out = []
    for n in (1 << 16, 1 << 20, 1 << 24, 1 << 26):
        out.append((f"add f32[{n}]", lambda x, y: x + y, [(n,), (n,)], jnp.float32))
        out.append((f"exp f32[{n}]", lambda x: jnp.exp(x), [(n,)], jnp.float32))
    for r, c in ((1024, 1024), (4096, 4096), (8192, 1024)):
        out.append((f"rowsum f32[{r},{c}]", lambda x: x.sum(axis=1), [(r, c)], jnp.float32))
        out.append((f"transpose f32[{r},{c}]", lambda x: x.T + 1, [(r, c)], jnp.float32))
    for s in (256, 1024, 4096, 8192):
        for dt in (jnp.bfloat16, jnp.float32):
            out.append(
                (f"dot {jnp.dtype(dt).name}[{s}]^2", lambda x, y: x @ y, [(s, s), (s, s)], dt)
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default=None)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    if not have_gpu():
        print("no NVIDIA GPU found: nothing to measure")
        return 0
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("jax is not installed: nothing to measure")
        return 0
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        print("jax sees no GPU (install jax[cuda12]): nothing to measure")
        return 0
    import hlopass
    from hlopass.cost import estimate

    device = args.device or guess_device(gpus[0].device_kind)
    print(f"GPU: {gpus[0].device_kind}; model device: {device}")
    measured, estimated = [], []
    for name, fn, shapes, dt in cases():
        xs = [jnp.ones(s, dt) for s in shapes]
        jf = jax.jit(fn)
        jf(*xs).block_until_ready()
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            jf(*xs).block_until_ready()
            times.append((time.perf_counter() - t0) * 1e6)
        ms = statistics.median(times)
        text = jf.lower(*xs).compile().as_text()  # what XLA ran: fused, gemm calls
        est = estimate(hlopass.parse_hlo(text), device).time_us
        measured.append(ms)
        estimated.append(est)
        print(
            f"{name:<28} measured {ms:10.2f} us   estimated {est:10.2f} us   ratio {est / ms:6.2f}"
        )
    print(
        f"Kendall tau (estimate vs measured): {kendall_tau(estimated, measured):.3f} over {len(measured)} kernels"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
