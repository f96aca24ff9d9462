"""The one naming rule, `base`, `base.1`, `base.2`, ...: `first_free` gives the lowest one
not yet taken; `claim_name` also takes it into the set and resumes probing there.

The parser names what the text leaves unnamed (inline computations `_`, async wrappers
`async_wrapped`, nested instructions `add.anon`) this way, as XLA does, and passes name
what they create (`NameUniquer` is built on `claim_name`); one module keeps the suffix
format identical everywhere (printed names must not change).
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


def claim_name(root: str, used: set[str], next_n: dict[str, int]) -> str:
    """`root` if `used` lacks it, else `root.N` for the first N free from `next_n[root]`
    on; taken into `used`. Probing resumes where the last claim of `root` stopped, so n
    names of one root cost O(n) probes, not O(n^2)."""
    if root not in used:
        used.add(root)
        return root
    n = next_n.get(root, 1)
    while f"{root}.{n}" in used:
        n += 1
    next_n[root] = n + 1
    name = f"{root}.{n}"
    used.add(name)
    return name
