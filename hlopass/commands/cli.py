"""Command-line entry points: `hlopass-opt` (parse, run passes, print) and `hlopass`.

Every user error ends as one line on stderr (`file:line:col: error: ...` where a place is
known) and exit code 1; never a traceback. `-o` is written by `hlopass.commands.output.write_output`:
a failed run never truncates the input or an existing output, and a device, FIFO or
symbolic link at the path is written through, never replaced.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from hlopass.commands.clirun import OneLineArgumentParser, guard
from hlopass.commands.output import write_output
from hlopass.errors import HloError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

SPLIT_MARKER = "// -----"


class UsageError(HloError):
    """Bad command-line usage, reported as one line."""


def read_input(path: str) -> str:
    if path == "-":
        try:
            return sys.stdin.read()
        except UnicodeDecodeError:
            raise UsageError("<stdin>: error: input is not UTF-8 text") from None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"{path}: error: cannot read file: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(_not_utf8(path)) from None


def _not_utf8(path: str) -> str:
    """`file:line:col: error: ...` at the first byte that is not UTF-8."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start
        line_start = data.rfind(b"\n", 0, at) + 1
        line = data.count(b"\n", 0, at) + 1
        col = len(data[line_start:at].decode("utf-8", "replace")) + 1
        return f"{path}:{line}:{col}: error: file is not UTF-8 text (byte 0x{data[at]:02x})"
    return f"{path}: error: file is not UTF-8 text"


def split_input(text: str) -> list[tuple[int, str]]:
    """Chunks between `// -----` lines as (line offset, text); offsets keep error lines true."""
    chunks: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for line, raw in enumerate(text.splitlines(keepends=True)):
        if raw.startswith(SPLIT_MARKER):
            chunks.append((start, "".join(current)))
            current = []
            start = line + 1
        else:
            current.append(raw)
    chunks.append((start, "".join(current)))
    return chunks


def emit_module(module: ModuleOp, emit: str, style: str) -> str:
    if emit == "xdsl":
        from io import StringIO

        from xdsl.printer import Printer

        buf = StringIO()
        Printer(stream=buf).print_op(module)
        return buf.getvalue() + "\n"
    if emit == "stablehlo":  # XLA's translation of the HLO print (needs jax)
        from hlopass.text.stablehlo import print_stablehlo

        return print_stablehlo(module, "<output>")
    from hlopass.text.exporter import print_hlo

    return print_hlo(module, style)


def _is_xdsl(text: str) -> bool:
    return text.lstrip().startswith(("builtin.module", '"builtin.module"'))


def parse_input(text: str, filename: str, emit_from: str = "hlo", verify: bool = True) -> ModuleOp:
    if emit_from == "xdsl" or _is_xdsl(text):
        from hlopass.text.xdsl_io import parse_xdsl

        return parse_xdsl(text, filename)
    from hlopass.text.stablehlo import looks_like_mlir, parse_mlir

    if looks_like_mlir(text, filename):  # StableHLO/MHLO, through XLA's converter
        return parse_mlir(text, filename)
    from hlopass.text.importer import parse_hlo

    return parse_hlo(text, filename, verify)


def parse_inputs(text: str, filename: str, verify: bool = True) -> list[ModuleOp]:
    """The modules of one input: one HLO module, or each HLO module of xDSL IR (where
    `xdsl-opt` wraps the modules of a split input in an outer `builtin.module`)."""
    if _is_xdsl(text):
        from hlopass.text.xdsl_io import parse_xdsl_modules

        return parse_xdsl_modules(text, filename)
    return [parse_input(text, filename, verify=verify)]


def build_opt_parser() -> argparse.ArgumentParser:
    p = OneLineArgumentParser(
        prog="hlopass-opt",
        description="Parse HLO text, run passes over it, and print it back (HLO or xDSL IR).",
    )
    _add_io_options(p)
    _add_pipeline_options(p)
    _add_info_options(p)
    _add_debug_options(p)
    return p


def _add_io_options(p: argparse.ArgumentParser) -> None:
    """What is read and how it is written."""
    p.add_argument(
        "input", nargs="?", default="-", help="HLO or StableHLO (.mlir) file ('-' for stdin)"
    )
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    p.add_argument(
        "--emit",
        choices=("hlo", "xdsl", "stablehlo"),
        default="hlo",
        help="output format (stablehlo: StableHLO MLIR, by XLA's translation; needs jax)",
    )
    p.add_argument(
        "--style",
        choices=("default", "long", "short"),
        default="default",
        help="HLO print style: XLA's default, long (typed operands) or short",
    )
    p.add_argument(
        "--split-input-file",
        action="store_true",
        help="treat '// -----' lines as separators of independent modules",
    )


