"""Error-bound rules for collectives, and `error_bounds_devices`: the bounded evaluation of
`hlopass.checking.error_bound` on R x P devices.

The devices run in the interpreter's own device machinery (`hlopass.interpreter.replicas`):
each one evaluates the module with (value, bound) pairs, and a collective exchanges values
first, then bounds, through the same rendezvous (site, group, occurrence), so the bounds
travel exactly as the values do:

- data movement (all-gather, all-to-all, collective-permute, collective-broadcast, send and
  recv, their async forms): the same exchange applied to the bounds.
- all-reduce / reduce-scatter with add over a group of n devices: each side's sum of n terms,
  in whatever order it folds them, is within gamma_{n-1} sum|terms| of the exact sum
  (Higham (3.5)), so the bound is the operands' bounds summed by the same collective plus
  2 gamma_{n-1} times the same collective applied to |terms| (reduce-scatter then slices
  both, as it slices the values).
- max / min: the largest operand bound over the group (the collective applied to the bounds).
- another combiner (multiply, a custom computation): no rule (`NoBound`).

Integer and pred collectives are exact and exchange no bounds (every device of a group sees
the same element type, so all of them skip the second exchange alike).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from hlopass.interpreter.groups import participants

COLLECTIVES = frozenset({
    "all-reduce", "all-reduce-start", "all-reduce-done", "all-gather", "all-gather-start",
    "all-gather-done", "reduce-scatter", "all-to-all", "collective-broadcast",
    "collective-permute", "collective-permute-start", "collective-permute-done",
    "send", "send-done", "recv", "recv-done", "ragged-all-to-all",
})  # fmt: skip
_SUMMING = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter"})
_SELECTING = frozenset({"maximum", "minimum"})


def collective_error(interp: Any, op: Any, vals: list[Any], moved: Any) -> Any:
    """The bound of a collective's result given `moved`, the collective applied to its
    operands' bounds (already exchanged between the devices); None where the combiner has
    no rule (the caller raises `NoBound`)."""
    if op.opcode not in _SUMMING:
        return moved
    kind = interp.comp(op.attr("to_apply")).root.opcode
    if kind in _SELECTING:
        return moved
    if kind != "add":
        return None
    n = len(participants(op))
    magnitude = interp.eval(op, [_abs_tree(x) for x in vals])  # |terms| summed alike
    return _add_tree(moved, _rounding_tree(magnitude, n))


def _abs_tree(x: Any) -> Any:
    return tuple(_abs_tree(i) for i in x) if isinstance(x, tuple) else np.abs(np.asarray(x))


def _rounding_tree(magnitude: Any, n: int) -> Any:
    """2 gamma_{n-1} |terms| summed, leaf by leaf (u of each leaf's element type; 0 for
    integer leaves, which are exact)."""
    if isinstance(magnitude, tuple):
        return tuple(_rounding_tree(i, n) for i in magnitude)
    a = np.asarray(magnitude)
    try:
        u = float(ml_dtypes.finfo(a.dtype).eps) / 2
    except ValueError:  # not a float type
        return np.zeros(a.shape)
    gamma = (n - 1) * u / max(1 - (n - 1) * u, 0.5)
    return 2 * gamma * a.astype(np.float64)


def _add_tree(a: Any, b: Any) -> Any:
    if isinstance(a, tuple):
        return tuple(_add_tree(x, y) for x, y in zip(a, b, strict=True))
    return np.asarray(a, np.float64) + b


def run_bounded_devices(
    bounds_on_one: Any, args_per_device: Sequence[Sequence[Any]], replicas: int, partitions: int
) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """`bounds_on_one(args)` on each of replicas x partitions devices, device d on
    `args_per_device[d]`, in one world of devices (so collectives meet)."""
    from hlopass.errors import HloInputError
    from hlopass.interpreter.replicas import run_devices

    if len(args_per_device) != replicas * partitions:
        raise HloInputError(
            f"error: {replicas} x {partitions} devices need as many argument lists, "
            f"got {len(args_per_device)}"
        )

    def body(d: int) -> list[tuple[np.ndarray, np.ndarray]]:
        with np.errstate(all="ignore"):  # numpy's error state is per thread
            return bounds_on_one(args_per_device[d])

    return run_devices(replicas, partitions, body)
