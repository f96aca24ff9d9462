"""typings/hlopass/ mirrors the installed hlopass package for pyright (pyproject's stubPath).

dialects/ and passes/ install as hlopass.dialects / hlopass.passes through package-dir, which
pyright cannot follow; the committed link tree spells that layout out. A new top-level module
or package in hlopass/ with no link here would silently fall out of type checking, so the tree
must hold exactly one relative link per entry of hlopass/ plus dialects and passes, each
resolving to its source.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINKS = ROOT / "typings" / "hlopass"
# link name -> the source it stands for, relative to the repo root
EXTRA = {"dialects": "dialects", "passes": "passes"}


def _expected() -> dict[str, Path]:
    out = {
        p.name: p
        for p in (ROOT / "hlopass").iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix in (".py", ".pyi")
    }
    out.update({name: ROOT / src for name, src in EXTRA.items()})
    return out


def test_link_tree_mirrors_hlopass() -> None:
    actual = {p.name for p in LINKS.iterdir()}
    assert actual == set(_expected()), (
        "typings/hlopass/ must link every entry of hlopass/ plus dialects and passes: "
        f"missing {sorted(set(_expected()) - actual)}, extra {sorted(actual - set(_expected()))}"
    )


def test_every_link_is_relative_and_resolves() -> None:
    for name, target in _expected().items():
        link = LINKS / name
        assert link.is_symlink(), f"{link} is not a symlink"
        assert not os.path.isabs(os.readlink(link)), f"{link} must be a relative link"
        assert link.resolve() == target.resolve(), f"{link} -> {link.resolve()}, not {target}"
