"""`hlopass viz`: draw a module (or a module before and after a pipeline) as DOT, SVG,
a self-contained HTML page or Model Explorer JSON."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence

from hlopass.commands.clirun import error_line
from hlopass.errors import HloError

FORMATS = ("dot", "svg", "html", "me-json")


def build_parser() -> argparse.ArgumentParser:
    from hlopass.commands.clirun import OneLineArgumentParser

    p = OneLineArgumentParser(
        prog="hlopass viz",
        description="Draw an HLO module: instructions coloured by family, fusions and called "
        "computations as clusters, kernels with their estimated time.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="HLO file; two files with --diff")
    p.add_argument("-p", "--passes", default="", help="pipeline to run first (with --diff: "
                   "draw before vs after it)")  # fmt: skip
    p.add_argument("--diff", action="store_true", help="mark what changed between two "
                   "modules (two FILEs, or one FILE and -p)")  # fmt: skip
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from -o's suffix, else dot)")  # fmt: skip
    p.add_argument("--focus", metavar="NAME", help="draw only what is near this instruction")
    p.add_argument("--radius", type=int, default=3, help="edges around --focus (default 3)")
    p.add_argument("--max-nodes", type=int, default=None,
                   help="node budget (default 400; 20000 for me-json)")  # fmt: skip
    from hlopass.cost.cli import device_arg

    p.add_argument("--device", default="h100_sxm", type=device_arg,
                   help="GPU for the cost overlay: a name, alias (h100) or unique prefix "
                   "(default h100_sxm)")  # fmt: skip
    p.add_argument("--no-cost", action="store_true", help="no cost estimates on kernels")
    p.add_argument("--load-pass-plugin", action="append", metavar="FILE.py|MODULE",
                   help="import a pass plug-in before running -p")  # fmt: skip
    p.add_argument("--node-data", metavar="OUT.json",
                   help="with me-json: also write Model Explorer node data (estimated µs)")  # fmt: skip
    p.add_argument("--explain-fusion", action="store_true",
                   help="with -p: colour each fusion apart, mark producers kept out of "
                   "fusion and say why (tooltips, side panel, Model Explorer attributes)")  # fmt: skip
    p.add_argument("--explain-layout", action="store_true",
                   help="with -p: note each dot/convolution's layout choice and the "
                   "estimated time of every candidate")  # fmt: skip
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    return p


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return args.format
    out = (args.output or "").lower()
    for suffix, fmt in ((".svg", "svg"), (".html", "html"), (".htm", "html"), (".json", "me-json")):
        if out.endswith(suffix):
            return fmt
    return "dot"


def usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with this combination of arguments (a usage error), if anything."""
    if len(args.files) > 2 or (len(args.files) == 2 and not args.diff):
        return "two FILEs need --diff (more than two are not drawn together)"
    if args.diff and len(args.files) == 1 and not args.passes:
        return "--diff needs two FILEs or one FILE and -p PIPELINE"
    if (args.explain_fusion or args.explain_layout) and not args.passes:
        return "--explain-fusion/--explain-layout need -p PIPELINE"
    if args.node_data and _format(args) != "me-json":
        return "--node-data needs --format me-json (or -o FILE.json)"
    return None


def viz_main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    problem = usage_problem(args)
    if problem:
        parser.error(problem)  # one line, exit 2
    try:
        text = render(args)
        from hlopass.commands.cli import write_output

        write_output(args.output, text)
    except HloError as e:
        # an error that names no place is about the module drawn (the last FILE)
        print(error_line(e, _shown(args.files[-1])), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _shown(path: str) -> str:
    return "<stdin>" if path == "-" else path


@contextlib.contextmanager
def _about(path: str) -> Iterator[None]:
    """Put `path: ` in front of an error that names no place (one line, as guard does)."""
    try:
        yield
    except HloError as e:
        raise HloError(error_line(e, _shown(path))) from None


def render(args: argparse.Namespace) -> str:
    from hlopass.commands.cli import read_input
    from hlopass.text.importer import parse_hlo
    from hlopass.viz.graph import build_graph

    fmt = _format(args)
    problem = usage_problem(args)
    if problem:
        raise HloError(f"error: {problem}")
    explaining = args.explain_fusion or args.explain_layout
    budget = args.max_nodes or (20000 if fmt == "me-json" else 400)
    device = None if args.no_cost else args.device
    modules = []
    for f in args.files:
        with _about(f):
            modules.append(parse_hlo(read_input(f), _shown(f)))
    if args.passes:
        from hlopass.pipeline import run_pipeline

        for plugin in args.load_pass_plugin or ():
            from hlopass.plugins import load_pass_plugin

            load_pass_plugin(plugin)
        if args.diff and len(modules) == 1:
            modules.insert(0, modules[0].clone())
        if explaining:
            from hlopass.viz.explain import collect

            with _about(args.files[-1]):
                notes = collect(lambda: run_pipeline(modules[-1], args.passes),
                                args.explain_fusion, args.explain_layout)  # fmt: skip
        else:
            with _about(args.files[-1]):
                run_pipeline(modules[-1], args.passes)

    graphs = []
    # with one FILE and -p, both modules are that FILE's (before and after)
    files = args.files * 2 if len(modules) > len(args.files) else args.files
    for f, m in zip(files, modules, strict=True):
        with _about(f):
            graphs.append(build_graph(m, device, args.focus, args.radius, budget))
    if explaining:
        from hlopass.viz.explain import apply

        apply(graphs[-1], notes)
    marks: dict[str, str] | None = None
    if args.diff:
        from hlopass.viz.diff import diff_marks

        marks, removed = diff_marks(graphs[0], graphs[1])
        counts = {k: sum(1 for v in marks.values() if v == k) for k in ("added", "changed")}
        graphs[1].omitted.append(f"diff: {counts['added']} added, {counts['changed']} changed, "
                                 f"{len(removed)} removed" + (f" ({', '.join(removed[:12])}"
                                 f"{', ...' if len(removed) > 12 else ''})" if removed else ""))  # fmt: skip
    if fmt == "me-json":
        from hlopass.viz.me_json import node_data, to_me_json

        labelled = [("before", graphs[0]), ("after", graphs[1])] if args.diff else [
            (graphs[-1].name, graphs[-1])]  # fmt: skip
        if args.node_data:
            from hlopass.commands.cli import write_output

            write_output(args.node_data, node_data(labelled))
        return to_me_json(labelled, marks=marks)
    g = graphs[-1]
    if fmt == "html":
        from hlopass.viz.html import to_html

        return to_html(g, marks)
    from hlopass.viz.dot import to_dot
    from hlopass.viz.svg import render_svg

    dot = to_dot(g, marks)
    return render_svg(dot) if fmt == "svg" else dot
