"""The docs a newcomer needs are reachable: the README links every page of `docs/`, and
every relative link in the README and the docs names a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def links(page: Path) -> list[str]:
    return [m for m in LINK.findall(page.read_text()) if "://" not in m]


def test_readme_links_every_doc() -> None:
    linked = {(ROOT / m).resolve() for m in links(ROOT / "README.md")}
    missing = [d.name for d in DOCS if d.resolve() not in linked]
    assert not missing, f"README.md links none of {missing}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = [m for m in links(page) if not (page.parent / m).exists()]
    assert not broken, f"{page.name}: broken links {broken}"
