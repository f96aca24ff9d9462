"""Where a pass or plug-in crashed, told in its author's terms.

A bug in a pass (a `KeyError` in its `match_and_rewrite`, say) reaches the user through
frames of hlopass and xDSL (the pipeline, the rewrite walker) and often ends in a library
(numpy): the frame the author needs is the innermost one in the pass's own code.
`crash_site` finds it; `traceback_wanted` says whether the whole traceback was asked for
(`HLOPASS_TRACEBACK=1`, or `--traceback` on the command line).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import sysconfig
import traceback
from types import TracebackType

TRACEBACK_ENV = "HLOPASS_TRACEBACK"


_REQUESTED = [False]
"""Set by `request_tracebacks` (the CLI's `--traceback`), for the whole command."""


def request_tracebacks(on: bool) -> None:
    _REQUESTED[0] = on


def traceback_wanted(flag: bool = False) -> bool:
    """True when the caller (`flag`), the command line or the environment asks for them."""
    return flag or _REQUESTED[0] or bool(os.environ.get(TRACEBACK_ENV))


def _dir_of(module: object) -> str:
    return os.path.dirname(os.path.abspath(getattr(module, "__file__", "") or ""))


@functools.cache
def _internals() -> tuple[str, ...]:
    """Folders of code that is not the pass author's unless it is the pass's own package:
    hlopass, its passes and dialects, xDSL, Python's library and the installed packages."""
    found = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]  # hlopass/
    for name in ("hlopass.passes", "hlopass.dialects", "xdsl"):
        spec = importlib.util.find_spec(name)
        found += list(spec.submodule_search_locations or ()) if spec else []
    found += [sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")]
    return tuple(os.path.abspath(d) + os.sep for d in found if d)


def own_roots(cls: type) -> tuple[str, ...]:
    """The files and folders of the code that defines pass class `cls`: its whole top-level
    package for an installed package, the file alone for a plug-in file or a pass of
    hlopass's or xDSL's own (whose packages are the internals)."""
    name = getattr(cls, "__module__", "") or ""
    module = sys.modules.get(name)
    path = os.path.abspath(getattr(module, "__file__", "") or "")
    if not path:
        return ()
    top = sys.modules.get(name.split(".")[0])
    if top is not None and hasattr(top, "__path__") and top.__name__ not in ("hlopass", "xdsl"):
        return (_dir_of(top) + os.sep,)
    return (path,)


def _frames(tb: TracebackType | None) -> list[tuple[str, int, str]]:
    out = []
    while tb is not None:
        code = tb.tb_frame.f_code
        out.append((os.path.abspath(code.co_filename), tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return out


def crash_site(e: BaseException, roots: tuple[str, ...] = ()) -> str:
    """`file:line in function` of the innermost frame of `e` in `roots` (the pass's own
    code); failing that, the innermost outside hlopass, xDSL and Python's library; failing
    that, the innermost. The file is relative to the current folder when inside it."""
    frames = _frames(e.__traceback__)
    if not frames:
        return ""
    picks = (
        [f for f in frames if any(_within(f[0], r) for r in roots)],
        [f for f in frames if not f[0].startswith(_internals())],
        frames,
    )
    path, line, func = next(p for p in picks if p)[-1]
    return f"{_shown(path)}:{line} in {func}"


def _within(path: str, root: str) -> bool:
    return path == root or (root.endswith(os.sep) and path.startswith(root))


def _shown(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith(os.pardir) else rel


def describe(e: BaseException) -> str:
    """`KeyError: 'oops'`: the exception's type and the first line of its message."""
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0].strip()}" if lines else type(e).__name__


def format_traceback(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__))
