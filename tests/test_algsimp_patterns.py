"""algsimp's pattern list is its families' own lists, assembled.

Each family module (`identities`, `slice`, ...) exports `PATTERNS`, its rewrites in the
order they fire; `algsimp.PATTERNS` runs them in groups among the other families'. These
checks keep the two in step: a rewrite added to a module but to no list, or listed twice,
or a family whose groups the assembly runs out of the family's own order, fails here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

from hlopass.passes import algsimp
from hlopass.passes.algsimp.base import Simplification

NOT_FAMILIES = {"base", "helpers", "barriers"}
"""Modules of the package that hold no family: shared code, and the opt-barrier cleanup
that `algsimp` runs after every pattern of the list."""


def families() -> list[ModuleType]:
    names = sorted(m.name for m in pkgutil.iter_modules(algsimp.__path__))
    return [
        importlib.import_module(f"{algsimp.__name__}.{n}") for n in names if n not in NOT_FAMILIES
    ]


def defined_rewrites(module: ModuleType) -> set[type]:
    """The public Simplifications `module` defines (a private base shared by some of them,
    `_OfTwoExps`, declares no rewrite of its own)."""
    return {
        c
        for c in vars(module).values()
        if inspect.isclass(c)
        and c.__module__ == module.__name__
        and issubclass(c, Simplification)
        and not c.__name__.startswith("_")
    }


def test_each_family_lists_every_rewrite_it_defines_once() -> None:
    for module in families():
        listed = module.PATTERNS
        assert len(set(listed)) == len(listed), f"{module.__name__}: a rewrite listed twice"
        assert set(listed) == defined_rewrites(module), module.__name__


def test_the_assembly_is_the_families_lists_in_their_own_order() -> None:
    every = [c for module in families() for c in module.PATTERNS]
    assert len(algsimp.PATTERNS) == len(set(algsimp.PATTERNS))
    assert set(algsimp.PATTERNS) == set(every)
    position = {c: i for i, c in enumerate(algsimp.PATTERNS)}
    for module in families():
        at = [position[c] for c in module.PATTERNS]
        assert at == sorted(at), f"{module.__name__}: its groups run out of its order"
