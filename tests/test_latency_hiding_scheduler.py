"""`latency-hiding-scheduler` keeps every value and shortens the modelled step.

Each case of `lit_tests/passes/latency-hiding-scheduler.hlo` runs on 8 replicas in our
interpreter and on 8 XLA:CPU host devices (one child process), before and after the pass
(both overlap limits): bit for bit the same (the pass only reorders instructions; every
all-reduce sums over the same group in the same order), and XLA parses what we print. The
first case's step is derived by hand from the cost model's per-instruction times.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hlopass
from hlopass.dialects.hlo import entry_computation
from hlopass.execution import oracle
from hlopass.pipeline import PipelineError
from tests.conftest import ORACLE_MISSING
from tests.interp_util import xla_execute_replicas
from tests.test_passes import LIT_PASSES

REPLICAS = 8
LIT = LIT_PASSES / "latency-hiding-scheduler.hlo"
CASES = [c for c in LIT.read_text().split("\n// -----\n") if "ENTRY" in c]
SPECS = (
    "latency-hiding-scheduler",
    "latency-hiding-scheduler{parallel-collective-overlap-limit=2}",
)


def _args(text: str, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    params = [op for op in entry_computation(hlopass.parse_hlo(text)).instructions
              if op.OPCODE == "parameter"]  # fmt: skip
    return [[rng.standard_normal(p.shape.dims).astype(np.float32) for p in params]  # type: ignore[attr-defined]
            for _ in range(REPLICAS)]  # fmt: skip


def _after(text: str, spec: str) -> str:
    module = hlopass.parse_hlo(text)
    hlopass.run_pass(module, spec)
    return hlopass.print_hlo(module)


def _same(got, want, what: str) -> None:
    assert len(got) == len(want) == REPLICAS, what
    for r, (g, w) in enumerate(zip(got, want, strict=True)):
        for k, (a, b) in enumerate(zip(g, w, strict=True)):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), f"{what}: {r} out {k}"


@pytest.fixture(scope="module")
def runs():
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    jobs, out = [], []
    for i, text in enumerate(CASES):
        args = _args(text, i)
        afters = [_after(text, s) for s in SPECS]
        out.append((text, args, afters))
        jobs += [(text, args)] + [(a, args) for a in afters]
    res = iter(xla_execute_replicas(jobs))
    return [(t, args, afters, next(res), [next(res) for _ in SPECS]) for t, args, afters in out]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_values_kept_on_every_device(case, runs):
    from hlopass.interpreter import evaluate_replicas

    text, args, afters, xla_before, xla_after = runs[case]
    ours_before = evaluate_replicas(hlopass.parse_hlo(text), args)
    # (ours against XLA:CPU is not compared: XLA:CPU's dots sum in an order of its own)
    assert "outputs" in xla_before, xla_before
    for spec, after, xla in zip(SPECS, afters, xla_after, strict=True):
        ok, why = oracle.accepts(after)
        assert ok, why
        _same(evaluate_replicas(hlopass.parse_hlo(after), args), ours_before, f"ours {spec}")
        assert "outputs" in xla, (spec, xla)
        _same(xla["outputs"], xla_before["outputs"], f"XLA {spec}")


def test_step_by_hand():
    """Case 1: before, the done right after the start blocks the compute stream for the
    transfer: step = g + s + h + h2. After, h and h2 run during the transfer: step =
    max(g + s, g + h + h2) = g + s (the 4 MiB all-reduce outlasts the two dots)."""
    from hlopass.cost import estimate, schedule_steps

    module = hlopass.parse_hlo(CASES[0])
    us = {s.name: s.us for s in schedule_steps(entry_computation(module), "h100_sxm", "1x8")}
    assert us["s"] > us["h"] + us["h2"]
    before = estimate(module, "h100_sxm", "1x8").step_us
    assert before == pytest.approx(us["g"] + us["s"] + us["h"] + us["h2"])
    assert hlopass.run_pass(module, "latency-hiding-scheduler")
    after = estimate(module, "h100_sxm", "1x8").step_us
    assert after == pytest.approx(us["g"] + us["s"])


def test_rerun_is_a_fixpoint():
    module = hlopass.parse_hlo(CASES[0])
    assert hlopass.run_pass(module, "latency-hiding-scheduler")
    assert not hlopass.run_pass(module, "latency-hiding-scheduler")


def test_bad_limit_is_one_line():
    module = hlopass.parse_hlo(CASES[0])
    with pytest.raises(PipelineError) as e:
        hlopass.run_pass(module, "latency-hiding-scheduler{parallel-collective-overlap-limit=0}")
    assert "\n" not in str(e.value) and "at least 1" in str(e.value), str(e.value)


@st.composite
def _graphs(draw):
    """Random computations: compute, free and sync nodes and async start/done pairs of two
    kinds, each node over earlier ones (data), some with a control predecessor."""
    from hlopass.passes.scheduling.list_scheduler import Node

    nodes: list[Node] = []
    for i in range(draw(st.integers(1, 30))):
        earlier = [n.name for n in nodes if n.stream != "async"]
        deps = tuple(draw(st.lists(st.sampled_from(earlier), max_size=3))) if earlier else ()
        what = draw(st.sampled_from(["compute", "free", "sync", "async"]))
        us = draw(st.floats(0, 100))
        if what == "async":
            kind = draw(st.sampled_from(["all-reduce", "all-gather"]))
            nodes.append(Node(f"s{i}", us, "async", deps, kind))
            nodes.append(Node(f"d{i}", 0.0, "done", (f"s{i}",), f"s{i}"))
        else:
            nodes.append(Node(f"n{i}", us, what, deps))
    names = [n.name for n in nodes if n.stream != "async"]
    nodes.append(Node("root", 0.0, "free", tuple(names)))
    return nodes


@given(_graphs(), st.integers(1, 3))
@settings(max_examples=200, deadline=None)
def test_schedule_is_topological_and_keeps_the_limit(nodes, limit):
    """Every node once, each after its dependencies, the root last, and never more than
    `limit` collectives of a kind between their starts and dones."""
    from hlopass.passes.scheduling.list_scheduler import schedule

    order = schedule(nodes, "root", limit)
    assert sorted(order) == sorted(n.name for n in nodes)
    assert order[-1] == "root"
    at = {name: i for i, name in enumerate(order)}
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        assert all(at[d] < at[n.name] for d in n.deps), n
    flight: dict[str, int] = {}
    for name in order:
        n = by_name[name]
        if n.stream == "async":
            flight[n.kind] = flight.get(n.kind, 0) + 1
            assert flight[n.kind] <= limit, order
        elif n.stream == "done":
            flight[by_name[n.kind].kind] -= 1


@given(_graphs())
@settings(max_examples=300, deadline=None)
def test_schedule_never_lengthens_the_step_of_a_dependency_order(nodes):
    """Against the order as generated (each done right after its start: nothing overlaps),
    the scheduled step is never longer under the two-stream model (3,000 examples held
    once; 300 each run)."""
    from hlopass.cost import Step, critical_path_us
    from hlopass.passes.scheduling.list_scheduler import schedule

    by_name = {n.name: n for n in nodes}

    def step(order: list[str]) -> float:
        return critical_path_us([Step(x, by_name[x].us, by_name[x].stream, by_name[x].deps)
                                 for x in order])  # fmt: skip

    given_order = [n.name for n in nodes]  # generated with each done after its start
    assert step(schedule(nodes, "root", 1)) <= step(given_order) + 1e-6


def test_combined_permute_start_by_hand():
    """The async form of a combined collective-permute (what async-collective-creator makes
    of collective-permute-combiner's result, as in ppermute_ring): XLA:CPU refuses it
    ("'stablehlo.async_done' op result #0 must be ranked tensor"), so by hand: with pairs
    {0,1},{1,0} each device gets the other's two operands."""
    from hlopass.interpreter import evaluate_replicas

    text = """HloModule m, replica_count=2
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[3] parameter(1)
  s = ((f32[4], f32[3]), (f32[4], f32[3])) collective-permute-start(p, q), source_target_pairs={{0,1},{1,0}}
  ROOT d = (f32[4], f32[3]) collective-permute-done(s)
}
"""
    args = [[np.arange(4, dtype=np.float32), np.arange(3, dtype=np.float32)],
            [np.ones(4, dtype=np.float32), np.full(3, 2, np.float32)]]  # fmt: skip
    got = evaluate_replicas(hlopass.parse_hlo(text), args)
    want = [[args[1][0], args[1][1]], [args[0][0], args[0][1]]]
    for g, w in zip(got, want, strict=True):
        assert [a.tolist() for a in g] == [b.tolist() for b in w]
