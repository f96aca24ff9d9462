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
