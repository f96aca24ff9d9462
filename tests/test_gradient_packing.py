"""`gradient-packing` keeps every device's outputs. Modules of many small gradients and a
few large ones run on 8 replicas in our interpreter (`evaluate_replicas`) and on 8 XLA:CPU
host devices (one child process for all), before and after the pass with several specs.

Bit for bit where the reduction order is unchanged: packing, `#n` shards and `xring`
reduce every element over the same group in the same order (a ring's reduce-scatter sums
in group order as the all-reduce does; padding adds zeros that are sliced away). The
hierarchical `a/b` sums each host's part first: a reassociation of the n = 8 terms, so
each float element may move by at most 2 gamma(n-1) sum_r |x_r| (each order is within
gamma(n-1) sum |x_r| of the exact sum, gamma(k) = k u / (1 - k u), u = 2^-24 for f32);
integer sums stay exact. The spec parser is checked by a round trip (hypothesis).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hlopass
from hlopass import oracle
from hlopass.passes.collectives.gradient_packing import Band, SpecError, format_spec, parse_spec
from hlopass.pipeline import PipelineError
from tests.conftest import ORACLE_MISSING
from tests.interp_util import xla_execute_replicas

REPLICAS = 8

_SMALL = [(3,), (4, 2), (5,), (2, 3), (7,), (1,), (6,), (2, 2)]
_LARGE = [(64, 33), (1000,)]


def _module() -> tuple[str, list[tuple[tuple[int, ...], str]]]:
    """Three s32 gradients (another element type: never packed with the f32 ones), the
    second over the all-reduced value of the first (data dependence), then small f32
    gradients around two large ones, and a max all-reduce (not a sum: left alone)."""
    params: list[tuple[tuple[int, ...], str]] = []
    body: list[str] = []
    outs: list[str] = []

    def grad(shape: tuple[int, ...], et: str = "f32", comp: str = "add") -> str:
        i = len(params)
        params.append((shape, et))
        t = f"{et}[{','.join(map(str, shape))}]"
        body.append(f"  p{i} = {t} parameter({i})")
        body.append(f"  g{i} = {t} all-reduce(p{i}), replica_groups={{}}, to_apply={comp}")
        outs.append(f"g{i}")
        return t

    grad((5,), "s32", "iadd")
    # a gradient of an all-reduced value: it cannot join the pack holding g0
    body.append("  d = s32[5] add(g0, p0)")
    body.append("  gd = s32[5] all-reduce(d), replica_groups={}, to_apply=iadd")
    outs.append("gd")
    grad((9,), "s32", "iadd")
    for s in _SMALL[:4]:
        grad(s)
    grad(_LARGE[0])
    for s in _SMALL[4:]:
        grad(s)
    grad(_LARGE[1])
    grad((4,), "f32", "mx")
    types = ", ".join(_type(s, et) for s, et in params[:1]) + ", s32[5], "
    types += ", ".join(_type(s, et) for s, et in params[1:])
    text = f"""HloModule grads, replica_count={REPLICAS}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

iadd {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}}

mx {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}}

