"""Reference interpreter for HLO modules: numpy + ml_dtypes, one vectorized numpy step per op.

    >>> outs = hlopass.evaluate(module, x, y)     # flattened results, list of np.ndarray
    >>> value = eval_instruction(op, [a, b])      # one instruction (constant folding)

Semantics follow XLA (checked against XLA:CPU in tests/test_interpreter*.py): integer
wrap-around and division by zero, saturating float->int convert, clamped dynamic indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hlopass.dialects.hlo import ComputationOp, HloOp, computations
from hlopass.errors import HloInputError
from hlopass.interpreter import (  # noqa: F401  (each registers its handlers)
    collectives,
    control,
    custom_calls,
    dynamic,
    elementwise,
    indexing,
    linalg,
    newer_ops,
    p2p,
    reductions,
    rng,
    shaping,
    sorting,
)
from hlopass.interpreter.core import (
    HANDLERS,
    Interpreter,
    Value,
    coerce,
    flatten,
    interpreter_for,
    module_of,
)
from hlopass.interpreter.numeric import float_mode as float_mode_of

__all__ = [
    "HANDLERS",
    "Interpreter",
    "elided_constant",
    "elided_message",
    "eval_instruction",
    "evaluate",
    "evaluate_devices",
    "evaluate_replicas",
    "supported_opcodes",
]


def evaluate(
    module: Any,
    *args: Any,
    float_mode: str = "xla-cpu",
    replicas: int = 1,
    partitions: int = 1,
) -> list[np.ndarray]:
    """Run the entry computation on `args` (one per parameter, or the flattened leaves).

    `float_mode`: "xla-cpu" (default) flushes f32/f64 denormal operands and results to
    zero as XLA-CPU does (FTZ/DAZ); "ieee" keeps them (gradual underflow).
    `replicas`, `partitions`: with R x P > 1 devices, each runs the program on the same
    `args` (collectives exchange between them, `replica-id` and `partition-id` tell them
    apart); the result is then one list of outputs per device, device d being replica
    d // P, partition d % P. `evaluate_devices` gives each device its own arguments.
    """
    if replicas * partitions != 1:
        per = [args] * (replicas * partitions)
        return evaluate_devices(module, per, replicas, partitions, float_mode)  # type: ignore[return-value]
    _refuse_elided(module)
    interp = interpreter_for(module)
    interp.__dict__.pop("_rng", None)  # `rng` restarts from its seed on each run
    interp.__dict__.pop("_rng_counter", None)
    with float_mode_of(float_mode):
        return _evaluate_one(module, args)


def evaluate_devices(
    module: Any,
    args_per_device: Sequence[Sequence[Any]],
    replicas: int,
    partitions: int = 1,
    float_mode: str = "xla-cpu",
) -> list[list[np.ndarray]]:
    """Run the entry computation on replicas x partitions devices, device d (replica
    d // partitions, partition d % partitions) on args_per_device[d]; returns each
    device's flattened outputs."""
    from hlopass.interpreter.replicas import run_devices

    if len(args_per_device) != replicas * partitions:
        raise HloInputError(
            f"error: {replicas} x {partitions} devices need as many argument lists, "
            f"got {len(args_per_device)}"
        )
    _refuse_elided(module)
    interp = interpreter_for(module)
    interp.__dict__.pop("_rng", None)
    interp.__dict__.pop("_rng_counter", None)
    # the float mode is process state: set once here, around all the device threads
    with float_mode_of(float_mode):
        return run_devices(
            replicas, partitions, lambda d: _evaluate_one(module, tuple(args_per_device[d]))
        )


def evaluate_replicas(
    module: Any, args_per_replica: Sequence[Sequence[Any]], float_mode: str = "xla-cpu"
) -> list[list[np.ndarray]]:
    """Run len(args_per_replica) replicas (one partition each) of the entry computation,
    replica r on args_per_replica[r]; returns each replica's flattened outputs."""
    return evaluate_devices(module, args_per_replica, len(args_per_replica), 1, float_mode)


def _evaluate_one(module: Any, args: tuple) -> list[np.ndarray]:
    interp = interpreter_for(module)
    entry = interp.entry()
    params = entry.parameters()
    shapes = [p.shape for p in params]
    if len(args) != len(params):
        leaves = [leaf for s in shapes for leaf in s.leaves()]
        if len(args) == len(leaves):
            args = tuple(_unflatten(list(args), shapes))
        else:
            raise HloInputError(
                f"entry computation takes {len(params)} argument(s) "
                f"({describe_parameters(module)}), got {len(args)}"
            )
    values = []
    for i, (a, s) in enumerate(zip(args, shapes, strict=False)):
        try:
            values.append(coerce(a, s))
        except ValueError as e:
            raise HloInputError(f"argument {i} (parameter {params[i].inst_name}) {e}") from None
    with np.errstate(all="ignore"):  # numpy's error state is per thread
        result = interp.call(entry, values)
    return [np.asarray(v) for v in flatten(result)]


def elided_constant(module: Any) -> tuple[ComputationOp, HloOp] | None:
    """The first constant a run of the entry computation would evaluate whose value the
    text left out (`constant({...})`, how XLA prints a large constant by default), and its
    computation; None when every constant it needs is known."""
    hits = [
        (comp, op)
        for comp in computations(module)
        for op in comp.instructions
        if op.opcode == "constant" and _is_elided(op)
    ]
    if not hits:  # the usual case: one pass over the instructions, nothing more
        return None
    from hlopass.rewriting import reachable_computations

    # as the interpreter runs: only computations the entry reaches, and in each only
    # what its root depends on (a dead elided constant does not stop a run)
    reached = reachable_computations(module)
    live: dict[str, set[int]] = {}
    for comp, op in hits:
        if comp.comp_name not in reached:
            continue
        if comp.comp_name not in live:
            live[comp.comp_name] = _live(comp)
        if id(op) in live[comp.comp_name]:
            return comp, op
    return None


def elided_message(comp: ComputationOp, op: HloOp) -> str:
    """What is wrong with running a module holding the elided constant `op` (no location)."""
    return (
        f"constant '{op.inst_name}' (computation {comp.comp_name}) is elided ({{...}}) in "
        "the input: its values are unknown, so the module cannot be run; dump it again with "
        "large constants printed (XLA_FLAGS=--xla_dump_large_constants, or "
        "HloPrintOptions.print_large_constants=True)"
    )


def _is_elided(op: HloOp) -> bool:
    value = op.attr("value")
    lit = value.literal if hasattr(value, "literal") else value
    return lit is not None and lit.elided


def _live(comp: ComputationOp) -> set[int]:
    """ids of the instructions of `comp` its root depends on (what the interpreter runs)."""
    root = comp.root
    live = {id(root)}
    for op in reversed(list(comp.instructions)):
        if id(op) in live:
            live.update(id(v.owner) for v in op.operands)
    return live


def _refuse_elided(module: Any) -> None:
    found = elided_constant(module)
    if found is not None:
        raise HloInputError(f"error: {elided_message(*found)}")


def describe_parameters(module: Any) -> str:
    """`in0: f32[4], in1: s32[]`: the entry's flattened parameters as `hlopass run` names
    them (a tuple parameter gives one per leaf)."""
    params = interpreter_for(module).entry().parameters()
    leaves = [leaf for p in params for leaf in p.shape.leaves()]
    return ", ".join(f"in{i}: {s.text(False)}" for i, s in enumerate(leaves)) or "none"


def _unflatten(leaves: list[Any], shapes: list[Any]) -> list[Any]:
    it = iter(leaves)

    def build(shape: Any) -> Any:
        if shape.is_tuple:
            return tuple(build(e) for e in shape.elements)
        return next(it)

    return [build(s) for s in shapes]


def eval_instruction(op: HloOp, operand_values: list[Value], float_mode: str = "xla-cpu") -> Value:
    """Evaluate one instruction on operand values (arrays or tuples of arrays).

    Instructions calling computations (reduce, while, fusion, ...) look them up in the
    module holding `op`. Raises `hlopass.UnsupportedOpError` for opcodes it cannot run.
    """
    module = module_of(op)
    interp = interpreter_for(module) if module is not None else Interpreter(None)
    with np.errstate(all="ignore"), float_mode_of(float_mode):
        return interp.eval(op, list(operand_values))


def supported_opcodes() -> set[str]:
    return set(HANDLERS)
