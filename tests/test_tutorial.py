"""docs/TUTORIAL.md runs as written: every code block, in order, in a fresh folder.

Fences: ```python blocks run in one namespace (as a reader's session would); ```python
file=NAME and ```text file=NAME blocks are written to NAME; ```sh blocks run with bash -e;
```toml blocks are shown, not run (the entry-point route is tested in
test_researcher_loop.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "TUTORIAL.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.M | re.S)


def blocks() -> list[tuple[str, str, str]]:
    """(language, info after the language, body) of each fenced block, in order."""
    return [
        (m.group(1), m.group(2).strip(), m.group(3)) for m in FENCE.finditer(TUTORIAL.read_text())
    ]


def test_tutorial_has_every_kind_of_block():
    kinds = {(lang, info.startswith("file=")) for lang, info, _ in blocks()}
    assert {("python", True), ("python", False), ("sh", False), ("text", True)} <= kinds


def test_tutorial_runs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("jax", reason="the tutorial's JAX section needs the test extra")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    namespace: dict = {"__name__": "__tutorial__"}
    for n, (lang, info, body) in enumerate(blocks()):
        if info.startswith("file="):
            target = tmp_path / info.removeprefix("file=")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        elif lang == "python":
            exec(compile(body, f"{TUTORIAL.name}[block {n}]", "exec"), namespace)
        elif lang == "sh":
            proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], env=env,
                                  capture_output=True, text=True, timeout=600)  # fmt: skip
            assert proc.returncode == 0, f"block {n} failed:\n{body}\n{proc.stdout}\n{proc.stderr}"
            assert "Traceback" not in proc.stderr
    out = capsys.readouterr().out
    assert " maximum(%a, %b)" in out
    assert "equivalent" in out and "NOT" not in out
    # the golden tests the tutorial made: one fires, one must not; both passed under lit
    assert (tmp_path / "golden" / "fires.hlo").read_text().count("CHECK-NEXT") >= 3
