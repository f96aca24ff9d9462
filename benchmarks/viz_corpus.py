"""`hlopass viz` over every corpus module: does it finish within the node budget, does
Graphviz parse the DOT, does Model Explorer's own graph dataclass (strict) read the JSON?

    python3 benchmarks/viz_corpus.py [--only SUBSTRING] [--svg-every N] [--no-cost]
                                     [--engine auto|dot|wasm]

Each module goes through the CLI's own code path (`hlopass.viz.cli.render` with the parsed
arguments of `hlopass viz FILE --format dot` and `--format me-json`, H100 costs on), one
module per file chunk as `hlopass.checking.corpus.modules` splits them. Graphviz's `gc` parses each
DOT where it is installed (it reads the graph with cgraph, no layout) and its node count
must equal ours; every N-th DOT is also laid out to SVG the way `hlopass viz -o f.svg` does
(`hlopass.viz.svg.render_svg`: `dot` on PATH, else the viz extra's WebAssembly Graphviz;
`--engine wasm` hides `dot` from PATH to time that one) and the SVG must hold every node. Model Explorer's JSON is read with
`dacite.from_dict(model_explorer.graph_builder.GraphCollection, ..., strict=True)` (the
web app's JSON loader takes a collection with a label; tests/test_viz.py opens such files
in Model Explorer in Chromium), every edge must name a node of the graph. Modules that XLA's parser refuses (parser cases marked so) must
be refused with one `error:` line. Prints one line per failure, then counts and times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hlopass.checking.corpus import corpus_root, modules  # noqa: E402
from hlopass.errors import HloError  # noqa: E402
from hlopass.viz import svg  # noqa: E402
from hlopass.viz.cli import build_parser, render  # noqa: E402


def _engine(which: str) -> str | None:
    """Make `svg.render_svg` lay out with `which`; the path of Graphviz's `gc`, if any.
    For 'wasm' every PATH directory holding `dot` is dropped (gc found first)."""
    gc = shutil.which("gc")
    if which == "wasm":
        dirs = os.environ.get("PATH", "").split(os.pathsep)
        os.environ["PATH"] = os.pathsep.join(
            d for d in dirs if not os.path.exists(os.path.join(d, "dot")))  # fmt: skip
    if which != "auto" and svg.engine() != which:
        sys.exit(f"viz_corpus: error: the {which} layout engine is not available")
    return gc


def _me_loader():
    try:
        import dacite
        from model_explorer import graph_builder
    except ImportError:
        return None

    def load(text: str) -> int:
        # the web app's JSON loader takes a collection: {"label": ..., "graphs": [...]}
        data = json.loads(text)
        assert isinstance(data.get("label"), str), "no collection label"
        coll = dacite.from_dict(graph_builder.GraphCollection, data,
                                config=dacite.Config(strict=True))  # fmt: skip
        n = 0
        for g in coll.graphs:
            ids = {node.id for node in g.nodes}
            for node in g.nodes:
                for e in node.incomingEdges:
                    assert e.sourceNodeId in ids, f"edge from unknown node {e.sourceNodeId}"
            n += len(ids)
        return n

    return load


def _xla_refuses(m) -> bool:  # noqa: ANN001
    """XLA's parser refuses the chunk, or its verifier does (tests/test_corpus_roundtrip.py
    lists the modules XLA's parser takes but its verifier and XLA:CPU reject)."""
    from hlopass.execution import oracle
    from tests.test_corpus_roundtrip import VERIFIER_REJECTS

    if m.id in VERIFIER_REJECTS:
        return True
    return oracle.available() and not oracle.accepts(m.text)[0]


