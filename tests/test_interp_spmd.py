"""SPMD modules on replicas x partitions simulated devices: the interpreter
(`evaluate_devices`) against XLA:CPU on as many host devices (`oracle.execute_devices`, all
cases in one child process), bit for bit, every device on its own inputs.

Device d is replica d // P, partition d % P on both sides (XLA's device assignment
arange(R * P).reshape(R, P)). The data are integers (s32, or f32 holding small integers),
so every sum is exact and the result does not depend on the order of the reduction.
What XLA:CPU cannot run is held to another oracle, named at each test: collective-broadcast
(no CPU thunk) to XLA running the all-gather of the same group and its first block;
send/recv (no CPU thunk) to XLA running the collective-permute with the same pairs that
XLA's collective-permute decomposer turns into that send/recv; ragged-all-to-all (XLA:CPU
crashes on it) to XLA's documented example (docs/operation_semantics.md) and a
two-updates-per-peer case worked out by hand from the same rules.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hlopass
from hlopass.errors import HloInputError, UnsupportedOpError
from hlopass.execution import oracle
from hlopass.interpreter import evaluate, evaluate_devices
from tests.child_runner import run_batch
from tests.conftest import ORACLE_MISSING

_ADD = """
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] add(a, b)
}

addf {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

mx {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] maximum(a, b)
}
"""


def _module(replicas: int, partitions: int, entry: str) -> str:
    return f"HloModule m, replica_count={replicas}, num_partitions={partitions}\n{_ADD}\n{entry}"


# name: (replicas, partitions, entry computation)
CASES: dict[str, tuple[int, int, str]] = {
    "ids": (
        2,
        4,
        """ENTRY e {
  p = s32[4] parameter(0)
  r = u32[] replica-id()
  q = u32[] partition-id()
  ROOT t = (u32[], u32[], s32[4]) tuple(r, q, p)
}""",
    ),
    # no channel_id: groups of replicas, within each partition
    "cross_replica": (
        2,
        4,
        """ENTRY e {
  p = s32[4] parameter(0)
  f = f32[4] parameter(1)
  a = s32[4] all-reduce(p), replica_groups={}, to_apply=add
  b = f32[4] all-reduce(f), replica_groups={{1,0}}, to_apply=addf
  g = s32[8] all-gather(p), replica_groups={{1,0}}, dimensions={0}
  s = s32[2] reduce-scatter(p), replica_groups={}, dimensions={0}, to_apply=add
  x = s32[4] all-to-all(p), replica_groups={{1,0}}, dimensions={0}
  c = s32[4] collective-permute(p), source_target_pairs={{0,1}}
  ROOT t = (s32[4], f32[4], s32[8], s32[2], s32[4], s32[4]) tuple(a, b, g, s, x, c)
}""",
    ),
    # channel_id on all-to-all and collective-permute: groups of partitions, per replica
    "cross_partition": (
        2,
        4,
        """ENTRY e {
  p = s32[8] parameter(0)
  q = s32[4] parameter(1)
  x = s32[8] all-to-all(p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}
  y = s32[4] all-to-all(q), channel_id=2, replica_groups={{3,1},{0,2}}, dimensions={0}
  c = s32[4] collective-permute(q), channel_id=3, source_target_pairs={{0,1},{1,2},{2,0}}
  ROOT t = (s32[8], s32[4], s32[4]) tuple(x, y, c)
}""",
    ),
    # channel_id, use_global_device_ids=false: groups of replicas, with all their partitions
    "cross_replica_and_partition": (
        2,
        2,
        """ENTRY e {
  p = s32[8] parameter(0)
  a = s32[8] all-reduce(p), channel_id=1, replica_groups={{0},{1}}, to_apply=add
  g = s32[32] all-gather(p), channel_id=2, replica_groups={{1,0}}, dimensions={0}
  s = s32[2] reduce-scatter(p), channel_id=3, replica_groups={}, dimensions={0}, to_apply=add
  m = s32[8] all-reduce(p), channel_id=4, replica_groups={{1},{0}}, use_global_device_ids=false, to_apply=mx
  ROOT t = (s32[8], s32[32], s32[2], s32[8]) tuple(a, g, s, m)
}""",
    ),
    # use_global_device_ids=true: groups of device ids, in list and iota forms
    "flattened_id": (
        2,
        4,
        """ENTRY e {
  p = s32[8] parameter(0)
  a = s32[8] all-reduce(p), channel_id=1, replica_groups=[2,4]<=[8], use_global_device_ids=true, to_apply=add
  g = s32[16] all-gather(p), channel_id=2, replica_groups=[4,2]<=[2,4]T(1,0), use_global_device_ids=true, dimensions={0}
  s = s32[2] reduce-scatter(p), channel_id=3, replica_groups={{7,0,5,2},{1,6,3,4}}, use_global_device_ids=true, dimensions={0}, to_apply=add
  ROOT t = (s32[8], s32[16], s32[2]) tuple(a, g, s)
}""",
    ),
    "iota_groups": (
        8,
        1,
        """ENTRY e {
  p = s32[8] parameter(0)
  a = s32[8] all-reduce(p), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=add
  g = s32[32] all-gather(p), replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}
  x = s32[8] all-to-all(p), replica_groups=[2,4]<=[8], dimensions={0}
  ROOT t = (s32[8], s32[32], s32[8]) tuple(a, g, x)
}""",
    ),
    "async": (
        4,
        2,
        """wrapped {
  w = s32[8] parameter(0)
  ROOT x = s32[8] all-to-all(w), channel_id=5, replica_groups={{1,0}}, dimensions={0}
}

