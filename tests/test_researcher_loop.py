"""The researcher's loop: out-of-tree passes (entry point, plug-in file), every CLI feature
on them, the shipped lit configuration, run_pass, check_equivalent and the CLI polish."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hlopass
from hlopass.commands.cli import build_opt_parser

BIN = Path(sys.executable).parent
OPT = str(BIN / "hlopass-opt")
HLOPASS = str(BIN / "hlopass")

# A pass package of its own: `neg-neg` rewrites negate(negate(x)) -> x.
PLUGIN = '''
"""`neg-neg`: `negate(negate(x)) -> x`."""
from dataclasses import dataclass
from typing import ClassVar

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from hlopass.dialects.hlo import HloOp
from hlopass.rewriting import HloModulePass, RewriteContext, owner, replace_op, run_patterns


@dataclass
class NegateNegate(RewritePattern):
    """negate(negate(x)) -> x"""

    ctx: RewriteContext

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, HloOp) or op.opcode != "negate":
            return
        inner = owner(op.operands[0])
        if inner is None or inner.opcode != "negate":
            return
        self.ctx.note(self, op, "removed")
        replace_op(rewriter, op, inner.operands[0])


@dataclass(frozen=True)
class {cls}(HloModulePass):
    """Remove double negations."""

    name: ClassVar[str] = "{name}"

    def run(self, ctx, module, trace=None) -> bool:
        return run_patterns(module, [NegateNegate(RewriteContext.of(module, trace))])
'''

HLO = """HloModule m

ENTRY main {
  x = f32[4] parameter(0)
  n1 = f32[4] negate(x)
  n2 = f32[4] negate(n1)
  ROOT r = f32[4] add(n2, x)
}
"""


@pytest.fixture(scope="module")
def plugin_dirs(tmp_path_factory) -> dict[str, Path]:
    """An installed out-of-tree package (built as a wheel, declaring `hlopass.passes`) and a
    plug-in file; PYTHONPATH points at the package's install folder."""
    root = tmp_path_factory.mktemp("outoftree")
    wheel = root / "negneg_pass-0.1-py3-none-any.whl"
    _write_wheel(wheel, PLUGIN.format(cls="NegNegPass", name="neg-neg"))
    site = root / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--target", str(site), str(wheel)], capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plugin_file = root / "negneg2.py"
    plugin_file.write_text(PLUGIN.format(cls="NegNeg2Pass", name="neg-neg-2"))
    hlo = root / "m.hlo"
    hlo.write_text(HLO)
    return {"site": site, "file": plugin_file, "hlo": hlo, "root": root}


def _write_wheel(path: Path, source: str) -> None:
    """A minimal wheel of package `negneg_pass` whose metadata declares the `hlopass.passes`
    entry point, as any build backend would write it (no backend needed to make it)."""
    import base64
    import hashlib
    import zipfile

    info = "negneg_pass-0.1.dist-info"
    files = {
        "negneg_pass/__init__.py": source,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: negneg-pass\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[hlopass.passes]\nneg-neg = negneg_pass:NegNegPass\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)


def run(args: list[str], site: Path | None = None, stdin: str | None = None):
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(args, capture_output=True, text=True, env=env, input=stdin, timeout=300)


def _variants(d: dict[str, Path]) -> list[tuple[str, list[str], Path | None]]:
    return [("neg-neg", [], d["site"]), ("neg-neg-2", ["--load-pass-plugin", str(d["file"])], None)]


@pytest.mark.parametrize("which", [0, 1], ids=["entry-point", "plugin-file"])
def test_out_of_tree_pass_through_every_cli_feature(plugin_dirs, which):
    name, load, site = _variants(plugin_dirs)[which]
    hlo = str(plugin_dirs["hlo"])
    listed = run([OPT, *load, "--list-passes"], site)
    assert listed.returncode == 0 and f"{name}: Remove double negations." in listed.stdout
    for pipeline in (name, f"fixpoint{{passes={name},dce}}"):
        p = run([OPT, hlo, *load, "-p", pipeline, "--verify-each", "--trace-rewrites",
                 "--time-passes", "--print-ir-after-change=diff"], site)  # fmt: skip
        assert p.returncode == 0, p.stderr
        assert "negate" not in p.stdout and "add(%x, %x)" in p.stdout
        assert "// rewrite NegateNegate [negate(negate(x)) -> x]: n2 removed" in p.stderr
        assert "//        1  NegateNegate  negate(negate(x)) -> x" in p.stderr
        assert f"IR Diff After {name}" in p.stderr and "-  %n2 = f32[4]{0} negate(%n1)" in p.stderr
        assert "Pass execution timing report" in p.stderr and f"  {name}\n" in p.stderr
    fix = run(
        [OPT, hlo, *load, "-p", f"fixpoint{{passes={name}}}", "--print-ir-after-change=diff"], site
    )
    assert "(fixpoint round 1)" in fix.stderr
    checks = run([OPT, hlo, *load, "-p", name, "--generate-checks"], site)
    assert checks.returncode == 0 and "// CHECK-NEXT: ROOT %[[R:[^ ]+]] = " in checks.stdout


