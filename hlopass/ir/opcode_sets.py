"""Opcode sets a rewrite pattern declares as its `OPCODES` when it names no single opcode.

Every rewrite pattern under `passes/` declares the opcodes it is offered as data (its
`OPCODES` class attribute), which `hlopass.text.grammar` reads for the per-pass columns of
`docs/GRAMMAR.md`. A pattern that looks at every instruction (dead-code removal, CSE,
fusion, layout assignment) declares `EVERY_OPCODE`; one that picks instructions by a trait
of the opcode table declares `with_trait(...)`.
"""

from __future__ import annotations

from hlopass.dialects.opcodes import OPCODES

EVERY_OPCODE: tuple[str, ...] = tuple(sorted(OPCODES))
"""Every opcode of the dialect: the pattern is offered any instruction."""


def with_trait(trait: str) -> tuple[str, ...]:
    """The opcodes whose table entry carries `trait` (e.g. "elementwise")."""
    return tuple(o for o in EVERY_OPCODE if trait in OPCODES[o].traits)