ENTRY e {
  p = s32[8] parameter(0)
  s = s32[8] all-reduce-start(p), replica_groups={{0,2},{1,3}}, to_apply=add
  d = s32[8] all-reduce-done(s)
  g = (s32[8], s32[32]) all-gather-start(p), channel_id=2, replica_groups=[2,4]<=[8], use_global_device_ids=true, dimensions={0}
  gd = s32[32] all-gather-done(g)
  c = (s32[8], s32[8], u32[], u32[]) collective-permute-start(p), channel_id=3, source_target_pairs={{0,1},{1,0}}
  cd = s32[8] collective-permute-done(c)
  k = (s32[8], s32[8], u32[], u32[]) collective-permute-start(p), source_target_pairs={{3,0},{0,1},{1,2}}
  kd = s32[8] collective-permute-done(k)
  as = ((s32[8]), s32[8], s32[]) async-start(p), calls=wrapped
  ad = s32[8] async-done(as)
  ROOT t = (s32[8], s32[32], s32[8], s32[8], s32[8]) tuple(d, gd, cd, kd, ad)
}""",
    ),
    # all-to-all's tuple form (operand j to member j) and reduce-scatter wrapped in async-start / async-done
    "tuple_forms": (
        2,
        2,
        """rs {
  w = s32[8] parameter(0)
  ROOT s = s32[4] reduce-scatter(w), channel_id=7, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=add
}

ENTRY e {
  p = s32[4] parameter(0)
  q = s32[4] parameter(1)
  w = s32[8] parameter(2)
  x = (s32[4], s32[4]) all-to-all(p, q), replica_groups={{1,0}}
  y = (s32[4], s32[4]) all-to-all(p, q), channel_id=2, replica_groups={{0,1}}
  as = ((s32[8]), s32[4], s32[]) async-start(w), calls=rs
  ad = s32[4] async-done(as)
  ROOT t = ((s32[4], s32[4]), (s32[4], s32[4]), s32[4]) tuple(x, y, ad)
}""",
    ),
    # a collective in a loop meets once per iteration
    "loop": (
        2,
        2,
        """cond {
  c = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  b = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  v = s32[4] get-tuple-element(b), index=1
  a = s32[4] all-reduce(v), channel_id=1, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, to_apply=add
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], s32[4]) tuple(j, a)
}