def test_lit_golden_test_of_a_plugin_with_the_shipped_config(plugin_dirs, tmp_path):
    suite = tmp_path / "golden"
    suite.mkdir()
    (suite / "lit.cfg").write_text(
        f"from hlopass.checking.lit_config import configure\nconfigure(config, plugins=[{str(plugin_dirs['file'])!r}])\n"
    )
    (suite / "fires.hlo").write_text(HLO + textwrap.dedent("""\
        // RUN: hlopass-opt %s -p neg-neg-2 | filecheck %s
        // CHECK-LABEL: ENTRY
        // CHECK-NEXT: %[[X:[^ ]+]] = f32[4]{0} parameter(0)
        // CHECK-NEXT: ROOT {{.*}} add(%[[X]], %[[X]])
        """))  # fmt: skip
    (suite / "fails.hlo").write_text(
        HLO + "// RUN: hlopass-opt %s -p neg-neg-2 | filecheck %s\n// CHECK: negate\n"
    )
    p = run([str(BIN / "lit"), "-v", str(suite)])
    assert "PASS: hlo-passes :: fires.hlo" in p.stdout, p.stdout + p.stderr
    assert "FAIL: hlo-passes :: fails.hlo" in p.stdout  # the suite can fail: not a rubber stamp


def test_bad_plugins_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    raising = tmp_path / "raising.py"
    raising.write_text("x = 1\nraise RuntimeError('boom')\n")
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    for plugin, expect in ((bad, "bad.py:1:"), (raising, "raising.py:2: error: plug-in failed to load"),
                           (empty, "defines and registers no pass"), (tmp_path / "none.py", "no such"),
                           ("no_such_module_xyz", "cannot load pass plug-in")):  # fmt: skip
        p = run([OPT, "--load-pass-plugin", str(plugin), "--list-passes"])
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and expect in p.stderr, p.stderr


def test_register_and_run_pass_in_python(plugin_dirs):
    from hlopass.pipeline import PASSES
    from hlopass.plugins import PluginError, load_pass_plugin

    assert load_pass_plugin(str(plugin_dirs["file"])) in (["neg-neg-2"], [])
    assert "neg-neg-2" in PASSES
    module = hlopass.parse_hlo(HLO)
    before = module.clone()
    assert hlopass.run_pass(module, "neg-neg-2") is True
    assert hlopass.run_pass(module, "neg-neg-2") is False  # nothing left: run -> changed
    assert hlopass.check_equivalent(before, module).ok
    cls = PASSES["neg-neg-2"]()
    with pytest.raises(PluginError, match="already registered"):
        hlopass.register_pass(type("Other", (cls,), {"__module__": "x"}), name="neg-neg-2")


def test_plain_xdsl_pass_reports_change_by_text():
    from dataclasses import dataclass

    from xdsl.passes import ModulePass

    from hlopass.dialects.hlo import computations

    @dataclass(frozen=True)
    class Rename(ModulePass):
        name = "rename-root"

        def apply(self, ctx, op) -> None:
            for comp in computations(op):
                comp.root.inst_name = "renamed"

    module = hlopass.parse_hlo(HLO)
    assert hlopass.run_pass(module, Rename()) is True
    assert "ROOT %renamed" in hlopass.print_hlo(module)


def test_check_equivalent_catches_a_wrong_rewrite():
    a = hlopass.parse_hlo(HLO)
    b = hlopass.parse_hlo(
        HLO.replace("ROOT r = f32[4] add(n2, x)", "ROOT r = f32[4] subtract(n2, x)")
    )
    result = hlopass.check_equivalent(a, b)
    assert not result.ok and "NOT equivalent" in str(result)


SUM = """HloModule sum, entry_computation_layout={(f32[4096]{0})->f32[]}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[4096]{0} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
"""


