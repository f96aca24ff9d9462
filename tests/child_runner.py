"""Run a batch of XLA jobs in child processes, restarting after a job that aborts XLA.

A child script gets `MANIFEST START`, prints `{"start": i}` and one JSON line `{"i": i, ...}`
per finished job; if it dies, the job it was on is marked as a crash and a new child goes
on with the next one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def run_batch(child: Path, manifest: str, count: int, timeout: float) -> list[dict]:
    """One message per job: the child's own, or `{"i", "crash": rc, "stderr": tail}` for a job
    it died on, or `{"crash": "no result"}` for one never reached."""
    results: list[dict | None] = [None] * count
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    start = 0
    while start < count:
        proc = subprocess.run([sys.executable, str(child), manifest, str(start)],
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
        if current >= count:
            break
        if results[current] is None:  # the child died on this one
            results[current] = {"i": current, "crash": proc.returncode,
                                "stderr": proc.stderr[-300:]}  # fmt: skip
        start = current + 1
    return [r or {"crash": "no result"} for r in results]
