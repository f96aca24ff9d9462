"""Unit sizes (issue 35): no class over 400 lines and no function over 80, except the parser's
and printer's measured hot paths, each carrying a comment that names the benchmark paying for
it being one unit. Units still to split have a ceiling that may only go down, so the list
shrinks and never rots (an entry that is gone or back under the limit fails too).

`python tests/test_unit_sizes.py` prints every unit over the limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLASS_LIMIT, FUNCTION_LIMIT = 400, 80

# (file, unit): measured hot paths, allowed over the limit with a benchmark comment above them
HOT_PATHS = {
    ("hlopass/text/parse_instructions.py", "InstructionParser"),
    ("hlopass/text/parse_instructions.py", "instruction_body"),
    ("hlopass/text/parse_values.py", "ValueParser"),
    ("hlopass/text/parse_values.py", "value"),
    ("hlopass/text/exporter.py", "_Printer"),
    ("hlopass/text/exporter.py", "scan"),
}

# (file, unit) -> lines today: still to split (not hot paths); a ceiling that may only go down
TO_SPLIT: dict[tuple[str, str], int] = {}


def oversized() -> dict[tuple[str, str], tuple[int, int]]:
    """(file, unit) -> (lines, first line) of every class or function over its limit."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for top in ("hlopass", "dialects", "passes"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if isinstance(node, ast.ClassDef):
                    limit = CLASS_LIMIT
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    limit = FUNCTION_LIMIT
                else:
                    continue
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > limit:
                    out[(rel, node.name)] = (n, node.lineno)
    return out


def _comment_above(rel: str, line: int) -> str:
    lines = (ROOT / rel).read_text().splitlines()
    above = []
    i = line - 2
    while i >= 0 and lines[i].lstrip().startswith("#"):
        above.append(lines[i])
        i -= 1
    return "\n".join(above)


def test_no_unit_over_the_limit_outside_the_lists() -> None:
    stray = sorted(k for k in oversized() if k not in HOT_PATHS and k not in TO_SPLIT)
    assert not stray, f"over {CLASS_LIMIT} (class) / {FUNCTION_LIMIT} (function) lines: {stray}"


def test_hot_paths_name_their_benchmark() -> None:
    found = oversized()
    for key in HOT_PATHS:
        assert key in found, f"{key} is no longer over the limit: drop it from HOT_PATHS"
        comment = _comment_above(key[0], found[key][1])
        assert "benchmarks/" in comment, f"{key}: no comment above it names its benchmark"


def test_units_to_split_only_shrink() -> None:
    found = oversized()
    for key, ceiling in TO_SPLIT.items():
        assert key in found, f"{key} is split (or gone): drop it from TO_SPLIT"
        assert found[key][0] <= ceiling, f"{key} grew to {found[key][0]} lines (ceiling {ceiling})"


if __name__ == "__main__":
    for (rel, name), (n, line) in sorted(oversized().items(), key=lambda kv: -kv[1][0]):
        status = (
            "hot path"
            if (rel, name) in HOT_PATHS
            else "to split"
            if (rel, name) in TO_SPLIT
            else "STRAY"
        )
        print(f"{n:5d}  {status:9s} {rel}:{line} {name}")