def _gc_nodes(gc: str, dot: str) -> int:
    p = subprocess.run([gc, "-n"], input=dot, capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or p.stderr.strip():
        raise ValueError(f"Graphviz: {p.stderr.strip()[:200]}")
    return int(p.stdout.split()[0])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="modules whose id contains this")
    ap.add_argument("--svg-every", type=int, default=25, help="also lay out every N-th DOT")
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--engine", choices=("auto", "dot", "wasm"), default="auto",
                    help="who lays out the SVGs (auto: as hlopass viz chooses)")  # fmt: skip
    args = ap.parse_args()
    gc = _engine(args.engine)
    print(f"layout by {svg.engine()}; DOT parse check by "
          f"{gc or 'nothing (no Graphviz gc on PATH)'}")  # fmt: skip
    root = corpus_root()
    if root is None:
        print("needs the corpus (../shared/corpus)")
        return 0
    load_me = _me_loader()
    accepts: dict[str, bool] = {}
    parser_cases = root / "xla_parser_tests.json"
    for case in json.loads(parser_cases.read_text()):
        accepts[f"parser/{case['name']}"] = bool(case.get("xla_accepts", True))
    tmp = Path(tempfile.mkdtemp())
    refused: list[str] = []
    counts = {"modules": 0, "dot_ok": 0, "me_ok": 0, "svg_ok": 0, "refused_ok": 0, "fail": 0}
    times: list[tuple[float, str]] = []
    layouts: list[tuple[float, str]] = []
    max_dot_nodes = max_me_nodes = 0
    t_all = time.perf_counter()
    for i, m in enumerate(modules(root)):
        if args.only not in m.id:
            continue
        counts["modules"] += 1
        src = tmp / "m.hlo"
        src.write_text(m.text)
        base = [str(src)] + (["--no-cost"] if args.no_cost else [])
        t0 = time.perf_counter()
        try:
            dot = render(build_parser().parse_args([*base, "--format", "dot"]))
            me = render(build_parser().parse_args([*base, "--format", "me-json"]))
        except HloError as e:
            line = str(e).splitlines()[0]
            one_line = "error:" in line and len(str(e).splitlines()) == 1
            if one_line and (not accepts.get(m.id, True) or _xla_refuses(m)):
                counts["refused_ok"] += 1
                refused.append(m.id)
            else:
                counts["fail"] += 1
                print(f"FAIL {m.id}: {line}")
            continue
        except Exception as e:  # noqa: BLE001 - a crash is what this looks for
            counts["fail"] += 1
            print(f"CRASH {m.id}: {type(e).__name__}: {e}")
            continue
        dt = time.perf_counter() - t0
        times.append((dt, m.id))
        if not accepts.get(m.id, True):
            counts["fail"] += 1
            print(f"ACCEPTED {m.id}: XLA refuses it")
        try:
            ours = dot.count('[id="n')
            n = _gc_nodes(gc, dot) if gc else ours
            assert n == ours, f"Graphviz read {n} nodes, we wrote {ours}"
            assert 0 < n <= 400, f"{n} nodes (budget 400)"
            max_dot_nodes = max(max_dot_nodes, n)
            counts["dot_ok"] += 1
            if args.svg_every and i % args.svg_every == 0:
                t1 = time.perf_counter()
                picture = svg.render_svg(dot, timeout=600)
                layouts.append((time.perf_counter() - t1, m.id))
                drawn = picture.count('class="node"')
                assert drawn == ours, f"the SVG has {drawn} nodes, the DOT {ours}"
                counts["svg_ok"] += 1
        except Exception as e:  # noqa: BLE001
            counts["fail"] += 1
            print(f"DOT {m.id}: {e}")
        if load_me is not None:
            try:
                k = load_me(me)
                assert 0 < k <= 20000, f"{k} nodes (budget 20000)"
                max_me_nodes = max(max_me_nodes, k)
                counts["me_ok"] += 1
            except Exception as e:  # noqa: BLE001
                counts["fail"] += 1
                print(f"ME-JSON {m.id}: {type(e).__name__}: {str(e)[:200]}")
    total = time.perf_counter() - t_all
    print(json.dumps(counts))
    if refused:
        print(f"refused with one error line, as XLA refuses them: {', '.join(refused)}")
    if times:
        ts = sorted(times)
        print(f"viz (dot + me-json) per module: median {statistics.median(t for t, _ in ts):.2f} s, "
              f"max {ts[-1][0]:.1f} s ({ts[-1][1]}); all {total:.0f} s; largest DOT "
              f"{max_dot_nodes} nodes, largest ME graph {max_me_nodes} nodes")  # fmt: skip
        for t, mid in ts[-5:]:
            print(f"  {t:7.1f} s  {mid}")
    if layouts:
        ls = sorted(layouts)
        print(f"SVG layout ({svg.engine()}) of {len(ls)} modules: median "
              f"{statistics.median(t for t, _ in ls):.2f} s, max {ls[-1][0]:.1f} s "
              f"({ls[-1][1]}), all {sum(t for t, _ in ls):.0f} s")  # fmt: skip
    if load_me is None:
        print("Model Explorer (the viz extra) is not installed: JSON not checked")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
