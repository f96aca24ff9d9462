"""Every corpus module: parse, print, compare byte for byte with XLA's own print of it."""

from __future__ import annotations

import difflib

import pytest

from hlopass import oracle
from hlopass.corpus import modules
from hlopass.exporter import print_hlo
from hlopass.importer import parse_hlo
from tests.conftest import CORPUS, CORPUS_MISSING, ORACLE_MISSING

MODULES = modules(CORPUS) if CORPUS is not None else []


def _diff(want: str, got: str) -> str:
    lines = difflib.unified_diff(want.splitlines(), got.splitlines(), "xla", "hlopass", n=1)
    return "\n".join(list(lines)[:40])


@pytest.mark.skipif(CORPUS is None, reason=CORPUS_MISSING)
@pytest.mark.skipif(not oracle.available(), reason=ORACLE_MISSING)
@pytest.mark.parametrize("m", MODULES, ids=[m.id for m in MODULES])
def test_byte_identical_to_xla(m):
    ok, why = oracle.accepts(m.text)
    if not ok:
        pytest.skip(f"XLA itself rejects this chunk: {why}")
    want = oracle.reprint(m.text)
    got = print_hlo(parse_hlo(m.text, str(m.path)))
    assert got == want, _diff(want, got)
