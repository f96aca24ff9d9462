"""hlopass.execution.jax: `lower` and `compile(fn, pipeline)` against `jax.jit` on three programs,
a training loop among them, with the core pipeline applied and verified after each pass."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="hlopass.execution.jax needs jax (the test extra)")
jnp = jax.numpy

import hlopass  # noqa: E402
import hlopass.execution.jax as hj  # noqa: E402

PIPELINE = "fixpoint{passes=algsimp,constant-folding,dce,cse}"
EPS32 = float(np.finfo(np.float32).eps)


def _mlp_loss(p, x, y):
    h = jnp.tanh(x @ p["w1"] + p["b1"])
    return jnp.mean((h @ p["w2"] - y) ** 2)


def _train_step(p, x, y):
    loss, grads = jax.value_and_grad(_mlp_loss)(p, x, y)
    return jax.tree_util.tree_map(lambda a, g: a - 0.05 * g, p, grads), loss


def test_lower_gives_the_module_jax_hands_xla():
    x = jnp.ones((4, 3), jnp.float32)
    module = hj.lower(lambda a: jnp.sum(a * 2.0, axis=1), x)
    text = hlopass.print_hlo(module)
    assert "reduce(" in text and "f32[4,3]" in text


def test_training_loop_matches_jit():
    """Five SGD steps of a 2-layer MLP, ours vs jax.jit, loss by loss.

    Tolerance: both sides are XLA:CPU compilations of the same function (our pipeline only
    applies value-preserving rewrites), so they may differ only by evaluation order. The
    loss is a mean of n = 64 non-negative squared errors whose inputs come from dots of
    length k <= 16; reordering a float32 sum of n same-sign terms changes it by at most
    n * eps relative (Higham, Accuracy and Stability, 4.2), the dots add k * eps each, and
    each SGD step can carry the previous step's error forward once more: after s steps the
    relative bound is s * (n + 2k) * eps."""
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {"w1": jax.random.normal(k1, (8, 16)) * 0.3, "b1": jnp.zeros(16),
              "w2": jax.random.normal(k2, (16, 1)) * 0.3}  # fmt: skip
    x = jax.random.normal(k3, (64, 8))
    y = jnp.sum(jnp.sin(x), axis=1, keepdims=True)
    ours = hj.compile(_train_step, PIPELINE, verify_each=True)
    ref = jax.jit(_train_step)
    pa, pb = params, params
    n, k = 64, 16
    for step in range(1, 6):
        pa, loss_ref = ref(pa, x, y)
        pb, loss_ours = ours(pb, x, y)
        bound = step * (n + 2 * k) * EPS32 * abs(float(loss_ref))
        assert abs(float(loss_ours) - float(loss_ref)) <= bound, (step, loss_ours, loss_ref)
    assert float(loss_ours) < float(_mlp_loss(params, x, y))  # it trained
    assert any(changed for _, changed in ours.runner.log)  # the pipeline did something


def test_softmax_cross_entropy_matches_jit():
    """Bound: log-sum-exp over c = 10 classes and a mean over b = 32 rows: (c + b) * eps
    relative to the loss, plus the same for the exp/log roundings (1 ulp each, 4 per row)."""

    def xent(logits, labels):
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    logits = jax.random.normal(jax.random.PRNGKey(1), (32, 10)) * 3
    labels = jnp.arange(32, dtype=jnp.int32) % 10
    want = float(jax.jit(xent)(logits, labels))
    got = float(hj.compile(xent, PIPELINE, verify_each=True)(logits, labels))
    assert abs(got - want) <= (10 + 32 + 4) * EPS32 * abs(want)


def test_integer_program_is_exact():
    def prog(a, b):
        s = jnp.cumsum(a * 3 + 0, axis=0)
        return jnp.sort(s ^ b), jnp.argmax(s)

    a = jnp.arange(-20, 20, dtype=jnp.int32)
    b = jnp.flip(a)
    want = jax.jit(prog)(a, b)
    compiled = hj.compile(prog, PIPELINE, verify_each=True)
    got = compiled(a, b)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert "multiply" in hlopass.print_hlo(compiled.module(a, b))