ENTRY e {
  p = s32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[4]) tuple(z, p)
  ROOT w = (s32[], s32[4]) while(init), condition=cond, body=body
}""",
    ),
}


def _args(text: str, replicas: int, partitions: int) -> list[list[np.ndarray]]:
    """Distinct integer inputs for each device: parameter k of device d counts up from
    100 d + 10 k."""
    params = hlopass.interpreter.interpreter_for(hlopass.parse_hlo(text)).entry().parameters()
    per = []
    for d in range(replicas * partitions):
        args = []
        for k, p in enumerate(params):
            dims = tuple(p.shape.dims)
            dtype = np.float32 if p.shape.element_type == "f32" else np.int32
            n = int(np.prod(dims))
            args.append((np.arange(n) + 100 * d + 10 * k).astype(dtype).reshape(dims))
        per.append(args)
    return per


def _xla_many(jobs: list[tuple[str, int, int, list[list[np.ndarray]]]]) -> list[dict]:
    """XLA:CPU's outputs for each (text, replicas, partitions, args per device), all in one
    child process: {"outputs": per device} or {"error": message} or a crash record."""
    from tests._xla_exec_child import load_arrays, save_arrays

    child = Path(__file__).with_name("_xla_spmd_child.py")
    with tempfile.TemporaryDirectory() as tmp:
        manifest = []
        for i, (text, r, p, per) in enumerate(jobs):
            case = {"hlo": os.path.join(tmp, f"m{i}.hlo"), "inputs": os.path.join(tmp, f"i{i}.npz"),
                    "outputs": os.path.join(tmp, f"o{i}.npz"), "replicas": r, "partitions": p}  # fmt: skip
            Path(case["hlo"]).write_text(text)
            save_arrays(case["inputs"], "in", [a for args in per for a in args])
            manifest.append(case)
        path = os.path.join(tmp, "manifest.json")
        Path(path).write_text(json.dumps(manifest))
        out = []
        for case, msg in zip(manifest, run_batch(child, path, len(jobs), 600), strict=True):
            if msg.get("ok"):
                flat = load_arrays(case["outputs"], "out")
                n = case["replicas"] * case["partitions"]
                k = len(flat) // n
                out.append({"outputs": [flat[d * k : (d + 1) * k] for d in range(n)]})
            else:
                out.append(msg)
    return out


# modules XLA:CPU cannot run, each beside the module XLA runs in its place (see the top)
_BROADCAST = (
    2,
    2,
    """ENTRY e {
  p = s32[4] parameter(0)
  a = s32[4] collective-broadcast(p), channel_id=1, replica_groups={{1,0}}
  b = s32[4] collective-broadcast(p), replica_groups={{1,0}}
  ROOT t = (s32[4], s32[4]) tuple(a, b)
}""",
)
# cross-partition groups {1,0} of each replica are the flattened ids {1,0} and {3,2}
_BROADCAST_XLA = """ENTRY e {
  p = s32[4] parameter(0)
  ga = s32[8] all-gather(p), channel_id=1, replica_groups={{1,0},{3,2}}, use_global_device_ids=true, dimensions={0}
  a = s32[4] slice(ga), slice={[0:4]}
  gb = s32[8] all-gather(p), replica_groups={{1,0}}, dimensions={0}
  b = s32[4] slice(gb), slice={[0:4]}
  ROOT t = (s32[4], s32[4]) tuple(a, b)
}"""
_PAIRS = "{{0,1},{1,2},{2,3},{3,0}}"
_SEND_RECV = (
    2,
    4,
    f"""ENTRY e {{
  p = s32[4] parameter(0)
  q = s32[4] parameter(1)
  tk = token[] after-all()
  r = (s32[4], u32[], token[]) recv(tk), channel_id=1, frontend_attributes={{_xla_send_recv_source_target_pairs="{_PAIRS}"}}
  s = (s32[4], u32[], token[]) send(p, tk), channel_id=1, frontend_attributes={{_xla_send_recv_source_target_pairs="{_PAIRS}"}}
  rcv2 = (s32[4], u32[], token[]) recv(tk), channel_id=2, frontend_attributes={{_xla_send_recv_source_target_pairs="{{{{2,0}}}}"}}
  snd2 = (s32[4], u32[], token[]) send(q, tk), channel_id=2, frontend_attributes={{_xla_send_recv_source_target_pairs="{{{{2,0}}}}"}}
  rd = (s32[4], token[]) recv-done(r), channel_id=1
  sd = token[] send-done(s), channel_id=1
  rd2 = (s32[4], token[]) recv-done(rcv2), channel_id=2
  sd2 = token[] send-done(snd2), channel_id=2
  a = s32[4] get-tuple-element(rd), index=0
  b = s32[4] get-tuple-element(rd2), index=0
  ROOT t = (s32[4], s32[4]) tuple(a, b)
}}""",
)
_SEND_RECV_XLA = f"""ENTRY e {{
  p = s32[4] parameter(0)
  q = s32[4] parameter(1)
  a = s32[4] collective-permute(p), channel_id=1, source_target_pairs={_PAIRS}
  b = s32[4] collective-permute(q), channel_id=2, source_target_pairs={{{{2,0}}}}
  ROOT t = (s32[4], s32[4]) tuple(a, b)
}}"""
_LOOP = """cond {
  c = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  b = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  v = s32[4] get-tuple-element(b), index=1
  STEP
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = s32[4] add(moved, v)
  ROOT t = (s32[], s32[4]) tuple(j, w)
}

