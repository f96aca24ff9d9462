"""The derived tolerances of `hlopass.checking.error_bound`, plus the corpus programs' bounds the tests use.

The analysis itself lives in the library (`hlopass.checking.error_bound`) so that
`hlopass.check_equivalent` compares with the same derived bound as the tests do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlopass.checking.error_bound import (
    K_FN,
    SAFETY,
    NoBound,
    assert_within_bound,
    error_bounds,
    is_float,
    unit_roundoff,
    within_bound,
)

__all__ = [
    "K_FN",
    "SAFETY",
    "NoBound",
    "assert_within_bound",
    "error_bounds",
    "is_float",
    "program_bounds",
    "program_bounds_or_none",
    "unit_roundoff",
    "within_bound",
]


def program_bounds(folder: Any, text: str | None = None) -> list[np.ndarray]:
    """Per-output bounds of a corpus program (`jax/<program>`: its before_optimizations.hlo,
    or `text`, on the inputs of its io.npz). Passes that only move data or regroup work
    (layouts, fusion) leave the arithmetic, so the original module's bound holds for their
    output too. Raises `NoBound` where the analysis has no rule for an op."""
    from pathlib import Path

    from hlopass import parse_hlo

    folder = Path(folder)
    if text is None:
        text = (folder / "before_optimizations.hlo").read_text()
    with np.load(folder / "io.npz") as io:
        args = [io[f"in{i}"] for i in range(sum(k.startswith("in") for k in io.files))]
    return [e for _, e in error_bounds(parse_hlo(text, str(folder)), *args)]


def program_bounds_or_none(folder: Any, text: str | None = None) -> list[np.ndarray] | None:
    """`program_bounds`, or None for a program that `tests.test_interpreter.NO_BOUND_YET`
    lists (the analysis lacks a rule it needs; its callers keep a fixed tolerance for it).
    Any other program without a bound fails the test."""
    from pathlib import Path

    from tests.test_interpreter import NO_BOUND_YET

    try:
        return program_bounds(folder, text)
    except NoBound:
        assert Path(folder).name in NO_BOUND_YET, f"{Path(folder).name}: no derived bound"
        return None
