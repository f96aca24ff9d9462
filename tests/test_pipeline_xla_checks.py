"""XLA's own hlo-opt FileCheck tests for algsimp/dce, run through our passes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hlopass.exporter import print_hlo
from hlopass.importer import parse_hlo
from hlopass.pipeline import run_pipeline

# (file in xla_tests, pipeline, FileCheck prefix)
CASES = [
    ("hlo__transforms__tests__algebraic_simplifier.hlo", "algsimp", "CHECK"),
    ("hlo__tools__tests__hlo_opt_dump.hlo", "dce,algsimp", "MODULE_WITH_LARGE_CONSTANTS"),
    ("hlo__tools__tests__hlo_opt_debug_options_parse_test.hlo", "dce,algsimp",
     "MODULE_WITH_LARGE_CONSTANTS"),
]  # fmt: skip


@pytest.mark.parametrize("name,pipeline,prefix", CASES, ids=[c[0] for c in CASES])
def test_xla_check_lines_hold(name: str, pipeline: str, prefix: str, corpus: Path) -> None:
    path = corpus / "xla_tests" / name
    if not path.is_file():
        pytest.skip(f"{name} is not in this corpus")
    filecheck = shutil.which("filecheck") or shutil.which("FileCheck")
    if filecheck is None:
        pytest.skip("filecheck is not installed (`test` extra)")
    module = parse_hlo(path.read_text(), str(path))
    run_pipeline(module, pipeline, verify_each=True)
    out = print_hlo(module)
    r = subprocess.run([filecheck, str(path), f"--check-prefix={prefix}"], input=out,
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
