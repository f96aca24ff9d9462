"""StableHLO (MLIR) in and out, through XLA's own converters (jaxlib: the `test` extra).

    module = parse_mlir(open("model.mlir").read(), "model.mlir")  # `hlo` ModuleOp
    text = print_stablehlo(module)                                # StableHLO MLIR text

Reading converts MLIR (StableHLO, MHLO or CHLO; what `jax.jit(f).lower(x).as_text()`
gives) to HLO text with the converter jax's `as_text(dialect="hlo")` uses, then parses that
HLO as any other. Writing prints the module as HLO and has XLA translate it to StableHLO,
locations carrying the instruction names, so a re-read keeps them. Both conversions run in
a child process (`python -m hlopass.text.stablehlo`): XLA may abort the process on input its
converter does not expect, and jax is never imported into the caller's process.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

from hlopass.errors import HloError, HloParseError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

NEEDS_JAX = "reading or writing MLIR needs jax (the `test` extra: pip install 'hlopass[test]')"

# what starts an MLIR module's text: `module @m ...`, a bare `func.func`, location aliases
# (`#loc = ...`, printed first with debug info), the generic form `"builtin.module"`
_MLIR_START = re.compile(r'(?:module\b|func\.func\b|#loc\d*\s*=|"builtin\.module")')
# one MLIR diagnostic: `-:3:28: error: ...` (`-`: the buffer given to the converter),
# behind XLA's status code (`UNKNOWN: `) on the first line
_DIAGNOSTIC = re.compile(r'^(?:[A-Z_]+: )?("[^"]*"|[^\s:]+):(\d+):(\d+): error: (.*)$')


def looks_like_mlir(text: str, filename: str = "") -> bool:
    """MLIR by its first line that is not a `//` comment, else by the `.mlir` suffix. HLO
    text (`HloModule`) and xDSL IR (`builtin.module`, which has its own reader) are not,
    whatever the file is called."""
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("//"):
            if line.startswith(("HloModule", "builtin.module")):
                return False
            if _MLIR_START.match(line):
                return True
            break
    return filename.endswith(".mlir")


def mlir_to_hlo_text(text: str, filename: str = "<mlir>", isolate: bool = True) -> str:
    """XLA's HLO text for an MLIR module (no metadata, as jax prints it)."""
    return _convert("to-hlo", text, filename, isolate)


def parse_mlir(text: str, filename: str = "<mlir>", isolate: bool = True) -> ModuleOp:
    """An MLIR module (StableHLO/MHLO text) as an `hlo` ModuleOp. `isolate=False` converts
    in this process (which then imports jax), for a caller that converts many."""
    from hlopass.text.importer import parse_hlo

    hlo = mlir_to_hlo_text(text, filename, isolate)
    try:
        return parse_hlo(hlo, f"{filename} (as HLO)")
    except HloParseError as e:  # XLA made HLO of it that our parser refuses
        raise HloError(
            f"{filename}: error: the HLO XLA makes of it does not import: {e.message} "
            f"(line {e.line} of that HLO)"
        ) from None


def print_stablehlo(module: ModuleOp, where: str = "<module>", isolate: bool = True) -> str:
    """The module as StableHLO MLIR text (XLA's translation of its HLO print); `where`
    names it in an error."""
    from hlopass.text.exporter import print_hlo

    return hlo_text_to_stablehlo(print_hlo(module), where, isolate)


def hlo_text_to_stablehlo(text: str, where: str = "<hlo>", isolate: bool = True) -> str:
    """StableHLO MLIR text for HLO text (XLA's translation, functions named as jax names
    them: see `plain_function_names`)."""
    return plain_function_names(_convert("to-stablehlo", text, where, isolate))


_PRIVATE_FUNC = re.compile(r"func\.func private @([A-Za-z_][\w$.\-]*)\(")
_SYMBOL_USE = re.compile(r"@([A-Za-z_][\w$.\-]*)(?![\w$.\-])")


def plain_function_names(mlir: str) -> str:
    """`mlir` with each private function's trailing `.N` dropped where the shorter name is
    free. HLO-to-StableHLO names a function after its computation (`relu.1`) and the way
    back appends a number again (`relu.1.1`): names would grow by one suffix per round trip.
    Without the suffix the function reads back under the computation's own name, as jax's
    `@relu` reads as `relu.1`."""
    taken = set(_SYMBOL_USE.findall(mlir))
    renames: dict[str, str] = {}
    for name in _PRIVATE_FUNC.findall(mlir):
        base, dot, number = name.rpartition(".")
        if dot and number.isdigit() and base not in taken:
            renames[name] = base
            taken.add(base)
    if not renames:
        return mlir
    return _SYMBOL_USE.sub(lambda m: "@" + renames.get(m[1], m[1]), mlir)


def _convert(kind: str, text: str, filename: str, isolate: bool = True) -> str:
    """Run one conversion, in a child process unless `isolate=False` (for a process that
    has jax loaded already and can afford an abort, such as a test's child)."""
    import importlib.util

    if importlib.util.find_spec("jax") is None:
        raise HloError(f"{filename}: error: {NEEDS_JAX}")
    reply = _convert_here(kind, text) if not isolate else _convert_in_child(kind, text, filename)
    if "error" in reply:
        raise HloError(diagnostic_line(reply["error"], filename))
    return reply["text"]


def _convert_in_child(kind: str, text: str, filename: str) -> dict[str, str]:
    import json
    import subprocess
    from pathlib import Path

    env = dict(os.environ, JAX_PLATFORMS="cpu", OPENBLAS_NUM_THREADS="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # XLA's start-up chatter on stderr
    root = str(Path(__file__).resolve().parents[2])  # a checkout run without install too
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "hlopass.text.stablehlo", kind],
        input=text.encode("utf-8"),
        capture_output=True,
        env=env,
    )
    try:
        return json.loads(proc.stdout.decode("utf-8"))
    except ValueError:
        how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        why = f": {tail[0]}" if tail else ""
        raise HloError(f"{filename}: error: XLA's MLIR converter died ({how}){why}") from None


def _convert_here(kind: str, text: str) -> dict[str, str]:
    """`{"text": result}` or `{"error": XLA's message}`."""
    try:
        from hlopass.execution import oracle

        convert = oracle.mlir_to_hlo if kind == "to-hlo" else oracle.hlo_to_stablehlo
        return {"text": convert(text)}
    except ImportError:
        return {"error": NEEDS_JAX}
    except Exception as e:  # XLA raises its runtime error / ValueError with the diagnostics
        return {"error": str(e) or type(e).__name__}


def diagnostic_line(message: str, filename: str) -> str:
    """One `file:line:col: error: ...` line for a converter's error message: its first MLIR
    diagnostic with a place (the buffer `-` is `filename`; line 0 has no place)."""
    for line in message.splitlines():
        m = _DIAGNOSTIC.match(line.strip())
        if m is None:
            continue
        where, row, col, what = m.groups()
        where = filename if where == "-" else where.strip('"')
        return f"{where}: error: {what}" if row == "0" else f"{where}:{row}:{col}: error: {what}"
    lines = [s.strip() for s in message.splitlines() if s.strip()]
    first = re.sub(r"^[A-Z_]+: ", "", lines[0]) if lines else "XLA refused the MLIR"
    return f"{filename}: error: {first}"


def _child(kind: str) -> int:
    """The child's side: text on stdin, one JSON object `{"text"}` or `{"error"}` on stdout."""
    import json

    text = sys.stdin.buffer.read().decode("utf-8")
    sys.stdout.write(json.dumps(_convert_here(kind, text)))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
