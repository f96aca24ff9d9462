"""`hlopass run` on modules as users bring them.

A constant printed elided (`constant({...})`, XLA's default for large constants) is refused
right after parsing, before any instruction runs, with one line at the constant (CLI) or an
`HloInputError` (`hlopass.evaluate`). `--random-inputs [SEED]` draws inputs of each
parameter's shape and dtype, the same per seed; `--save-inputs PATH` writes them as the
`.npz` `--inputs` reads, and XLA:CPU on the saved inputs gives the interpreter's outputs.
"""

from __future__ import annotations

import re
import time

import ml_dtypes
import numpy as np
import pytest

import hlopass
from hlopass.dialects.hlo import entry_computation
from hlopass.errors import HloInputError
from hlopass.interpreter.cli import run_main
from tests.error_bound import assert_within_bound, error_bounds
from tests.interp_util import assert_same, xla_execute_many

SEED_001 = "seeds/001_c2c20f964a2c12a7.hlo"

# The elided constant sits behind a while loop that never ends: had anything been evaluated
# first, `--max-iterations 1` would have stopped it with the loop's error instead.
_BEHIND_A_LOOP = """HloModule behind_a_loop

cond {
  s = s32[] parameter(0)
  ROOT t = pred[] compare(s, s), direction=EQ
}

body {
  s = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(s, one)
}

helper {
  p = f32[20] parameter(0)
  big = f32[20] constant({...})
  ROOT s = f32[20] add(p, big)
}

ENTRY e {
  x = f32[20] parameter(0)
  z = s32[] constant(0)
  loop = s32[] while(z), condition=cond, body=body
  f = f32[] convert(loop)
  fb = f32[20] broadcast(f), dimensions={}
  y = f32[20] add(x, fb)
  ROOT c = f32[20] call(y), to_apply=helper
}
"""


def _elided_line(path, line: int, col: int, name: str, comp: str) -> str:
    return (
        rf"{re.escape(str(path))}:{line}:{col}: error: constant '{re.escape(name)}' "
        rf"\(computation {re.escape(comp)}\) is elided \(\{{\.\.\.\}}\) in the input: its "
        r"values are unknown, so the module cannot be run; dump it again with large "
        r"constants printed \(XLA_FLAGS=--xla_dump_large_constants, .*\)"
    )


def test_elided_constant_is_refused_before_anything_runs(tmp_path, capsys):
    src = tmp_path / "behind.hlo"
    src.write_text(_BEHIND_A_LOOP)
    assert run_main([str(src), "--random-inputs", "--max-iterations", "1"]) == 1
    err = capsys.readouterr().err.strip()
    # line 16 `  big = f32[20] constant({...})`: the column of `{...}`
    assert _BEHIND_A_LOOP.splitlines()[15] == "  big = f32[20] constant({...})"
    assert re.fullmatch(_elided_line(src, 16, 26, "big", "helper"), err), err


def test_seed_001_is_refused_within_seconds(corpus, capsys):
    path = corpus / SEED_001
    start = time.perf_counter()
    status = run_main([str(path)])  # no --inputs: the elided constant is told first
    wall = time.perf_counter() - start
    err = capsys.readouterr().err.strip()
    assert status == 1
    comp = (
        "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__"
        "XlaNumConstantArgs_173__XlaNumResourceArgs_52_.2592"
    )
    # XLA's text, line 4440: `  %constant_36 = s32[16]{0} constant({...}), metadata=...`
    line = path.read_text().splitlines()[4439]
    assert line.startswith("  %constant_36 = s32[16]{0} constant({...})")
    assert re.fullmatch(_elided_line(path, 4440, 38, "constant_36", comp), err), err
    # parsing 4.7k lines and one scan; evaluating first took a minute and 3.9 GB
    assert wall < 5, f"{wall:.1f} s"


def test_evaluate_refuses_an_elided_constant(corpus):
    module = hlopass.parse_hlo((corpus / SEED_001).read_text(), SEED_001)
    start = time.perf_counter()
    with pytest.raises(HloInputError, match=r"^error: constant 'constant_36' \(computation "):
        hlopass.evaluate(module)  # before the arguments are even counted
    assert time.perf_counter() - start < 5
    small = hlopass.parse_hlo(_BEHIND_A_LOOP)
    with pytest.raises(HloInputError, match=r"constant 'big' \(computation helper\) is elided"):
        hlopass.evaluate(small, np.zeros(20, np.float32))
    with pytest.raises(HloInputError, match="constant 'big'"):
        hlopass.evaluate(small, np.zeros(20, np.float32), replicas=2)


def test_elided_constants_the_run_never_needs_do_not_stop_it():
    text = """HloModule unneeded

unused {
  q = f32[20] parameter(0)
  ROOT k = f32[20] constant({...})
}

ENTRY e {
  x = f32[2] parameter(0)
  dead = f32[20] constant({...})
  ROOT n = f32[2] negate(x)
}
"""
    out = hlopass.evaluate(hlopass.parse_hlo(text), np.array([1.5, -2], np.float32))
    assert out[0].tolist() == [-1.5, 2.0]


# --- --random-inputs / --save-inputs --------------------------------------------------------

