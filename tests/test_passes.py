"""Pass registry, change reporting, and the passes on the shared corpus."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline

from hlopass.dialects.hlo import computations
from hlopass.pipeline import PASSES, list_passes_text, parse_pass_pipeline, run_pipeline
from hlopass.rewriting import HloModulePass
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from hlopass.text.xdsl_io import context
from tests.error_bound import assert_within_bound, error_bounds

ROOT = Path(__file__).resolve().parent.parent
LIT_PASSES = ROOT / "lit_tests" / "passes"
PIPELINE = "fixpoint{passes=algsimp,constant-folding,dce,cse}"


def _interpreter():
    """The interpreter, imported where a test needs it: a broken import fails that test."""
    import hlopass.interpreter as interp

    return interp


def _count(module) -> int:
    return sum(1 for c in computations(module) for _ in c.instructions)


# --- registry -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PASSES))
def test_registry_key_is_pass_name(name: str) -> None:
    cls = PASSES[name]()
    assert cls.name == name
    assert issubclass(cls, ModulePass) and issubclass(cls, HloModulePass)
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert (cls.__doc__ or "").strip(), f"{name} has no docstring"


def test_registry_sorted() -> None:
    assert list(PASSES) == sorted(PASSES)


@pytest.mark.parametrize("name", list(PASSES))
def test_each_pass_has_lit_test(name: str) -> None:
    path = LIT_PASSES / f"{name}.hlo"
    if not path.is_file():  # the collective passes keep theirs in a folder of their own
        path = LIT_PASSES / "collectives" / f"{name}.hlo"
    if not path.is_file():  # and so do the Triton fusion passes, named as XLA's files
        path = LIT_PASSES / "fusion" / f"{name.replace('-', '_')}.hlo"
    assert path.is_file(), f"missing {path}"
    text = path.read_text()
    assert "// RUN:" in text and "CHECK-LABEL" in text


def test_list_passes_mentions_options() -> None:
    text = list_passes_text()
    for name in PASSES:
        assert re.search(rf"^{re.escape(name)}: ", text, re.M)
    assert "max-elements=45000000" in text
    assert "float-unsafe=false" in text


def test_patterns_have_rewrite_docstrings() -> None:
    from hlopass.passes import algsimp

    assert len(algsimp.PATTERNS) >= 30
    for cls in algsimp.PATTERNS:
        doc = (cls.__doc__ or "").strip()
        assert doc.startswith("`") and "->" in doc.splitlines()[0], cls.__name__


def test_pipeline_options_parse() -> None:
    (cf,) = parse_pass_pipeline("constant-folding{max-elements=1000}")
    assert cf.max_elements == 1000  # type: ignore[attr-defined]
    (fx,) = parse_pass_pipeline('fixpoint{passes="algsimp{float-unsafe=true}",dce}')
    inner = fx.inner()  # type: ignore[attr-defined]
    assert [p.name for p in inner] == ["algsimp", "dce"]
    assert inner[0].float_unsafe  # type: ignore[attr-defined]


# --- change reporting ---------------------------------------------------------------------


def _lit_cases() -> list[tuple[str, str, str]]:
    """(pass, case id, module text) of every case in lit_tests/passes."""
    out = []
    for path in sorted(LIT_PASSES.glob("*.hlo")):
        for i, chunk in enumerate(path.read_text().split("\n// -----\n")):
            if "ENTRY" in chunk:
                out.append((path.stem, f"{path.stem}#{i}", chunk))
    return out


@pytest.mark.parametrize("pass_name,case,text", _lit_cases(), ids=[c[1] for c in _lit_cases()])
@pytest.mark.parametrize(
    "spec", ["algsimp", "algsimp{float-unsafe=true}", "constant-folding", "dce", "cse", PIPELINE]
)
def test_changed_flag_matches_text(pass_name: str, case: str, text: str, spec: str) -> None:
    """A pass says it changed the module exactly when the printed module changed."""
    if spec.startswith("constant-folding") or spec == PIPELINE:
        _interpreter()
    module = parse_hlo(text, case)
    before = print_hlo(module)
    (p,) = parse_pass_pipeline(spec)
    changed = p.run(context(), module)
    after = print_hlo(module)
    assert changed == (before != after), f"{spec} on {case}: changed={changed}"
    module.verify()


def test_changed_flag_checker_catches_liars() -> None:
    """The check above fails a pass that claims a change it did not make, or hides one."""

    @dataclasses.dataclass(frozen=True)
    class Liar(HloModulePass):
        name = "liar"

        def run(self, ctx, module, trace=None) -> bool:  # type: ignore[override]
            return True

    module = parse_hlo("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n")
    before = print_hlo(module)
    assert Liar().run(context(), module) != (before != print_hlo(module))


def test_verify_each_names_the_breaking_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    from hlopass import pipeline
    from hlopass.errors import HloError

    @dataclasses.dataclass(frozen=True)
    class Breaker(HloModulePass):
        """Breaks the module: the root's tuple gets a wrong operand count."""

        name = "breaker"

        def run(self, ctx, module, trace=None) -> bool:  # type: ignore[override]
            for comp in computations(module):
                root = comp.root
                if root.opcode == "tuple":
                    root.operands = list(root.operands)[:1]
                    return True
            return False

    monkeypatch.setitem(pipeline.PASSES, "breaker", lambda: Breaker)
    module = parse_hlo(
        "HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT t = (f32[], f32[]) tuple(a, a)\n}\n"
    )
    with pytest.raises(HloError, match="after pass 'breaker'"):
        run_pipeline(module, "dce,breaker", verify_each=True)


