"""Every rewrite pattern declares the opcodes it targets (`OPCODES`, or `TARGETS` for one
matched on something other than an instruction), and `docs/GRAMMAR.md`'s per-pass columns
are read from those declarations (`hlopass.text.grammar.pass_opcodes`), not from the source
text; `tests/test_grammar.py` checks the page is current."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from xdsl.pattern_rewriter import RewritePattern

from hlopass import passes, pipeline
from hlopass.dialects.opcodes import OPCODES
from hlopass.rewriting import OpcodeDispatchApplier
from hlopass.text.grammar import declared_opcodes, pass_opcodes


def _all_patterns() -> list[type]:
    for m in pkgutil.walk_packages(passes.__path__, passes.__name__ + "."):
        importlib.import_module(m.name)
    out, todo = [], [RewritePattern]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith(passes.__name__ + "."):
                out.append(sub)
    return sorted(set(out), key=lambda c: (c.__module__, c.__qualname__))


PATTERNS = _all_patterns()
# a base (one with subclasses) leaves the declaring to them; a dispatcher offers patterns
# that declare their own
LEAVES = [
    c for c in PATTERNS if not c.__subclasses__() and not issubclass(c, OpcodeDispatchApplier)
]


def test_patterns_found() -> None:
    # algsimp alone has over 250 patterns: a broken walk would find few
    assert len(LEAVES) > 300


@pytest.mark.parametrize("cls", LEAVES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_pattern_declares_known_opcodes(cls: type) -> None:
    declared = declared_opcodes(cls)
    assert declared, f"{cls.__qualname__} declares no OPCODES"
    assert set(declared) <= set(OPCODES), set(declared) - set(OPCODES)


def test_every_pass_declares() -> None:
    # fixpoint runs other passes and targets nothing itself
    empty = {n for n, ops in pass_opcodes().items() if not ops}
    assert empty == {"fixpoint"}
    assert set(pass_opcodes()) == set(pipeline.PASSES)


def test_columns_per_pass_not_per_module() -> None:
    # two passes sharing a module (decomposers.py) get only their own pattern's opcode
    got = pass_opcodes()
    assert got["all-gather-decomposer"] == {"all-gather"}
    assert got["reduce-scatter-decomposer"] == {"reduce-scatter"}
    assert got["defuse"] == {"fusion"}
    assert got["while-loop-unroller"] == {"while"}


def test_algsimp_and_layout_credited() -> None:
    # the string grep credited algsimp with 2 opcodes and layout assignment with none
    got = pass_opcodes()
    assert {"add", "multiply", "reshape", "transpose", "dot", "broadcast", "slice"} <= got[
        "algsimp"
    ]
    assert "parameter" not in got["algsimp"]
    assert got["layout-assignment"] == set(OPCODES)
    # copy elision targets copies and the elementwise ops it sinks copies through, no more
    assert "copy" in got["copy-elision"] and "add" in got["copy-elision"]
    assert "dot" not in got["copy-elision"]
