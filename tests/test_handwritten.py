"""The hand-written modules of `lit_tests/handwritten/` (shapes left out, comments, old and
new styles): our print of each equals XLA's print of the same text, so the lit goldens,
which check our print, say what XLA says. Files expected to fail (`RUN: not`) fail in XLA
too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hlopass.errors import HloError
from hlopass.execution import oracle
from hlopass.text.exporter import print_hlo
from hlopass.text.importer import parse_hlo
from tests.child_runner import run_batch
from tests.conftest import ORACLE_MISSING

DIR = Path(__file__).resolve().parent.parent / "lit_tests" / "handwritten"
FILES = sorted(DIR.glob("*.hlo"))
CHILD = Path(__file__).resolve().parent / "_xla_print_child.py"


@pytest.fixture(scope="module")
def xla_prints(tmp_path_factory):
    if not oracle.available():
        pytest.skip(ORACLE_MISSING)
    manifest = tmp_path_factory.mktemp("handwritten") / "jobs.json"
    manifest.write_text(json.dumps([f.read_text() for f in FILES]))
    answers = run_batch(CHILD, str(manifest), len(FILES), timeout=300)
    return {f.name: a for f, a in zip(FILES, answers, strict=True)}


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_handwritten_prints_as_xla(xla_prints, path):
    text = path.read_text()
    want = xla_prints[path.name]
    if "RUN: not " in text:
        assert "error" in want, "XLA accepts a module the lit test expects to fail"
        with pytest.raises(HloError):
            parse_hlo(text, str(path))
        return
    assert "print" in want, want
    assert print_hlo(parse_hlo(text, str(path))) == want["print"]
