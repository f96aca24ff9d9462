"""Tuples, calls, control flow, and single-device no-ops (barriers, collectives on one replica)."""

from __future__ import annotations

import numpy as np

from hlopass.errors import HloError, HloVerifyError
from hlopass.interpreter.core import handler, unsupported
from hlopass.interpreter.numeric import widen
from hlopass.interpreter.plan import clean_leaves, covers
from hlopass.ir.shape import ArrayShape


@handler("tuple")
def _tuple(interp, op, args):
    return tuple(args)


@handler("get-tuple-element")
def _gte(interp, op, args):
    return args[0][op.attr("index")]


@handler("call", "fusion", "async-start")
def _call(interp, op, args):
    name = op.attr("to_apply") if op.opcode == "call" else op.attr("calls")
    comp = interp.comp(name)
    if op.opcode == "fusion":
        # XLA's verifier lets a fusion pass more operands than it has parameters (unused)
        args = args[: len(comp.parameters())]
    _check_arguments(op, comp, args)
    result = interp.call(name, args)
    if op.opcode == "async-start":
        return (tuple(args), result, np.zeros((), np.uint32))
    return result


def _check_arguments(op, comp, args) -> None:
    """XLA's verifier: a called computation's parameters match the caller's operands."""
    params = comp.parameters()
    if len(params) != len(args):
        raise HloVerifyError(
            f"instruction {op.inst_name} passes {len(args)} operand(s) to computation "
            f"{comp.comp_name}, which takes {len(params)}"
        )
    # Declared shapes, not the values: a reduction runs its combiner (and fusions in it)
    # once over whole arrays, so values may carry batch dims the declarations do not.
    for p, v, a in zip(params, list(op.operands)[: len(args)], args, strict=True):
        shape, declared = p.shape, getattr(v.type, "data", None)
        if (
            isinstance(shape, ArrayShape)
            and isinstance(declared, ArrayShape)
            and (tuple(declared.dims) != tuple(shape.dims))
        ):
            raise HloVerifyError(
                f"instruction {op.inst_name} passes {np.shape(a)} to parameter "
                f"{p.inst_name} of computation {comp.comp_name}, a {shape.text(False)}"
            )


@handler("async-update")
def _async_update(interp, op, args):
    return args[0]  # the async state passes through unchanged


@handler("infeed", "outfeed")
def _host_io(interp, op, args):
    raise unsupported(op, "needs a peer or the host to exchange data with")


@handler("async-done")
def _async_done(interp, op, args):
    return args[0][1]


class IterationLimitError(HloError):
    """A `while` loop ran more iterations than the interpreter's `max_iterations` allows."""

    def __init__(self, inst_name: str, limit: int):
        self.inst_name = inst_name
        self.limit = limit
        super().__init__(f"while loop {inst_name} did not end within {limit} iterations")


@handler("while")
def _while(interp, op, args):
    cond_comp, body_comp = interp.comp(op.attr("condition")), interp.comp(op.attr("body"))
    cond, body = interp.plan(cond_comp), interp.plan(body_comp)
    limit = interp.max_iterations
    state = args[0]
    if not cond((state,)):
        return state
    if limit is not None and limit < 1:
        raise IterationLimitError(op.inst_name, limit)
    state = body((state,))
    # From the second iteration on the state is the body's result: plan both computations
    # knowing which parts of it the body flushed, so they are not flushed again.
    clean = body.clean_out
    if any(clean_leaves(clean)):
        again = interp.plan(body_comp, (clean,))
        if covers(again.clean_out, clean):  # the knowledge holds for every later iteration
            cond, body = interp.plan(cond_comp, (clean,)), again
    if limit is None:  # the loop without a counter: it is the cost of every iteration
        while cond((state,)):
            state = body((state,))
        return state
    for _ in range(limit - 1):
        if not cond((state,)):
            return state
        state = body((state,))
    if cond((state,)):
        raise IterationLimitError(op.inst_name, limit)
    return state


@handler("conditional")
def _conditional(interp, op, args):
    selector, *operands = args
    branches = op.attr("branch_computations")
    if branches is None:
        branches = (op.attr("true_computation"), op.attr("false_computation"))
        index = 0 if bool(selector) else 1
    else:
        index = int(widen(np.asarray(selector)).reshape(()))
        if not 0 <= index < len(branches):
            index = len(branches) - 1
    return interp.call(branches[index], [operands[index]])


@handler("opt-barrier", "domain", "copy-done")
def _identity(interp, op, args):
    if op.opcode == "copy-done":
        return args[0][0]
    if len(args) == 1:
        return args[0]
    return tuple(args)


@handler("copy-start")
def _copy_start(interp, op, args):
    return (args[0].copy(), args[0], np.zeros((), np.uint32))


@handler("add-dependency")
def _add_dependency(interp, op, args):
    return args[0]


@handler("after-all")
def _after_all(interp, op, args):
    return np.zeros((0,), np.uint8)
