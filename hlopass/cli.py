"""Command-line entry points: `hlopass-opt` (parse, run passes, print) and `hlopass`.

Every user error ends as one line on stderr (`file:line:col: error: ...` where a place is
known) and exit code 1; never a traceback. Output goes to a temporary file renamed over
`-o`, so a failed run never truncates the input or an existing output.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hlopass.errors import HloError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

SPLIT_MARKER = "// -----"


class UsageError(HloError):
    """Bad command-line usage, reported as one line."""


def _read(path: str) -> str:
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


def write_output(path: str | None, text: str) -> None:
    """Write atomically: a temp file beside the target, then rename."""
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".hlopass-", suffix=".tmp")
    except OSError as e:
        raise UsageError(f"{path}: error: cannot write output: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise UsageError(f"{path}: error: cannot write output: {e.strerror}") from None
        raise


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
    from hlopass.exporter import print_hlo

    return print_hlo(module, style)


def parse_input(text: str, filename: str, emit_from: str = "hlo") -> ModuleOp:
    if emit_from == "xdsl" or text.lstrip().startswith(("builtin.module", '"builtin.module"')):
        from hlopass.xdsl_io import parse_xdsl

        return parse_xdsl(text, filename)
    from hlopass.importer import parse_hlo

    return parse_hlo(text, filename)


def build_opt_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hlopass-opt",
        description="Parse HLO text, run passes over it, and print it back (HLO or xDSL IR).",
    )
    p.add_argument("input", nargs="?", default="-", help="HLO file ('-' for stdin)")
    p.add_argument("-o", "--output", help="output file (default: stdout)")
    p.add_argument("--emit", choices=("hlo", "xdsl"), default="hlo", help="output format")
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
    p.add_argument("-p", "--passes", default="", help="pass pipeline, e.g. 'dce,cse'")
    p.add_argument("--verify-each", action="store_true", help="verify after every pass")
    p.add_argument("--list-passes", action="store_true", help="list passes and exit")
    p.add_argument("--print-ir-after-all", action="store_true")
    p.add_argument("--print-ir-after-change", action="store_true")
    p.add_argument("--trace-rewrites", action="store_true")
    p.add_argument(
        "--explain-fusion",
        nargs="?",
        const="text",
        choices=("text", "json"),
        help="print every fusion decision (rule or estimated times) on stderr",
    )
    return p


PipelineHook = Callable[["ModuleOp", argparse.Namespace], None]


def _run_pipeline(module: ModuleOp, args: argparse.Namespace) -> None:
    if not args.passes:
        return
    if getattr(args, "explain_fusion", None):
        from hlopass.passes.fusion.explain import explain_sink

        explain_sink.enable(sys.stderr, args.explain_fusion)
    try:
        from hlopass.pipeline import run_pipeline_from_cli
    except ImportError:
        raise UsageError("error: passes are not available in this build") from None
    run_pipeline_from_cli(module, args)


def opt_main(argv: Sequence[str] | None = None) -> int:
    args = build_opt_parser().parse_args(argv)
    try:
        if args.list_passes:
            from hlopass.pipeline import list_passes_text

            sys.stdout.write(list_passes_text())
            return 0
        text = _read(args.input)
        filename = "<stdin>" if args.input == "-" else args.input
        chunks = split_input(text) if args.split_input_file else [(0, text)]
        outputs = []
        for offset, chunk in chunks:
            module = parse_input("\n" * offset + chunk, filename)
            _run_pipeline(module, args)
            outputs.append(emit_module(module, args.emit, args.style))
        write_output(args.output, (SPLIT_MARKER + "\n").join(outputs))
    except HloError as e:
        print(str(e).splitlines()[0] if str(e) else type(e).__name__, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`hlopass SUBCOMMAND ...`: opt, run (interpreter), cost, rank."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "opt": opt_main,
        "run": lambda a: _lazy("hlopass.interpreter.cli", "run_main")(a),
        "cost": lambda a: _lazy("hlopass.cost.cli", "cost_main")(a),
        "rank": lambda a: _lazy("hlopass.cost.cli", "rank_main")(a),
    }
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print("usage: hlopass {opt,run,cost,rank} ...", file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 1
    try:
        return commands[argv[0]](argv[1:])
    except ImportError as e:
        print(f"error: hlopass {argv[0]} is not available: {e}", file=sys.stderr)
        return 1


def _lazy(module: str, name: str) -> Callable[[Sequence[str]], int]:
    import importlib

    return getattr(importlib.import_module(module), name)


if __name__ == "__main__":
    sys.exit(opt_main())
