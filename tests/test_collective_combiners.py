"""The collective combiners keep every device's outputs: each module runs on 4 replicas in
our interpreter (`evaluate_replicas`) and on 4 XLA:CPU host devices (one child process for
all of them), before and after the pass, and all four agree bit for bit. Each pass must
fire (fewer collectives after), and XLA must parse what it prints. Corpus modules with
collectives go through every combiner, and XLA parses the results.

Bit-exactness holds because combining reorders no arithmetic: a combined all-reduce or
reduce-scatter folds each element over the same group in the same order, an all-gather or
collective-permute only moves data, and the bitcasts that swap a gather or scatter dimension
move no data (the layout follows the dimensions).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import hlopass
from hlopass.execution import oracle
from tests.conftest import ORACLE_MISSING
from tests.interp_util import xla_execute_replicas

REPLICAS = 4

_HDR = """HloModule m, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

add2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

mx {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] maximum(a, b)
}
"""

# name -> (pipeline, entry over p: f32[4,6], q: s32[8], number of collectives after)
CASES: dict[str, tuple[str, str, int]] = {
    "all_reduce": (
        "all-reduce-combiner",
        """
ENTRY e {
  p = f32[4,6] parameter(0)
  q = s32[8] parameter(1)
  a = f32[4,6] all-reduce(p), replica_groups={}, to_apply=add
  n = f32[4,6] negate(p)
  b = f32[4,6] all-reduce(n), replica_groups={}, to_apply=add2
  c = f32[4,6] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add
  d = f32[4,6] all-reduce(n), replica_groups=[2,2]<=[4], to_apply=add
  e = s32[8] all-reduce(q), replica_groups={}, to_apply=mx
  f = s32[8] all-reduce(e), replica_groups={}, to_apply=mx
  g = f32[4,6] all-reduce(a), replica_groups={}, to_apply=add
  ROOT t = (f32[4,6], f32[4,6], f32[4,6], f32[4,6], s32[8], s32[8], f32[4,6]) tuple(a, b, c, d, e, f, g)
}""",
        5,
    ),
    # (no channel ids here: XLA:CPU fails on a tuple all-reduce with one, "LogicalBuffer ...
    # does not have a layout"; their key is checked in the lit tests)
    "all_reduce_gpu": (
        "all-reduce-combiner{gpu=true combine-threshold-in-bytes=1000}",
        """
ENTRY e {
  p = f32[4,6] parameter(0)
  q = s32[8] parameter(1)
  n = f32[4,6] negate(p)
  a = f32[4,6] all-reduce(p), replica_groups={{0,1,2,3}}, to_apply=add, backend_config={"collective_backend_config":{"is_pipelined":true}}
  b = f32[4,6] all-reduce(n), replica_groups={{0,1,2,3}}, to_apply=add
  c = f32[4,6] all-reduce(n), replica_groups={{0,1,2,3}}, to_apply=add, backend_config={"collective_backend_config":{"is_pipelined":true}}
  d = f32[4,6] all-reduce(p), replica_groups={{0,1,2,3}}, to_apply=add
  ROOT t = (f32[4,6], f32[4,6], f32[4,6], f32[4,6]) tuple(a, b, c, d)
}""",
        2,
    ),
    "all_gather": (
        "all-gather-combiner",
        """
ENTRY e {
  p = f32[4,6] parameter(0)
  q = s32[8] parameter(1)
  a = f32[16,6] all-gather(p), replica_groups={}, dimensions={0}
  b = f32[4,24] all-gather(p), replica_groups={}, dimensions={1}
  n = f32[4,6] negate(p)
  c = f32[16,6] all-gather(n), replica_groups={}, dimensions={0}
  d = s32[32] all-gather(q), replica_groups={}, dimensions={0}
  e = f32[8,6] all-gather(p), replica_groups={{3,1},{0,2}}, dimensions={0}
  f = f32[4,12] all-gather(n), replica_groups={{3,1},{0,2}}, dimensions={1}
  ROOT t = (f32[16,6], f32[4,24], f32[16,6], s32[32], f32[8,6], f32[4,12]) tuple(a, b, c, d, e, f)
}""",
        2,
    ),
    # (the two combined all-gathers take different operands: XLA:CPU miscomputes two tuple
    # all-gathers of the same operands on different dimensions, as written by hand too)
    "all_gather_by_dim": (
        "all-gather-combiner{combine-by-dim=true combine-different-dtypes=false}",
        """
