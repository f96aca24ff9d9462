"""A lit configuration for golden tests of HLO passes, shipped with hlopass.

A pass author's whole `lit.cfg` (next to their `.hlo` tests):

    from hlopass.checking.lit_config import configure
    configure(config, plugins=["my_passes.py"])   # plug-ins: paths relative to lit.cfg

and a test:

    // RUN: hlopass-opt %s -p my-pass | filecheck %s
    // CHECK-LABEL: ENTRY
    ...

Run with `lit -v tests/`. `configure` sets the suite's format (shell tests, `.hlo`
files), passes PATH, HOME and the virtual environment through, and defines:

- `%hlopass-opt` / `hlopass-opt`: `hlopass-opt` with every plug-in loaded, so tests need
  no `--load-pass-plugin` of their own;
- `%filecheck` / `filecheck`: the FileCheck implementation installed with the `test` extra;
- `%corpus`: the hlopass corpus folder where it is known (`$HLOPASS_CORPUS`).

`hlopass-opt FILE --generate-checks` writes the CHECK lines for a new test.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import Any

PASSED_THROUGH = ("PATH", "HOME", "HLOPASS_CORPUS", "VIRTUAL_ENV", "PYTHONPATH", "TMPDIR")


def _tool(name: str) -> str:
    """The tool installed beside this interpreter (a venv's bin), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else (shutil.which(name) or name)


def configure(
    config: Any,
    plugins: Sequence[str] = (),
    suffixes: Sequence[str] = (".hlo",),
    name: str | None = None,
) -> None:
    """Fill lit's `config` object for a suite of HLO golden tests (see the module doc)."""
    import lit.formats  # lit is a test dependency; imported only where lit runs

    # lit runs lit.cfg with `__file__` among its globals; the suite's root (lit's default
    # test_source_root) is that folder, and plug-in paths are relative to it.
    cfg_file = sys._getframe(1).f_globals.get("__file__")
    root = getattr(config, "test_source_root", None) or (
        os.path.dirname(os.path.abspath(cfg_file)) if cfg_file else os.getcwd())  # fmt: skip
    if name or getattr(config, "name", None) in (None, "", "<unnamed>"):  # lit's default
        config.name = name or "hlo-passes"
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = list(suffixes)
    config.excludes = list(getattr(config, "excludes", [])) + ["lit.cfg", "lit.cfg.py"]
    config.environment["PYTHONIOENCODING"] = "utf-8"
    for var in PASSED_THROUGH:
        if var in os.environ:
            config.environment[var] = os.environ[var]
    opt = [_tool("hlopass-opt")]
    for plugin in plugins:
        path = plugin if os.path.isabs(plugin) else os.path.join(root, plugin)
        opt += ["--load-pass-plugin", path if os.path.exists(path) else plugin]
    opt_cmd = " ".join(shlex.quote(a) for a in opt)
    filecheck = shlex.quote(_tool("filecheck"))
    # Longer names first: lit substitutes in order, and `%hlopass-opt` contains no other key.
    config.substitutions.append(("%hlopass-opt", opt_cmd))
    config.substitutions.append(("%filecheck", filecheck))
    corpus = os.environ.get("HLOPASS_CORPUS")
    if corpus:
        config.substitutions.append(("%corpus", corpus))
    if plugins:  # plain `hlopass-opt` in RUN lines gets the plug-ins too
        config.substitutions.append((r"(?<![%\w/.-])hlopass-opt(?![\w-])", opt_cmd))
