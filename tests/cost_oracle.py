"""Run XLA's cost analysis on many HLO texts in child processes (XLA may abort)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = Path(__file__).with_name("_cost_oracle_child.py")


def xla_costs(texts: list[str], timeout: float = 600) -> list[dict]:
    """For each text: {"cost": {...}} or {"error": message} or {"crash": rc}."""
    results: list[dict | None] = [None] * len(texts)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(texts, f)
        path = f.name
    try:
        start = 0
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        while start < len(texts):
            proc = subprocess.run([sys.executable, str(CHILD), path, str(start)],
                                  capture_output=True, text=True, timeout=timeout, env=env)  # fmt: skip
            current = start
            for line in proc.stdout.splitlines():
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "start" in msg:
                    current = msg["start"]
                else:
                    results[msg["i"]] = msg
                    current = msg["i"] + 1
            if current >= len(texts):
                break
            if results[current] is None:  # the child died on this one
                results[current] = {"i": current, "crash": proc.returncode,
                                    "stderr": proc.stderr[-300:]}  # fmt: skip
            start = current + 1
    finally:
        os.unlink(path)
    return [r or {"crash": "no result"} for r in results]
