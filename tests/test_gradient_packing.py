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
from hlopass.execution import oracle
from hlopass.passes.collectives.gradient_packing import Band, SpecError, format_spec, parse_spec
from hlopass.pipeline import PipelineError
from tests.conftest import ORACLE_MISSING
from tests.interp_util import xla_execute_replicas

REPLICAS = 8

_SMALL = [(3,), (4, 2), (), (5,), (2, 3), (7,), (1,), (6,), (2, 2)]
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

CHANNEL_TEXT = """HloModule channels, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p0 = f32[6] parameter(0)
  p1 = f32[3,3] parameter(1)
  p2 = f32[2] parameter(2)
  p3 = f32[257] parameter(3)
  p4 = f32[5] parameter(4)
  g0 = f32[6] all-reduce(p0), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  g1 = f32[3,3] all-reduce(p1), channel_id=2, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  g2 = f32[2] all-reduce(p2), channel_id=3, replica_groups={{0,2},{1,3}}, use_global_device_ids=true, to_apply=add
  g3 = f32[257] all-reduce(p3), channel_id=4, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  g4 = f32[5] all-reduce(p4), replica_groups={{1,0},{3,2}}, to_apply=add
  ROOT t = (f32[6], f32[3,3], f32[2], f32[257], f32[5]) tuple(g0, g1, g2, g3, g4)
}
"""
"""4 replicas, gradients with channels and global device ids (flattened ids), groups of
every other device and groups listed out of order."""
CHANNEL_PARAMS = [((6,), "f32"), ((3, 3), "f32"), ((2,), "f32"), ((257,), "f32"), ((5,), "f32")]

# module -> (text, parameters, replicas, output k's parameter)
MODULES = {
    "grads": (TEXT, PARAMS, REPLICAS, [0, None, *range(1, len(PARAMS))]),
    "channels": (CHANNEL_TEXT, CHANNEL_PARAMS, 4, list(range(len(CHANNEL_PARAMS)))),
}

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
    "auto_2x4": ('spec="auto" gpus-per-host=4', True),
    "blue_2x2": ('spec="xring/xring" gpus-per-host=2 max-bytes=64', False),
}

_COLLECTIVE = re.compile(r"\s(all-reduce|all-gather|reduce-scatter)\(")


def _after(name: str, text: str = TEXT) -> str:
    module = hlopass.parse_hlo(text)
    assert hlopass.run_pass(module, f"gradient-packing{{{SPECS[name][0]}}}") or "auto" in name
    return hlopass.print_hlo(module)


def _args(seed: int, params=PARAMS, replicas: int = REPLICAS) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(replicas):
        row = []
        for shape, et in params:
            if et == "s32":
                row.append(rng.integers(-(2**30), 2**30, shape).astype(np.int32))
            else:
                row.append(
                    (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)
                )
        out.append(row)
    return out


@pytest.fixture(scope="module")
def runs():
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    out = {}
    jobs = []
    for m, (text, params, replicas, _) in MODULES.items():
        args = _args(len(out), params, replicas)
        afters = {n: _after(n, text) for n in SPECS}
        out[m] = (afters, args)
        jobs += [(text, args)] + [(afters[n], args) for n in SPECS]
    res = iter(xla_execute_replicas(jobs))
    return {m: (afters, args, next(res), {n: next(res) for n in SPECS})
            for m, (afters, args) in out.items()}  # fmt: skip


def _bound(args: list[list[np.ndarray]], param: int) -> np.ndarray:
    """2 gamma(n-1) sum_r |x_r| for a float gradient of parameter `param` over n devices
    (the group size is at most the replica count n)."""
    n = len(args)
    u = 2.0**-24
    gamma = (n - 1) * u / (1 - (n - 1) * u)
    return 2 * gamma * np.sum([np.abs(a[param].astype(np.float64)) for a in args], axis=0)


