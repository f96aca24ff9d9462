"""`VersionMemo`: a value per object, kept while the object's `version` has not moved.

The fusion cost models cache per-kernel answers keyed by `id(kernel)`; a kernel that
grows (a merge) bumps its `version`, and the stale entry must not be served. One class
holds that rule so the copies cannot drift apart (e.g. one forgetting the version check).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

V = TypeVar("V")


class VersionMemo(Generic[V]):
    """Values keyed by `id(obj)`, valid only for the `obj.version` they were stored at.

    Keyed by id, not the object: kernels are mutable and unhashable by value, and the
    caller keeps them alive for the memo's lifetime (one pass run)."""

    __slots__ = ("_d",)

    def __init__(self) -> None:
        self._d: dict[int, tuple[int, V]] = {}

    def get(self, obj: Any) -> V | None:
        """The value stored for `obj` at its current version, else None."""
        hit = self._d.get(id(obj))
        if hit is not None and hit[0] == obj.version:
            return hit[1]
        return None

    def put(self, obj: Any, value: V) -> V:
        """Store `value` for `obj` at its current version; returns it."""
        self._d[id(obj)] = (obj.version, value)
        return value

    def pop(self, obj: Any) -> None:
        """Forget `obj` (whatever its version)."""
        self._d.pop(id(obj), None)

    def clear(self) -> None:
        self._d.clear()
