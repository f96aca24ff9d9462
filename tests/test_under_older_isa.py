"""The semantics tests again, with XLA-CPU held to an older instruction set.

XLA-CPU compiles for the host's features, so a test that compares with it can pass on the
machine it was written on and fail on another (an AVX-512 summation order, FMA contraction,
a hardware bf16 conversion). Running the same tests with `--xla_cpu_max_isa=AVX` (no FMA,
no AVX2, no AVX-512) on every machine that has more proves on each run that their
expectations hold for two instruction sets; tests whose XLA side depends on the set ask
`tests.host_isa`, which reads the cap from XLA_FLAGS.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.host_isa import older_level

ROOT = Path(__file__).resolve().parent.parent
SEMANTICS = (
    "tests/test_interpreter_semantics.py",
    "tests/test_bf16_excess_precision.py",
    "tests/test_xla_cpu_trig.py",
    "tests/test_xla_value_defects.py",
    "tests/test_semantics_vs_xla.py",
)


def test_semantics_hold_under_an_older_isa(xla):
    level = older_level()
    if level is None:
        pytest.skip("this host has neither AVX2 nor FMA: the main run already is the old ISA")
    flags = re.sub(r"--xla_cpu_max_isa=\w+", "", os.environ.get("XLA_FLAGS", ""))
    env = dict(os.environ, XLA_FLAGS=f"{flags} --xla_cpu_max_isa={level}".strip())
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SEMANTICS]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    tail = "\n".join(r.stdout.strip().splitlines()[-30:])
    assert r.returncode == 0, f"under --xla_cpu_max_isa={level}:\n{tail}\n{r.stderr[-2000:]}"
    summary = r.stdout.strip().splitlines()[-1]
    assert re.search(r"\d+ passed", summary) and "failed" not in summary, summary
