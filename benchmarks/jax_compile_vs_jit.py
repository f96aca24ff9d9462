"""`hlopass.execution.jax.compile(fn, pipeline)` against `jax.jit(fn)` on the three programs of
tests/test_jax_interop.py (a 5-step MLP training loop, softmax cross-entropy, an integer
program): first call (lowering, our pipeline, XLA compile) and the median of later calls,
and the largest difference of the results.

    python3 benchmarks/jax_compile_vs_jit.py [--runs 20] [--pipeline PIPELINE]

Both run on the CPU in this process (jaxlib's XLA:CPU); the steady-state column is what a
training loop pays per step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--pipeline", default="fixpoint{passes=algsimp,constant-folding,dce,cse}")
    args = ap.parse_args()
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError:
        print("needs jax (the test extra)")
        return 0
    import hlopass.execution.jax as hj
    from tests.test_jax_interop import _mlp_loss, _train_step

    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (8, 16)) * 0.3, "b1": jnp.zeros(16),
              "w2": jax.random.normal(k2, (16, 1)) * 0.3}  # fmt: skip
    x = jax.random.normal(k3, (64, 8))
    y = jnp.sum(jnp.sin(x), axis=1, keepdims=True)

    def xent(logits, labels):
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    def ints(a, b):
        s = jnp.cumsum(a * 3 + 0, axis=0)
        return jnp.sort(s ^ b), jnp.argmax(s)

    a = jnp.arange(-20, 20, dtype=jnp.int32)
    programs = [
        ("mlp train step", _train_step, (params, x, y)),
        (
            "softmax xent",
            xent,
            (jax.random.normal(k1, (32, 10)) * 3, jnp.arange(32, dtype=jnp.int32) % 10),
        ),  # fmt: skip
        ("int program", ints, (a, jnp.flip(a))),
    ]
    print(f"pipeline: {args.pipeline}; {args.runs} runs; XLA:CPU, this machine (loaded)")
    print(f"{'program':16} {'first ours':>11} {'first jit':>10} {'step ours':>10} "
          f"{'step jit':>9} {'ratio':>6} {'max |diff|':>11}")  # fmt: skip
    for name, fn, call_args in programs:
        row = []
        results = []
        for make in (lambda f=fn: hj.compile(f, args.pipeline), lambda f=fn: jax.jit(f)):
            f = make()
            t0 = time.perf_counter()
            out = jax.block_until_ready(f(*call_args))
            first = time.perf_counter() - t0
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                jax.block_until_ready(f(*call_args))
                times.append(time.perf_counter() - t0)
            row.append((first, statistics.median(times)))
            results.append(jax.tree_util.tree_leaves(out))
        diff = max(float(np.max(np.abs(np.asarray(p, np.float64) - np.asarray(q, np.float64))))
                   for p, q in zip(*results, strict=True))  # fmt: skip
        (fo, so), (fj, sj) = row
        print(f"{name:16} {fo * 1e3:9.0f}ms {fj * 1e3:8.0f}ms {so * 1e6:8.0f}us {sj * 1e6:7.0f}us "
              f"{so / sj:6.2f} {diff:11.3g}")  # fmt: skip
    # the training loop, 5 steps both ways, loss by loss
    ours, ref = hj.compile(_train_step, args.pipeline), jax.jit(_train_step)
    pa = pb = params
    losses = []
    for _ in range(5):
        pa, la = ref(pa, x, y)
        pb, lb = ours(pb, x, y)
        losses.append((float(la), float(lb)))
    print("5 SGD steps, loss jit / ours: " + ", ".join(f"{p:.6f}/{q:.6f}" for p, q in losses))
    print(f"initial loss {float(_mlp_loss(params, x, y)):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