# --- corpus -------------------------------------------------------------------------------


def _jax_programs() -> list[str]:
    from tests.conftest import CORPUS

    if CORPUS is None:
        return []
    return sorted(p.name for p in (CORPUS / "jax").iterdir() if p.is_dir())


def _tolerance(dtype: np.dtype) -> tuple[float, float]:
    name = str(dtype)
    if name in ("bfloat16", "float16") or "float8" in name:
        return 5e-2, 5e-2
    if name in ("float32", "complex64"):
        return 1e-4, 1e-5
    return 1e-9, 0.0


def _derived_bounds(d: Path, text: str) -> list[np.ndarray] | None:
    """Per-output bounds derived from the program `text` on the corpus inputs (see
    tests/error_bound.py), or None for the programs `NO_BOUND_YET` lists (which keep
    `_tolerance`)."""
    from tests.error_bound import NoBound, error_bounds
    from tests.test_interpreter import NO_BOUND_YET

    with np.load(d / "io.npz") as io:
        args = [io[f"in{i}"] for i in range(sum(k.startswith("in") for k in io.files))]
    try:
        bounds = [e for _, e in error_bounds(parse_hlo(text), *args)]
    except NoBound:
        assert d.name in NO_BOUND_YET, f"{d.name}: no derived bound"
        return None
    return bounds


def _assert_close(g, w, bound, what: str) -> None:
    from tests.error_bound import assert_within_bound

    if bound is not None:
        assert_within_bound(g, w, bound, what=what)
        return
    rtol, atol = _tolerance(g.dtype)
    np.testing.assert_allclose(g.astype(np.complex128), np.asarray(w).astype(np.complex128),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)  # fmt: skip


_OPTIMIZED: dict[Path, tuple[str, int, int]] = {}


def _optimized(d: Path) -> tuple[str, int, int]:
    """(printed module after PIPELINE, instructions before, after) for jax/<program>."""
    if d not in _OPTIMIZED:
        _interpreter()  # constant-folding evaluates with it
        module = parse_hlo((d / "before_optimizations.hlo").read_text(), str(d))
        n0 = _count(module)
        run_pipeline(module, PIPELINE, verify_each=True)
        _OPTIMIZED[d] = (print_hlo(module), n0, _count(module))
    return _OPTIMIZED[d]


_XLA_CHILD = r"""
import pickle, sys
import numpy as np
from hlopass.execution import oracle
text = open(sys.argv[1]).read()
io = np.load(sys.argv[2])
args = [io[f"in{i}"] for i in range(sum(1 for k in io.files if k.startswith("in")))]
outs = oracle.execute(text, args)
with open(sys.argv[3], "wb") as f:
    pickle.dump([np.asarray(o) for o in outs], f)
"""


