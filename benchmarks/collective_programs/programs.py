"""Data-parallel JAX programs on 8 devices, each a `shard_map` over one mesh axis `d`.

Every program is (function, inputs, in_specs, out_specs): parameters are replicated
(`P()`), the batch is split (`P("d")`), and the collectives are the ones a data-parallel
step issues (gradient all-reduces, statistics all-reduces, reduce-scatter + all-gather,
collective-permute, all-to-all, an all-reduce inside a loop body).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

DEVICES = 8
AXIS = "d"

Program = tuple[Callable[..., Any], tuple[Any, ...], tuple[Any, ...], Any]


def _mlp_params(rng: np.random.Generator, sizes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    return [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
             (0.1 * rng.standard_normal(b)).astype(np.float32))
            for a, b in zip(sizes[:-1], sizes[1:], strict=True)]  # fmt: skip


def _mlp_loss(params: Any, x: Any, y: Any) -> Any:
    h = x
    for w, b in params[:-1]:
        h = jnp.tanh(h @ w + b)
    w, b = params[-1]
    return jnp.mean((h @ w + b - y) ** 2)


def mlp_grads(rng: np.random.Generator) -> Program:
    """(a) MLP training step: many small gradients (biases, narrow layers) and two large
    weight gradients, each averaged with its own `pmean`, then an SGD update."""
    params = _mlp_params(rng, [128, 192, 128, 32, 32, 32, 16, 16, 8])
    x = rng.standard_normal((DEVICES * 4, 128)).astype(np.float32)
    y = rng.standard_normal((DEVICES * 4, 8)).astype(np.float32)

    def step(params, x, y):
        g = jax.grad(_mlp_loss)(params, x, y)
        g = jax.tree.map(lambda t: lax.pmean(t, AXIS), g)
        return jax.tree.map(lambda p, t: p - 0.01 * t, params, g)

    return step, (params, x, y), (P(), P(AXIS), P(AXIS)), P()


def batch_norm(rng: np.random.Generator) -> Program:
    """(b) Batch norm over the global batch: per-channel sum and sum of squares all-reduced
    (two `psum`s per layer, three layers), then normalised."""
    x = rng.standard_normal((DEVICES * 8, 64)).astype(np.float32)
    ws = [(rng.standard_normal((64, 64)) / 8).astype(np.float32) for _ in range(3)]

    def step(x, ws):
        h = x
        for w in ws:
            h = h @ w
            n = lax.psum(jnp.float32(h.shape[0]), AXIS)
            mean = lax.psum(jnp.sum(h, 0), AXIS) / n
            sq = lax.psum(jnp.sum(h * h, 0), AXIS) / n
            h = jax.nn.relu((h - mean) * lax.rsqrt(sq - mean * mean + 1e-5))
        return h

    return step, (x, ws), (P(AXIS), P()), P(AXIS)


def adam_global_norm(rng: np.random.Generator) -> Program:
    """(c) Adam with clipping by the global gradient norm: each gradient's `pmean`, then
    the squared norms of the local gradient shards `psum`med for the norm."""
    params = _mlp_params(rng, [64, 64, 32, 10])
    x = rng.standard_normal((DEVICES * 4, 64)).astype(np.float32)
    y = rng.standard_normal((DEVICES * 4, 10)).astype(np.float32)
    m = jax.tree.map(np.zeros_like, params)
    v = jax.tree.map(np.zeros_like, params)

    def step(params, m, v, x, y):
        g = jax.grad(_mlp_loss)(params, x, y)
        local = sum(jnp.sum(t * t) for t in jax.tree.leaves(g))
        norm = jnp.sqrt(lax.psum(local, AXIS)) / DEVICES
        g = jax.tree.map(lambda t: lax.pmean(t, AXIS), g)
        scale = jnp.minimum(1.0, 1.0 / (norm + 1e-6))
        g = jax.tree.map(lambda t: t * scale, g)
        m = jax.tree.map(lambda a, t: 0.9 * a + 0.1 * t, m, g)
        v = jax.tree.map(lambda a, t: 0.999 * a + 0.001 * t * t, v, g)
        params = jax.tree.map(lambda p, a, b: p - 1e-3 * a / (jnp.sqrt(b) + 1e-8), params, m, v)
        return params, m, v

    return step, (params, m, v, x, y), (P(), P(), P(), P(AXIS), P(AXIS)), (P(), P(), P())


def zero_step(rng: np.random.Generator) -> Program:
    """(d) ZeRO-style step: each flat gradient reduce-scattered (`psum_scatter`), the owned
    shard updated, the parameters all-gathered back."""
    sizes = [2048, 512, 4096, 256]
    params = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    x = rng.standard_normal((DEVICES, 4)).astype(np.float32)

    def step(params, x):
        me = lax.axis_index(AXIS)
        g = [jnp.sin(p) * jnp.sum(x) for p in params]
        shards = [lax.psum_scatter(t, AXIS, scatter_dimension=0, tiled=True) for t in g]
        own = [lax.dynamic_slice_in_dim(p, me * (p.shape[0] // DEVICES), p.shape[0] // DEVICES)
               for p in params]  # fmt: skip
        new = [p - 0.01 * s for p, s in zip(own, shards, strict=True)]
        return [lax.all_gather(t, AXIS, tiled=True) for t in new]

    return step, (params, x), (P(), P(AXIS)), P()


def ppermute_ring(rng: np.random.Generator) -> Program:
    """(e) Ring all-reduce written by hand: 7 `ppermute` steps to the right neighbour,
    each adding what arrives, plus a halo exchange to both neighbours."""
    x = rng.standard_normal((DEVICES * 16, 32)).astype(np.float32)
    right = [(i, (i + 1) % DEVICES) for i in range(DEVICES)]
    left = [(i, (i - 1) % DEVICES) for i in range(DEVICES)]

    def step(x):
        acc, msg = x, x
        for _ in range(DEVICES - 1):
            msg = lax.ppermute(msg, AXIS, right)
            acc = acc + msg
        halo = lax.ppermute(x[:1], AXIS, right) + lax.ppermute(x[-1:], AXIS, left)
        return acc, halo

    return step, (x,), (P(AXIS),), (P(AXIS), P(AXIS))


def moe_all_to_all(rng: np.random.Generator) -> Program:
    """(f) Mixture-of-experts dispatch: tokens grouped by destination expert (one per
    device) go out with an `all_to_all`, through the local expert, and back."""
    tokens = rng.standard_normal((DEVICES * DEVICES * 4, 32)).astype(np.float32)
    experts = (rng.standard_normal((DEVICES, 32, 32)) / 6).astype(np.float32)

    def step(tokens, experts):
        t = tokens.reshape(DEVICES, -1, tokens.shape[-1])  # [dest expert, slot, d]
        t = lax.all_to_all(t, AXIS, split_axis=0, concat_axis=0, tiled=True)
        h = jax.nn.gelu(jnp.einsum("esd,edf->esf", t, experts))
        back = lax.all_to_all(h, AXIS, split_axis=0, concat_axis=0, tiled=True)
        return back.reshape(tokens.shape)

    return step, (tokens, experts), (P(AXIS), P(AXIS)), P(AXIS)


def scan_psum(rng: np.random.Generator) -> Program:
    """(g) Gradient accumulation over microbatches in a `scan` whose body all-reduces
    each microbatch's gradients (two `psum`s per iteration)."""
    w = (rng.standard_normal((64, 16)) / 8).astype(np.float32)
    b = np.zeros(16, np.float32)
    xs = rng.standard_normal((DEVICES * 6, 64)).astype(np.float32)

    def step(w, b, xs):
        micro = xs.reshape(3, -1, xs.shape[-1])

        def body(carry, x):
            gw, gb = jax.grad(lambda w, b: jnp.sum(jnp.tanh(x @ w + b) ** 2), (0, 1))(w, b)
            return (carry[0] + lax.psum(gw, AXIS), carry[1] + lax.psum(gb, AXIS)), None

        (gw, gb), _ = lax.scan(body, (jnp.zeros_like(w), jnp.zeros_like(b)), micro)
        return w - 0.01 * gw, b - 0.01 * gb

    return step, (w, b, xs), (P(), P(), P(AXIS)), (P(), P())