ENTRY e {
  p = f32[4,6] parameter(0)
  q = s32[8] parameter(1)
  a = f32[16,6] all-gather(p), replica_groups={}, dimensions={0}
  m = f32[4,6] abs(p)
  b = f32[4,24] all-gather(m), replica_groups={}, dimensions={1}
  n = f32[4,6] negate(p)
  c = f32[16,6] all-gather(n), replica_groups={}, dimensions={0}
  d = s32[32] all-gather(q), replica_groups={}, dimensions={0}
  k = f32[4,6] multiply(p, p)
  f = f32[4,24] all-gather(k), replica_groups={}, dimensions={1}
  ROOT t = (f32[16,6], f32[4,24], f32[16,6], s32[32], f32[4,24]) tuple(a, b, c, d, f)
}""",
        3,
    ),
    "reduce_scatter": (
        "reduce-scatter-combiner",
        """
ENTRY e {
  p = f32[4,6] parameter(0)
  q = s32[8] parameter(1)
  a = f32[1,6] reduce-scatter(p), replica_groups={}, dimensions={0}, to_apply=add
  n = f32[4,6] negate(p)
  b = f32[4,3] reduce-scatter(n), replica_groups={{1,0},{3,2}}, dimensions={1}, to_apply=add
  c = f32[2,6] reduce-scatter(n), replica_groups={{1,0},{3,2}}, dimensions={0}, to_apply=add
  d = f32[4,3] reduce-scatter(p), replica_groups={{1,0},{3,2}}, dimensions={1}, to_apply=add2
  e = s32[2] reduce-scatter(q), replica_groups={}, dimensions={0}, to_apply=mx
  f = s32[2] reduce-scatter(q), replica_groups={}, dimensions={0}, to_apply=mx
  ROOT t = (f32[1,6], f32[4,3], f32[2,6], f32[4,3], s32[2], s32[2]) tuple(a, b, c, d, e, f)
}""",
        3,
    ),
    "collective_permute": (
        "collective-permute-combiner",
        """
ENTRY e {
  p = f32[4,6] parameter(0)
  q = s32[8] parameter(1)
  n = f32[4,6] negate(p)
  a = f32[4,6] collective-permute(p), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  b = s32[8] collective-permute(q), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}, control-predecessors={n}
  c = f32[4,6] collective-permute(n), source_target_pairs={{0,2},{2,0}}
  d = f32[4,6] collective-permute(p), source_target_pairs={{0,2},{2,0}}
  e = f32[4,6] collective-permute(a), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  m = f32[4,6] multiply(p, p), control-predecessors={b}
  ROOT t = (f32[4,6], s32[8], f32[4,6], f32[4,6], f32[4,6], f32[4,6]) tuple(a, b, c, d, e, m)
}""",
        3,
    ),
}

_COLLECTIVE = re.compile(r"\s(all-reduce|all-gather|reduce-scatter|collective-permute)\(")


_XLA_REFUSES_AFTER = {
    "reduce_scatter": "'stablehlo.reduce_scatter' op requires a single operand",
    "collective_permute": "'stablehlo.collective_permute' op requires a single operand",
}
"""Combined collectives XLA:CPU's execution path (through StableHLO) cannot compile: the
expected refusal (the test notices when XLA starts running them)."""


def _count(text: str) -> int:
    return len(_COLLECTIVE.findall(text))


def _args(seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal((4, 6)).astype(np.float32), rng.integers(-9, 9, 8).astype(np.int32)]
            for _ in range(REPLICAS)]  # fmt: skip


def _after(name: str) -> str:
    spec, entry, _ = CASES[name]
    module = hlopass.parse_hlo(_HDR + entry)
    assert hlopass.run_pass(module, spec), f"{spec} did not fire"
    return hlopass.print_hlo(module)


def _runnable(text: str) -> str:
    """`text` as XLA:CPU runs it: its path through StableHLO drops the layouts and refuses a
    bitcast before layout assignment, so each bitcast the combiners add (a swap of two
    dimensions whose layout follows) runs there as the transpose it equals (our interpreter
    runs the bitcasts themselves, layouts and all)."""
    module = hlopass.parse_hlo(text)
    lines = text.splitlines()
    for comp in module.body.block.ops:
        for op in comp.instructions:
            if op.OPCODE != "bitcast":
                continue
            src = op.operands[0].type.data
            perm = [0] * len(src.dims)
            for s_dim, d_dim in zip(src.minor_to_major, op.shape.minor_to_major, strict=True):
                perm[s_dim] = d_dim
            dims = ",".join(map(str, perm))
            for i, line in enumerate(lines):
                if line.lstrip().startswith(f"%{op.inst_name} = "):
                    lines[i] = re.sub(
                        r" bitcast\((%[\w.\-]+)\)", rf" transpose(\1), dimensions={{{dims}}}", line
                    )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def runs():
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    texts = {n: (_HDR + e, _after(n)) for n, (_, e, _) in CASES.items()}
    jobs = [(_runnable(t), _args(i)) for i, n in enumerate(CASES) for t in texts[n]]
    res = iter(xla_execute_replicas(jobs))
    return {n: (texts[n], next(res), next(res)) for n in CASES}


def _same(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), what
    for r, (g, w) in enumerate(zip(got, want, strict=True)):
        assert len(g) == len(w), f"{what}: replica {r}"
        for k, (a, b) in enumerate(zip(g, w, strict=True)):
            a, b = np.asarray(a), np.asarray(b)
            assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: replica {r} out {k}"
            assert a.tobytes() == b.tobytes(), f"{what}: replica {r} out {k}\n{a}\n{b}"


@pytest.mark.parametrize("name", list(CASES))
def test_outputs_kept_on_every_device(name, runs):
    from hlopass.interpreter import evaluate_replicas

    (before, after), xla_before, xla_after = runs[name]
    assert _count(after) == CASES[name][2], after
    assert _count(after) < _count(before)
    ok, why = oracle.accepts(after)
    assert ok, why
    assert "outputs" in xla_before, xla_before
    refusal = _XLA_REFUSES_AFTER.get(name)
    if refusal is None:
        assert "outputs" in xla_after, f"{xla_after}\n{after}"
        _same(xla_after["outputs"], xla_before["outputs"], "XLA after vs before")
    else:  # XLA:CPU cannot run it: ours after is held to XLA's before below
        assert refusal in str(xla_after.get("error")), xla_after
    args = _args(list(CASES).index(name))
    ours_before = evaluate_replicas(hlopass.parse_hlo(before), args)
    ours_after = evaluate_replicas(hlopass.parse_hlo(after), args)
    _same(ours_before, xla_before["outputs"], "ours before vs XLA")
    _same(ours_after, xla_before["outputs"], "ours after vs XLA")


def test_combined_all_reduce_by_hand():
    """Replica r holds [r, 10 r]; sums over {{0,1},{2,3}} are [1, 10] and [5, 50] for
    both members, and the max over everyone of [r] is [3] (hand-derived)."""
    from hlopass.interpreter import evaluate_replicas

    text = (
        _HDR
        + """
