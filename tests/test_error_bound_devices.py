"""`error_bounds_devices`: derived bounds on several devices, collectives exchanging bounds
with the values. Wide enough for any order a group's sum may be folded in, narrow enough to
catch a small real bug in a collective; integer collectives exact."""

from __future__ import annotations

import numpy as np
import pytest

import hlopass
from hlopass.checking.error_bound import NoBound, error_bounds_devices, within_bound
from tests.conftest import ORACLE_MISSING

N = 8

ALL_REDUCE = """HloModule m, replica_count=8
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[256] parameter(0)
  ROOT r = f32[256] all-reduce(p), replica_groups={}, to_apply=add
}"""

# an exp before the sum, so the operands already carry a bound into the collective; the
# result all-gathered, so moved bounds are checked too
CHAIN = """HloModule m, replica_count=8
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[64] parameter(0)
  x = f32[64] exponential(p)
  r = f32[16] reduce-scatter(x), replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0},
      to_apply=add
  ROOT g = f32[64] all-gather(r), replica_groups={{0,2,4,6},{1,3,5,7}}, dimensions={0}
}"""

MULTIPLY = """HloModule m, replica_count=8
mul {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] multiply(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(p), replica_groups={}, to_apply=mul
}"""


def _normal(shape, seed):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(shape).astype(np.float32)] for _ in range(N)]


def _inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    # mixed signs and magnitudes: the group's sums cancel, where order matters most
    return [[(rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 3, shape)).astype(np.float32)]
            for _ in range(N)]  # fmt: skip


def _folded(xs, order):
    """The sum of `xs` folded in `order`, each step rounded to f32."""
    acc = np.zeros_like(xs[0])
    for d in order:
        acc = (acc + xs[d]).astype(np.float32)
    return acc


@pytest.fixture(scope="module")
def all_reduce():
    args = _inputs((256,))
    return args, error_bounds_devices(hlopass.parse_hlo(ALL_REDUCE), args, N)


def test_every_fold_order_of_the_group_is_within_the_bound(all_reduce):
    args, bounded = all_reduce
    xs = [a[0] for a in args]
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0).astype(np.float32)
    orders = [range(N), range(N - 1, -1, -1), [3, 1, 7, 0, 5, 2, 6, 4]]
    for (v, bound), in bounded:  # fmt: skip
        assert np.array_equal(v, _folded(xs, range(N)))  # group order, as XLA:CPU folds it
        for other in [exact] + [_folded(xs, o) for o in orders]:
            assert within_bound(other, v, bound).all()
    # the bound is no wider than needed: the orders do differ from each other somewhere
    assert not np.array_equal(_folded(xs, range(N)), _folded(xs, reversed(range(N))))


def test_a_dropped_contribution_exceeds_the_bound():
    """An all-reduce that loses 1e-5 of device 5's contribution. Any bound valid for every
    fold order of 8 f32 terms is 2 SAFETY gamma_7 = 1.7e-6 of sum|terms| wide, so a loss
    of 1e-5 |x_5| shows wherever |x_5| is more than 1.7e-6 / 1e-5 = 17% of sum|terms|: on
    every element where it is 20% or more (a 1e-6 loss is below that width: no bound that
    holds for every order can see it)."""
    args = _normal((256,), seed=3)
    xs = np.stack([a[0] for a in args])
    for (v, bound), in error_bounds_devices(hlopass.parse_hlo(ALL_REDUCE), args, N):  # fmt: skip
        buggy = (v - np.float32(1e-5) * xs[5]).astype(np.float32)
        caught = ~within_bound(buggy, v, bound)
        dominant = np.abs(xs[5]) >= 0.2 * np.abs(xs).sum(axis=0)
        assert dominant.any() and caught[dominant].all()
        assert caught.mean() > 0.1


def test_a_sum_over_the_wrong_group_exceeds_the_bound():
    """reduce-scatter then all-gather over groups {0..3}, {4..7}: summing {0,1,2,4} instead
    (one member swapped) is caught on the outputs it reaches."""
    args = _normal((64,), seed=1)
    bounded = error_bounds_devices(hlopass.parse_hlo(CHAIN), args, N)
    xs = [np.exp(a[0].astype(np.float64)) for a in args]
    right = [np.sum([xs[d] for d in g], axis=0) for g in ([0, 1, 2, 3], [4, 5, 6, 7])]
    wrong = np.sum([xs[d] for d in [0, 1, 2, 4]], axis=0)
    (v, bound), = bounded[0]  # fmt: skip
    # device 0 gathers devices 0, 2 (block 0 and 2 of group {0..3}'s sum) and 4, 6
    want = np.concatenate([right[0][:16], right[0][32:48], right[1][:16], right[1][32:48]])
    assert within_bound(want.astype(np.float32), v, bound).all()
    bug = np.concatenate([wrong[:16], wrong[32:48], right[1][:16], right[1][32:48]])
    assert not within_bound(bug.astype(np.float32), v, bound)[:32].any()


def test_integer_collectives_are_exact():
    text = ALL_REDUCE.replace("f32", "s32")
    args = [[np.arange(256, dtype=np.int32) * (d + 1)] for d in range(N)]
    for (v, bound), in error_bounds_devices(hlopass.parse_hlo(text), args, N):  # fmt: skip
        assert np.array_equal(v, np.arange(256) * 36) and not bound.any()


def test_a_combiner_without_a_rule_is_reported():
    args = [[np.ones(4, np.float32)] for _ in range(N)]
    with pytest.raises(NoBound, match="all-reduce"):
        error_bounds_devices(hlopass.parse_hlo(MULTIPLY), args, N)


def test_xla_cpu_is_within_the_bound_of_the_chain():
    """The oracle: XLA:CPU on 8 host devices against the bounded run of CHAIN (an exp on
    each side, then sums over groups and a gather)."""
    from hlopass.execution import oracle
    from tests.interp_util import xla_execute_replicas

    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    args = _normal((64,), seed=2)
    (res,) = xla_execute_replicas([(CHAIN, args)])
    assert "outputs" in res, res
    bounded = error_bounds_devices(hlopass.parse_hlo(CHAIN), args, N)
    for dev, want in zip(bounded, res["outputs"], strict=True):
        (v, bound), = dev  # fmt: skip
        assert within_bound(np.asarray(want), v, bound).all()