def test_check_equivalent_allows_another_summation_order():
    # The rewrite sums 4096 terms as 64 partial sums of 64 (tree-reduction-rewriter's form):
    # another rounding, within gamma_n * sum|x| of the exact sum, so equivalent.
    two_stage = SUM.replace(
        "  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add",
        "  y = f32[64,64]{1,0} reshape(x)\n"
        "  p = f32[64]{0} reduce(y, z), dimensions={1}, to_apply=add\n"
        "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add",
    )
    a, b = hlopass.parse_hlo(SUM), hlopass.parse_hlo(two_stage)
    args = [np.random.default_rng(1).standard_normal(4096).astype(np.float32)]
    assert hlopass.evaluate(a, *args)[0] != hlopass.evaluate(b, *args)[0]  # not bit-equal
    assert hlopass.check_equivalent(a, b, args).ok


def test_check_equivalent_derived_bound_catches_a_two_ulp_error():
    # A correctly rounded multiply has one right answer: a constant off by 2 ulps is a bug
    # that a fixed 64-ulp tolerance lets through and the derived bound (zero here) does not.
    hlo = """HloModule m, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

ENTRY e {
  x = f32[8]{0} parameter(0)
  c = f32[] constant(3)
  b = f32[8]{0} broadcast(c), dimensions={}
  ROOT r = f32[8]{0} multiply(x, b)
}
"""
    off = float(np.nextafter(np.nextafter(np.float32(3), np.float32(4)), np.float32(4)))
    a = hlopass.parse_hlo(hlo)
    b = hlopass.parse_hlo(hlo.replace("constant(3)", f"constant({off!r})"))
    result = hlopass.check_equivalent(a, b)
    assert not result.ok and "derived bound" in str(result), str(result)
    assert hlopass.check_equivalent(a, b, ulps=64).ok


# --- CLI polish ------------------------------------------------------------------------------


def test_hlopass_help_and_unknown_command():
    p = run([HLOPASS, "--help"])
    assert p.returncode == 0 and p.stderr == ""
    for cmd in ("opt", "run", "cost", "rank"):
        assert f"\n  {cmd} " in p.stdout
    q = run([HLOPASS, "cots"])
    assert q.returncode == 2 and "unknown command 'cots' (did you mean 'cost'?)" in q.stderr
    assert len(q.stderr.strip().splitlines()) == 1