ENTRY e {
  p = s32[4] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[4]) tuple(z, p)
  ROOT w = (s32[], s32[4]) while(init), condition=cond, body=body
}"""
_RING = "{{0,1},{1,2},{2,0}}"
_ATTR = f'frontend_attributes={{_xla_send_recv_source_target_pairs="{_RING}"}}'
# a ring of sends and recvs in a loop body: each iteration's data, in order
_SEND_RECV_LOOP = _LOOP.replace(
    "STEP",
    f"""tk = token[] after-all()
  r = (s32[4], u32[], token[]) recv(tk), channel_id=4, {_ATTR}
  s = (s32[4], u32[], token[]) send(v, tk), channel_id=4, {_ATTR}
  rd = (s32[4], token[]) recv-done(r), channel_id=4
  sd = token[] send-done(s), channel_id=4
  moved = s32[4] get-tuple-element(rd), index=0""",
)
_SEND_RECV_LOOP_XLA = _LOOP.replace(
    "STEP", f"moved = s32[4] collective-permute(v), channel_id=4, source_target_pairs={_RING}"
)
# XLA refuses groups that leave a device out; so must we
_NOT_IN_GROUP = (
    4,
    1,
    """ENTRY e {
  p = s32[4] parameter(0)
  ROOT a = s32[4] all-reduce(p), replica_groups={{0,1},{2}}, to_apply=add
}""",
)


@pytest.fixture(scope="module")
def xla() -> dict[str, dict]:
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    jobs = {name: (_module(r, p, e), r, p) for name, (r, p, e) in CASES.items()}
    jobs["broadcast"] = (_module(2, 2, _BROADCAST_XLA), 2, 2)
    jobs["send_recv"] = (_module(2, 4, _SEND_RECV_XLA), 2, 4)
    jobs["not_in_group"] = (_module(*_NOT_IN_GROUP), 4, 1)
    jobs["send_recv_loop"] = (_module(2, 3, _SEND_RECV_LOOP_XLA), 2, 3)
    names = list(jobs)
    results = _xla_many([(t, r, p, _args(t, r, p)) for t, r, p in jobs.values()])
    return dict(zip(names, results, strict=True))


def _same(got: list, want: list) -> None:
    assert len(got) == len(want)
    for d, (g, w) in enumerate(zip(got, want, strict=True)):
        assert len(g) == len(w), f"device {d}"
        for k, (a, b) in enumerate(zip(g, w, strict=True)):
            a, b = np.asarray(a), np.asarray(b)
            assert (a.dtype, a.shape) == (b.dtype, b.shape), f"device {d} out {k}"
            assert a.tobytes() == b.tobytes(), f"device {d} out {k}\n{a}\n{b}"


def _ours(text: str, replicas: int, partitions: int) -> list[list[np.ndarray]]:
    module = hlopass.parse_hlo(text)
    return evaluate_devices(module, _args(text, replicas, partitions), replicas, partitions)


@pytest.mark.parametrize("name", list(CASES))
def test_devices_match_xla(name, xla):
    r, p, entry = CASES[name]
    text = _module(r, p, entry)
    assert "outputs" in xla[name], xla[name]
    _same(_ours(text, r, p), xla[name]["outputs"])


def test_ids_and_groups_by_hand():
    """Device 6 of 2 x 4 is replica 1, partition 2; the flattened group [4,2]<=[2,4]T(1,0)
    holding it is {2,6}: gathered, device 2's input then its own."""
    r, p, entry = CASES["ids"]
    outs = _ours(_module(r, p, entry), r, p)
    assert [int(o[0]) for o in outs] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [int(o[1]) for o in outs] == [0, 1, 2, 3, 0, 1, 2, 3]
    r, p, entry = CASES["flattened_id"]
    g = _ours(_module(r, p, entry), r, p)[6][1]
    assert g.tolist() == list(range(200, 208)) + list(range(600, 608))