# large_grads: square layers of WIDTH^2 f32 (16 MiB each; 4 of them, 64 MiB, above XLA
# GPU's 30 MiB all-reduce combine threshold) and a per-device batch whose backward dots
# per layer (4 * BATCH * WIDTH^2 flops, 8.6 GFLOP) take a third of one layer's all-reduce
# on 8 H100s under our cost model (49 us vs 133 us): overlap can hide the whole backward.
# Every time the tests spend here grows with the layers x WIDTH^2 x 8 devices of values
# (our interpreter and the error bound's float64 run), the dots with BATCH as well.
LARGE_LAYERS, LARGE_WIDTH, LARGE_BATCH = 4, 2048, 512
LARGE_LR = np.float32(0.25)  # the update moves each weight by about a tenth of its size


def _hashed_uniform(seed: Any, rows: Any, cols: int, scale: float) -> Any:
    """[len(rows), cols] f32 uniform in [-scale/2, scale/2) from murmur3's 32-bit finalizer
    of (row id * cols + column) ^ seed: integer ops, then exact f32 ops and one rounding
    (no multiply feeding an add that XLA could contract into an FMA), so every
    implementation builds the same bits, and a full-rank matrix where a function of an
    outer product of two vectors would be numerically of rank 2 or 3."""
    u32 = jnp.uint32
    h = rows[:, None] * u32(cols) + lax.broadcasted_iota(u32, (rows.shape[0], cols), 1)
    h = h ^ (seed * u32(0x9E3779B1))
    for shift, mul in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h = (h ^ (h >> shift)) * u32(mul)
    h = h ^ (h >> 16)
    centered = (h >> 8).astype(jnp.float32) - np.float32(2.0**23)  # integers: exact
    return centered * np.float32(scale * 2.0**-24)