def test_did_you_mean_for_passes_options_and_devices(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    p = run([OPT, str(hlo), "-p", "algsimpp"])
    assert p.returncode == 1 and "(did you mean 'algsimp'?)" in p.stderr
    p = run([OPT, str(hlo), "-p", "constant-folding{max-element=3}"])
    assert "(did you mean 'max-elements'?)" in p.stderr
    p = run([HLOPASS, "cost", str(hlo), "--device", "h10x"])
    assert p.returncode == 2 and "did you mean 'h100_sxm'" in p.stderr


def test_short_device_names_and_cost_sorting(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    p = run([HLOPASS, "cost", str(hlo), "--device", "h100", "--sort", "time", "--top", "1"])
    assert p.returncode == 0, p.stderr
    assert "device: h100_sxm" in p.stdout and "(2 more kernels)" in p.stdout
    assert "transcendentals" in p.stdout and "dram_bytes" in p.stdout


def test_every_flag_of_every_command_has_help(monkeypatch):
    """Every option of hlopass-opt and of each `hlopass` subcommand (their parsers are
    caught as each command builds its own)."""
    from hlopass.commands.cli import main

    seen: list[argparse.ArgumentParser] = []

    def catch(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        seen.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
    for cmd in ("opt", "run", "cost", "rank", "viz"):
        with contextlib.suppress(SystemExit):
            main([cmd, "m.hlo"])
    assert [p.prog for p in seen][1:] == [f"hlopass {c}" for c in ("run", "cost", "rank", "viz")]
    for parser in [build_opt_parser(), *seen]:
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"{parser.prog}: {action.option_strings or action.dest}"


def test_did_you_mean_for_misspelt_flags_and_choices(tmp_path):
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    for args, want in (([OPT, str(hlo), "--trace-rewritez"], "did you mean '--trace-rewrites'?"),
                       ([HLOPASS, "cost", str(hlo), "--sort", "tim"], "did you mean 'time'?"),
                       ([HLOPASS, "viz", str(hlo), "--formt", "svg"], "did you mean '--format'?"),
                       ([HLOPASS, "run", str(hlo), "--inputz", "x"], "did you mean '--inputs'?")):  # fmt: skip
        p = run(args)
        assert p.returncode == 2 and want in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


def test_stdin_at_a_terminal_says_it_reads_stdin():
    import pty

    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([OPT], stdin=follower, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        os.write(leader, HLO.encode() + b"\x04")  # Ctrl-D ends the terminal's input
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    assert "reading HLO from stdin" in err
    assert proc.returncode == 0 and "negate" in out


def test_progress_line_only_on_a_terminal():
    from hlopass.driver.instrument import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        with Progress(stream, delay=0.0, every=0.01) as progress:
            progress.current = "pass algsimp"
            import time

            time.sleep(0.1)
    assert "[hlopass]" in tty.getvalue() and "pass algsimp" in tty.getvalue()
    assert pipe.getvalue() == ""


SLOW_PASS = """
import time
from dataclasses import dataclass
from typing import ClassVar

from hlopass.rewriting import HloModulePass


@dataclass(frozen=True)
class Slow(HloModulePass):
    \"\"\"Take three seconds, change nothing.\"\"\"

    name: ClassVar[str] = "slow"

    def run(self, ctx, module, trace=None) -> bool:
        time.sleep(3)
        return False
"""


def test_progress_line_from_hlopass_opt_at_a_terminal_only(tmp_path):
    """A run over two seconds shows `[hlopass] 2.0s  pass slow` on a terminal's stderr and
    clears it at the end; with stderr a pipe it prints nothing."""
    import pty

    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_PASS)
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO)
    args = [OPT, str(hlo), "--load-pass-plugin", str(plugin), "-p", "slow", "-o", os.devnull]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=follower)  # fmt: skip
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    assert b"[hlopass]" in seen and b"pass slow" in seen, seen
    assert seen.endswith(b"\r\x1b[K")  # the line is cleared when the run ends
    piped = run(args)
    assert piped.returncode == 0 and piped.stderr == ""


def test_estimate_rows_and_top():
    from hlopass.cost import estimate

    est = estimate(hlopass.parse_hlo(HLO), "h100")
    rows = est.rows()
    assert len(rows) == 3 and {"name", "time_us", "flops", "bound"} <= set(rows[0])
    top = est.top(2)
    assert len(top) == 2 and top[0].time_us * top[0].count >= top[1].time_us * top[1].count


def test_passes_of_other_xdsl_universes_run_from_hlopass_opt(tmp_path):
    """xDSL registers its own passes through `xdsl.universe`; `canonicalize` is not ours, yet
    hlopass-opt finds it by name, runs it on hlo IR and keeps `run -> changed` (by text)."""
    hlo = tmp_path / "m.hlo"
    hlo.write_text(HLO.replace("ROOT r = f32[4] add(n2, x)", "ROOT r = f32[4] add(x, x)"))
    p = run([OPT, str(hlo), "-p", "canonicalize", "--verify-each", "--print-ir-after-change"])
    assert p.returncode == 0, p.stderr
    assert "negate" not in p.stdout and "IR Dump After canonicalize" in p.stderr


def test_module_shows_as_hlo_in_a_repl_and_a_notebook():
    from xdsl.dialects.builtin import ModuleOp

    module = hlopass.parse_hlo(HLO)
    assert isinstance(module, ModuleOp)
    assert repr(module) == hlopass.print_hlo(module).rstrip("\n")
    assert module._repr_html_().startswith("<pre>HloModule m") and "&gt;" in module._repr_html_()
    big = hlopass.parse_hlo(
        HLO.replace(
            "  ROOT r", "".join(f"  e{i} = f32[4] exponential(x)\n" for i in range(80)) + "  ROOT r"
        )
    )
    assert "more lines: print(hlopass.print_hlo(module))" in repr(big)
    assert type(module.clone()) is type(module)


def test_cost_names_xlas_bytes_accessed_apart_from_dram_bytes():
    """The footer's `bytes accessed` is XLA's own HloCostAnalysis figure (meta.json holds
    jaxlib's), the table's `dram_bytes` the model's."""
    import json

    from hlopass.checking.corpus import corpus_root

    root = corpus_root()
    if root is None:
        pytest.skip("the corpus (../shared/corpus) is not present")
    prog = Path(root) / "jax" / "mlp_adam"
    p = run([HLOPASS, "cost", str(prog / "before_optimizations.hlo"), "--json", "--top", "1"])
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    want = json.loads((prog / "meta.json").read_text())["xla_cost_before_optimizations"]
    assert out["xla_cost_analysis"]["bytes accessed"] == want["bytes accessed"]
    assert out["xla_cost_analysis"]["flops"] == want["flops"]
    assert len(out["kernels"]) == 1 and "bytes_accessed" in out["kernels"][0]
    text = run([HLOPASS, "cost", str(prog / "before_optimizations.hlo"), "--top", "1"]).stdout
    assert "dram_bytes" in text and f"bytes accessed {want['bytes accessed']:.4g}" in text