ENTRY e {
  p = f32[2] parameter(0)
  q = s32[1] parameter(1)
  a = f32[2] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add
  n = f32[2] negate(p)
  b = f32[2] all-reduce(n), replica_groups={{0,1},{2,3}}, to_apply=add
  c = s32[1] all-reduce(q), replica_groups={}, to_apply=mx
  ROOT t = (f32[2], f32[2], s32[1]) tuple(a, b, c)
}"""
    )
    module = hlopass.parse_hlo(text)
    assert hlopass.run_pass(module, "all-reduce-combiner")
    assert _count(hlopass.print_hlo(module)) == 2
    args = [[np.array([r, 10 * r], np.float32), np.array([r], np.int32)] for r in range(REPLICAS)]
    outs = evaluate_replicas(module, args)
    low, high = [1.0, 10.0], [5.0, 50.0]
    for r, (a, b, c) in enumerate(outs):
        want = low if r < 2 else high
        assert a.tolist() == want and b.tolist() == [-x for x in want] and c.tolist() == [3]


def test_bad_option_is_one_line():
    from hlopass.pipeline import PipelineError

    with pytest.raises(PipelineError) as e:
        hlopass.run_pass(hlopass.parse_hlo(_HDR + CASES["all_reduce"][1]),
                         "all-reduce-combiner{combine-treshold-in-bytes=3}")  # fmt: skip
    assert "\n" not in str(e.value) and "combine-threshold-in-bytes" in str(e.value)


_LARGEST_CORPUS_CHARS = 200_000  # the larger Llama / Mixtral modules cost too long here
_PASSES = ("all-reduce-combiner", "all-gather-combiner", "reduce-scatter-combiner",
           "collective-permute-combiner", "all-reduce-combiner{gpu=true}",
           "all-gather-combiner{gpu=true}", "reduce-scatter-combiner{gpu=true}")  # fmt: skip
_HAS_COLLECTIVE = re.compile(r" (all-reduce|all-gather|reduce-scatter|collective-permute)\(")


def test_corpus_modules_go_through_every_combiner(xla):
    from hlopass.checking.corpus import corpus_root, modules

    root = corpus_root()
    if root is None:
        pytest.fail("the shared corpus is missing")
    found = [m for m in modules(root)
             if len(m.text) <= _LARGEST_CORPUS_CHARS and _HAS_COLLECTIVE.search(m.text)]  # fmt: skip
    assert found, f"no corpus modules with collectives under {root}"
    fired = 0
    for m in found:
        try:
            module = hlopass.parse_hlo(m.text)
        except hlopass.HloError:
            continue  # modules our parser refuses are the parser tests' business
        for spec in _PASSES:  # one after another on the same module
            if hlopass.run_pass(module, spec):
                fired += 1
                ok, why = xla.accepts(hlopass.print_hlo(module))
                assert ok, f"{m.id} after {spec}: {why}"
    assert fired >= 5, f"only {fired} corpus modules had collectives to combine"
