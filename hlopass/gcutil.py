"""The garbage collector paused around bulk IR work (parse, print, pass pipelines).

Parsing and printing allocate hundreds of thousands of acyclic containers that reference
counting frees; with the collector on, every 700 allocations start a generation-0 scan, and
the older generations, which by then hold the whole module, are traversed again and again
(measured: a fresh-process Mixtral parse took 2-3x longer with the collector on). Pausing it
for the duration of one call and restoring the caller's setting on every exit path gives the
fast path to users who never touch `gc`, without changing their process's behaviour after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the collector inside the block if it was enabled; re-enable it after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
