"""A crash inside a user's own pass: one line naming the failing line of the user's file,
the whole traceback on request (`--traceback`, `HLOPASS_TRACEBACK=1`), through a plug-in
file and through an entry point of the group `hlopass.passes`; a pass's deliberate
diagnostic on bad input stays its own one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

OPT = str(Path(sys.executable).parent / "hlopass-opt")

HLO = "HloModule m\n\nENTRY main {\n  ROOT p0 = f32[4]{0} parameter(0)\n}\n"

# The bug is on the line marked BUG (a KeyError in match_and_rewrite).
PLUGIN = textwrap.dedent('''\
    from dataclasses import dataclass
    from typing import ClassVar

    from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

    from hlopass.rewriting import HloModulePass, run_patterns


    class Buggy(RewritePattern):
        def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
            table = {}
            table["oops"] += 1  # BUG


    @dataclass(frozen=True)
    class BuggyPass(HloModulePass):
        """Crashes on every module."""

        name: ClassVar[str] = "buggy"

        def run(self, ctx, module, trace=None) -> bool:
            return run_patterns(module, [Buggy()])
    ''')

# An installed package whose pass crashes in a helper module, inside the standard library
# (json): the line to name is the helper's call, not json's own frames.
EP_PASS = textwrap.dedent('''\
    from dataclasses import dataclass
    from typing import ClassVar

    from hlopass.rewriting import HloModulePass

    from buggy_ep.helpers import settings


    @dataclass(frozen=True)
    class EpPass(HloModulePass):
        """Reads broken settings."""

        name: ClassVar[str] = "ep-buggy"

        def run(self, ctx, module, trace=None) -> bool:
            return bool(settings())
    ''')
EP_HELPERS = textwrap.dedent("""\
    import json


    def settings():
        return json.loads("{")  # BUG
    """)

# A deliberate diagnostic: bad input reported as hlopass's one-line error.
STRICT = textwrap.dedent('''\
    from dataclasses import dataclass
    from typing import ClassVar

    from hlopass.errors import HloError
    from hlopass.rewriting import HloModulePass


    @dataclass(frozen=True)
    class StrictPass(HloModulePass):
        """Refuses modules without a negate."""

        name: ClassVar[str] = "strict"

        def run(self, ctx, module, trace=None) -> bool:
            raise HloError("ex.hlo:4:3: error: strict: this module has no negate")
    ''')


def bug_line(source: str) -> int:
    """The 1-based line of the `# BUG` marker, read from the source itself."""
    (line,) = [i for i, text in enumerate(source.splitlines(), 1) if text.endswith("# BUG")]
    return line


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """ex.hlo, the plug-in files, and `site/` holding package `buggy_ep` with a hand-made
    dist-info that declares its entry point (as an installed wheel would)."""
    root = tmp_path_factory.mktemp("author")
    (root / "ex.hlo").write_text(HLO)
    (root / "my_pass.py").write_text(PLUGIN)
    (root / "strict.py").write_text(STRICT)
    pkg = root / "site" / "buggy_ep"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(EP_PASS)
    (pkg / "helpers.py").write_text(EP_HELPERS)
    info = root / "site" / "buggy_ep-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: buggy-ep\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[hlopass.passes]\nep-buggy = buggy_ep:EpPass\n")
    return root


def opt(args: list[str], cwd: Path, traceback_env: bool = False,
        site: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "HLOPASS_TRACEBACK"}
    if traceback_env:
        env["HLOPASS_TRACEBACK"] = "1"
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run([OPT, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)  # fmt: skip


HINT = "; --traceback shows the whole traceback"


@pytest.mark.parametrize("pipeline", ["buggy", "fixpoint{passes=buggy,dce}"])
def test_plugin_crash_names_the_line_of_the_bug(work: Path, pipeline: str) -> None:
    p = opt(["ex.hlo", "--load-pass-plugin", "my_pass.py", "-p", pipeline], work)
    line = bug_line(PLUGIN)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.splitlines() == [
        f"ex.hlo: error: pass 'buggy' failed: KeyError: 'oops' "
        f"(at my_pass.py:{line} in match_and_rewrite{HINT})"
    ], p.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_plugin_crash_traceback_on_request(work: Path, how: str) -> None:
    args = ["ex.hlo", "--load-pass-plugin", "my_pass.py", "-p", "buggy"]
    p = opt(args + (["--traceback"] if how == "flag" else []), work, traceback_env=how == "env")
    line = bug_line(PLUGIN)
    assert p.returncode == 1
    assert "Traceback (most recent call last):" in p.stderr
    assert f'my_pass.py", line {line}, in match_and_rewrite' in p.stderr
    assert 'table["oops"] += 1' in p.stderr  # the source line, as Python shows it
    assert p.stderr.splitlines()[-1] == (
        f"ex.hlo: error: pass 'buggy' failed: KeyError: 'oops' "
        f"(at my_pass.py:{line} in match_and_rewrite)"
    )


def test_entry_point_crash_names_the_line_in_the_package(work: Path) -> None:
    site = work / "site"
    p = opt([str(work / "ex.hlo"), "-p", "ep-buggy"], site, site=site)
    line = bug_line(EP_HELPERS)
    assert p.returncode == 1
    (msg,) = p.stderr.splitlines()
    assert msg.startswith(
        f"{work / 'ex.hlo'}: error: pass 'ep-buggy' failed: JSONDecodeError: Expecting "
    ), msg
    assert msg.endswith(f" (at buggy_ep/helpers.py:{line} in settings{HINT})"), msg


def test_entry_point_crash_traceback_on_request(work: Path) -> None:
    site = work / "site"
    p = opt([str(work / "ex.hlo"), "-p", "ep-buggy", "--traceback"], site, site=site)
    line = bug_line(EP_HELPERS)
    assert p.returncode == 1
    assert "Traceback (most recent call last):" in p.stderr
    assert f'helpers.py", line {line}, in settings' in p.stderr
    assert "json" + os.sep + "decoder.py" in p.stderr  # the whole traceback, libraries too
    assert p.stderr.splitlines()[-1].endswith(f"(at buggy_ep/helpers.py:{line} in settings)")


def test_deliberate_diagnostic_stays_one_line(work: Path) -> None:
    for extra in ([], ["--traceback"]):
        p = opt(["ex.hlo", "--load-pass-plugin", "strict.py", "-p", "strict", *extra], work)
        assert p.returncode == 1
        assert p.stderr.splitlines() == ["ex.hlo:4:3: error: strict: this module has no negate"]


def test_plugin_load_crash_traceback_on_request(work: Path) -> None:
    (work / "loads_badly.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    one = opt(["ex.hlo", "--load-pass-plugin", "loads_badly.py"], work)
    assert one.returncode == 1 and "Traceback" not in one.stderr
    assert len(one.stderr.splitlines()) == 1 and "loads_badly.py:2: error:" in one.stderr
    full = opt(["ex.hlo", "--load-pass-plugin", "loads_badly.py", "--traceback"], work)
    assert full.returncode == 1 and "Traceback (most recent call last):" in full.stderr
    assert full.stderr.splitlines()[-1] == one.stderr.splitlines()[0]


def test_python_api_keeps_the_cause(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hlopass
    from hlopass.pipeline import PASSES, PipelineError
    from hlopass.plugins import load_pass_plugin

    monkeypatch.chdir(work)
    registry = dict(PASSES)  # the plug-in's pass leaves with this test
    try:
        load_pass_plugin(str(work / "my_pass.py"))
        module = hlopass.parse_hlo(HLO, "ex.hlo")
        with pytest.raises(
            PipelineError, match=rf"my_pass.py:{bug_line(PLUGIN)} in match_and_rew"
        ) as info:
            hlopass.run_pass(module, "buggy")
    finally:
        PASSES.clear()
        PASSES.update(registry)
    assert isinstance(info.value.__cause__, KeyError)  # Python callers see the original too