def test_collective_broadcast_matches_xla_gather(xla):
    """The group's first member's value (partition 1, or replica 1, of each group)."""
    r, p, entry = _BROADCAST
    assert "outputs" in xla["broadcast"], xla["broadcast"]
    _same(_ours(_module(r, p, entry), r, p), xla["broadcast"]["outputs"])


def test_send_recv_match_xla_permute(xla):
    """recv; send; recv-done; send-done around a ring of partitions (channel 1), and one
    pair 2 -> 0 (channel 2): what the collective-permute with those pairs gives, zeros
    where no pair sends."""
    r, p, entry = _SEND_RECV
    assert "outputs" in xla["send_recv"], xla["send_recv"]
    ours = _ours(_module(r, p, entry), r, p)
    _same(ours, xla["send_recv"]["outputs"])
    assert not ours[5][1].any()  # partition 1 of replica 1 receives nothing on channel 2


def test_send_recv_in_a_loop_match_xla_permute(xla):
    """Each iteration's send meets the same iteration's recv (the channel is a queue)."""
    assert "outputs" in xla["send_recv_loop"], xla["send_recv_loop"]
    _same(_ours(_module(2, 3, _SEND_RECV_LOOP), 2, 3), xla["send_recv_loop"]["outputs"])


def test_groups_leaving_a_device_out_are_an_error(xla):
    assert "error" in xla["not_in_group"], xla["not_in_group"]
    r, p, entry = _NOT_IN_GROUP
    with pytest.raises(HloInputError, match="must hold each of 4 replica ids once, they hold 3"):
        _ours(_module(r, p, entry), r, p)


_RAGGED = """ENTRY e {
  input = s32[3] parameter(0)
  output = s32[4] parameter(1)
  in_off = s32[2] parameter(2)
  send = s32[2] parameter(3)
  out_off = s32[2] parameter(4)
  recv = s32[2] parameter(5)
  ROOT r = s32[4] ragged-all-to-all(input, output, in_off, send, out_off, recv), replica_groups={{0,1}}
}"""


def test_ragged_all_to_all_documented_example():
    """XLA's example of RaggedAllToAll (docs/operation_semantics.md): replica 0 gets
    [1, 3, 0, 0], replica 1 [2, 2, 4, 0]."""
    a = [np.array(v, np.int32) for v in ([1, 2, 2], [0, 0, 0, 0], [0, 1], [1, 2], [0, 0], [1, 1])]
    b = [np.array(v, np.int32) for v in ([3, 4, 0], [0, 0, 0, 0], [0, 1], [1, 1], [1, 2], [2, 1])]
    outs = evaluate_devices(hlopass.parse_hlo(_module(2, 1, _RAGGED)), [a, b], 2)
    assert [o[0].tolist() for o in outs] == [[1, 3, 0, 0], [2, 2, 4, 0]]


def test_ragged_all_to_all_two_updates_per_peer():
    """Offsets and sizes of shape [peers, updates]: row j holds the updates for peer j.
    Replica 0 sends rows 0 and 2 of [[10,11],[20,21],[30,31]] to itself at 3 and 0, and
    row 1 to replica 1 at 1; replica 1 sends its row 0 to replica 0 at 1 and its rows
    1..2 to itself at 2 (by hand from the documented rules)."""
    text = _module(
        2,
        1,
        """ENTRY e {
  input = s32[3,2] parameter(0)
  output = s32[4,2] parameter(1)
  in_off = s32[2,2] parameter(2)
  send = s32[2,2] parameter(3)
  out_off = s32[2,2] parameter(4)
  recv = s32[2,2] parameter(5)
  ROOT r = s32[4,2] ragged-all-to-all(input, output, in_off, send, out_off, recv), replica_groups={}
}""",
    )

    def dev(data, in_off, send, out_off):
        arrays = (data, np.full((4, 2), -1), in_off, send, out_off, np.zeros((2, 2)))
        return [np.array(v, np.int32) for v in arrays]

    a = dev([[10, 11], [20, 21], [30, 31]], [[0, 2], [1, 0]], [[1, 1], [1, 0]], [[3, 0], [1, 0]])
    b = dev([[40, 41], [50, 51], [60, 61]], [[0, 0], [1, 0]], [[1, 0], [2, 0]], [[1, 0], [2, 0]])
    outs = evaluate_devices(hlopass.parse_hlo(text), [a, b], 2)
    assert outs[0][0].tolist() == [[30, 31], [40, 41], [-1, -1], [10, 11]]
    assert outs[1][0].tolist() == [[-1, -1], [20, 21], [50, 51], [60, 61]]