def _xla_execute_in_child(text: str, npz: Path, tmp: Path) -> list[np.ndarray]:
    """XLA:CPU outputs of `text` on io.npz's inputs, in a child process (XLA may abort)."""
    import pickle
    import subprocess
    import sys

    src, res = tmp / "optimized.hlo", tmp / "outs.pkl"
    src.write_text(text)
    r = subprocess.run([sys.executable, "-c", _XLA_CHILD, str(src), str(npz), str(res)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)  # fmt: skip
    assert r.returncode == 0, (
        f"XLA:CPU failed on the optimized module (rc {r.returncode}): {r.stderr[-3000:]}"
    )
    with open(res, "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("program", _jax_programs() or ["<no corpus>"])
def test_jax_pipeline_xla_cpu_executes(program: str, corpus: Path, xla, tmp_path: Path) -> None:
    """XLA:CPU runs the optimized printed module and gives the reference outputs."""
    d = corpus / "jax" / program
    out, _, _ = _optimized(d)
    io = np.load(d / "io.npz")
    n_out = sum(1 for k in io.files if k.startswith("out"))
    got = _xla_execute_in_child(out, d / "io.npz", tmp_path)
    assert len(got) == n_out
    bounds = _derived_bounds(d, (d / "before_optimizations.hlo").read_text())
    for i, g in enumerate(got):
        want = np.asarray(io[f"out{i}"])
        assert g.shape == want.shape and g.dtype == want.dtype, (
            f"out{i}: {g.dtype}{g.shape} vs {want.dtype}{want.shape}"
        )
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, want, err_msg=f"{program} out{i} (XLA:CPU, optimized)")
        else:
            bound = None if bounds is None else bounds[i]
            _assert_close(g, want, bound, f"{program} out{i} (XLA:CPU, optimized)")


@pytest.mark.parametrize("program", _jax_programs() or ["<no corpus>"])
def test_jax_pipeline_keeps_outputs(program: str, corpus: Path, xla) -> None:
    interp = _interpreter()
    d = corpus / "jax" / program
    text = (d / "before_optimizations.hlo").read_text()
    out, n0, n1 = _optimized(d)
    ok, msg = xla.accepts(out)
    assert ok, f"XLA rejects the optimized {program}: {msg}"
    io = np.load(d / "io.npz")
    n_in = sum(1 for k in io.files if k.startswith("in"))
    n_out = sum(1 for k in io.files if k.startswith("out"))
    args = [io[f"in{i}"] for i in range(n_in)]
    # evaluate a fresh parse of the printed text: it checks the printed form too
    got = interp.evaluate(parse_hlo(out, program), *args)
    base = interp.evaluate(parse_hlo(text, program), *args)
    assert len(got) == n_out
    # the optimized program may round differently where passes rewrote it: the bounds of
    # both programs (each against an exact evaluation) add up
    base_bounds = _derived_bounds(d, text)
    opt_bounds = _derived_bounds(d, out)
    for i, (g, b) in enumerate(zip(got, base, strict=False)):
        want = io[f"out{i}"]
        assert g.shape == want.shape and g.dtype == b.dtype, f"out{i}"
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, b, err_msg=f"{program} out{i} vs unoptimized")
            np.testing.assert_array_equal(g, want, err_msg=f"{program} out{i} vs XLA")
            continue
        bound = None
        if base_bounds is not None and opt_bounds is not None:
            bound = base_bounds[i] + opt_bounds[i]
        _assert_close(g, b, bound, f"{program} out{i} vs unoptimized")
        _assert_close(g, want, bound, f"{program} out{i} vs XLA")
    assert n1 <= n0 + _XLA_EXPANSIONS.get(program, 0)


_XLA_EXPANSIONS = {"const_heavy": 2}
"""Instructions a program may gain where XLA's own rewrites expand one: const_heavy's
`reshape(iota(f32[24]))` to f32[4,6] becomes `iota(dim 1) + iota(dim 0) * 6` (two iotas, a
constant, its broadcast, a multiply and an add for the iota and the reshape), as in its
`xla_cpu_optimized.hlo`."""


