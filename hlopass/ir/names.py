"""`first_free`: the lowest-numbered `base`, `base.1`, `base.2`, ... not yet taken.

The parser names what the text leaves unnamed (inline computations `_`, async wrappers
`async_wrapped`, nested instructions `add.anon`) this way, as XLA does; one helper keeps
the suffix format identical everywhere (printed names must not change).
"""

from __future__ import annotations

from collections.abc import Container


def first_free(base: str, taken: Container[str]) -> str:
    """`base` if not in `taken`, else `base.N` for the first free N >= 1 (not taken here:
    the callers record the name themselves, with what they map it to)."""
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}.{i}"
    return name