ENTRY e {{
{chr(10).join(body)}
  ROOT t = ({types}) tuple({", ".join(outs)})
}}
"""
    return text, params


def _type(shape: tuple[int, ...], et: str) -> str:
    return f"{et}[{','.join(map(str, shape))}]"


TEXT, PARAMS = _module()

# name -> (options, exact, all-reduce-like collectives after (None: not checked))
SPECS: dict[str, tuple[str, bool]] = {
    "nccl_packed": ('spec="nccl" max-bytes=64 max-group=3', True),
    "xring": ('spec="xring"', True),
    "shards": ('spec="nccl#3" max-bytes=32', True),
    "bands": ('spec="nccl:8:xring#2:1000:xring" max-bytes=40', True),
    "blueconnect": ('spec="xring/nccl" gpus-per-host=4', False),
    "two_level": ('spec="nccl/xring#2" gpus-per-host=2 max-bytes=64', False),
    "hier_ring": ('spec="xring/xring" gpus-per-host=4 max-bytes=100', False),
    "auto": ('spec="auto"', True),
}

_COLLECTIVE = re.compile(r"\s(all-reduce|all-gather|reduce-scatter)\(")


def _after(name: str) -> str:
    module = hlopass.parse_hlo(TEXT)
    assert hlopass.run_pass(module, f"gradient-packing{{{SPECS[name][0]}}}") or name == "auto"
    return hlopass.print_hlo(module)


def _args(seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(REPLICAS):
        row = []
        for shape, et in PARAMS:
            if et == "s32":
                row.append(rng.integers(-(2**30), 2**30, shape).astype(np.int32))
            else:
                row.append((rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(np.float32))
        out.append(row)
    return out


@pytest.fixture(scope="module")
def runs():
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    afters = {n: _after(n) for n in SPECS}
    args = _args(0)
    jobs = [(TEXT, args)] + [(afters[n], args) for n in SPECS]
    res = xla_execute_replicas(jobs)
    return afters, args, res[0], dict(zip(SPECS, res[1:], strict=True))


def _bound(args: list[list[np.ndarray]], k: int) -> np.ndarray:
    """2 gamma(n-1) sum_r |x_r| for output k, a float gradient of parameter k - 1 (output
    1 is the s32 gradient of an all-reduced value)."""
    n = REPLICAS
    u = 2.0**-24
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    return 2 * gamma * sum(np.abs(a[k - 1].astype(np.float64)) for a in args)


def _check(got, want, args, exact: bool, what: str) -> None:
    assert len(got) == len(want) == REPLICAS, what
    for r in range(REPLICAS):
        for k, (g, w) in enumerate(zip(got[r], want[r], strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: replica {r} out {k}"
            if exact or g.dtype.kind in "iu":
                assert g.tobytes() == w.tobytes(), f"{what}: replica {r} out {k}\n{g}\n{w}"
            else:
                diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
                bound = _bound(args, k).reshape(g.shape)
                assert (diff <= bound).all(), f"{what}: replica {r} out {k}: {diff.max()}"


@pytest.mark.parametrize("name", list(SPECS))
def test_outputs_kept_on_every_device(name, runs):
    from hlopass.interpreter import evaluate_replicas

    afters, args, xla_before, xla_after = runs
    after, exact = afters[name], SPECS[name][1]
    ok, why = oracle.accepts(after)
    assert ok, why
    assert "outputs" in xla_before, xla_before
    assert "outputs" in xla_after[name], f"{xla_after[name]}\n{after}"
    ours_before = evaluate_replicas(hlopass.parse_hlo(TEXT), args)
    ours_after = evaluate_replicas(hlopass.parse_hlo(after), args)
    _check(ours_before, xla_before["outputs"], args, True, "ours before vs XLA before")
    _check(ours_after, xla_after[name]["outputs"], args, True, "ours after vs XLA after")
    _check(xla_after[name]["outputs"], xla_before["outputs"], args, exact, "XLA after vs before")


def test_specs_change_the_collectives():
    """Each spec leaves its mark: packing lowers the count of all-reduces, xring makes a
    reduce-scatter and an all-gather of each gradient, the hierarchies name host groups;
    the max all-reduce is untouched by all of them."""
    before = _COLLECTIVE.findall(TEXT)
    assert before.count("all-reduce") == len(PARAMS) + 1
    packed = _after("nccl_packed")
    assert 0 < packed.count(" all-reduce(") < len(PARAMS) + 1
    ring = _after("xring")
    assert ring.count(" reduce-scatter(") == ring.count(" all-gather(") == len(PARAMS)
    blue = _after("blueconnect")
    assert "replica_groups={{0,1,2,3},{4,5,6,7}}" in blue
    assert "replica_groups={{0,4},{1,5},{2,6},{3,7}}" in blue
    for name in SPECS:
        assert re.search(r"all-reduce\(%p\d+\), replica_groups=\{\}, to_apply=%mx", _after(name))


def test_bad_specs_are_one_line():
    module = hlopass.parse_hlo(TEXT)
    for spec, words in (("pscpu", "'pscpu' has no HLO meaning"),
                        ("nccl/psgpu#2", "'psgpu' has no HLO meaning"),
                        ("collective", "'collective' has no HLO meaning"),
                        ("nccl:4x:xring", "limit '4x'"), ("ring", "unknown all-reduce algorithm"),
                        ("nccl:1k", "expected alg"), ("xring:2k:nccl:1k:nccl", "limits must grow")):  # fmt: skip
        with pytest.raises(PipelineError) as e:
            hlopass.run_pass(module, f'gradient-packing{{spec="{spec}"}}')
        assert "\n" not in str(e.value) and words in str(e.value), str(e.value)


def test_seed_examples_parse():
    """The seed's docstring examples that use HLO-meaningful algorithms, read by hand."""
    assert parse_spec("nccl/xring") == (Band("nccl", 1, "xring"),)
    assert parse_spec("xring#2") == (Band("xring", 2),)
    assert parse_spec("nccl:2k:nccl#2:64k:xring") == (
        Band("nccl", 1, None, 2048), Band("nccl", 2, None, 65536), Band("xring"))
    assert parse_spec("nccl/xring#4") == parse_spec("nccl#4/xring") == (Band("nccl", 4, "xring"),)
    assert parse_spec("xring:3M:nccl")[0].limit == 3 * 1024 * 1024
    with pytest.raises(SpecError):
        parse_spec("nccl#2/xring#2")


_ALG = st.sampled_from(["nccl", "xring"])
_BAND = st.tuples(_ALG, st.integers(1, 16), st.one_of(st.none(), _ALG))


@given(st.lists(_BAND, min_size=1, max_size=5), st.lists(st.integers(0, 2**41), min_size=4, max_size=4, unique=True))
def test_spec_round_trip(parts, limits):
    limits = sorted(limits)[: len(parts) - 1]
    bands = tuple(Band(a, s, i, limits[k] if k < len(parts) - 1 else None)
                  for k, (a, s, i) in enumerate(parts))  # fmt: skip
    if len(parts) - 1 > len(limits):
        return
    assert parse_spec(format_spec(bands)) == bands