def test_seed_001_pipeline_to_fixpoint(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus / "seeds" / "001_c2c20f964a2c12a7.hlo"
    module = parse_hlo(path.read_text(), str(path))
    n0 = _count(module)
    from hlopass.pipeline import Runner

    runner = Runner(verify_each=True)
    runner.run(parse_pass_pipeline(PIPELINE), module)
    module.verify()
    n1 = _count(module)
    # the last round changed nothing: a fixed point, reached before the cap of 25 rounds
    rounds = len(runner.log) // 4
    assert rounds < 25 and not any(changed for _, changed in runner.log[-4:])
    with capsys.disabled():
        print(f"\nseed 001: {n0} -> {n1} instructions in {rounds} rounds")
    assert n1 <= n0


def test_xdsl_opt_universe(tmp_path: Path) -> None:
    """`hlopass-opt f.hlo --emit xdsl | xdsl-opt -p dce` (xDSL's DCE), and our passes as hlo-*."""
    import shutil
    import subprocess

    from xdsl.transforms import get_all_passes

    from hlopass.commands.universe import HLOPASS_UNIVERSE

    names = set(HLOPASS_UNIVERSE.all_passes)
    # every pass as hlo-NAME, and as NAME where xDSL has no pass of that name
    assert {f"hlo-{n}" for n in PASSES} <= names
    assert {"algsimp", "constant-folding", "fixpoint"} <= names
    assert not names & set(get_all_passes()), "a name clashes with one of xDSL's passes"
    assert names == {f"hlo-{n}" for n in PASSES} | (set(PASSES) - set(get_all_passes()))
    for name, load in HLOPASS_UNIVERSE.all_passes.items():
        cls = load()
        assert cls.name == name and issubclass(cls, HloModulePass)
        assert cls.from_spec(next(iter(parse_pipeline(name)))).name == name  # xdsl-opt's lookup
    assert HLOPASS_UNIVERSE.all_dialects["hlo"]().name == "hlo"
    xdsl_opt, opt = shutil.which("xdsl-opt"), shutil.which("hlopass-opt")
    if xdsl_opt is None or opt is None:
        pytest.skip("xdsl-opt / hlopass-opt are not on PATH (pip install -e .)")
    src = tmp_path / "f.hlo"
    src.write_text(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  dead = f32[4] negate(p)\n"
        "  z = f32[] constant(0)\n  zb = f32[4] broadcast(z), dimensions={}\n"
        "  ROOT a = f32[4] add(p, zb)\n}\n"
    )
    ir = subprocess.run(
        [opt, str(src), "--emit", "xdsl"], capture_output=True, text=True, check=True
    ).stdout
    dce = subprocess.run(
        [xdsl_opt, "-p", "dce"], input=ir, capture_output=True, text=True, check=True
    ).stdout
    assert "hlo.negate" not in dce and "hlo.add" in dce
    for pipeline in (
        "hlo-algsimp,hlo-dce",
        "algsimp,hlo-dce",
        'fixpoint{passes="algsimp,hlo-dce"}',
    ):
        ours = subprocess.run([xdsl_opt, "-p", pipeline], input=ir, capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        back = subprocess.run(
            [opt, "-"], input=ours, capture_output=True, text=True, check=True
        ).stdout
        assert "ROOT %p = f32[4]{0} parameter(0)" in back, pipeline
        assert "negate" not in back, pipeline
    # `xdsl-opt -p algsimp` alone: the add of zero goes; algsimp leaves dead code to dce
    ours = subprocess.run([xdsl_opt, "-p", "algsimp"], input=ir, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    back = subprocess.run([opt, "-"], input=ours, capture_output=True, text=True, check=True).stdout
    assert "ROOT %p = f32[4]{0} parameter(0)" in back and " add(" not in back


def test_hlo_prefixed_aliases_in_pipelines() -> None:
    """`hlo-dce` (the xdsl-opt name) means `dce` in hlopass-opt pipelines too."""
    passes = parse_pass_pipeline(
        'hlo-dce,hlo-constant-folding{max-elements=4},fixpoint{passes="hlo-cse"}'
    )
    assert [p.name for p in passes] == ["dce", "constant-folding", "fixpoint"]
    assert passes[1].max_elements == 4  # type: ignore[attr-defined]
    assert [p.name for p in passes[2].inner()] == ["cse"]  # type: ignore[attr-defined]


# --- safety -------------------------------------------------------------------------------


_CALLED = """HloModule m

f {
  x = f32[4] parameter(0)
  two = f32[] constant(2)
  twos = f32[4] broadcast(two), dimensions={}
  sq = f32[4] power(x, twos)
  ROOT e = f32[4] exponential(sq)
}

ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] call(p), to_apply=f
  ROOT n = f32[4] negate(c)
}
"""


def test_evaluate_after_a_pass_edits_a_called_computation() -> None:
    """`hlopass.evaluate` caches an interpreter per module; passes must not leave it stale."""
    interp = _interpreter()
    module = parse_hlo(_CALLED)
    x = np.arange(4, dtype=np.float32)
    want = -np.exp(x * x)
    # the bound derived from the module (exp's ulps, power -> multiply): see error_bound.py
    ((_, bound),) = error_bounds(module, x)
    assert_within_bound(interp.evaluate(module, x)[0], want, bound)
    for spec in ("algsimp", "dce", PIPELINE):
        run_pipeline(module, spec)
        assert_within_bound(interp.evaluate(module, x)[0], want, bound, what=spec)
    assert "power" not in print_hlo(module)  # algsimp made a new multiply in f


def test_forget_cached_state_runs_for_every_pass_class() -> None:
    """Every HloModulePass subclass's `run` (ours, the xdsl-opt aliases, new ones) forgets caches."""
    from hlopass.commands.universe import HLOPASS_UNIVERSE

    for load in [*PASSES.values(), *HLOPASS_UNIVERSE.all_passes.values()]:
        assert getattr(load().run, "_forgets_caches", False), load().name


def _fold_text(spec: str, text: str) -> str:
    module = parse_hlo(text)
    run_pipeline(module, spec, verify_each=True)
    return print_hlo(module)


def test_constant_folding_after_folding_inside_a_callee() -> None:
    """A callee folded after the interpreter scheduled it is re-read, not a stale schedule."""
    _interpreter()
    text = """HloModule m

f {
  x = f32[] parameter(0)
  k = f32[] constant(3)
  k2 = f32[] add(k, k)
  ROOT y = f32[] multiply(x, k2)
}

g {
  gp = f32[] parameter(0)
  b = f32[] constant(2)
  gc = f32[] call(b), to_apply=f
  ROOT gs = f32[] add(gp, gc)
}

ENTRY e {
  a = f32[] constant(2)
  p = f32[] parameter(0)
  c1 = f32[] call(a), to_apply=f
  c2 = f32[] call(p), to_apply=g
  ROOT t = (f32[], f32[]) tuple(c1, c2)
}
"""
    module = parse_hlo(text)
    # The pass walks computations in block order: the entry first (text must define callees
    # first, as XLA requires, so the entry is moved to the front here).
    block = module.body.block
    entry = block.last_op
    assert entry is not None
    entry.detach()
    block.insert_op_before(entry, block.first_op)  # type: ignore[arg-type]
    # (without the interprocedural propagation, which would fold f's body before any call)
    run_pipeline(module, "constant-folding{propagate-into-calls=false}", verify_each=True)
    out = print_hlo(module)
    # entry's call is folded first (the interpreter schedules f), then f's add, then g's call
    assert out.count("call(") == 1 and out.count("constant(12)") == 2, out


_MIXED = """HloModule mixed
ENTRY e {
  a = f16[6] parameter(0)
  b = f32[6] parameter(1)
  m = minimum(a, b)
  ROOT r = f32[6] add(m, b)
}
"""


def test_mixed_precision_needs_the_verifier_option() -> None:
    """`minimum(f16, f32)` is refused (one line) unless `allow_mixed_precision` is on, as in
    XLA's HloVerifier; integers of different widths are refused either way."""
    from hlopass.checking.verifier import allow_mixed_precision
    from hlopass.errors import HloError

    with pytest.raises(HloError, match="different element types"):
        parse_hlo(_MIXED, "mixed.hlo")
    with allow_mixed_precision():
        module = parse_hlo(_MIXED, "mixed.hlo")
        module.verify()
        assert "f32[6]{0} minimum(%a, %b)" in print_hlo(module)
        with pytest.raises(HloError, match="different element types"):
            parse_hlo(_MIXED.replace("f16", "s16").replace("f32", "s32"), "int.hlo")
    with pytest.raises(HloError):  # the option does not outlive its scope
        parse_hlo(_MIXED, "mixed.hlo")


def test_mixed_precision_values_match_xla_cpu_of_the_converted_module(xla) -> None:
    """The interpreter computes `minimum(f16, f32)` as XLA does once the f16 operand is
    converted (XLA-CPU's own verifier refuses the mixed module, so it runs the converted)."""
    import hlopass
    from hlopass.checking.verifier import allow_mixed_precision
    from tests.interp_util import xla_execute_many
    from tests.op_grid import special_values

    a = special_values("f16")
    b = np.resize(special_values("f32"), a.shape)
    text = _MIXED.replace("[6]", f"[{a.size}]")
    converted = text.replace(
        "m = minimum(a, b)", "ca = f32[%d] convert(a)\n  m = minimum(ca, b)" % a.size
    )
    with allow_mixed_precision():
        got = hlopass.evaluate(parse_hlo(text, "mixed.hlo"), a, b)
    (want,) = xla_execute_many([(converted, [a, b])])
    assert "outputs" in want, want
    g, w = (
        np.asarray(got[0] if isinstance(got, (list, tuple)) else got),
        np.asarray(want["outputs"][0]),
    )
    assert g.dtype == w.dtype == np.float32
    num = ~np.isnan(w)  # (any nan equals any nan: XLA does not define its sign)
    assert np.array_equal(g, w, equal_nan=True)
    assert np.array_equal(np.signbit(g[num]), np.signbit(w[num]))