def _add_pipeline_options(p: argparse.ArgumentParser) -> None:
    """The passes and how strictly the module is checked around them."""
    p.add_argument("-p", "--passes", default="", help="pass pipeline, e.g. 'dce,cse'")
    p.add_argument(
        "--verify-each",
        action="store_true",
        help="verify the module first and after every pass that changed it (as XLA's pipeline)",
    )
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="read what XLA's parser reads: no shape verification while parsing (as hlo-opt "
        "on XLA's own test inputs); --verify-each still verifies",
    )
    p.add_argument(
        "--allow-mixed-precision",
        action="store_true",
        help="accept elementwise ops on floats of different precisions (minimum(f16, f32)), "
        "as XLA's verifier with allow_mixed_precision",
    )


def _add_info_options(p: argparse.ArgumentParser) -> None:
    """Listing passes, plug-ins and what a run reports about itself."""
    p.add_argument("--list-passes", action="store_true", help="list passes and exit")
    p.add_argument(
        "--print-pipeline",
        action="store_true",
        help="print the -p pipeline with every named pipeline (e.g. gpu) expanded into its "
        "passes, and exit: edit that line to swap a pass for your own",
    )
    p.add_argument(
        "--help-pass",
        metavar="NAME",
        help="print a pass's whole documentation (every option, its default and what its "
        "value must be) and exit",
    )
    p.add_argument(
        "--load-pass-plugin",
        action="append",
        metavar="FILE.py|MODULE",
        help="import a pass plug-in (a .py file or a module) first; repeatable",
    )
    p.add_argument(
        "--stats",
        action="store_true",
        help="print on stderr what was read (modules, instructions, print style), what ran "
        "and what was written, and why the output text differs from the input",
    )
    p.add_argument(
        "--traceback",
        action="store_true",
        help="when a pass or plug-in crashes, print the whole Python traceback before the "
        "error line (as HLOPASS_TRACEBACK=1)",
    )


def _add_debug_options(p: argparse.ArgumentParser) -> None:
    """Watching the passes work: the IR after them, rewrites, times and decisions."""
    p.add_argument(
        "--print-ir-after-all", action="store_true", help="print the module after every pass"
    )
    p.add_argument(
        "--print-ir-after-change",
        nargs="?",
        const="full",
        choices=("full", "diff"),
        help="print the module after each pass that changed it; =diff: a unified diff of "
        "the changed computations only",
    )
    p.add_argument(
        "--trace-rewrites",
        action="store_true",
        help="print each rewrite (pattern, its rule, where) and counts per pattern at the end",
    )
    p.add_argument("--time-passes", action="store_true", help="print wall time per pass at the end")
    p.add_argument(
        "--generate-checks",
        action="store_true",
        help="print FileCheck CHECK lines for the output (captured names) instead of the IR",
    )
    p.add_argument(
        "--explain-layout",
        action="store_true",
        help="layout-assignment prints each cluster's candidate plans and times (stderr)",
    )
    p.add_argument(
        "--explain-fusion",
        nargs="?",
        const="text",
        choices=("text", "json"),
        help="print every fusion decision (rule or estimated times) on stderr",
    )


PipelineHook = Callable[["ModuleOp", argparse.Namespace], None]


def _runner(args: argparse.Namespace) -> Any:
    """One pass runner for all input chunks (None without a pipeline or plug-ins)."""
    if not args.passes and not args.load_pass_plugin:
        return None
    if getattr(args, "explain_fusion", None):
        from hlopass.passes.fusion.explain import explain_sink

        explain_sink.enable(sys.stderr, args.explain_fusion)
    try:
        from hlopass.pipeline import runner_from_cli
    except ImportError:
        raise UsageError("error: passes are not available in this build") from None
    if getattr(args, "explain_layout", False):
        from hlopass.passes.layout.strategy import explain_to

        explain_to(sys.stderr)
    return runner_from_cli(args)


def opt_main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the process's own command
        _one_blas_thread()
    from hlopass.checking.verifier import allow_mixed_precision

    args = build_opt_parser().parse_args(argv)
    with allow_mixed_precision(args.allow_mixed_precision):
        code = guard(lambda: _opt(args), "<stdin>" if args.input == "-" else args.input)
    if argv is None:  # the process's own command (not a call from Python): it ends now
        _no_collection_at_exit()
    return code


