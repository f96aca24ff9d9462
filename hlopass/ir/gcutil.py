"""The garbage collector paused around bulk IR work (parse, print, pass pipelines).

Parsing and printing allocate hundreds of thousands of acyclic containers that reference
counting frees; with the collector on, every 700 allocations start a generation-0 scan, and
the older generations, which by then hold the whole module, are traversed again and again
(measured: a fresh-process Mixtral parse took 2-3x longer with the collector on). Pausing it
for the duration of one call and restoring the caller's setting on every exit path gives the
fast path to users who never touch `gc`, without changing their process's behaviour after.

What the paused block allocated is still in the youngest generation when the collector comes
back, so the next allocation would start a generation-0 scan of the whole new module (about
a tenth of a parse), and two more scans would follow as it ages. `gc.freeze()` followed by
`gc.unfreeze()` moves every tracked object into the oldest generation without visiting any
(two list splices in CPython); cycles among them are still found by the next full
collection. It is done only when the caller has frozen nothing, so a caller's own
`gc.freeze()` (a pre-fork server's) is never undone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the collector inside the block if it was enabled; re-enable it after, with
    what the block allocated aged into the oldest generation (see the module docstring)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        age_all()
        gc.enable()


def age_all() -> None:
    """Move every object the collector tracks into its oldest generation, visiting none
    (nothing when the caller holds frozen objects, which `unfreeze` would release)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
