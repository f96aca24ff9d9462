"""Tuples, calls, control flow, and single-device no-ops (barriers, collectives on one replica)."""

from __future__ import annotations

import numpy as np

from hlopass.interpreter.core import handler, unsupported
from hlopass.interpreter.numeric import widen


@handler("tuple")
def _tuple(interp, op, args):
    return tuple(args)


@handler("get-tuple-element")
def _gte(interp, op, args):
    return args[0][op.attr("index")]


@handler("call", "fusion", "async-start")
def _call(interp, op, args):
    name = op.attr("to_apply") if op.opcode == "call" else op.attr("calls")
    result = interp.call(name, args)
    if op.opcode == "async-start":
        return (tuple(args), result, np.zeros((), np.uint32))
    return result


@handler("async-done")
def _async_done(interp, op, args):
    return args[0][1]


@handler("while")
def _while(interp, op, args):
    cond = interp.comp(op.attr("condition"))
    body = interp.comp(op.attr("body"))
    state = args[0]
    while bool(interp.call(cond, [state])):
        state = interp.call(body, [state])
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


@handler("opt-barrier", "domain", "all-reduce", "all-gather", "collective-broadcast", "copy-done")
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


@handler("replica-id", "partition-id")
def _replica_id(interp, op, args):
    return np.zeros((), np.uint32)


@handler("custom-call")
def _custom_call(interp, op, args):
    from hlopass.interpreter.gpu_calls import evaluate_library_call, is_library_call
    from hlopass.interpreter.sorting import custom_call_topk

    target = op.attr("custom_call_target")
    if target == "TopK":
        return custom_call_topk(interp, op, args)
    if is_library_call(target):  # cuBLAS / cuDNN calls of GPU-optimized modules
        return evaluate_library_call(interp, op, args)
    raise unsupported(op)