def test_too_few_devices_names_the_count():
    r, p, entry = CASES["flattened_id"]
    module = hlopass.parse_hlo(_module(r, p, entry))
    with pytest.raises(
        UnsupportedOpError, match="groups of 4 devices name device 7, the run has 4"
    ):
        evaluate(module, *_args(_module(r, p, entry), 1, 1)[0], replicas=2, partitions=2)


def test_reducer_of_another_type_is_refused():
    """A bf16 all-reduce whose reducer adds f32 (XLA's verifier accepts it, XLA-CPU fails to
    compile it): one line naming both types, not an internal error."""
    text = """HloModule m, replica_count=2

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = bf16[4] parameter(0)
  ROOT ar = bf16[4] all-reduce(p), replica_groups={{0,1}}, to_apply=sum
}
"""
    x = np.ones(4, dtype=ml_dtypes.bfloat16)
    with pytest.raises(UnsupportedOpError, match="reducer sum adds f32, the operand is bfloat16"):
        evaluate(hlopass.parse_hlo(text), x, replicas=2)


def test_devices_that_disagree_stop_with_one_error():
    """Partition 0 skips the all-reduce its group {0,1} waits on: no hang, one error."""
    text = _module(
        1,
        2,
        """tk {
  x = s32[4] parameter(0)
  ROOT a = s32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

sk {
  ROOT x = s32[4] parameter(0)
}

ENTRY e {
  p = s32[4] parameter(0)
  q = u32[] partition-id()
  b = pred[] convert(q)
  ROOT c = s32[4] conditional(b, p, p), true_computation=tk, false_computation=sk
}""",
    )
    with pytest.raises(HloInputError, match="no rendezvous"):
        evaluate(hlopass.parse_hlo(text), np.zeros(4, np.int32), partitions=2)


def test_cli_runs_on_devices(tmp_path, capsys):
    """`hlopass run --devices 8` takes the module's 4 partitions; each device's outputs
    are the interpreter's on the same inputs."""
    from hlopass.interpreter.cli import run_main

    r, p, entry = CASES["flattened_id"]
    text = _module(r, p, entry)
    hlo, ins, outs = tmp_path / "m.hlo", tmp_path / "in.npz", tmp_path / "out.npz"
    hlo.write_text(text)
    x = np.arange(8, dtype=np.int32)
    np.savez(ins, in0=x)
    args = [str(hlo), "--inputs", str(ins)]
    assert run_main([*args, "--devices", "8", "-o", str(outs)]) == 0
    want = evaluate(hlopass.parse_hlo(text), x, replicas=2, partitions=4)
    with np.load(outs) as got:
        assert sorted(got.files) == sorted(f"d{d}_out{k}" for d in range(8) for k in range(3))
        for d in range(8):
            for k in range(3):
                assert got[f"d{d}_out{k}"].tobytes() == want[d][k].tobytes()
    assert run_main([*args, "--devices", "8"]) == 0
    assert "device 5 (replica 1, partition 1):" in capsys.readouterr().out
    assert run_main([*args, "--devices", "6", "--partitions", "4"]) == 1
    err = capsys.readouterr()
    assert (
        (err.out + err.err)
        .strip()
        .endswith("m.hlo: error: --devices 6 is not a multiple of --partitions 4")
    )
    assert len((err.out + err.err).strip().splitlines()) == 1


def test_deadlock_is_reported_at_once():
    """Partition 0 waits at one all-reduce, partition 1 at another: XLA would hang; the
    interpreter sees every device blocked and stops with one error."""
    text = _module(
        1,
        2,
        """ta {
  x = s32[4] parameter(0)
  ROOT a = s32[4] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}

tb {
  x = s32[4] parameter(0)
  ROOT b = s32[4] all-reduce(x), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=mx
}

ENTRY e {
  p = s32[4] parameter(0)
  q = u32[] partition-id()
  b = pred[] convert(q)
  ROOT c = s32[4] conditional(b, p, p), true_computation=ta, false_computation=tb
}""",
    )
    with pytest.raises(HloInputError, match="every device waits"):
        evaluate(hlopass.parse_hlo(text), np.zeros(4, np.int32), partitions=2)
