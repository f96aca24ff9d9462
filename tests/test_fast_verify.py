"""The instruction ops' fast `verify_` (dialects/hlo.py) against xDSL's generic definition
checks it stands in for: the same verdict and, on failure, the same message."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.dialects.builtin import IntAttr, StringAttr, i32
from xdsl.ir import Block, Operation, Region

from hlopass import parse_hlo
from hlopass.dialects.hlo import (
    OP_CLASSES,
    ComputationOp,
    HloOp,
    ReturnOp,
    _computation_checks,
    _generic_verify,
    computations,
)

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
    slow = [
        o for o, c in OP_CLASSES.items() if "_definition_fast_path" not in c.verify_.__qualname__
    ]
    assert slow == []


def _comp() -> ComputationOp:
    (comp,) = computations(parse_hlo(TEXT))
    return comp


def _ret() -> ReturnOp:
    return _comp().block.last_op  # type: ignore[return-value]


def _extra_block(op: Operation) -> None:
    op.regions[0].add_block(Block())


def _int_operand(op: Operation) -> None:
    from xdsl.dialects.test import TestOp

    op.operands = [TestOp(result_types=[i32]).results[0]]


# `ReturnOp` and `ComputationOp` (`_structural_fast_verify`): the same, against xDSL's
# `OpDef.verify` followed by the op's own check.
STRUCTURAL: dict[str, tuple[Callable[[], Operation], Callable[[Operation], object]]] = {
    "computation unchanged": (_comp, lambda op: None),
    "computation with a second block": (_comp, _extra_block),
    "computation without its name": (_comp, lambda op: op.properties.pop("sym_name")),
    "computation named by an int": (_comp, _set("sym_name", IntAttr(1))),
    "computation with an unknown property": (_comp, _set("color", StringAttr("red"))),
    "computation entry of the wrong class": (_comp, _set("is_entry", StringAttr("yes"))),
    "computation with a second region": (_comp, lambda op: op.add_region(Region(Block()))),
    "computation ending without a return": (_comp, lambda op: op.block.last_op.detach()),  # type: ignore[union-attr]
    "return unchanged": (_ret, lambda op: None),
    "return of an integer": (_ret, _int_operand),
    "return with a property": (_ret, _set("name", StringAttr("r"))),
    "return with a region": (_ret, lambda op: op.add_region(Region(Block()))),
    "return not last": (_ret, lambda op: op.parent.add_op(ReturnOp(op.operands[0]))),  # type: ignore[union-attr]
}


@pytest.mark.parametrize("mutation", STRUCTURAL)
def test_structural_ops_same_outcome_as_generic_checks(mutation: str) -> None:
    make, mutate = STRUCTURAL[mutation]
    op = make()
    mutate(op)
    custom = _computation_checks if isinstance(op, ComputationOp) else None
    generic = _generic_verify(type(op).get_irdl_definition(), custom or (lambda op: None))
    fast = _outcome(type(op).verify_, op)  # type: ignore[arg-type]
    assert fast == _outcome(generic, op)  # type: ignore[arg-type]
    assert (fast == "verifies") == mutation.endswith("unchanged")
