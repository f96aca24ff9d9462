"""Pass registry, change reporting, and the passes on the shared corpus."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from hlopass.dialects.hlo import computations
from xdsl.passes import ModulePass

from hlopass.exporter import print_hlo
from hlopass.importer import parse_hlo
from hlopass.pipeline import PASSES, list_passes_text, parse_pass_pipeline, run_pipeline
from hlopass.rewriting import HloModulePass
from hlopass.xdsl_io import context

ROOT = Path(__file__).resolve().parent.parent
LIT_PASSES = ROOT / "lit_tests" / "passes"
PIPELINE = "fixpoint{passes=algsimp,constant-folding,dce,cse}"


def _interpreter():
    try:
        import hlopass.interpreter as interp
    except ImportError as e:
        pytest.skip(f"hlopass.interpreter is not importable yet: {e}")
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


@pytest.mark.parametrize(
    "pass_name,case,text", _lit_cases(), ids=[c[1] for c in _lit_cases()]
)
@pytest.mark.parametrize("spec", ["algsimp", "algsimp{float-unsafe=true}", "constant-folding", "dce", "cse", PIPELINE])
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


@pytest.mark.parametrize("program", _jax_programs() or ["<no corpus>"])
def test_jax_pipeline_keeps_outputs(program: str, corpus: Path, xla) -> None:
    interp = _interpreter()
    d = corpus / "jax" / program
    text = (d / "before_optimizations.hlo").read_text()
    module = parse_hlo(text, str(d))
    n0 = _count(module)
    run_pipeline(module, PIPELINE, verify_each=True)
    out = print_hlo(module)
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
    for i, (g, b) in enumerate(zip(got, base)):
        want = io[f"out{i}"]
        assert g.shape == want.shape and g.dtype == b.dtype, f"out{i}"
        rtol, atol = _tolerance(g.dtype)
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, b, err_msg=f"{program} out{i} vs unoptimized")
            np.testing.assert_array_equal(g, want, err_msg=f"{program} out{i} vs XLA")
        else:
            gf, bf = g.astype(np.complex128), b.astype(np.complex128)
            np.testing.assert_allclose(gf, bf, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"{program} out{i} vs unoptimized")  # fmt: skip
            # no further from XLA's reference than the unoptimized module is
            wf = np.asarray(want).astype(np.complex128)
            err_opt = np.nanmax(np.abs(gf - wf)) if g.size else 0.0
            err_base = np.nanmax(np.abs(bf - wf)) if g.size else 0.0
            assert err_opt <= err_base + atol + rtol * float(np.nanmax(np.abs(wf)) if g.size else 0), (
                f"{program} out{i}: error vs XLA {err_opt} (unoptimized {err_base})"
            )
    assert _count(module) <= n0


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

    from hlopass.universe import HLOPASS_UNIVERSE

    assert set(HLOPASS_UNIVERSE.all_passes) == {f"hlo-{n}" for n in PASSES}
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
    ir = subprocess.run([opt, str(src), "--emit", "xdsl"], capture_output=True, text=True, check=True).stdout
    dce = subprocess.run([xdsl_opt, "-p", "dce"], input=ir, capture_output=True, text=True, check=True).stdout
    assert "hlo.negate" not in dce and "hlo.add" in dce
    ours = subprocess.run([xdsl_opt, "-p", "hlo-algsimp,hlo-dce"], input=ir, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    back = subprocess.run([opt, "-"], input=ours, capture_output=True, text=True, check=True).stdout
    assert "ROOT %p = f32[4]{0} parameter(0)" in back
