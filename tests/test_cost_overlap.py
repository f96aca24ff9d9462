"""Step time with async collectives overlapped (`hlopass/cost/overlap.py`).

The schedules below are small enough to work out by hand on two streams: the expected step
times are written out next to each case. The module tests check the same arithmetic on
real HLO, from the estimate's own per-instruction rows.
"""

from __future__ import annotations

import pytest

import hlopass.cost
from hlopass.cost.overlap import Step, critical_path_us


def test_fully_hidden():
    # start(10) issued at 0; 30 µs of independent compute; done at 30: the transfer is hidden
    steps = [Step("p", 0, "free"), Step("s", 10, "async", ("p",)),
             Step("a", 20, "compute", ("p",)), Step("b", 10, "compute", ("a",)),
             Step("d", 0, "done", ("s",)), Step("c", 5, "compute", ("d", "b"))]  # fmt: skip
    assert critical_path_us(steps) == 35.0  # 20 + 10 + 5; the serial sum is 45


def test_partly_hidden():
    # transfer 0..50, compute 0..20; done waits to 50; then 5 more
    steps = [Step("s", 50, "async"), Step("a", 20, "compute"), Step("d", 0, "done", ("s",)),
             Step("c", 5, "compute", ("d",))]  # fmt: skip
    assert critical_path_us(steps) == 55.0  # serial sum 75


def test_dependent_compute_not_overlapped():
    # compute before the start feeds it: the start is issued at 20, the transfer ends at 60;
    # the compute after done reads its result: nothing overlaps
    steps = [Step("a", 20, "compute"), Step("s", 40, "async", ("a",)),
             Step("d", 0, "done", ("s",)), Step("c", 7, "compute", ("d",))]  # fmt: skip
    assert critical_path_us(steps) == 67.0  # = the serial sum


def test_sync_collective_serialised():
    # a synchronous collective holds both streams: compute after it waits though independent
    steps = [Step("a", 20, "compute"), Step("r", 30, "sync"), Step("b", 10, "compute")]
    assert critical_path_us(steps) == 60.0
    # ... and it waits for a transfer still in flight on the communication stream
    steps = [Step("s", 50, "async"), Step("r", 30, "sync"), Step("d", 0, "done", ("s",))]
    assert critical_path_us(steps) == 80.0


def test_several_in_flight_queue_on_one_stream():
    # two starts back to back (40 and 30 µs): the second runs 40..70 on the communication
    # stream; 50 µs of compute between them and the dones; done2 at 70, then 5
    steps = [Step("s1", 40, "async"), Step("s2", 30, "async"), Step("a", 50, "compute"),
             Step("d1", 0, "done", ("s1",)), Step("d2", 0, "done", ("s2",)),
             Step("c", 5, "compute", ("d1", "d2"))]  # fmt: skip
    assert critical_path_us(steps) == 75.0  # serial sum 125
    # a start issued after compute: it starts when the compute stream reaches it (at 50)
    steps = [Step("a", 50, "compute"), Step("s1", 40, "async"), Step("d1", 0, "done", ("s1",))]
    assert critical_path_us(steps) == 90.0


MODULE = """HloModule m, replica_count=8

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  g = f32[4194304] parameter(0)
  w = f32[2048,2048] parameter(1)
  start = f32[4194304] all-reduce-start(g), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=add
  m1 = f32[2048,2048] dot(w, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  done = f32[4194304] all-reduce-done(start)
  b = f32[2048,2048] bitcast(done)
  ROOT out = f32[2048,2048] add(b, m1)
}
"""


def _rows(est: hlopass.cost.Estimate) -> dict[str, float]:
    return {k.name: k.time_us * k.count for k in est.kernels}


@pytest.mark.parametrize("dots", [1, 8])
def test_module_step_overlaps_async_all_reduce(dots: int):
    """One async all-reduce of 16 MiB with `dots` independent matmuls scheduled between its
    start and done: step = max(transfer, matmuls) + the add that reads both."""
    extra = "".join(f"  m{i} = f32[2048,2048] dot(w, m{i - 1}), lhs_contracting_dims={{1}}, "
                    f"rhs_contracting_dims={{0}}\n" for i in range(2, dots + 1))  # fmt: skip
    text = MODULE.replace("  done =", extra + "  done =").replace(
        "add(b, m1)", f"add(b, m{dots})")  # fmt: skip
    est = hlopass.cost.estimate(text, "h100_sxm", "1x8")
    rows = _rows(est)
    mm = sum(rows[f"m{i}"] for i in range(1, dots + 1))
    want = max(rows["start"], mm) + rows["out"]
    assert est.step_us == pytest.approx(want, rel=1e-12)
    assert est.step_us < est.time_us
    # one matmul (~58 µs) hides part of the ~133 µs all-reduce; eight hide all of it
    assert (rows["start"] > mm) == (dots == 1)


def test_module_sync_all_reduce_is_the_serial_sum():
    text = MODULE.replace("all-reduce-start(g)", "all-reduce(g)").replace(
        "  done = f32[4194304] all-reduce-done(start)\n", "").replace("bitcast(done)",
                                                                        "bitcast(start)")  # fmt: skip
    est = hlopass.cost.estimate(text, "h100_sxm", "1x8")
    assert est.step_us == pytest.approx(est.time_us, rel=1e-12)


def test_cost_cli_prints_the_step(tmp_path, capsys):
    from hlopass.cost.cli import cost_main

    f = tmp_path / "m.hlo"
    f.write_text(MODULE)
    assert cost_main([str(f), "--topology", "1x8"]) == 0
    out = capsys.readouterr().out
    est = hlopass.cost.estimate(MODULE, "h100_sxm", "1x8")
    assert "start" in out and "network" in out  # the collective keeps its own row
    step = [ln for ln in out.splitlines() if ln.startswith("STEP")]
    assert len(step) == 1 and f"{est.step_us:.3f}" in step[0]


def test_module_async_start_of_a_collective_overlaps():
    """`all-to-all-start` is XLA's sugar for an `async-start` of a computation holding the
    all-to-all: it runs on the communication stream like the other starts."""
    text = MODULE.replace(
        "all-reduce-start(g), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=add",
        "all-to-all-start(g), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}",
    ).replace("f32[4194304] all-to-all-start", "((f32[4194304]), f32[4194304]) all-to-all-start")
    text = text.replace("all-reduce-done(start)", "all-to-all-done(start)")
    est = hlopass.cost.estimate(text, "h100_sxm", "1x8")
    rows = _rows(est)
    coll = next(k for k in est.kernels if k.kind == "collective")
    want = max(coll.time_us, rows["m1"]) + rows["out"]
    assert coll.bound == "network"
    assert est.step_us == pytest.approx(want, rel=1e-12)
    assert est.step_us < est.time_us
