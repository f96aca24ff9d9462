"""Child process of tests/test_stablehlo.py: every piece of jax work for all corpus programs.

argv: MANIFEST START (child_runner's protocol); the manifest is a JSON list of program
names. The programs' definitions come from the corpus's own generator,
/work/shared/tools/make_corpus.py (`$HLOPASS_MAKE_CORPUS`), loaded as a module, not copied.
Per program one JSON line: the StableHLO jax gives (with and without debug info), jax's HLO
and XLA's print of it, and each conversion hlopass makes (in this process: isolate=False).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path


def load_make_corpus():
    path = os.environ.get("HLOPASS_MAKE_CORPUS", "/work/shared/tools/make_corpus.py")
    spec = importlib.util.spec_from_file_location("make_corpus", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one(fn, args) -> dict:
    import jax

    import hlopass.execution.jax as hj
    from hlopass.execution import oracle
    from hlopass.text.exporter import print_hlo
    from hlopass.text.importer import parse_hlo
    from hlopass.text.stablehlo import hlo_text_to_stablehlo, mlir_to_hlo_text

    lowered = jax.jit(fn, keep_unused=True).lower(*args)
    jax_hlo = lowered.as_text(dialect="hlo")
    out: dict[str, object] = {"jax_hlo": jax_hlo, "xla_print": oracle.reprint(jax_hlo)}
    for kind, debug in (("plain", False), ("debug", True)):
        mlir = lowered.as_text(debug_info=debug)
        hlo = mlir_to_hlo_text(mlir, kind, isolate=False)
        # --emit stablehlo of what we read, read back; then once more from that
        mlir2 = hlo_text_to_stablehlo(print_hlo(parse_hlo(hlo, kind)), kind, isolate=False)
        hlo2 = mlir_to_hlo_text(mlir2, kind, isolate=False)
        mlir3 = hlo_text_to_stablehlo(print_hlo(parse_hlo(hlo2, kind)), kind, isolate=False)
        hlo3 = mlir_to_hlo_text(mlir3, kind, isolate=False)
        out[kind] = {"mlir": mlir, "hlo": hlo, "mlir2": mlir2, "hlo2": hlo2, "hlo3": hlo3}
    out["lower"] = print_hlo(hj.lower(fn, *args))
    return out


def main() -> None:
    names = json.loads(Path(sys.argv[1]).read_text())
    start = int(sys.argv[2])
    programs = load_make_corpus().programs()
    for i in range(start, len(names)):
        print(json.dumps({"start": i}), flush=True)
        fn, make = programs[names[i]]
        print(json.dumps({"i": i, **one(fn, make())}), flush=True)


if __name__ == "__main__":
    main()
