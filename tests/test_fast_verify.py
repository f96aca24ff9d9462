"""The instruction ops' fast `verify_` (dialects/hlo.py) against xDSL's generic definition
checks it stands in for: the same verdict and, on failure, the same message."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Block, Region

from hlopass import parse_hlo
from hlopass.dialects.hlo import OP_CLASSES, HloOp, _generic_verify, computations

TEXT = """HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  ROOT b = f32[2] add(a, a)
}"""


def _add() -> HloOp:
    (comp,) = computations(parse_hlo(TEXT))
    return next(o for o in comp.instructions if o.opcode == "add")


def _outcome(verify: Callable[[HloOp], None], op: HloOp) -> str:
    try:
        verify(op)
    except Exception as e:  # the message is what is compared
        return f"{type(e).__name__}: {e}"
    return "verifies"


def _set(name: str, value: object) -> Callable[[HloOp], None]:
    return lambda op: op.properties.__setitem__(name, value)


MUTATIONS: dict[str, Callable[[HloOp], None]] = {
    "unchanged": lambda op: None,
    "name of the wrong class": _set("name", IntAttr(1)),
    "no name": lambda op: op.properties.pop("name"),
    "unknown property": _set("no-such-attribute", IntAttr(1)),
    "optional property of the wrong class": _set("sharding", StringAttr("x")),
    "a region": lambda op: op.add_region(Region(Block())),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_same_outcome_as_generic_checks(mutation: str) -> None:
    op = _add()
    MUTATIONS[mutation](op)
    generic = _generic_verify(type(op).get_irdl_definition(), HloOp.verify_)
    fast = _outcome(type(op).verify_, op)
    assert fast == _outcome(generic, op)
    assert (fast == "verifies") == (mutation == "unchanged")


def test_every_instruction_op_has_the_fast_checks() -> None:
    """`_fast_checks_suffice` holds for every opcode's definition today; an op falling back
    to the generic checks would still be right, only slower, so say so here."""
    slow = [o for o, c in OP_CLASSES.items() if "_fast_verify" not in c.verify_.__qualname__]
    assert slow == []
