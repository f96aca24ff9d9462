"""Run XLA's cost analysis on many HLO texts in child processes (XLA may abort)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tests.child_runner import run_batch

CHILD = Path(__file__).with_name("_cost_oracle_child.py")


def xla_costs(texts: list[str], timeout: float = 600) -> list[dict]:
    """For each text: {"cost": {...}} or {"error": message} or {"crash": rc}."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
        path = f.name
    try:
        return run_batch(CHILD, path, len(texts), timeout)
    finally:
        os.unlink(path)