def large_grads(rng: np.random.Generator) -> Program:
    """(h) MLP training step with MiB-scale gradients: 4 tanh layers of 2048 x 2048 on a
    per-device batch of 512, each weight gradient `pmean`ed, SGD update. The weights and
    the batch are hashed inside the step from seeds and row ids, and the outputs are the
    per-column sums and sums of squares of each updated weight and the local loss, so the
    inputs and outputs stay small while every gradient all-reduce reaches an output."""
    n, width = LARGE_LAYERS, LARGE_WIDTH
    seeds = rng.integers(1, 2**31, n + 1).astype(np.uint32)  # one per layer, one for x
    rows = np.arange(DEVICES * LARGE_BATCH, dtype=np.uint32)  # each device its batch rows
    # uniform entries of variance 1/width: activations keep their scale through the layers
    scale = float(np.sqrt(12.0 / width))

    def loss(ws, x):
        h = x
        for w in ws[:-1]:
            h = jnp.tanh(h @ w)
        return jnp.mean(jnp.sum((h @ ws[-1] - x) ** 2, axis=1))

    def step(seeds, rows):
        ids = lax.iota(jnp.uint32, width)
        ws = [_hashed_uniform(seeds[i], ids, width, scale) for i in range(n)]
        x = _hashed_uniform(seeds[n], rows, width, 2.0)
        value, g = jax.value_and_grad(loss)(ws, x)
        g = [lax.pmean(t, AXIS) for t in g]
        new = [w - LARGE_LR * t for w, t in zip(ws, g, strict=True)]
        stats = [jnp.stack([jnp.sum(w, 0), jnp.sum(w * w, 0)]) for w in new]
        return stats, value.reshape(1)

    return step, (seeds, rows), (P(), P(AXIS)), ([P()] * n, P(AXIS))


PROGRAMS: dict[str, Callable[[np.random.Generator], Program]] = {
    "mlp_grads": mlp_grads,
    "batch_norm": batch_norm,
    "adam_global_norm": adam_global_norm,
    "zero_step": zero_step,
    "ppermute_ring": ppermute_ring,
    "moe_all_to_all": moe_all_to_all,
    "scan_psum": scan_psum,
    "large_grads": large_grads,
}
