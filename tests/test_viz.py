"""`hlopass viz`: the graph model, DOT golden output (Graphviz parses it), SVG, the HTML page
in a real browser, Model Explorer JSON (its own dataclasses read it) and the diff view."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hlopass
from hlopass.viz.dot import to_dot
from hlopass.viz.graph import build_graph, family
from hlopass.viz.me_json import node_data, to_me_json

BIN = Path(sys.executable).parent
HLOPASS = str(BIN / "hlopass")

SMALL = """HloModule small

fused_add {
  p0 = f32[4]{0} parameter(0)
  p1 = f32[4]{0} parameter(1)
  ROOT a = f32[4]{0} add(p0, p1)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  f = f32[4]{0} fusion(x, y), kind=kLoop, calls=fused_add
  ROOT t = f32[4]{0} transpose(f), dimensions={0}
}
"""

# Written by hand from SMALL: what the DOT must say (node ids in definition order, the
# fusion as a cluster whose parameters take the fusion's operands, shapes on edges).
SMALL_DOT_LINES = [
    'n0 [id="n0", label="x\\nparameter\\nf32[4]{0}", fillcolor="#ffcc80", fontcolor="black", '
    'tooltip="%x = f32[4]{0} parameter(0)", shape=ellipse];',
    "subgraph cluster_0 {",
    'n2 [id="n2", label="p0\\nparameter\\nf32[4]{0}", fillcolor="#ffcc80"',
    'n4 [id="n4", label="a\\nadd\\nf32[4]{0}", fillcolor="#f2f2f2"',
    'n5 [id="n5", label="t\\ntranspose\\nf32[4]{0}", fillcolor="#c8e6c9"',
    'n0 -> n2 [label="f32[4]{0}"];',
    'n1 -> n3 [label="f32[4]{0}"];',
    'n2 -> n4 [label="f32[4]{0}"];',
    'n4 -> n5 [label="f32[4]{0}"];',
]


def corpus() -> Path:
    from hlopass.corpus import corpus_root

    root = corpus_root()
    if root is None:
        pytest.skip("the corpus (../shared/corpus) is not present")
    return Path(root)


def test_families_follow_xlas_groups():
    assert [family(o) for o in ("add", "dot", "transpose", "reduce", "all-reduce", "while",
                                "parameter", "custom-call")] == [
        "elementwise", "dot", "data", "reduce", "collective", "control", "parameter", "custom"]  # fmt: skip


def test_small_module_dot_golden():
    g = build_graph(hlopass.parse_hlo(SMALL))
    assert set(g.nodes) >= {"main/x", "main/y", "main/t"} and "main/f" not in g.nodes
    assert g.aliases["f"] == "main/f::fused_add/a"
    dot = to_dot(g)
    for line in SMALL_DOT_LINES:
        assert line in dot, line
    assert dot.count("->") == 5  # x->p0, y->p1, p0->a, p1->a, a->t


def test_costs_label_kernels():
    g = build_graph(hlopass.parse_hlo(SMALL), device="h100_sxm")
    assert g.groups["group:main/f"].cost["bound"] == "launch"
    assert "µs launch" in to_dot(g)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (`dot`) is not installed")
def test_graphviz_reads_our_dot_for_corpus_modules(tmp_path):
    root = corpus()
    files = sorted((root / "jax").glob("*/xla_h100_optimized.hlo")) + sorted(
        (root / "seeds").glob("*.hlo")
    )
    for f in files:
        g = build_graph(hlopass.parse_hlo(f.read_text(), str(f)), device="h100_sxm", max_nodes=150)
        assert 0 < len(g.nodes) <= 150
        proc = subprocess.run(["dot", "-Tsvg"], input=to_dot(g), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert proc.returncode == 0 and "<svg" in proc.stdout, (f, proc.stderr[:300])


def test_focus_and_budget_on_mixtral():
    f = corpus() / "xla_tests/tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo"
    module = hlopass.parse_hlo(f.read_text(), str(f))
    whole = build_graph(module, max_nodes=400)
    assert len(whole.nodes) <= 400 and any("not drawn" in o for o in whole.omitted)
    name = "dot.162"  # deep in the first layer: beyond the budget's reach from the root
    assert name not in {n.name for n in whole.nodes.values()}
    near = build_graph(module, focus=name, radius=2)
    assert name in {n.name for n in near.nodes.values()} and len(near.nodes) < 100


def test_model_explorer_json_is_read_by_model_explorer():
    me = pytest.importorskip(
        "model_explorer.graph_builder", reason="the viz extra is not installed"
    )
    dacite = pytest.importorskip("dacite")
    g = build_graph(hlopass.parse_hlo(SMALL), device="h100_sxm")
    data = json.loads(to_me_json([("small", g)]))
    graph = dacite.from_dict(me.Graph, data["graphs"][0], config=dacite.Config(strict=True))
    ids = {n.id for n in graph.nodes}
    assert ids == set(g.nodes)
    fused = [n for n in graph.nodes if n.namespace == "f"]
    assert {n.label for n in fused} == {"parameter", "add"}
    for n in graph.nodes:
        assert all(e.sourceNodeId in ids for e in n.incomingEdges)
    nd = json.loads(node_data([("small", g)]))
    assert nd["small"]["results"]["main/f::fused_add/a"]["value"] > 0


def test_viz_cli_formats_and_errors(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(SMALL)
    p = subprocess.run([HLOPASS, "viz", str(src)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith('digraph "small"')
    out = tmp_path / "m.json"
    p = subprocess.run([HLOPASS, "viz", str(src), "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0 and "graphs" in json.loads(out.read_text())
    p = subprocess.run(
        [HLOPASS, "viz", str(src), "--focus", "nope"], capture_output=True, text=True
    )
    assert (
        p.returncode == 1
        and p.stderr.count("\n") == 1
        and "no instruction named 'nope'" in p.stderr
    )
    p = subprocess.run([HLOPASS, "viz", str(src), str(src)], capture_output=True, text=True)
    assert p.returncode == 1 and "--diff" in p.stderr


def test_diff_marks_added_changed_removed(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(SMALL.replace("ROOT t = f32[4]{0} transpose(f), dimensions={0}",
                                 "n = f32[4]{0} negate(f)\n  ROOT t = f32[4]{0} negate(n)"))  # fmt: skip
    p = subprocess.run([HLOPASS, "viz", str(src), "-p", "algsimp", "--diff", "--format", "dot"],
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "diff: 0 added, 0 changed, 2 removed (n, t)" in p.stdout  # negate(negate(f)) -> f


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (`dot`) is not installed")
def test_html_page_draws_nodes_in_a_real_browser(tmp_path):
    browser = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    if browser is None:
        pytest.skip("no Chromium on this machine (CI installs Debian's chromium)")
    root = corpus()
    cases = [(root / "seeds/001_c2c20f964a2c12a7.hlo", []),
             (root / "xla_tests/tools__benchmarks__hlo__hlo_mixtral_8x7b_bf16_2x8.hlo",
              ["--focus", "dot.162", "--radius", "3"])]  # fmt: skip
    for src, extra in cases:
        page = tmp_path / (src.stem + ".html")
        p = subprocess.run([HLOPASS, "viz", str(src), "-o", str(page), *extra], capture_output=True,
                           text=True, timeout=900)  # fmt: skip
        assert p.returncode == 0, p.stderr
        html = page.read_text()
        assert "http://" not in html.replace("http://www.w3.org", "")  # self-contained
        dom = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                              "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                             capture_output=True, text=True, timeout=300)  # fmt: skip
        drawn = dom.stdout.count('class="node"')
        assert drawn > 10, (src.name, dom.stderr[-500:])
        shot = tmp_path / (src.stem + ".png")
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--screenshot={shot}", "--window-size=1200,900", page.as_uri()],
                       capture_output=True, timeout=300)  # fmt: skip
        assert shot.exists() and shot.stat().st_size > 20_000  # a blank 1200x900 page is ~5 KB


def test_model_explorer_adapter_converts_a_seed():
    pytest.importorskip("model_explorer", reason="the viz extra is not installed")
    from hlopass.viz.model_explorer import HloAdapter

    seed = corpus() / "seeds/000_887393ea171d6a40.hlo"
    graphs = HloAdapter().convert(str(seed), {"device": "h100"})["graphs"]
    nodes = graphs[0].nodes
    assert len(nodes) > 300
    assert any(n.namespace.startswith("fusion") for n in nodes)  # fusions are namespaces
    assert any(a.key == "estimated_us" for n in nodes for a in n.attrs)