_MIXED = """HloModule mixed

ENTRY e {
  t = (bf16[3], (pred[2,2], c64[2])) parameter(0)
  i = s8[4] parameter(1)
  w = s32[5] parameter(2)
  a = bf16[3] get-tuple-element(t), index=0
  inner = (pred[2,2], c64[2]) get-tuple-element(t), index=1
  p = pred[2,2] get-tuple-element(inner), index=0
  c = c64[2] get-tuple-element(inner), index=1
  ROOT r = (bf16[3], pred[2,2], c64[2], s8[4], s32[5]) tuple(a, p, c, i, w)
}
"""


def _run_random(src, tmp_path, seed: str, tag: str) -> tuple[dict, dict]:
    ins, outs = tmp_path / f"in_{tag}.npz", tmp_path / f"out_{tag}.npz"
    argv = [str(src), "--random-inputs", seed, "--save-inputs", str(ins), "-o", str(outs)]
    assert run_main(argv) == 0
    with np.load(ins) as i, np.load(outs) as o:
        return {k: i[k] for k in i.files}, {k: o[k] for k in o.files}


def test_random_inputs_have_each_parameters_shape_and_dtype(tmp_path):
    src = tmp_path / "mixed.hlo"
    src.write_text(_MIXED)
    ins, outs = _run_random(src, tmp_path, "5", "a")
    # the tuple parameter's leaves first, in order, then the other parameters
    assert sorted(ins) == ["in0", "in1", "in2", "in3", "in4"]
    assert ins["in0"].dtype == np.dtype("V2") and ins["in0"].shape == (3,)  # bf16's raw bytes
    bf16 = ins["in0"].view(ml_dtypes.bfloat16).astype(np.float32)
    assert ((bf16 >= -2) & (bf16 <= 2)).all() and len(set(bf16.tolist())) == 3
    assert ins["in1"].dtype == np.bool_ and ins["in1"].shape == (2, 2)
    assert ins["in2"].dtype == np.complex64 and ins["in2"].shape == (2,)
    assert (np.abs(ins["in2"].real) <= 2).all() and (ins["in2"].imag != 0).all()
    assert ins["in3"].dtype == np.int8 and ins["in3"].shape == (4,)
    assert ins["in4"].dtype == np.int32 and ins["in4"].shape == (5,)
    assert (np.abs(ins["in4"]) <= 100).all()
    # the module returns its inputs: the outputs are the saved inputs, bit for bit
    for k in range(5):
        assert outs[f"out{k}"].tobytes() == ins[f"in{k}"].tobytes(), k
    # and --inputs reads the saved file back to the same run
    again = tmp_path / "again.npz"
    assert run_main([str(src), "--inputs", str(tmp_path / "in_a.npz"), "-o", str(again)]) == 0
    with np.load(again) as o:
        assert all(o[f"out{k}"].tobytes() == outs[f"out{k}"].tobytes() for k in range(5))


def test_random_inputs_are_the_same_per_seed(tmp_path):
    src = tmp_path / "mixed.hlo"
    src.write_text(_MIXED)
    first, _ = _run_random(src, tmp_path, "11", "a")
    second, _ = _run_random(src, tmp_path, "11", "b")
    other, _ = _run_random(src, tmp_path, "12", "c")
    assert all(first[k].tobytes() == second[k].tobytes() for k in first)
    assert any(first[k].tobytes() != other[k].tobytes() for k in first)
    assert run_main([str(src), "--random-inputs", "--save-inputs", str(tmp_path / "d.npz")]) == 0
    zero, _ = _run_random(src, tmp_path, "0", "e")  # a bare --random-inputs is seed 0
    with np.load(tmp_path / "d.npz") as d:
        assert all(d[k].tobytes() == zero[k].tobytes() for k in zero)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--random-inputs", "-1"], "expected a seed (an integer >= 0), got '-1'"),
        (["--random-inputs", "x"], "expected a seed (an integer >= 0), got 'x'"),
        (["--random-inputs", "--inputs", "a.npz"], "not allowed with argument"),
    ],
)
def test_bad_random_inputs_usage_is_one_line(tmp_path, capsys, argv, says):
    src = tmp_path / "mixed.hlo"
    src.write_text(_MIXED)
    with pytest.raises(SystemExit) as e:
        run_main([str(src), *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and says in err, err


@pytest.mark.parametrize("program", ["mlp_adam", "int_mixed", "fft_complex"])
def test_random_inputs_run_as_xla_cpu_runs_them(xla, corpus, tmp_path, program):
    src = corpus / "jax" / program / "before_optimizations.hlo"
    text = src.read_text()
    ins, outs = _run_random(src, tmp_path, "3", program)
    module = hlopass.parse_hlo(text, str(src))
    params = [p.shape for p in entry_computation(module).parameters()]
    args = [ins[f"in{k}"] for k in range(len(params))]
    assert [a.shape for a in args] == [tuple(s.dims) for s in params]
    (res,) = xla_execute_many([(text, args)])
    assert "outputs" in res, res
    want = res["outputs"]
    got = [outs[f"out{k}"] for k in range(len(outs))]
    assert len(got) == len(want)
    bounds = error_bounds(module, *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.dtype.kind in "fc":
            assert_within_bound(g, w, bounds[k][1], what=f"{program} output {k}")
        else:
            assert_same(g, w, what=f"{program} output {k}")