def _one_blas_thread() -> None:
    """numpy's OpenBLAS starts a thread per core when numpy is imported, and they spin: about
    50 ms of CPU per `hlopass-opt` process, which never makes a BLAS call big enough to gain
    from threads (constant folding's largest dot is capped by `max-elements`). One thread
    unless the user chose otherwise; before numpy is imported, or it has no effect."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _no_collection_at_exit() -> None:
    """Freeze what is left (the module's graph of cyclic objects, garbage by now), so the
    interpreter's last collection at exit does not traverse and free it object by object:
    about a fifth of a Mixtral round trip's CPU time; the OS takes the memory back at once."""
    import gc

    gc.freeze()


def _opt(args: argparse.Namespace) -> int:
    runner = _runner(args)
    if args.list_passes:
        from hlopass.pipeline import list_passes_text

        sys.stdout.write(list_passes_text())
        return 0
    if args.print_pipeline:
        from hlopass.pipeline import PipelineError, expanded_pipeline

        try:
            print(expanded_pipeline(args.passes))
        except PipelineError as e:  # no input file to name: the command is where it failed
            raise PipelineError(f"hlopass-opt: {e}") from None
        return 0
    if args.help_pass:
        from hlopass.pipeline import help_pass_text

        sys.stdout.write(help_pass_text(args.help_pass))
        return 0
    if args.input == "-" and sys.stdin.isatty():
        print("hlopass-opt: reading HLO from stdin (end with Ctrl-D; --help for usage)",
              file=sys.stderr)  # fmt: skip
    text = read_input(args.input)
    filename = "<stdin>" if args.input == "-" else args.input
    chunks = split_input(text) if args.split_input_file else [(0, text)]
    outputs = []
    stats = _stats(args, filename, text)
    for offset, chunk in chunks:
        for module in parse_inputs("\n" * offset + chunk, filename, not args.no_verify):
            if stats is not None:
                stats.read(module)  # before the passes: what was read
            if runner is not None and args.passes:
                from hlopass.pipeline import run_pipeline_from_cli

                run_pipeline_from_cli(module, args, runner)
            out = emit_module(module, args.emit, args.style)
            if args.generate_checks:
                from hlopass.checking.checkgen import generate_checks

                out = generate_checks(out)
            outputs.append(out)
    written = (SPLIT_MARKER + "\n").join(outputs)
    write_output(args.output, written)
    if runner is not None:
        sys.stderr.write(runner.report())
    if stats is not None:
        stats.report(sys.stderr, written, args.output or "<stdout>", runner)
    return 0


def _stats(args: argparse.Namespace, filename: str, text: str) -> Any:
    """The `--stats` collector (None without the flag)."""
    if not args.stats:
        return None
    from hlopass.commands.opt_stats import OptStats

    return OptStats(filename, text, "checks" if args.generate_checks else args.emit, args.style)


SUBCOMMANDS = {
    "opt": "parse HLO, run a pass pipeline, print it back (same as hlopass-opt)",
    "run": "execute a module with the reference interpreter (inputs/outputs as .npz)",
    "cost": "estimate a module's GPU run time per kernel with the cost model",
    "rank": "rank alternative modules by estimated GPU run time",
    "sweep": "run a pipeline over every module of folders or globs, in parallel",
    "search": "search fusion plans beyond priority-fusion's greedy choices, ranked by time",
    "viz": "draw a module (or before/after a pipeline) as DOT, SVG, HTML or Model Explorer JSON",
}


def _usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = [f"usage: hlopass {{{','.join(SUBCOMMANDS)}}} ...", "", "commands:"]
    lines += [f"  {name:{width}}  {what}" for name, what in SUBCOMMANDS.items()]
    lines += ["", "'hlopass COMMAND --help' describes each command's options."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """`hlopass SUBCOMMAND ...`: opt, run (interpreter), cost, rank."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "opt": opt_main,
        "run": lambda a: _lazy("hlopass.interpreter.cli", "run_main")(a),
        "cost": lambda a: _lazy("hlopass.cost.cli", "cost_main")(a),
        "rank": lambda a: _lazy("hlopass.cost.cli", "rank_main")(a),
        "sweep": lambda a: _lazy("hlopass.sweep.cli", "sweep_main")(a),
        "search": lambda a: _lazy("hlopass.search.cli", "search_main")(a),
        "viz": lambda a: _lazy("hlopass.viz.cli", "viz_main")(a),
    }
    if argv and argv[0] in ("-h", "--help"):
        sys.stdout.write(_usage())
        return 0
    if not argv or argv[0] not in commands:
        from hlopass.pipeline import did_you_mean

        what = (f"unknown command '{argv[0]}'{did_you_mean(argv[0], commands)}" if argv
                else "missing command")  # fmt: skip
        print(f"hlopass: error: {what} (commands: {', '.join(commands)}; hlopass --help)",
              file=sys.stderr)  # fmt: skip
        return 2
    return guard(lambda: commands[argv[0]](argv[1:]), f"hlopass {argv[0]}")


def _lazy(module: str, name: str) -> Callable[[Sequence[str]], int]:
    import importlib

    return getattr(importlib.import_module(module), name)


if __name__ == "__main__":
    sys.exit(opt_main())
