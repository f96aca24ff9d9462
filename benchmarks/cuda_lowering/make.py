"""JAX's CUDA lowering of the corpus programs whose HLO differs from the CPU lowering.

The corpus's `before_optimizations.hlo` is what JAX hands XLA:CPU (`jf.lower(*args)` on the
CPU platform), but `xla_h100_optimized.hlo` was compiled from JAX's lowering *for CUDA*
(`../shared/tools/make_corpus.py` lowers again with a CUDA sharding). The two are the same
HLO except where a JAX primitive lowers per platform: `threefry2x32` lowers to rolled
`while` loops (five of them per key use, trip count 5) on CPU and to straight-line code
elsewhere (JAX's `_threefry2x32_lowering`, `use_rolled_loops=True` registered for
`platform='cpu'` only). XLA's GPU pipeline unrolls none of those loops before fusion
(its `WhileLoopUnroller` is not in `gpu_compiler.cc`; `DoubleBufferLoopUnrolling` runs after
fusion), so comparing our plan for the CPU lowering with XLA's plan for the CUDA lowering
compares two programs. `benchmarks/fusion_vs_xla.py` reads `NAME.hlo` here instead of the
corpus's `before_optimizations.hlo` when it exists.

    JAX_PLATFORMS=cpu python benchmarks/cuda_lowering/make.py [--check]

writes `NAME.hlo` for every corpus program whose CUDA lowering differs (opcode counts) from
its `before_optimizations.hlo`; no GPU or CUDA plugin is needed (`lowering_platforms`).
`--check` only lists the programs that differ (today: rng_bits).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent.parent / "shared"


def _opcodes(text: str) -> Counter[str]:
    return Counter(re.findall(r"= \S+ ([a-z][a-z0-9_-]*)\(", text))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--check", action="store_true", help="list the programs that differ only")
    args = ap.parse_args(argv)
    import jax
    import numpy as np

    spec = importlib.util.spec_from_file_location("make_corpus", SHARED / "tools/make_corpus.py")
    assert spec is not None and spec.loader is not None
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    np.random.seed(0)
    for name, (fn, make) in corpus.programs().items():
        cpu_text = SHARED / "corpus/jax" / name / "before_optimizations.hlo"
        if not cpu_text.is_file():
            continue
        traced = jax.jit(fn, keep_unused=True).trace(*make())
        cuda = traced.lower(lowering_platforms=("cuda",)).as_text(dialect="hlo")
        if _opcodes(cuda) == _opcodes(cpu_text.read_text()):
            continue
        print(name, file=sys.stderr)
        if not args.check:
            (HERE / f"{name}.hlo").write_text(cuda)
    return 0


if __name__ == "__main__":
    sys.exit(main())
