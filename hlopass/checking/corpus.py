"""The shared HLO corpus (`../shared/corpus`): enumerate its modules for tests and benchmarks."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def corpus_root() -> Path | None:
    """`$HLOPASS_CORPUS`, else `../shared/corpus` beside the checkout; None when absent."""
    env = os.environ.get("HLOPASS_CORPUS")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve().parents[2]  # the checkout (this file: hlopass/checking/)
    candidates += [here.parent / "shared" / "corpus", here / "shared" / "corpus"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


@dataclass(frozen=True)
class CorpusModule:
    id: str
    text: str
    path: Path
    line_offset: int = 0
    """Line of `path` where `text` starts (0-based), for chunks of multi-module files."""


_SPLIT = re.compile(r"^// -----.*$", re.M)


def split_chunks(text: str) -> list[tuple[int, str]]:
    """Split a file at `// -----` lines; (first line, text) of each chunk holding a module."""
    out = []
    pos = 0
    line = 0
    for m in list(_SPLIT.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        if _holds_module(chunk):
            out.append((line, chunk))
        if m:
            line += text.count("\n", pos, m.end()) + 1
            pos = m.end() + 1
    return out


def _holds_module(chunk: str) -> bool:
    body = re.sub(r"//[^\n]*", "", chunk)
    return bool(re.search(r"\{[^{}]*=", body)) and (
        "HloModule" in body or re.search(r"(ENTRY|\w)\s*[^\n]*\{\s*\n", body) is not None
    )


def modules(
    root: Path, groups: tuple[str, ...] = ("seeds", "xla_tests", "parser", "jax")
) -> list[CorpusModule]:
    out: list[CorpusModule] = []
    if "seeds" in groups:
        for p in sorted((root / "seeds").glob("*.hlo")):
            out.append(CorpusModule(f"seeds/{p.name}", p.read_text(), p))
    if "xla_tests" in groups:
        for p in sorted((root / "xla_tests").glob("*.hlo")):
            chunks = split_chunks(p.read_text())
            for i, (line, chunk) in enumerate(chunks):
                suffix = f"#{i}" if len(chunks) > 1 else ""
                out.append(CorpusModule(f"xla_tests/{p.name}{suffix}", chunk, p, line))
    if "parser" in groups:
        path = root / "xla_parser_tests.json"
        for case in json.loads(path.read_text()):
            out.append(CorpusModule(f"parser/{case['name']}", case["hlo"], path))
    if "jax" in groups:
        for p in sorted(root.glob("jax/*/*.hlo")):
            out.append(CorpusModule(f"jax/{p.parent.name}/{p.name}", p.read_text(), p))
    return out


def elide_like(module: Any, xla_text: str) -> str:
    """Replace XLA's arbitrary fill of constants elided in the input (`{...}`) by `{...}`.

    XLA's parser fills an elided constant with arbitrary values; comparing our print (which
    keeps `{...}`) with XLA's is only meaningful once those are elided again.
    """
    from hlopass.dialects.hlo import computations

    names = [
        op.inst_name
        for comp in computations(module)
        for op in comp.instructions
        if op.opcode == "constant" and op.attr("value").literal.elided
    ]
    for name in names:
        pattern = re.compile(
            rf"^(\s*(?:ROOT )?%{re.escape(name)} = \S+ constant\().*?(\)(?:, |$))", re.M
        )
        xla_text = pattern.sub(r"\1{...}\2", xla_text, count=1)
    return xla_text