def _check(got, want, args, sources, exact: bool, what: str) -> None:
    n = len(args)
    assert len(got) == len(want) == n, what
    for r in range(n):
        for k, (g, w) in enumerate(zip(got[r], want[r], strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: replica {r} out {k}"
            if exact or g.dtype.kind in "iu" or sources[k] is None:
                assert g.tobytes() == w.tobytes(), f"{what}: replica {r} out {k}\n{g}\n{w}"
            else:
                diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
                bound = _bound(args, sources[k]).reshape(g.shape)
                assert (diff <= bound).all(), f"{what}: replica {r} out {k}: {diff.max()}"


@pytest.mark.parametrize("module", list(MODULES))
@pytest.mark.parametrize("name", list(SPECS))
def test_outputs_kept_on_every_device(module, name, runs):
    from hlopass.interpreter import evaluate_replicas

    afters, args, xla_before, xla_after = runs[module]
    text, sources = MODULES[module][0], MODULES[module][3]
    after, exact = afters[name], SPECS[name][1]
    ok, why = oracle.accepts(after)
    assert ok, why
    assert "outputs" in xla_before, xla_before
    assert "outputs" in xla_after[name], f"{xla_after[name]}\n{after}"
    ours_before = evaluate_replicas(hlopass.parse_hlo(text), args)
    ours_after = evaluate_replicas(hlopass.parse_hlo(after), args)
    _check(ours_before, xla_before["outputs"], args, sources, True, "ours before vs XLA before")
    _check(ours_after, xla_after[name]["outputs"], args, sources, True, "ours vs XLA after")
    _check(xla_after[name]["outputs"], xla_before["outputs"], args, sources, exact,
           "XLA after vs before")  # fmt: skip


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
        Band("nccl", 1, None, 2048),
        Band("nccl", 2, None, 65536),
        Band("xring"),
    )
    assert parse_spec("nccl/xring#4") == parse_spec("nccl#4/xring") == (Band("nccl", 4, "xring"),)
    assert parse_spec("xring:3M:nccl")[0].limit == 3 * 1024 * 1024
    with pytest.raises(SpecError):
        parse_spec("nccl#2/xring#2")


_ALG = st.sampled_from(["nccl", "xring"])
_BAND = st.tuples(_ALG, st.integers(1, 16), st.one_of(st.none(), _ALG))


@given(
    st.lists(_BAND, min_size=1, max_size=5),
    st.lists(st.integers(0, 2**41), min_size=4, max_size=4, unique=True),
)
def test_spec_round_trip(parts, limits):
    limits = sorted(limits)[: len(parts) - 1]
    bands = tuple(Band(a, s, i, limits[k] if k < len(parts) - 1 else None)
                  for k, (a, s, i) in enumerate(parts))  # fmt: skip
    assert parse_spec(format_spec(bands)) == bands


def test_sums_by_hand():
    """Replica r holds [r, 10 r, 100 r] (integers in f32: every order sums exactly): each
    spec gives every replica [28, 280, 2800] over all 8, and [6, 60, 600] / [22, 220, 2200]
    over {0,1,2,3} / {4,5,6,7} (hand-derived: 0+...+7 = 28, 0+1+2+3 = 6, 4+...+7 = 22)."""
    from hlopass.interpreter import evaluate_replicas

    text = """HloModule hand, replica_count=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[3] parameter(0)
  a = f32[3] all-reduce(p), replica_groups={}, to_apply=add
  n = f32[3] negate(p)
  b = f32[3] all-reduce(n), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=add
  ROOT t = (f32[3], f32[3]) tuple(a, b)
}"""
    args = [[np.array([r, 10 * r, 100 * r], np.float32)] for r in range(REPLICAS)]
    for options in ('spec="xring"', 'spec="nccl#2"', 'spec="xring/nccl" gpus-per-host=4',
                    'spec="nccl/xring" gpus-per-host=2', 'spec="xring/xring#2" gpus-per-host=2'):  # fmt: skip
        module = hlopass.parse_hlo(text)
        assert hlopass.run_pass(module, f"gradient-packing{{{options}}}"), options
        for r, (a, b) in enumerate(evaluate_replicas(module, args)):
            low = 6 if r < 4 else 22
            assert a.tolist() == [28, 280, 2800], options
            assert b.tolist() == [-low, -10 * low, -100 * low], options


@pytest.mark.parametrize("gpus_per_host", [8, 4, 2])
def test_auto_is_never_slower_than_what_it_weighed(gpus_per_host):
    """Under the model, `auto`'s plan costs no more than any single algorithm of its
    candidates without packing (each size took its cheapest) and than its own bands at
    any threshold it tried (it kept the cheapest)."""
    from hlopass.passes.collectives.gradient_packing.auto import (
        FLAT,
        HIERARCHICAL,
        Pricer,
        choose,
        plan_time,
        topology_for,
    )
    from hlopass.rewriting import comps_by_name

    module = hlopass.parse_hlo(TEXT)
    by_name = comps_by_name(module)
    comps = list(by_name.values())
    topo = topology_for(module, gpus_per_host, "h100_sxm")
    pricer = Pricer(topo)
    choice = choose(comps, by_name, topo, 10)
    best, _ = plan_time(comps, by_name, choice.bands, choice.max_bytes, choice.max_group, pricer)
    for band in FLAT + (HIERARCHICAL if topo.hosts > 1 else ()):
        single, _ = plan_time(comps, by_name, (band,), 0, 10, pricer)
        assert best <= single + 1e-9, (band, choice.spec)
    tried = _thresholds_tried(choice.lines)
    # no packing, the smallest gradient, a large one; the seed's group limit and one for all
    assert {(0, 10), (12, 10), (4000, 10)} <= tried
    count = int(re.search(r"\((\d+) gradient all-reduces\)", choice.lines[0]).group(1))  # type: ignore[union-attr]
    assert {group for _, group in tried} == {10, max(10, count)}
    for threshold, group in tried:
        t, _ = plan_time(comps, by_name, choice.bands, threshold, group, pricer)
        assert best <= t + 1e-9, (threshold, choice.spec, choice.max_bytes)
    assert any(line.startswith("  chosen: spec=") for line in choice.lines)


def _thresholds_tried(lines: list[str]) -> set[tuple[int, int]]:
    found = (re.match(r"  max-bytes=(\d+) max-group=(\d+):", ln) for ln in lines)
    return {(int(m.group(1)), int(m.group(2))) for m in found if m}


_LARGEST_CORPUS_CHARS = 200_000  # the larger Llama / Mixtral modules cost too long here
_CORPUS_SPECS = ('spec="xring/nccl" gpus-per-host=4', 'spec="nccl#2" max-bytes=4096', 'spec="auto"')


def test_corpus_modules_with_all_reduces(xla):
    """Every corpus module with an all-reduce goes through three specs; XLA parses what
    the pass prints whenever it changed something."""
    from hlopass.checking.corpus import corpus_root, modules

    root = corpus_root()
    if root is None:
        pytest.fail("the shared corpus is missing")
    found = [m for m in modules(root)
             if len(m.text) <= _LARGEST_CORPUS_CHARS and " all-reduce(" in m.text]  # fmt: skip
    assert found, f"no corpus modules with all-reduces under {root}"
    fired = 0
    for m in found:
        for spec in _CORPUS_SPECS:
            try:
                module = hlopass.parse_hlo(m.text)
            except hlopass.HloError:
                break  # modules our parser refuses are the parser tests' business
            if hlopass.run_pass(module, f"gradient-packing{{{spec}}}"):
                fired += 1
                ok, why = xla.accepts(hlopass.print_hlo(module))
                assert ok, f"{m.id} after {spec}: {why}"
    assert fired >= 10, f"only {fired} corpus runs changed a module"


_CANDIDATE = re.compile(r"  max-bytes=(\d+) max-group=(\d+): (\d+) all-reduces, ([\d.]+) us"
                        r"(?:, step ([\d.]+) us)?")  # fmt: skip


def _overlap_module() -> str:
    """The 6-layer backward pass of `lit_tests/passes/collectives/gradient-packing-overlap.hlo`."""
    from tests.test_passes import LIT_PASSES

    text = (LIT_PASSES / "collectives" / "gradient-packing-overlap.hlo").read_text()
    return text[text.index("HloModule") :]


def _choose(text: str, by_step: bool):
    from hlopass.passes.collectives.gradient_packing.auto import choose, topology_for
    from hlopass.passes.collectives.gradient_packing.steps import (
        StepPricer,
        has_hideable_compute,
    )
    from hlopass.rewriting import comps_by_name

    module = hlopass.parse_hlo(text)
    by_name = comps_by_name(module)
    topo = topology_for(module, 8, "h100_sxm")
    stepper = None
    if by_step and has_hideable_compute(module, "h100_sxm", topo):
        stepper = StepPricer(module, "h100_sxm", topo, 8, "algsimp,cse,dce,priority-fusion")
    choice = choose(list(by_name.values()), by_name, topo, 2, stepper)
    rows = [m.groups() for m in map(_CANDIDATE.match, choice.lines) if m]
    return choice, [(int(b), int(g), int(c), float(u), s and float(s)) for b, g, c, u, s in rows]


def test_auto_ranks_by_step_where_compute_hides():
    """Backward dots to hide behind: the chosen plan has the shortest scheduled step of
    all candidates, though not the least summed collective time (one pack for all has
    that, and is what ranking by the sum alone chooses)."""
    choice, rows = _choose(_overlap_module(), True)
    assert all(s is not None for *_, s in rows)
    chosen = next(r for r in rows if (r[0], r[1]) == (choice.max_bytes, choice.max_group))
    assert chosen[4] == min(r[4] for r in rows)  # type: ignore[type-var]
    assert chosen[3] > min(r[3] for r in rows)
    assert chosen[2] == 2  # buckets of four and two gradients (pairs: 3, 1 ns slower)
    assert any("hides behind" in ln for ln in choice.lines)
    summed, rows_sum = _choose(_overlap_module(), False)
    assert all(s is None for *_, s in rows_sum)
    least = min(rows_sum, key=lambda r: r[3])
    assert (summed.max_bytes, summed.max_group) == (least[0], least[1]) and least[2] == 1


def test_auto_without_compute_ranks_by_sum():
    """Only all-reduces of parameters: nothing to hide behind, no step priced, the choice
    is the least summed collective time (as before steps were priced)."""
    params = "\n".join(f"  p{i} = f32[{n}] parameter({i})" for i, n in enumerate((3, 5, 7, 1000)))
    reduces = "\n".join(
        f"  g{i} = f32[{n}] all-reduce(p{i}), replica_groups={{}}, to_apply=add"
        for i, n in enumerate((3, 5, 7, 1000))
    )
    text = (
        "HloModule only_reduces, replica_count=8\n\nadd {\n  a = f32[] parameter(0)\n"
        "  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n"
        f"{params}\n{reduces}\n"
        "  ROOT t = (f32[3], f32[5], f32[7], f32[1000]) tuple(g0, g1, g2, g3)\n}\n"
    )
    choice, rows = _choose(text, True)
    assert rows and all(s is None for *_, s in rows)
    assert not any("reason:" in ln for ln in choice.lines)
    least = min(rows, key=lambda r: r[3])
    assert (choice.max_bytes, choice.max_group) == (least[0], least[1])
